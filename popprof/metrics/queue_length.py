"""Queue length per GPU stream: work launched by the host and not yet started on the GPU.

The figures are HolisticTraceAnalysis's (HTA 0.5.0, ``TraceAnalysis.get_queue_length_time_series``,
``get_queue_length_summary`` and ``get_time_spent_blocked_on_full_queue``), built in popprof's own code:

- the queue of a stream steps **+1 at the start of each launch call** and **-1 at the start of the GPU work**
  it launched (HTA's ``ts`` of both; its docstring says "decremented when the kernel executes": the
  kernel's start). The series has one point per step, per stream;
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
order there is its unstable sort's, so its mean and standard deviation can differ slightly);
``hipExtLaunchKernel`` and ``hipModuleLaunchKernel`` launches count (HTA's queue list lacks them).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..io import jsonout
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


class _Launches(NamedTuple):
    """The launched work by stream, in (rank, device, stream) order: per stream its ``rank`` (-1: none),
    ``device`` (a code of ``devices``) and ``stream``; per item, stream by stream (``bounds``: each one's rows),
    its launch call's start (``launch``) and its own (``start``), HTA's times."""

    rank: np.ndarray
    device: np.ndarray
    devices: pd.Index
    stream: np.ndarray
    launch: np.ndarray
    start: np.ndarray
    bounds: np.ndarray

    def streams(self) -> pd.DataFrame:
        """The table's first columns: ``rank``, ``device``, ``stream``, ``launches``."""
        return pd.DataFrame(
            {
                "rank": pd.arrays.IntegerArray(np.where(self.rank >= 0, self.rank, 0), self.rank < 0),
                "device": pd.Categorical.from_codes(self.device, categories=self.devices),
                "stream": self.stream,
                "launches": np.diff(self.bounds),
            }
        )


def queue_series(profile: Profile) -> tuple[pd.DataFrame, QueueSeries] | None:
    """The streams (``rank``, ``device``, ``stream``, ``launches``) and their series (:class:`QueueSeries`,
    HTA's ``get_queue_length_time_series``: one point per launch and per work start, a launch first at equal
    times); None without launched GPU work."""
    found = _launches(profile)
    if found is None:
        return None
    parts = [_merged(found.launch[lo:hi], found.start[lo:hi]) for lo, hi in _slices(found.bounds)]
    group = np.repeat(np.arange(len(parts)), [2 * (hi - lo) for lo, hi in _slices(found.bounds)])
    time = np.concatenate([t for t, _ in parts])
    return found.streams(), QueueSeries(group, time, np.concatenate([q for _, q in parts]))


def _slices(bounds: np.ndarray) -> list[tuple[int, int]]:
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


def _merged(launch: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One stream's series from its launch and work start times: the times of its points and the queue length
    from each on (+1 at each launch, -1 at each work start, in time order, a launch first at equal times: the
    launches come first into a stable sort, which merges the two sorted runs in one pass)."""
    times = np.concatenate([launch, start])
    order = np.argsort(times, kind="stable")
    return times[order], np.cumsum(np.where(order < launch.size, 1, -1))


def _launches(profile: Profile) -> _Launches | None:
    return profile.cached("queue_length.launches", lambda: _find_launches(profile))


def _find_launches(profile: Profile) -> _Launches | None:
    work = device_work(profile)
    if work is None:
        return None
    found = [launch_pairs(profile, work)]
    if profile.events["name"].array.categories.isin(QUEUE_ONLY_CALLS).any():
        found.append(launch_pairs(profile, work, QUEUE_ONLY_CALLS))
    items = [p.item for p in found if p is not None]
    if not items or not any(i.size for i in items):
        return None
    item = np.concatenate(items)
    rank = work["rank"].to_numpy()[item]
    device = np.asarray(work["device"].array.codes)[item]
    stream = work["stream"].to_numpy()[item]
    # one small number per (rank, device, stream), ordered as they are: a stable sort on it keeps each
    # stream's items in launch order (a radix sort when it fits 16 bits)
    key = np.zeros(item.size, dtype=np.int64)
    for column in (rank, device, stream):
        low, high = int(column.min()), int(column.max())
        if high - low < 1 << 12:  # small numbers (ranks, device codes, CUDA streams): their offsets
            key = key * (high - low + 1) + (column - low)
        else:  # large ones (rocprof's queue handles): their places among them
            codes, numbers = pd.factorize(column, sort=True)
            key = key * len(numbers) + codes
    if key.max() < 1 << 15:
        key = key.astype(np.int16)
    order = np.argsort(key, kind="stable")
    item, key = item[order], key[order]
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    pick = order[first]
    return _Launches(
        rank=rank[pick],
        device=device[pick],
        devices=work["device"].array.categories,
        stream=stream[pick],
        launch=work["launch_start"].to_numpy()[item],  # the launch call's start, HTA-rounded as the work
        start=work["start"].to_numpy()[item],
        bounds=np.append(first, item.size),
    )


def _rows(profile: Profile, limit: int) -> tuple[_Launches, list[tuple]] | None:
    """The streams and each one's figures (:func:`_figures`), once per profile and limit."""

    def build() -> tuple[_Launches, list[tuple]] | None:
        found = _launches(profile)
        if found is None:
            return None
        slices = _slices(found.bounds)
        return found, [_figures(found.launch[lo:hi], found.start[lo:hi], limit) for lo, hi in slices]

    return profile.cached(f"queue_length.rows.{limit}", build)


def _table(profile: Profile, limit: int) -> pd.DataFrame:
    built = _rows(profile, limit)
    if built is None:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in QUEUE_COLUMNS})
    found, rows = built
    figures = dict(zip(QUEUE_COLUMNS[4:], (np.array(c) for c in zip(*rows, strict=True)), strict=True))
    figures["points"] = figures["points"].astype(np.int64)
    streams = found.streams()
    streams["device"] = streams["device"].cat.remove_unused_categories()
    return pd.DataFrame({**{c: streams[c].array for c in QUEUE_COLUMNS[:4]}, **figures})


def _figures(launch: np.ndarray, start: np.ndarray, limit: int) -> tuple:
    """One stream's figures (:data:`QUEUE_COLUMNS` from ``points`` on) from its launches and work starts."""
    time, values = _merged(launch, start)
    points = values.size
    low = int(values.min())
    histogram = np.cumsum(np.bincount(values - low))  # points at or under each length
    total = int(values.sum())
    mean = total / points
    squares = int(np.dot(values, values))  # exact: whole numbers
    std = float(np.sqrt(max(squares - total * mean, 0.0) / (points - 1)))
    quartiles = [_quantile(histogram, low, points, q) for q in (0.25, 0.5, 0.75)]
    most = low + int(np.searchsorted(histogram, points))
    span = float(time[-1] - time[0])
    # the time integral of the queue: each item waits from its launch to its start (Little's law); summed item
    # by item, as sums of epoch times in microseconds lose digits
    waiting = float((start - launch).sum())
    time_mean = waiting / span if span > 0 else float("nan")
    blocked = float(np.diff(time)[values[:-1] >= limit].sum()) if most >= limit else 0.0
    return (points, mean, std, float(low), *quartiles, float(most), time_mean, span, blocked)


def _quantile(histogram: np.ndarray, low: int, points: int, q: float) -> float:
    """The ``q`` quantile of ``points`` values given as the cumulative count at or under each value from
    ``low`` on, by linear interpolation (pandas' and numpy's default)."""
    position = (points - 1) * q
    below = int(np.floor(position))
    at = low + int(np.searchsorted(histogram, below + 1))  # the value of the sorted point number ``below``
    above = low + int(np.searchsorted(histogram, min(below + 2, points)))
    return at + (above - at) * (position - below)


def queue_section(profile: Profile) -> dict | None:
    """The summary's ``trace.queue_lengths``: ``max_queue_length`` (the full queue's length) and ``streams``
    (:func:`queue_lengths`' rows as records, ``rank`` None when the trace names none); None without launched
    GPU work."""
    built = _rows(profile, MAX_QUEUE_LENGTH)
    if built is None:
        return None
    found, rows = built
    names = [str(d) for d in found.devices]
    streams = [
        {
            "rank": None if rank < 0 else rank,
            "device": names[device] if device >= 0 else None,
            "stream": stream,
            "launches": launches,
            **dict(zip(QUEUE_COLUMNS[4:], figures, strict=True)),
        }
        for rank, device, stream, launches, figures in zip(
            found.rank.tolist(),
            found.device.tolist(),
            found.stream.tolist(),
            np.diff(found.bounds).tolist(),
            rows,
            strict=True,
        )
    ]
    return {"max_queue_length": MAX_QUEUE_LENGTH, "streams": jsonout.plain(streams)}
