"""Nesting of trace events (``parent_id``, ``depth``) from time containment, vectorised with numpy.

Events of one thread nest when one lies inside another in time. Sorting the
events by (thread, start, longest first) puts every event after the events that
contain it; its parent is then the nearest earlier event of the same thread
whose end is not before its own end. A stack walk finds that in one pass but is
a Python loop; here the same search runs as *pointer jumping* over all events at
once: each event's candidate parent starts as the previous event, and while the
candidate does not contain the event, the candidate is replaced by the
candidate's own candidate. That is sound because, in properly nested data, an
event that does not contain ours ended before ours started, and so did every
event it skipped. Top-level events (which start after everything before them on
the thread has ended) are settled up front, so the loop only works on nested
events and needs about log2(chain length) rounds.

Partially overlapping events (which proper nesting forbids) get the nearest
enclosing event found this way; :func:`count_partial_overlaps` counts them so
readers can report it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def thread_rank(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One integer per event that sorts like (pid, tid), numbering the threads 0, 1, 2, ... (hash-factorised
    ids, ranked: O(n), no big sort)."""
    # codes in order of first appearance (no pass over the events to renumber them in sorted order: the few
    # distinct values are ranked instead), and each code's rank among the sorted distinct values
    p, pid_rank = _first_seen_codes(pid)
    t, tid_rank = _first_seen_codes(tid)
    width = max(len(tid_rank), 1)
    size = len(pid_rank) * width
    if size <= DENSE_THREAD_PAIRS:  # the pairs present, numbered in (pid, tid) order: no third hash pass
        p *= width  # the pair of codes, in place
        p += t
        del t
        present = np.zeros(size, dtype=bool)
        present[p] = True
        sorted_pair = (
            pid_rank[:, None] * width + tid_rank[None, :]
        ).ravel()  # each code pair's place in order
        in_order = np.zeros(size, dtype=bool)
        in_order[sorted_pair] = present
        number = (np.cumsum(in_order) - 1)[sorted_pair]  # each present code pair's thread number
        return number[p]
    pair = pid_rank[p] * width + tid_rank[t]  # sorts like (pid, tid)
    return pd.factorize(pair, sort=True)[0].astype(np.int64, copy=False)


def _first_seen_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` codes (int64, in order of first appearance) and each code's rank in sorted order."""
    codes, uniques = pd.factorize(values, sort=False)
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[np.argsort(uniques, kind="stable")] = np.arange(len(uniques), dtype=np.int64)
    return codes.astype(np.int64, copy=False), rank


#: up to this many (pid, tid) combinations, :func:`thread_rank` numbers the pairs with an array of them
DENSE_THREAD_PAIRS = 1 << 22


def sort_order(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """The stable permutation sorting events by (pid, tid, start, longest first, input order).

    The permutation ``np.lexsort((-dur, start, thread_rank(pid, tid)))`` gives, built from
    cheaper sorts: by start (a trace is mostly in time order, which a stable sort runs
    through quickly), then by thread (a radix sort over the thread numbers), and only the
    runs of equal thread and start (a parent and its first child) by duration.
    """
    n = len(pid)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    threads = thread_rank(pid, tid)
    if (
        threads.max() < np.iinfo(np.int16).max
    ):  # 16-bit numbers: a radix sort, and a quarter of the bytes to move
        threads = threads.astype(np.int16)
    order = np.argsort(start, kind="stable")
    order = order[np.argsort(threads[order], kind="stable")]
    t, s = threads[order], start[order]
    del threads
    equal = s[1:] == s[:-1]
    if has_missing(s):  # missing starts tie with each other
        equal |= np.isnan(s[1:]) & np.isnan(s[:-1])
    same = (t[1:] == t[:-1]) & equal
    del equal
    if same.any():
        run = np.cumsum(np.concatenate(([True], ~same)))  # runs of equal (thread, start), numbered in order
        tied = np.zeros(n, dtype=bool)
        tied[1:] = same
        tied[:-1] |= same
        at = np.flatnonzero(tied)
        # within a run the order is the input order so far; a stable sort by -dur keeps it among equal ones
        order[at] = order[at][np.lexsort((-dur[order[at]], run[at]))]
    return order


def has_missing(values: np.ndarray) -> bool:
    """Whether a float array holds a NaN (``min`` propagates one: a pass without a mask array)."""
    return len(values) > 0 and bool(np.isnan(values.min()))


def filled(values: np.ndarray, fill: float) -> np.ndarray:
    """``values`` with NaN replaced by ``fill``; the array itself (no copy) when it holds none."""
    return np.where(np.isnan(values), fill, values) if has_missing(values) else values


def thread_bounds(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Start offsets of each run of equal (pid, tid) in sorted arrays, plus the final length."""
    n = len(pid)
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    change = np.flatnonzero((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])) + 1
    return np.concatenate(([0], change, [n])).astype(np.int64)


def _tolerance(values: np.ndarray) -> np.ndarray:
    # a few units in the last place: start + dur rounds, and equal ends must still nest (in place on one
    # new array: no temporaries the size of the table)
    tol = np.abs(values)
    np.spacing(tol, out=tol)
    tol *= 4
    return tol


def ends(start: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each event's end (``start + dur``, a missing duration as 0) and its :func:`_tolerance`, as
    :func:`derive_nesting` and :func:`count_partial_overlaps` compare them (computed once for both)."""
    end = start + filled(dur, 0.0)
    return end, _tolerance(end)


def derive_nesting(
    bounds: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    end_tol: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(parent, depth)`` for events sorted by :func:`sort_order`; ``parent`` is -1 at top level.

    ``bounds`` are the thread boundaries from :func:`thread_bounds`; ``end_tol`` is :func:`ends` of the
    events when the caller has it. Missing (NaN) starts are treated as top-level events. Works in
    O(n log d) numpy operations, where d is the longest run of nested siblings.
    """
    n = len(start)
    if n == 0:
        return np.full(0, -1, dtype=np.int64), np.zeros(0, dtype=np.int16)
    end, tol = end_tol if end_tol is not None else ends(start, dur)
    # latest end of any earlier event on the same thread (running maximum per thread), plus the tolerance
    prev_max = _previous_max(np.where(np.isnan(end), -np.inf, end) if has_missing(end) else end, bounds)
    prev_max += tol
    # nested: something earlier on the thread is still running when this one ends
    nested = prev_max >= end
    del prev_max
    nested[bounds[:-1][bounds[:-1] < n]] = False  # a thread's first event
    if has_missing(start):
        nested &= ~np.isnan(start)
    # positions fit in 32 bits (a table has fewer than 2**31 rows): half the scratch memory of int64 positions,
    # which at the read's peak (this pass) is what the process holds beyond its tables
    index = np.int32 if n < np.iinfo(np.int32).max else np.int64
    # candidates: the previous event for a nested one; index n, a sentinel that contains everything,
    # for the others, so every chain ends at a real parent or at the sentinel (= top level)
    candidate = np.arange(-1, n - 1, dtype=index)
    candidate[~nested] = n
    end_or_all = np.append(end, np.inf)
    parent = np.full(n, -1, dtype=index)
    # the first round, on shifted slices instead of gathers: a nested event's first candidate is the event
    # before it, its parent for most (a first child)
    first = np.zeros(n, dtype=bool)
    np.greater_equal(end[:-1] + tol[1:], end[1:], out=first[1:])
    first &= nested
    parent[first] = candidate[first]
    nested &= ~first
    del first
    active = np.flatnonzero(nested).astype(index, copy=False)
    del nested
    cand = candidate[candidate[active]]  # the unsettled ones' next candidate
    candidate[active] = cand
    active_end, active_tol = end[active], tol[active]  # shrink with ``active`` instead of gathering again
    while active.size:
        settled = end_or_all[cand] + active_tol >= active_end
        parent[active[settled]] = cand[settled]
        keep = ~settled
        active, active_end, active_tol = active[keep], active_end[keep], active_tol[keep]
        cand = candidate[cand[keep]]
        candidate[active] = cand
    del candidate, end_or_all, cand, active_end, active_tol, active
    parent[parent == n] = -1
    depth = depth_from_parent(parent)
    return parent.astype(np.int64, copy=False), depth


#: up to this many threads the running maximum is one numpy pass per thread (less memory than a
#: grouped pass); beyond it, one grouped pass (a Python call per thread is slow for many small threads)
RUNNING_MAX_LOOP_THREADS = 4096


def _previous_max(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """The maximum of ``values`` over the earlier events of each event's thread (-inf for a thread's first);
    ``values`` is only read."""
    n = len(values)
    previous = np.empty(n)
    if len(bounds) - 1 > RUNNING_MAX_LOOP_THREADS:
        thread = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
        previous[1:] = pd.Series(values).groupby(thread).cummax().to_numpy()[:-1]
    else:  # each thread's running maximum written one place on, straight into the result
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if hi - lo > 1:
                np.maximum.accumulate(values[lo : hi - 1], out=previous[lo + 1 : hi])
    previous[bounds[:-1][bounds[:-1] < n]] = -np.inf
    return previous


def depth_from_parent(parent: np.ndarray) -> np.ndarray:
    """Nesting depth of every event from its parent index (-1 = top level), by pointer doubling."""
    n = len(parent)
    if n == 0:
        return np.zeros(0, dtype=np.int16)
    index = np.int32 if n < np.iinfo(np.int32).max else np.int64  # positions and depths fit in 32 bits
    depth = (parent >= 0).astype(index)
    anc = parent.astype(index)  # a copy: jumped in place
    active = np.flatnonzero(anc >= 0).astype(index, copy=False)
    while active.size:
        # depth[i] counts the steps from i to anc[i]; jump to anc[anc[i]] adding its count
        a = anc[active]
        add = depth[a]
        nxt = anc[a]
        depth[active] += add
        anc[active] = nxt
        active = active[nxt >= 0]
    return np.minimum(depth, np.iinfo(np.int16).max).astype(np.int16)


def count_partial_overlaps(
    bounds: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    end_tol: tuple[np.ndarray, np.ndarray] | None = None,
) -> int:
    """Events that start inside the previous event of their thread but end after it (improper nesting).
    ``end_tol``: :func:`ends` of the events, when the caller has it."""
    if len(start) < 2:
        return 0
    end, tol = end_tol if end_tol is not None else ends(start, dur)
    prev_end = end[:-1]
    tol = tol[1:]
    overlap = (start[1:] < prev_end - tol) & (end[1:] > prev_end + tol)
    same = np.ones(len(start) - 1, dtype=bool)
    inner = bounds[1:-1]
    same[inner - 1] = False
    return int(np.count_nonzero(overlap & same))


def parent_positions(events: pd.DataFrame) -> np.ndarray:
    """Each event's parent as a row position of ``events`` (-1 at top level or when the parent is absent).

    ``parent_id`` holds ``event_id`` values; those equal row positions in a table as
    readers build it, but not in a filtered or reordered one.
    """
    parent = events["parent_id"].to_numpy(dtype=np.int64, na_value=-1)
    ids = events["event_id"].to_numpy()
    if len(ids) and not np.array_equal(ids, np.arange(len(ids))):
        position = pd.Series(np.arange(len(ids)), index=ids)
        parent = np.where(parent >= 0, position.reindex(parent).fillna(-1).to_numpy(np.int64), -1)
    return parent


def self_time(parent: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Duration minus the summed durations of direct children (never below 0)."""
    dur = np.where(np.isnan(dur), 0.0, dur)
    has = parent >= 0
    child_sum = np.bincount(parent[has], weights=dur[has], minlength=len(dur))
    return np.maximum(dur - child_sum, 0.0)
