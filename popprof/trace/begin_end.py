"""Pairing Chrome-trace ``B`` (begin) and ``E`` (end) events per thread, vectorised.

On each thread, an ``E`` closes the most recent open ``B``. In timestamp order
(file order among equal timestamps), the running count of open events is a
cumulative sum of +1 (``B``) and -1 (``E``). An ``E`` that takes the count below
every earlier value has nothing to close (unmatched ``E``); once those are
removed, a ``B`` that leaves ``k`` events open is closed by the next ``E`` that
starts from ``k`` open events, so grouping by (thread, level) and pairing
neighbours matches everything in a few sorts. ``B`` events left open at the end
are unmatched ``B``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Pairing:
    """Result of :func:`match_begin_end`; indices refer to the input arrays."""

    begin: np.ndarray  # index of each matched B
    end: np.ndarray  # index of the E that closes it
    unmatched_begin: np.ndarray  # B indices never closed
    unmatched_end: np.ndarray  # E indices with nothing open
    out_of_order: int  # times a thread's timestamps went backwards in file order


def _segment_ranks(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """For arrays sorted by thread: 0, 0, 1, 1, 1, 2 ... (the thread's rank)."""
    if len(pid) == 0:
        return np.zeros(0, dtype=np.int64)
    change = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    return np.concatenate(([0], np.cumsum(change))).astype(np.int64)


def match_begin_end(is_begin: np.ndarray, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray) -> Pairing:
    """Match B/E events (given in file order) per thread; see the module docstring."""
    n = len(is_begin)
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return Pairing(empty, empty, empty, empty, 0)
    file_order = np.arange(n, dtype=np.int64)
    # out-of-order timestamps, counted per thread in file order
    by_thread = np.lexsort((file_order, tid, pid))
    rank_f = _segment_ranks(pid[by_thread], tid[by_thread])
    ts_f = ts[by_thread]
    backwards = (ts_f[1:] < ts_f[:-1]) & (rank_f[1:] == rank_f[:-1])
    out_of_order = int(np.count_nonzero(backwards))

    order = np.lexsort((file_order, ts, tid, pid))
    rank = _segment_ranks(pid[order], tid[order])
    step = np.where(is_begin[order], 1, -1).astype(np.int64)
    big = 2 * n + 2

    level = local_cumsum(step, rank)
    # running minimum per thread (including the starting 0), via a per-thread offset
    shifted = np.minimum(level, 0) - rank * big
    running_min = np.minimum.accumulate(shifted) + rank * big
    prev_min = np.empty(len(level), dtype=np.int64)
    prev_min[1:] = running_min[:-1]
    first = np.concatenate(([True], rank[1:] != rank[:-1]))
    prev_min[first] = 0
    unmatched_e_mask = (step < 0) & (level < prev_min)
    unmatched_end = order[unmatched_e_mask]

    keep = ~unmatched_e_mask
    k_order = order[keep]
    k_rank = rank[keep]
    k_step = step[keep]
    k_level = local_cumsum(k_step, k_rank)
    # a B's level is the count after it; an E's level is the count before it
    group_level = np.where(k_step > 0, k_level, k_level + 1)
    pos = np.arange(len(k_order), dtype=np.int64)
    g = np.lexsort((pos, group_level, k_rank))
    g_rank, g_level, g_step = k_rank[g], group_level[g], k_step[g]
    same_next = np.zeros(len(g), dtype=bool)
    same_next[:-1] = (g_rank[1:] == g_rank[:-1]) & (g_level[1:] == g_level[:-1])
    pair_start = np.zeros(len(g), dtype=bool)
    pair_start[:-1] = same_next[:-1] & (g_step[:-1] > 0) & (g_step[1:] < 0)
    begin_pos = np.flatnonzero(pair_start)
    begin = k_order[g[begin_pos]]
    end = k_order[g[begin_pos + 1]]
    matched_b = np.zeros(n, dtype=bool)
    matched_b[begin] = True
    unmatched_begin = np.flatnonzero(is_begin & ~matched_b)
    return Pairing(begin, end, unmatched_begin, np.sort(unmatched_end), out_of_order)


def local_cumsum(values: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at every new thread rank (``ranks`` sorted)."""
    if len(values) == 0:
        return values.copy()
    total = np.cumsum(values)
    starts = np.flatnonzero(np.concatenate(([True], ranks[1:] != ranks[:-1])))
    before = total[starts] - values[starts]
    lengths = np.diff(np.concatenate((starts, [len(values)])))
    return total - np.repeat(before, lengths)
