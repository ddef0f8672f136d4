"""Interval arithmetic over plain arrays (numpy: sorting, searchsorted, bincount): the one interval union.

Intervals are ``[start, end)`` pairs of float arrays; nothing here knows events, tables or
devices, so every trace module (``activity.py``, ``intervals.py``) and the metrics and plots
build on it. Nothing loops in Python over intervals: every function is a handful of
whole-array operations.
"""

from __future__ import annotations

import numpy as np


def merge_intervals(
    start: np.ndarray, end: np.ndarray, tolerance: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals ``[start, end)``: sorted, disjoint ``(starts, ends)``, vectorised.

    Intervals that overlap or touch merge; with ``tolerance`` so do intervals less than that far
    apart (a plot merges what it could not draw apart). The one interval union of the package.
    """
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    if start.size == 0:
        return np.empty(0), np.empty(0)
    if np.all(
        start[1:] >= start[:-1]
    ):  # in order already (GPU work by start): the stable sort is the identity
        s, e = start, end
    else:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1] + tolerance
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def touching(b_start: np.ndarray, b_end: np.ndarray, a_start: np.ndarray, a_end: np.ndarray) -> np.ndarray:
    """Which intervals B (any order) touch an interval of A (sorted, disjoint): the only ones of B that can
    cover any of A, so subtracting their union from A is subtracting the union of all of B."""
    first = np.searchsorted(a_end, b_start, side="left")  # the first A ending at or after each B starts
    touches = first < a_start.size
    touches[touches] = a_start[first[touches]] <= b_end[touches]
    return touches


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Total length of the union of the intervals."""
    s, e = merge_intervals(start, end)
    return float((e - s).sum())


def state_durations(kinds: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, float]:
    """Time spent in each combination of kinds: ``{bitmask: duration}`` (bit i = kind i running).

    Each kind's intervals are merged first (unless they are merged already), so a kind is either running
    or not; the timeline is then swept once over every boundary.
    """
    times, deltas = [], []
    for bit, (start, end) in enumerate(kinds):
        s, e = (start, end) if _merged(start, end) else merge_intervals(start, end)
        times += [s, e]
        deltas += [np.full(s.size, 1 << bit, dtype=np.int64), np.full(e.size, -(1 << bit), dtype=np.int64)]
    if not times:
        return {}
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    if t.size == 0:
        return {}
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    running = np.cumsum(d)
    seg = np.diff(t)
    state = running[:-1]
    present = np.flatnonzero(np.bincount(state[state > 0], minlength=1))  # np.unique of small codes, no sort
    return {int(value): float(seg[state == value].sum()) for value in present.tolist()}


def _merged(start: np.ndarray, end: np.ndarray) -> bool:
    """Whether :func:`merge_intervals` gives these float64 intervals back as they are: starts and ends in
    order, each interval apart from the next (the kinds a caller merged already)."""
    if not (isinstance(start, np.ndarray) and isinstance(end, np.ndarray)):
        return False
    if start.dtype != np.float64 or end.dtype != np.float64 or start.shape != end.shape or start.ndim != 1:
        return False
    return bool(
        np.all(start[1:] >= start[:-1]) and np.all(end[1:] >= end[:-1]) and np.all(start[1:] > end[:-1])
    )


def subtract_intervals(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Parts of the intervals A not covered by the intervals B (each sorted and disjoint): one sweep over
    all boundaries, vectorised."""
    if len(a_start) == 0 or len(b_start) == 0:
        return a_start, a_end
    points = np.concatenate([a_start, a_end, b_start, b_end])
    in_a = np.concatenate([np.ones(len(a_start)), -np.ones(len(a_end)), np.zeros(len(b_start) + len(b_end))])
    in_b = np.concatenate([np.zeros(len(a_start) + len(a_end)), np.ones(len(b_start)), -np.ones(len(b_end))])
    order = np.argsort(points, kind="stable")
    points, count_a, count_b = points[order], np.cumsum(in_a[order]), np.cumsum(in_b[order])
    keep = (count_a[:-1] > 0) & (count_b[:-1] <= 0) & (points[1:] > points[:-1])
    return merge_intervals(points[:-1][keep], points[1:][keep])


def intersect_intervals(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Parts of the intervals A covered by the intervals B (each sorted and disjoint): A less what of A
    B does not cover."""
    if len(a_start) == 0 or len(b_start) == 0:
        return np.empty(0), np.empty(0)
    return subtract_intervals(a_start, a_end, *subtract_intervals(a_start, a_end, b_start, b_end))


def busy_before(
    busy_start: np.ndarray, busy_end: np.ndarray, t: np.ndarray, prefix: np.ndarray | None = None
) -> np.ndarray:
    """Busy time of the merged intervals before each time in ``t`` (vectorised).

    ``prefix`` (cumulative interval lengths with a leading 0) may be passed to avoid recomputing it.
    """
    t = np.asarray(t, dtype=np.float64)
    if prefix is None:
        prefix = np.concatenate([[0.0], np.cumsum(busy_end - busy_start)])
    k = np.searchsorted(busy_start, t, side="right")  # intervals starting at or before t
    total = prefix[k]
    has = k > 0
    last = np.clip(k - 1, 0, None)
    excess = np.where(has, np.clip(busy_end[last] - t, 0, None), 0.0)  # part of interval k-1 after t
    return total - excess


def busy_within(busy_start: np.ndarray, busy_end: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Busy time of the merged intervals inside each ``[a, b]``."""
    return busy_before(busy_start, busy_end, b) - busy_before(busy_start, busy_end, a)


def overlap_pairs(
    start: np.ndarray, end: np.ndarray, gap_start: np.ndarray, gap_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (event index, gap index, overlap) for events overlapping sorted, disjoint gaps."""
    empty = np.empty(0, dtype=np.int64)
    if len(gap_start) == 0 or len(start) == 0:
        return empty, empty, np.empty(0)
    first = np.searchsorted(gap_end, start, side="right")  # first gap ending after the event starts
    hit = first < len(gap_start)
    hit[hit] = gap_start[first[hit]] < end[hit]  # ... and starting before it ends
    event = np.flatnonzero(hit)
    first = first[event]
    # Most events overlap one gap at most; search again only for those reaching past their first gap.
    count = np.ones(len(event), dtype=np.int64)
    longer = end[event] > gap_end[first]
    if longer.any():
        stop = np.searchsorted(gap_start, end[event[longer]], side="left")
        count[longer] = stop - first[longer]
    total = int(count.sum())
    event = np.repeat(event, count)
    offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    gap = np.repeat(first, count) + offset
    overlap = np.minimum(end[event], gap_end[gap]) - np.maximum(start[event], gap_start[gap])
    keep = overlap > 0
    return event[keep], gap[keep], overlap[keep]


def window_sums(start: np.ndarray, end: np.ndarray, origin: float, width: float, count: int) -> np.ndarray:
    """Time each of ``count`` windows ``[origin + i*width, origin + (i+1)*width)`` overlaps the intervals.

    Intervals may overlap each other (their times add up). Intervals are
    assumed to lie within the windows' range (they are clipped to it).
    """
    s = np.clip(start, origin, origin + count * width)
    e = np.clip(end, origin, origin + count * width)
    ws = np.clip(np.floor((s - origin) / width).astype(np.int64), 0, count - 1)
    we = np.clip(np.floor((e - origin) / width).astype(np.int64), 0, count - 1)
    same = ws == we
    out = np.bincount(ws[same], weights=(e - s)[same], minlength=count).astype(np.float64)
    cross = ~same
    if cross.any():
        cs, ce, cws, cwe = s[cross], e[cross], ws[cross], we[cross]
        out += np.bincount(cws, weights=origin + (cws + 1) * width - cs, minlength=count)
        out += np.bincount(cwe, weights=ce - (origin + cwe * width), minlength=count)
        inner = np.bincount(cws + 1, minlength=count + 1) - np.bincount(cwe, minlength=count + 1)
        out += np.cumsum(inner)[:count] * width
    return out
