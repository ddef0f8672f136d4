"""Queue length per GPU stream: work launched by the host and not yet started on the GPU.

The figures are HolisticTraceAnalysis's (HTA 0.5.0, ``TraceAnalysis.get_queue_length_time_series``,
``get_queue_length_summary`` and ``get_time_spent_blocked_on_full_queue``), built in popprof's own code:

- the queue of a stream steps **+1 at the start of each launch call** and **-1 at the start of the GPU work**
  it launched (HTA's ``ts`` of both; its docstring says "decremented when the kernel executes": the
  kernel's start). The series has one point per step, per (rank, stream);
- the **statistics** are pandas' ``describe()`` of the series' points, as HTA gives them: ``points`` (HTA's
  ``count``), mean, standard deviation (ddof 1), min, quartiles (linear interpolation) and max. They weigh
  each change alike, not time: popprof adds ``time_mean`` (the series' mean over time, first point to last);
- **blocked on a full queue**: the time the stream's queue held :data:`MAX_QUEUE_LENGTH` (1024, CUDA's
  launch queue per stream, HTA's default) or more: each point at or over it weighs the time to the stream's
  next point. (HTA divides it by its trace duration too, the first to the last start of the events it kept:
  popprof gives the time alone.)

The GPU work and its launch calls are those of HTA's launch statistics in popprof
(:func:`popprof.metrics.devices.device_work`, :func:`popprof.metrics.devices.launch_pairs`): HTA's times (a
ns-resolution rank's rounded to whole microseconds), the last profiler step left out as HTA's trace loader
does, the launch calls of :data:`popprof.metrics.devices.LAUNCH_CALLS` plus the two HTA's queue adds
(:data:`QUEUE_ONLY_CALLS`). Where popprof differs (``docs/traces.md``, "Queue length"): streams are told
apart per device (HTA: by number within a rank); at equal times a launch counts before a work start (HTA's
order there is its unstable sort's, so its mean and standard deviation can differ in the last digits);
``hipExtLaunchKernel`` and ``hipModuleLaunchKernel`` launches count (HTA's queue list lacks them).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..model.profile import Profile
from .devices import device_work, launch_pairs

#: CUDA's launch queue per stream (HTA's ``CUDA_MAX_LAUNCH_QUEUE_PER_STREAM``): a queue this long blocks the
#: host's next launch onto the stream.
MAX_QUEUE_LENGTH = 1024
#: Launch calls HTA's queue counts beyond :data:`popprof.metrics.devices.LAUNCH_CALLS` (its
#: ``get_runtime_launch_events_query``; the launch statistics' list, HTA's too, lacks them).
QUEUE_ONLY_CALLS = ("cuLaunchKernel", "hipMemcpyWithStream")
#: The statistics of the series' points, as pandas' ``describe()`` names them (HTA's summary), and their
#: column names here (queue lengths, in launches).
DESCRIBE = {
    "count": "points",
    "mean": "mean",
    "std": "std",
    "min": "min",
    "25%": "p25",
    "50%": "median",
    "75%": "p75",
    "max": "max",
}
#: Columns of :func:`queue_lengths`.
QUEUE_COLUMNS = [
    "rank",
    "device",
    "stream",
    "launches",
    *DESCRIBE.values(),
    "time_mean",
    "span_us",
    "blocked_us",
]


def queue_lengths(profile: Profile, max_queue_length: int = MAX_QUEUE_LENGTH) -> pd.DataFrame:
    """One row per (rank, device, stream) with launched GPU work (:data:`QUEUE_COLUMNS`): ``launches``
    counted, HTA's statistics of the queue length series (``points``, ``mean``, ``std``, ``min``, ``p25``,
    ``median``, ``p75``, ``max``; queue lengths in launches), ``time_mean`` (popprof's: its mean over time),
    ``span_us`` (first point to last) and ``blocked_us`` (time at ``max_queue_length`` or more). Sorted by
    rank, device, stream; empty without launched GPU work (an IPU profile, a trace without a launch call)."""
    key = f"queue_length.table.{max_queue_length}"
    return profile.cached(key, lambda: _table(profile, max_queue_length))


class QueueSeries(NamedTuple):
    """The queue length series of every stream, as arrays, one entry per point, sorted by stream then time."""

    group: np.ndarray  # the stream's row in the streams' table
    time: np.ndarray  # us, HTA's
    length: np.ndarray  # int64, the queue length from this point on


def queue_series(profile: Profile) -> tuple[pd.DataFrame, QueueSeries] | None:
    """The streams (``rank``, ``device``, ``stream``, ``launches``) and their series (:class:`QueueSeries`,
    HTA's ``get_queue_length_time_series``: one point per launch and per work start); None without launched
    GPU work."""
    return profile.cached("queue_length.series", lambda: _series(profile))


def _series(profile: Profile) -> tuple[pd.DataFrame, QueueSeries] | None:
    work = device_work(profile)
    if work is None:
        return None
    found = [launch_pairs(profile, work), launch_pairs(profile, work, QUEUE_ONLY_CALLS)]
    items = [p.item for p in found if p is not None]
    item = np.concatenate(items) if items else np.empty(0, dtype=np.int64)
    if item.size == 0:
        return None
    call_start = work["launch_start"].to_numpy()[item]  # the launch call's start, HTA-rounded as the work
    rank = work["rank"].to_numpy()[item]
    device = np.asarray(work["device"].array.codes)[item]
    stream = work["stream"].to_numpy()[item]
    order = np.lexsort((stream, device, rank))
    rank, device, stream = rank[order], device[order], stream[order]
    new = np.ones(rank.size, dtype=bool)
    new[1:] = (rank[1:] != rank[:-1]) | (device[1:] != device[:-1]) | (stream[1:] != stream[:-1])
    group = np.cumsum(new) - 1  # each launch's stream, in the order above
    first = np.flatnonzero(new)
    streams = pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.where(rank[first] >= 0, rank[first], 0), rank[first] < 0),
            "device": pd.Categorical.from_codes(
                device[first], categories=work["device"].array.categories
            ).remove_unused_categories(),
            "stream": stream[first],
            "launches": np.diff(np.append(first, rank.size)),
        }
    )
    # the sweep: +1 at each launch call's start, -1 at its work's start; a launch first at equal times
    n = item.size
    times = np.concatenate([call_start[order], work["start"].to_numpy()[item][order]])
    steps = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    groups = np.concatenate([group, group])
    sweep = np.lexsort((-steps, times, groups))
    # each stream's steps sum to 0, so the running sum over all streams starts every stream at 0
    length = np.cumsum(steps[sweep])
    return streams, QueueSeries(groups[sweep], times[sweep], length)


def _table(profile: Profile, limit: int) -> pd.DataFrame:
    found = queue_series(profile)
    if found is None:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in QUEUE_COLUMNS})
    streams, series = found
    group, time, length = series.group, series.time, series.length.astype(np.float64)
    count = np.bincount(group).astype(np.float64)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group))])
    lo, hi = bounds[:-1], bounds[1:]
    mean = np.bincount(group, weights=length) / count
    squares = np.bincount(group, weights=(length - mean[group]) ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.sqrt(squares / (count - 1))  # pandas' std: ddof 1, NaN for one point
    ordered = length[np.lexsort((length, group))]
    # the time to the stream's next point (0 for its last: HTA's NaN, skipped by its sum)
    step = np.zeros(time.size)
    step[:-1] = time[1:] - time[:-1]
    step[hi - 1] = 0.0
    span = time[hi - 1] - time[lo]
    integral = np.bincount(group, weights=length * step)
    blocked = np.bincount(group, weights=np.where(length >= limit, step, 0.0), minlength=lo.size)
    out = streams.copy()
    out["points"] = count
    out["mean"] = mean
    out["std"] = std
    out["min"] = ordered[lo]
    for name, q in (("p25", 0.25), ("median", 0.5), ("p75", 0.75)):
        out[name] = _quantile(ordered, lo, hi, q)
    out["max"] = ordered[hi - 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["time_mean"] = np.where(span > 0, integral / np.where(span > 0, span, 1.0), np.nan)
    out["span_us"] = span
    out["blocked_us"] = blocked
    return out[QUEUE_COLUMNS]


def _quantile(ordered: np.ndarray, lo: np.ndarray, hi: np.ndarray, q: float) -> np.ndarray:
    """Each stream's ``q`` quantile of its sorted points (``ordered[lo:hi]``), by linear interpolation
    (pandas' and numpy's default)."""
    position = (hi - lo - 1) * q
    below = np.floor(position).astype(np.int64)
    above = np.minimum(below + 1, hi - lo - 1)
    fraction = position - below
    return ordered[lo + below] + (ordered[lo + above] - ordered[lo + below]) * fraction
