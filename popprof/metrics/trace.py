"""Trace metrics from the ``events`` table: span, event counts, device busy / idle, host stalls.

Device activity follows :mod:`popprof.trace.activity`: events with a device
category; host stalls are the idle gaps inside the
device-active span (first device event to last).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import activity, masks
from ..trace.activity import STEP_PREFIX, device_union, interval_window
from ..trace.device import DEVICE_CATEGORIES
from ..trace.masks import bookkeeping_mask
from ..trace.nesting import parent_positions
from . import metric, metric_family
from .devices import device_breakdown


def work_window(profile: Profile) -> tuple[float, float] | None:
    """First start and last end of the trace's events without the profiler's bookkeeping
    (``events.bookkeeping``), as :func:`popprof.trace.activity.interval_window`.

    The first start is the trace's **time origin**: every time shown to people is an offset
    from it (``docs/figures.md``); last end minus first start is ``trace.span_us``.
    """

    def build() -> tuple[float, float] | None:
        events = profile.events
        real = ~bookkeeping_mask(profile)
        if not real.any():
            return None
        return interval_window(events["start_us"].to_numpy(), events["dur_us"].to_numpy(), real)

    return profile.cached("trace.work_window", build)


def time_origin(profile: Profile) -> float | None:
    """The start of the first event that is not profiler bookkeeping (absolute, microseconds), or None."""
    if profile.get("events") is None or profile.events.empty:
        return None
    window = work_window(profile)
    return None if window is None else window[0]


@metric(
    "trace.span_us",
    "us",
    "trace length: first event start to last event end, the profiler's bookkeeping left out",
    needs=("events",),
    better=None,
)
def span_us(profile: Profile) -> float | None:
    window = work_window(profile)
    return None if window is None else window[1] - window[0]


@metric(
    "trace.recorded_span_us",
    "us",
    "the profiler's whole recording: first event start to last event end, bookkeeping included",
    needs=("events",),
    better=None,
)
def recorded_span_us(profile: Profile) -> float | None:
    def build() -> float | None:
        events = profile.events
        window = interval_window(events["start_us"].to_numpy(), events["dur_us"].to_numpy())
        return None if window is None else window[1] - window[0]

    return profile.cached("trace.recorded_span_us", build)


@metric("trace.event_count", "events", "trace events (bookkeeping included)", needs=("events",), better=None)
def event_count(profile: Profile) -> float | None:
    return float(len(profile.events))


def device_activity_mask(profile: Profile) -> np.ndarray:
    """:func:`popprof.trace.activity.is_device_activity` of the profile's events, computed once per scope
    (:func:`popprof.trace.masks.device_activity_mask`, read-only)."""
    return masks.device_activity_mask(profile)


def device_work_union(profile: Profile) -> activity.Union | None:
    """:func:`popprof.trace.activity.device_union` of the profile's events, computed once per scope."""
    return profile.cached(
        "trace.device_union", lambda: device_union(profile.events, device_activity_mask(profile))
    )


def parent_rows(profile: Profile) -> np.ndarray:
    """:func:`popprof.trace.nesting.parent_positions` of the profile's events, computed once per scope."""
    return profile.cached("trace.parent_rows", lambda: parent_positions(profile.events))


def device_time_sums(profile: Profile) -> pd.Series:
    """:func:`popprof.trace.activity.device_time_by_category` of the profile's events, once per scope."""
    return profile.cached(
        "trace.device_time_sums",
        lambda: activity.device_time_by_category(
            profile.events, device_activity_mask(profile), parent_rows(profile)
        ),
    )


def thread_index(events: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each event's thread as a number, and the (rank, pid, tid) of each number (rank -1 when unknown)."""
    if "rank" not in events.columns:
        rank = np.full(len(events), -1, dtype=np.int64)
    elif isinstance(events["rank"].array, pd.arrays.IntegerArray):  # fillna(-1) without a new Series
        rank = events["rank"].array.to_numpy(dtype=np.int64, na_value=-1)  # read only here
    else:
        rank = events["rank"].fillna(-1).to_numpy(dtype=np.int64)
    pid, tid = events["pid"].to_numpy(), events["tid"].to_numpy()
    if len(rank) > 1:  # the readers sort events by thread: then each thread is one run, numbered in order
        new = (rank[1:] != rank[:-1]) | (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
        step = np.flatnonzero(new) + 1
        at = np.concatenate(([0], step))
        ordered = np.all(
            (rank[at[1:]] > rank[step - 1])
            | ((rank[at[1:]] == rank[step - 1]) & (pid[at[1:]] > pid[step - 1]))
            | (
                (rank[at[1:]] == rank[step - 1])
                & (pid[at[1:]] == pid[step - 1])
                & (tid[at[1:]] > tid[step - 1])
            )
        )
        if ordered:  # each thread's number repeated over its run
            lengths = np.diff(np.append(at, len(rank)))
            ids = np.repeat(np.arange(len(at), dtype=np.int64), lengths)
            return ids, pd.DataFrame({"rank": rank[at], "pid": pid[at], "tid": tid[at]})
    keys = pd.DataFrame({"rank": rank, "pid": pid, "tid": tid})
    grouped = keys.groupby(["rank", "pid", "tid"], sort=True)
    return grouped.ngroup().to_numpy(dtype=np.int64), grouped.size().index.to_frame(index=False)


def thread_ids(profile: Profile) -> tuple[np.ndarray, pd.DataFrame]:
    """:func:`thread_index` of the profile's events, computed once per scope."""
    return profile.cached("trace.thread_ids", lambda: thread_index(profile.events))


@metric(
    "trace.thread_count",
    "threads",
    "threads with events (a thread per rank, pid and tid; bookkeeping left out)",
    needs=("events",),
    better=None,
)
def thread_count(profile: Profile) -> float | None:
    return float(np.count_nonzero(thread_event_counts(profile)))


def thread_event_counts(profile: Profile) -> np.ndarray:
    """Events per thread of :func:`thread_ids` (bookkeeping left out), computed once per scope (read-only)."""

    def build() -> np.ndarray:
        ids, keys = thread_ids(profile)
        everything = np.bincount(ids, minlength=len(keys))  # no copy of the ids: bookkeeping is a few events
        counts = everything - np.bincount(ids[bookkeeping_mask(profile)], minlength=len(keys))
        counts.setflags(write=False)
        return counts

    return profile.cached("trace.thread_event_counts", build)


@metric(
    "trace.device_window_idle_share",
    "share",
    "share of each device's own window (HolisticTraceAnalysis's: its first to last work item, the last "
    "ProfilerStep left out when there are two or more) with no work running, pooled over devices (the "
    "per-device table's idle)",
    needs=("events",),
)
def device_window_idle_share(profile: Profile) -> float | None:
    table = device_breakdown(profile)
    if table.empty or "idle_us" not in table.columns:
        return None
    idle, span = table["idle_us"], table["span_us"]
    timed = (idle.notna() & span.notna()).to_numpy()  # the rows dropna(subset=...) keeps, without the frame
    window = float(span[timed].sum())
    return None if window <= 0 else min(float(idle[timed].sum()) / window, 1.0)


@metric_family(
    "trace.device_time_us.",
    "us",
    "device time by category (nested device events counted once, in their own category)",
    needs=("events",),
)
def device_time_by_category(profile: Profile) -> dict[str, float]:
    events = profile.events
    if not events["device_category"].notna().any():
        return {}
    sums = device_time_sums(profile)
    return {c: float(sums[c]) for c in DEVICE_CATEGORIES}


@metric_family(
    "trace.gpu_annotation_us.",
    "us",
    "GPU time of a record_function annotation name, summed over ranks: HTA's user-annotation breakdown's sum "
    "(the summary's trace.gpu_annotations), the 10 names with the most (ProfilerStep#N as one, ProfilerStep#*); "
    "annotations nest, so the members do not add up to the device time",
    needs=("events",),
    absent_is_zero=False,  # a name one side lacks may be past its 10 names: "not in" that side, never 0
)
def gpu_annotation_time(profile: Profile) -> dict[str, float]:
    events = profile.events
    if "channel" not in events.columns or "gpu_user_annotation" not in events["channel"].array.categories:
        return {}  # the usual trace: the annotations' module not even imported
    from .annotations import gpu_time_by_name

    return gpu_time_by_name(profile)


@metric(
    "trace.profiler_step_count",
    "steps",
    "profiler steps in the trace (distinct ProfilerStep#N annotations)",
    needs=("events",),
    better=None,
)
def profiler_step_count(profile: Profile) -> float | None:
    """Distinct ``ProfilerStep#N`` names among the events; None when the trace marks no steps."""
    names = profile.events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):  # the reader's dtype: the step names, then those used
        labels = pd.Index(names.cat.categories.astype("str"))
        steps = np.flatnonzero(np.asarray(labels.str.startswith(STEP_PREFIX), dtype=bool))
        if steps.size == 0:
            return None
        codes = names.cat.codes.to_numpy()
        count = int(np.isin(steps, activity.distinct(codes[codes >= 0])).sum())
    else:
        count = int(pd.Index(names.dropna().astype("str").unique()).str.startswith(STEP_PREFIX).sum())
    return float(count) if count else None


@metric(
    "trace.step_time_us",
    "us",
    "mean profiler step time: the ProfilerStep#N steps' mean duration (a step of several ranks: its slowest rank)",
    needs=("events",),
)
def step_time_us(profile: Profile) -> float | None:
    """Mean duration of the profiler steps as the summary's iterations give them
    (:func:`popprof.metrics.steps.step_times`: a step's host ``ProfilerStep#N`` span, its slowest rank's when
    several ranks ran it); None when the trace marks no steps.

    A mean, so two runs of different numbers of steps compare as they are; what a CI gate of a GPU trace
    watches (the default budget: +5 %), as ``execution.total_cycles`` is an IPU run's.
    """
    from .steps import step_times

    times = step_times(profile)
    if times.empty or times["source"].iloc[0] != "ProfilerStep":
        return None
    return float(times["dur_us"].mean())
