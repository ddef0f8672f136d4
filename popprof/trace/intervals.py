"""Device and host activity of a trace's events as intervals (numpy: sorting, searchsorted, bincount).

Used by the trace-based metrics; the arithmetic on plain intervals is ``spans.py``. Nothing here
loops in Python over events: every function is a handful of whole-array operations, so 10 million
events take seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model.errors import NotEvaluated
from ..model.profile import Profile
from . import masks
from .activity import (
    distinct,
    is_bookkeeping,
    is_device_activity,
    is_host_activity,
    is_host_wait,
)
from .masks import rank_codes  # noqa: F401  (its home is masks.py; importable here as before)
from .spans import busy_before, merge_intervals, subtract_intervals, touching

NO_DEVICE = (
    "needs device activity in the trace: no event has a device_category (map device events "
    "with [tool.popprof.device_map] or --device-map when reading the trace)"
)

#: Host calls that block on the device (``cudaStreamSynchronize`` ...): host events, never device time.
HOST_WAIT = "host_wait"


def device_label(rank, device) -> str:
    """A device as the time account, the gains and the rules name it: ``rank 1 gpu:0``, ``gpu:0``, ``rank 1``,
    or ``""`` without either (``rank`` None or NaN: no rank)."""
    parts = [] if rank is None or pd.isna(rank) else [f"rank {int(rank)}"]
    if device:
        parts.append(str(device))
    return " ".join(parts)


@dataclass
class DeviceActivity:
    """Device events of one device (or of a whole trace without device columns): top-level ones, and the
    merged intervals when the device was busy. ``rank`` / ``device`` name it when the trace says."""

    start: np.ndarray  # start_us of each device event
    end: np.ndarray  # start_us + dur_us
    category: pd.Categorical  # device_category
    name: pd.Categorical  # event label
    busy_start: np.ndarray  # merged busy intervals, sorted and disjoint
    busy_end: np.ndarray
    rank: int | None = None
    device: str | None = None
    rows: np.ndarray | None = None  # positions of these events in the events table

    @property
    def label(self) -> str:
        """``rank 1 gpu:0``, ``gpu:0``, ``rank 1``, or ``""`` for a trace without rank/device columns."""
        return device_label(self.rank, self.device)

    def busy_within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Device busy time inside each ``[a, b]``."""
        if not hasattr(self, "_prefix"):
            self._prefix = np.concatenate([[0.0], np.cumsum(self.busy_end - self.busy_start)])
        return busy_before(self.busy_start, self.busy_end, b, self._prefix) - busy_before(
            self.busy_start, self.busy_end, a, self._prefix
        )

    @property
    def span(self) -> tuple[float, float]:
        """First start and last end of device activity."""
        return float(self.busy_start[0]), float(self.busy_end[-1])

    def exposed(self, categories: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Time the events of ``categories`` run while no other device event does (e.g. communication not
        overlapped by compute on another stream), as sorted, disjoint intervals (computed once per set)."""
        if not hasattr(self, "_exposed"):
            self._exposed: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
        if categories not in self._exposed:
            mine = self.in_categories(categories)
            a_start, a_end = merge_intervals(self.start[mine], self.end[mine])
            # only the other events that touch an interval of A can cover any of it: the union of those is
            # the union of all of them wherever A is (a few exchanges among 100k kernels: a few to merge)
            other = ~mine & touching(self.start, self.end, a_start, a_end)
            b_start, b_end = merge_intervals(self.start[other], self.end[other])
            self._exposed[categories] = subtract_intervals(a_start, a_end, b_start, b_end)
        return self._exposed[categories]

    def without(
        self, start: np.ndarray, end: np.ndarray, categories: tuple[str, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The sorted, disjoint intervals ``[start, end)`` less the time this device's events of ``categories``
        run (e.g. communication less compute); only the events that touch an interval are merged."""
        if start.size == 0:
            return start, end
        mine = self.in_categories(categories)
        mine[mine] = touching(self.start[mine], self.end[mine], start, end)
        return subtract_intervals(start, end, *merge_intervals(self.start[mine], self.end[mine]))

    def in_categories(self, categories: tuple[str, ...]) -> np.ndarray:
        """True for events whose category is one of ``categories`` (on the codes, no strings)."""
        wanted = [i for i, c in enumerate(self.category.categories) if c in categories]
        return np.isin(self.category.codes, wanted)


@dataclass
class HostEvents:
    """Host events (no device_category, or ``host_wait``) with a positive duration, profiler bookkeeping
    left out, as arrays."""

    event_id: np.ndarray
    parent_id: np.ndarray  # float64, NaN for top-level events
    depth: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name: pd.Categorical
    start: np.ndarray
    dur: np.ndarray
    rank: np.ndarray  # int64, -1 when the trace has no rank
    waits: np.ndarray  # bool: a call blocking on the device (host_wait)

    def __len__(self) -> int:
        return len(self.start)

    def subset(self, mask: np.ndarray) -> HostEvents:
        """The events where ``mask`` is true."""
        return HostEvents(
            **{
                k: (
                    v[mask]
                    if not isinstance(v, pd.Categorical)
                    else pd.Categorical.from_codes(np.asarray(v.codes)[mask], dtype=v.dtype)
                )
                for k, v in vars(self).items()
            }
        )

    def of_rank(self, rank: int | None) -> HostEvents:
        """The events of one rank (all of them for a trace without ranks)."""
        if rank is None or not (self.rank >= 0).any():
            return self
        return self.subset(self.rank == rank)


# One-entry caches: several rules read the same (large) events table in one check.
_cache: dict[str, tuple[object, object]] = {}


def clear_cache() -> None:
    """Forget the cached device/host arrays (they are rebuilt on next use)."""
    _cache.clear()


def _cached(kind: str, events: pd.DataFrame, build):
    hit = _cache.get(kind)
    if hit is not None and hit[0] is events:
        return hit[1]
    value = build(events)
    _cache[kind] = (events, value)  # keeps a reference to the frame, so its id cannot be reused
    return value


def sum_by_code(series: pd.Series, mask: np.ndarray, weights: np.ndarray) -> pd.Series:
    """Sum of ``weights`` per category of a categorical Series over rows in ``mask`` (non-zero sums only,
    largest first)."""
    cat = series.array
    codes = np.asarray(cat.codes)[mask]
    ok = codes >= 0
    sums = np.bincount(codes[ok], weights=weights[mask][ok], minlength=len(cat.categories))
    nonzero = np.flatnonzero(sums)
    out = pd.Series(sums[nonzero], index=pd.Index(np.asarray(cat.categories)[nonzero], dtype="str"))
    return out.sort_values(ascending=False, kind="stable")


def host_mask(events: pd.DataFrame) -> np.ndarray:
    """True for host events (not device time: host waits included, profiler bookkeeping excluded)."""
    return is_host_activity(events)


def wait_mask(events: pd.DataFrame) -> np.ndarray:
    """True for host calls that block on the device (``device_category == "host_wait"``)."""
    return is_host_wait(events)


def bookkeeping_mask(events: pd.DataFrame) -> np.ndarray:
    """True for profiler bookkeeping (kept in the tables, left out of every attribution)."""
    return is_bookkeeping(events)


def _events(profile: Profile) -> pd.DataFrame:
    events = profile.get("events")
    if events is None or events.empty:
        raise NotEvaluated("needs a trace (.pvti or Chrome trace JSON)")
    return events


def device_activities(profile: Profile, by: str = "device") -> list[DeviceActivity]:
    """The device activity of a profile's trace, one entry per (rank, device) (``by="device"``) or per rank
    (``by="rank"``, the union of a rank's devices), ordered by rank and device; a trace without rank and
    device columns gives one entry. Raises NotEvaluated when there is no device activity."""
    activities = _cached(f"device:{by}", _events(profile), lambda ev: _build_devices(profile, by))
    if not activities:
        raise NotEvaluated(NO_DEVICE)
    return activities


def device_activity(profile: Profile) -> DeviceActivity:
    """All device activity of a profile's trace as one (every device together)."""
    activities = _cached("device:all", _events(profile), lambda ev: _build_devices(profile, "all"))
    if not activities:
        raise NotEvaluated(NO_DEVICE)
    return activities[0]


def _build_devices(profile: Profile, by: str) -> list[DeviceActivity]:
    events = profile.events
    keep, start, end, category, names = profile.cached("trace.device_rows", lambda: _device_rows(profile))
    if keep is None:
        return []
    ranks = masks.rank_array(profile)[keep] if by != "all" else np.full(len(start), -1, dtype=np.int64)
    if by == "device" and "device" in events.columns:
        column = events["device"]
        if isinstance(column.dtype, pd.CategoricalDtype):  # codes, never 10 million strings
            dev_codes, dev_names = np.asarray(column.array.codes)[keep], column.array.categories
        else:
            dev_codes, dev_names = pd.factorize(
                column.to_numpy(dtype=object)[keep], sort=True
            )  # missing -> -1
    else:
        dev_codes, dev_names = np.full(len(start), -1, dtype=np.int64), pd.Index([])
    key = (ranks + 1) * (len(dev_names) + 1) + (dev_codes + 1)
    positions = np.flatnonzero(keep)
    out = []
    for k in distinct(key):  # one pass per device (a handful), not per event
        mine = key == k
        rank, dev = divmod(int(k), len(dev_names) + 1)
        s, e = start[mine], end[mine]
        if mine.all():  # one device (or rank) holds every device event: one union for every grouping
            busy_start, busy_end = profile.cached("trace.device_rows.union", lambda: _read_only(start, end))
        else:
            busy_start, busy_end = merge_intervals(s, e)
        out.append(
            DeviceActivity(
                s,
                e,
                pd.Categorical.from_codes(np.asarray(category.codes)[mine], dtype=category.dtype),
                pd.Categorical.from_codes(np.asarray(names.codes)[mine], dtype=names.dtype),
                busy_start,
                busy_end,
                None if rank == 0 else rank - 1,
                None if dev == 0 else str(dev_names[dev - 1]),
                positions[mine],
            )
        )
    return out


def _read_only(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`popprof.trace.spans.merge_intervals` of the intervals, read-only (shared by activities)."""
    busy_start, busy_end = merge_intervals(start, end)
    busy_start.setflags(write=False)
    busy_end.setflags(write=False)
    return busy_start, busy_end


def _device_rows(profile: Profile):
    """Mask of device-activity events (top-level, timed; no host waits, no bookkeeping) and their arrays
    (the same for every grouping of :func:`device_activities`: found once per profile scope)."""
    events = profile.events
    category = events["device_category"].array
    keep = masks.device_activity_mask(profile) & ~masks.bookkeeping_mask(profile)
    keep &= np.isfinite(events["start_us"].to_numpy(dtype=np.float64))
    keep &= np.isfinite(events["dur_us"].to_numpy(dtype=np.float64))
    if not keep.any():
        return None, None, None, None, None
    depth = events["depth"].to_numpy()
    nested = keep & (depth > 0)
    if nested.any():  # drop device events inside another device event (they would count twice)
        parents = events["parent_id"].array[nested].to_numpy(dtype="float64", na_value=np.nan)
        ids = events["event_id"].to_numpy()[keep]
        inside = np.zeros(len(keep), dtype=bool)
        inside[np.flatnonzero(nested)] = np.isin(parents, ids)
        keep &= ~inside
    start = events["start_us"].to_numpy(dtype=np.float64)[keep]
    end = start + events["dur_us"].to_numpy(dtype=np.float64)[keep]
    names = events["name"].array
    return (
        keep,
        start,
        end,
        pd.Categorical.from_codes(np.asarray(category.codes)[keep], dtype=category.dtype),
        pd.Categorical.from_codes(np.asarray(names.codes)[keep], dtype=names.dtype),
    )


def host_events(profile: Profile, min_us: float = 0.0, waits_only: bool = False) -> HostEvents:
    """The host events of a profile's trace (those without device_category, with a duration); with
    ``min_us``, only those lasting at least that long; with ``waits_only``, only the calls blocking on the
    device (``waits``). Both picked before any column is taken."""
    kind = ("host" if min_us <= 0 else f"host>={min_us!r}") + (":waits" if waits_only else "")
    return _cached(kind, _events(profile), lambda ev: _build_host(profile, min_us, waits_only))


def thread_keys(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid): a thread's key for joins and ``isin`` (wraps harmlessly for huge synthetic
    ids)."""
    return np.asarray(pid, dtype=np.int64) * np.int64(1_000_003) + np.asarray(tid, dtype=np.int64)


def device_tracks(
    events: pd.DataFrame, device: np.ndarray | None = None, rows: np.ndarray | None = None
) -> np.ndarray:
    """True for events on a thread that carries device activity (a GPU stream's track): an annotation
    there (Kineto ``gpu_user_annotation``) has no device category but is not host work either.
    ``device``: the events' :func:`popprof.trace.activity.is_device_activity` when the caller has it;
    ``rows``: the answer for these rows only (all events when None)."""
    pid = events["pid"].to_numpy(dtype=np.int64)
    tid = events["tid"].to_numpy(dtype=np.int64)
    device = is_device_activity(events) if device is None else device

    def key(picked) -> np.ndarray:  # one number per thread
        return thread_keys(pid[picked], tid[picked])

    wanted = key(slice(None) if rows is None else rows)
    return np.isin(wanted, pd.unique(key(device)))  # a few device threads: hashing, no sort


def _build_host(profile: Profile, min_us: float = 0.0, waits_only: bool = False) -> HostEvents:
    events = profile.events
    dur = events["dur_us"].to_numpy(dtype=np.float64)
    start = events["start_us"].to_numpy(dtype=np.float64)
    device = masks.device_activity_mask(profile)
    # host events (host_mask: not device time, not bookkeeping); ProfilerStep#N annotations span whole
    # steps: markers, not host work of their own
    keep = dur >= min_us if min_us > 0 else dur > 0
    if waits_only:
        keep &= masks.host_wait_mask(profile)
    keep &= ~device
    keep &= ~masks.bookkeeping_mask(profile)
    keep &= ~masks.step_marker_mask(profile)
    keep &= np.isfinite(start)
    rows = np.flatnonzero(keep)
    rows = rows[~device_tracks(events, device, rows)]  # the threads' keys of the candidates only
    names = events["name"].array
    return HostEvents(
        rank=masks.rank_array(profile)[rows],
        waits=masks.host_wait_mask(profile)[rows],
        event_id=events["event_id"].to_numpy()[rows],
        parent_id=events["parent_id"].array[rows].to_numpy(dtype="float64", na_value=np.nan),
        depth=events["depth"].to_numpy()[rows],
        pid=events["pid"].to_numpy()[rows],
        tid=events["tid"].to_numpy()[rows],
        name=pd.Categorical.from_codes(np.asarray(names.codes)[rows], dtype=names.dtype),
        start=start[rows],
        dur=dur[rows],
    )


def thread_labels(profile: Profile) -> dict[tuple[int, int], str]:
    """``(pid, tid) -> "thread_name (tid)"`` from the threads table (empty when absent).

    A name that already holds the thread id as a word (Kineto's ``thread 25738 (python)``) is
    shown as it is, so the id is not printed twice.
    """
    threads = profile.get("threads")
    if threads is None or threads.empty:
        return {}
    names = threads["thread_name"].fillna("").astype("str")
    return {
        (int(p), int(t)): _thread_label_text(int(p), int(t), n)
        for p, t, n in zip(threads["pid"], threads["tid"], names, strict=True)
    }


def _thread_label_text(pid: int, tid: int, name: str) -> str:
    if not name:
        return f"{pid}:{tid}"
    if str(tid) in re.findall(r"\d+", name):
        return name
    return f"{name} ({tid})"


def thread_label(labels: dict[tuple[int, int], str], pid: int, tid: int) -> str:
    """The display name of one thread."""
    return labels.get((int(pid), int(tid)), f"{int(pid)}:{int(tid)}")


def thread_names(labels: dict[tuple[int, int], str], pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Display names for arrays of (pid, tid), naming each distinct thread once (vectorised)."""
    if len(pid) == 0:
        return np.empty(0, dtype=object)
    threads, which = np.unique(np.column_stack([pid, tid]), axis=0, return_inverse=True)
    names = np.array([thread_label(labels, p, t) for p, t in threads], dtype=object)  # a few threads
    return names[which.ravel()]
