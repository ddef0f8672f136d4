"""Device activity over time: union of device intervals, idle gaps inside the active span.

Device activity is every event with a device ``device_category`` (compute,
exchange, host_io, sync, other): on an IPU, syncs are device time. ``host_wait``
events (a GPU host call such as ``cudaDeviceSynchronize`` blocking until the
device catches up) are host events, never device time. Profiler bookkeeping
(``events.bookkeeping``) is never activity of either kind. The *device-active span* runs
from the first device event's start to the last one's end; gaps inside it, when
no device event runs, are time the device sat idle while the host was busy
elsewhere: host stalls.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .spans import merge_intervals

BUSY_CATEGORIES: tuple[str, ...] = ("compute", "exchange", "host_io", "sync", "other")
#: The Chrome trace categories of framework operators (Kineto's ``cpu_op``; ``Operator`` in its 2021 layout):
#: the calls a user's code makes (``aten::to``, ``aten::item``, ...).
OPERATOR_CHANNELS: tuple[str, ...] = ("cpu_op", "Operator")


@dataclass(frozen=True)
class Union:
    """The union of a set of intervals."""

    first_start: float
    last_end: float
    busy: float  # total covered time
    gaps: np.ndarray  # lengths of the uncovered gaps between first_start and last_end

    @property
    def span(self) -> float:
        return self.last_end - self.first_start

    @property
    def idle(self) -> float:
        return float(self.gaps.sum())


def clipped_durations(dur: np.ndarray) -> np.ndarray:
    """``np.maximum(np.nan_to_num(dur, nan=0.0), 0.0)`` in one pass: missing and negative durations as 0,
    +inf as the largest float (as ``nan_to_num`` has it)."""
    out = np.fmax(np.asarray(dur, dtype=np.float64), 0.0)
    if out.size and out.max() == np.inf:
        np.minimum(out, np.finfo(np.float64).max, out=out)
    return out


def interval_union(start: np.ndarray, dur: np.ndarray) -> Union | None:
    """Union of intervals ``[start, start + dur)``, vectorised; ``None`` when there are none."""
    start = np.asarray(start, dtype=np.float64)
    keep = ~np.isnan(start)
    start, dur = start[keep], clipped_durations(np.asarray(dur, dtype=np.float64)[keep])
    if start.size == 0:
        return None
    s, e = merge_intervals(start, start + dur)
    gaps = s[1:] - e[:-1]
    first, last = float(s[0]), float(e[-1])
    return Union(first, last, float((e - s).sum()), gaps)


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)``, in one min/max pass when every value is the same (the ranks of a one-rank
    trace: the usual case, where a hash of every event is the cost), by flagging each value when the values
    are integers in a narrow range (stream ids, category codes)."""
    values = np.asarray(values)
    if values.size:
        low, high = values.min(), values.max()
        if low == high:
            return values[:1].copy()
        if values.dtype.kind in "iu" and int(high) - int(low) <= 4 * values.size + 1024:
            # one flag per value of the range, set at each value's offset from the lowest (computed as intp
            # in the subtraction itself: no widened copy of the values; a wrap cancels in the difference)
            seen = np.zeros(int(high) - int(low) + 1, dtype=bool)
            seen[np.subtract(values, low, dtype=np.intp, casting="unsafe")] = True
            wide = np.int64 if values.dtype.kind == "i" else np.uint64
            return (np.flatnonzero(seen).astype(wide) + wide(low)).astype(values.dtype)
    return np.unique(values)


def interval_window(
    start: np.ndarray, dur: np.ndarray, mask: np.ndarray | None = None
) -> tuple[float, float] | None:
    """``(first_start, last_end)`` of :func:`interval_union` of the same intervals (those in ``mask``),
    without merging them (a minimum and a maximum: the window needs no sort); ``None`` when there are none."""
    start = np.asarray(start, dtype=np.float64)
    keep = ~np.isnan(start)
    if mask is not None:
        keep &= mask
    if not keep.any():
        return None
    end = start + clipped_durations(dur)
    return float(np.min(start, where=keep, initial=np.inf)), float(np.max(end, where=keep, initial=-np.inf))


def labels_mask(column: pd.Series, labels: Sequence[str], rows: np.ndarray | None = None) -> np.ndarray:
    """``column.isin(labels)`` as a new boolean array (of the positions ``rows`` only, in their order, when
    given); on a categorical (the readers' dtype) one test per category, on its codes (:func:`category_mask`),
    not one per row."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        hit = column.array.categories.isin(labels)
        codes = np.asarray(column.array.codes)
        return codes_mask(codes if rows is None else codes[rows], hit)
    if rows is not None:
        column = column.iloc[rows]
    return column.isin(labels).to_numpy(dtype=bool, copy=True)


def is_device_activity(events: pd.DataFrame) -> np.ndarray:
    """Boolean mask: the event is device time (a device category other than ``host_wait``)."""
    return labels_mask(events["device_category"], BUSY_CATEGORIES)


def is_host_wait(events: pd.DataFrame) -> np.ndarray:
    """Boolean mask: a host call blocking on the device (``device_category == "host_wait"``)."""
    return labels_mask(events["device_category"], ("host_wait",))


#: Iteration markers written by the PyTorch profiler (``ProfilerStep#12``): annotations spanning a step, as
#: HTA reads them; never host work of their own.
STEP_MARKER = re.compile(r"^ProfilerStep\s*#\s*\d+$")
#: What every step marker's name begins with (``ProfilerStep#``): steps counted, and named as one (``#*``)
STEP_PREFIX = "ProfilerStep#"


def category_mask(values: pd.Categorical, hit: Sequence[bool] | np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of a categorical whose category is hit (``hit``: one flag per category,
    in their order); a missing value (code -1) is not. On the codes: one test per category, not per row."""
    return codes_mask(np.asarray(values.codes), hit)


#: Up to this many categories hit, :func:`codes_mask` compares the codes with each.
_FEW_CODES = 8


def codes_mask(codes: np.ndarray, hit: Sequence[bool] | np.ndarray) -> np.ndarray:
    """Boolean mask of the category codes (-1: missing, never hit) whose category is hit (``hit``: one flag
    per category). A few categories hit (the usual case: a device category, the launch calls): the codes
    compared with each, in their own small integer type; more: a lookup table taken at every code, which
    first widens the codes to an index array eight times their size."""
    hit = np.asarray(hit, dtype=bool)
    wanted = np.flatnonzero(hit)
    if wanted.size <= _FEW_CODES:
        out = np.zeros(codes.shape, dtype=bool)
        for code in wanted.tolist():
            out |= codes == code
        return out
    return np.append(hit, False).take(codes)  # -1: the False


def is_step_marker(events: pd.DataFrame) -> np.ndarray:
    """Boolean mask: ``ProfilerStep#N`` annotations."""
    column = events["name"]
    names = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    return category_mask(names, [bool(STEP_MARKER.match(str(c))) for c in names.categories])


def is_bookkeeping(events: pd.DataFrame) -> np.ndarray:
    """Boolean mask: profiler bookkeeping (``events.bookkeeping``), to leave out of attribution and tops."""
    if "bookkeeping" not in events.columns:
        return np.zeros(len(events), dtype=bool)
    return events["bookkeeping"].to_numpy(dtype=bool, na_value=False)


def is_host_activity(events: pd.DataFrame) -> np.ndarray:
    """Boolean mask: host events to attribute time to (not device time, not bookkeeping; host waits included)."""
    return ~is_device_activity(events) & ~is_bookkeeping(events)


def device_union(events: pd.DataFrame, mask: np.ndarray | None = None) -> Union | None:
    """Union of the device-busy events (see the module docstring); ``mask``: their
    :func:`is_device_activity` when the caller has it."""
    mask = is_device_activity(events) if mask is None else mask
    return interval_union(events["start_us"].to_numpy()[mask], events["dur_us"].to_numpy()[mask])


def device_time_by_category(
    events: pd.DataFrame, mask: np.ndarray | None = None, parent: np.ndarray | None = None
) -> pd.Series:
    """Device time per category without double counting nested device events.

    Each device event contributes its duration minus that of its direct children
    that are device events too (a pvti ``Engine::run`` holding stream copies and
    syncs counts only its own remainder as compute). For Chrome traces, where
    device events do not nest, this is the plain sum of durations. ``mask``: the events'
    :func:`is_device_activity` and ``parent``: their :func:`popprof.trace.nesting.parent_positions`,
    when the caller has them.
    """
    from .device import DEVICE_CATEGORIES
    from .nesting import parent_positions

    is_device = is_device_activity(events) if mask is None else mask
    parent = parent_positions(events) if parent is None else parent
    rows = np.flatnonzero(is_device)  # the device events only: none of the host's rows is read
    dur = events["dur_us"].to_numpy(dtype=np.float64)[rows]
    dur[np.isnan(dur)] = 0.0  # fillna(0.0)
    up = parent[rows]
    inside = up >= 0
    inside[inside] = is_device[up[inside]]  # a device event inside another device event
    if inside.any():
        nested_sum = np.bincount(up[inside], weights=dur[inside], minlength=len(is_device))
        own = np.maximum(dur - nested_sum[rows], 0.0)
    else:  # no device event inside another (Chrome traces): dur - 0.0 is dur
        own = np.maximum(dur, 0.0)
    column = events["device_category"]
    category = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    codes = np.asarray(category.codes)[rows]
    named = codes >= 0
    # one groupby over the category codes: the sums (row order, pandas' summation) of a groupby by category
    sums = pd.Series(own[named]).groupby(codes[named], sort=True).sum()
    by_category = pd.Series(sums.to_numpy(), index=category.categories.take(sums.index.to_numpy()))
    return by_category.reindex(list(DEVICE_CATEGORIES), fill_value=0.0).astype("float64")
