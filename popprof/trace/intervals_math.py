"""Interval arithmetic on numpy arrays: merge, total length, overlap by kind (all vectorised)."""

from __future__ import annotations

import numpy as np


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals ``[start, end)`` into disjoint, sorted ones (touching intervals stay apart)."""
    start = np.asarray(start, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    # a new group starts where an interval begins after everything before it has ended
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, start.size - 1)
    return start[first], reach[last]


def length(start: np.ndarray, end: np.ndarray) -> float:
    """Total length of the union of the intervals."""
    s, e = merge(start, end)
    return float((e - s).sum())


def state_durations(kinds: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, float]:
    """Time spent in each combination of kinds: ``{bitmask: duration}`` (bit i = kind i running).

    Each kind's intervals are merged first, so a kind is either running or not; the
    timeline is then swept once over every boundary.
    """
    times, deltas = [], []
    for bit, (start, end) in enumerate(kinds):
        s, e = merge(start, end)
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
    out: dict[int, float] = {}
    for value in np.unique(state[state > 0]).tolist():
        out[int(value)] = float(seg[state == value].sum())
    return out
