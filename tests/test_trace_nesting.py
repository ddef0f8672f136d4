"""Nesting (parent_id, depth) from time containment, and B/E pairing, against plain stack walks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_helpers import stack_nesting

from popprof.trace import nesting
from popprof.trace.begin_end import match_begin_end


def _nested_intervals(rng: np.random.Generator, threads: int, per_thread: int) -> tuple[np.ndarray, ...]:
    """Properly nested random intervals (integer-valued, with shared starts, instants and deep chains)."""
    pid, tid, start, dur = [], [], [], []
    for t in range(threads):
        stack = [(0.0, 1e9)]
        x = 0.0
        for _ in range(per_thread):
            lo, hi = stack[-1]
            r = rng.random()
            if r < 0.3 and len(stack) > 1:
                x = max(x, hi)  # close the innermost interval
                stack.pop()
                continue
            length = float(rng.integers(0, 50)) if r > 0.9 else float(rng.integers(0, max(1, int(hi - x))))
            length = min(length, hi - x)
            pid.append(1 + t % 2)
            tid.append(t)
            start.append(x)
            dur.append(length)
            if length > 0 and rng.random() < 0.6:
                stack.append((x, x + length))  # next events go inside (the first shares its start)
            else:
                x += length + float(rng.integers(0, 3))
    return (np.array(pid), np.array(tid), np.array(start), np.array(dur))


@pytest.mark.parametrize(
    "seed, threads, per_thread, loop_threads",
    [
        (0, 3, 1500, 4096),
        (1, 3, 1500, 4096),
        (2, 3, 1500, 4096),
        (3, 3, 1500, 4096),
        (4, 400, 12, 4096),  # many small threads on one clock
        (5, 400, 12, 100),
        (6, 3, 1500, 2),
    ],
)  # the grouped running maximum (very many threads)
def test_derive_nesting_matches_a_stack_walk(
    seed: int, threads: int, per_thread: int, loop_threads: int, monkeypatch
) -> None:
    monkeypatch.setattr(nesting, "RUNNING_MAX_LOOP_THREADS", loop_threads)
    pid, tid, start, dur = _nested_intervals(
        np.random.default_rng(seed), threads=threads, per_thread=per_thread
    )
    order = nesting.sort_order(pid, tid, start, dur)
    pid, tid, start, dur = pid[order], tid[order], start[order], dur[order]
    parent, depth = nesting.derive_nesting(nesting.thread_bounds(pid, tid), start, dur)
    expected = stack_nesting([(i, pid[i], tid[i], start[i], dur[i]) for i in range(len(start))])
    got = {i: (None if parent[i] < 0 else int(parent[i]), int(depth[i])) for i in range(len(start))}
    assert got == expected
    assert depth.max() >= 5  # the data really nests
    # the ends and tolerances computed once by the caller (as build_events does) give the same nesting
    bounds = nesting.thread_bounds(pid, tid)
    end_tol = nesting.ends(start, dur)
    shared = nesting.derive_nesting(bounds, start, dur, end_tol)
    np.testing.assert_array_equal(shared[0], parent)
    np.testing.assert_array_equal(shared[1], depth)
    assert nesting.count_partial_overlaps(bounds, start, dur, end_tol) == nesting.count_partial_overlaps(
        bounds, start, dur
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400), st.integers(1, 6), st.integers(1, 40000), st.integers(0, 2**31 - 1))
def test_sort_order_is_the_lexsort(n: int, starts: int, threads: int, seed: int) -> None:
    """Built from cheaper sorts, the order is exactly lexsort's (ties of thread and start: longest first,
    then input order), with NaN starts and durations."""
    rng = np.random.default_rng(seed)
    pid = rng.integers(0, 3, n) * 100_000
    tid = rng.integers(0, threads, n)
    start = rng.integers(0, starts, n).astype(float)
    dur = rng.integers(0, 3, n).astype(float)
    start[rng.random(n) < 0.1] = np.nan
    dur[rng.random(n) < 0.1] = np.nan
    start[rng.random(n) < 0.1] = -0.0
    expected = np.lexsort((-dur, start, nesting.thread_rank(pid, tid)))
    assert nesting.sort_order(pid, tid, start, dur).tolist() == expected.tolist()


def test_sort_order_with_more_threads_than_int16_numbers() -> None:
    rng = np.random.default_rng(7)
    n = 70_000
    pid, tid = np.zeros(n, dtype=np.int64), rng.permutation(n) % 40_000  # 40,000 threads
    start, dur = rng.integers(0, 4, n).astype(float), rng.integers(0, 3, n).astype(float)
    expected = np.lexsort((-dur, start, nesting.thread_rank(pid, tid)))
    assert np.array_equal(nesting.sort_order(pid, tid, start, dur), expected)


@pytest.mark.parametrize("dense_pairs", [nesting.DENSE_THREAD_PAIRS, 0])
def test_thread_rank_numbers_threads_densely_in_pid_tid_order(monkeypatch, dense_pairs: int) -> None:
    """Both ways of numbering (an array of the pid x tid pairs, or a third hash pass when there are too
    many pairs) give 0, 1, 2, ... in (pid, tid) order, synthetic (2**40 + k) and negative ids included."""
    monkeypatch.setattr(nesting, "DENSE_THREAD_PAIRS", dense_pairs)
    rng = np.random.default_rng(11)
    pid = rng.choice([-3, 0, 7, 2**40, 2**40 + 1], 5_000)
    tid = rng.integers(0, 300, 5_000)
    _, expected = np.unique(np.stack([pid, tid], axis=1), axis=0, return_inverse=True)
    assert np.array_equal(nesting.thread_rank(pid, tid), expected.ravel())


def test_float_rounding_still_nests() -> None:
    # child ends exactly where its parent ends, but start + dur rounds differently
    start = np.array([5e9 + 0.1, 5e9 + 0.3])
    dur = np.array([0.7, (5e9 + 0.8) - (5e9 + 0.3)])
    parent, depth = nesting.derive_nesting(np.array([0, 2]), start, dur)
    assert parent.tolist() == [-1, 0]
    assert depth.tolist() == [0, 1]


def test_siblings_back_to_back_and_instants() -> None:
    # A [0,10] holds B [0,4] (shared start), instant at 4, C [4,10]; D [10,12] starts as A ends
    start = np.array([0.0, 0.0, 4.0, 4.0, 10.0])
    dur = np.array([10.0, 4.0, 6.0, 0.0, 2.0])
    order = nesting.sort_order(np.zeros(5), np.zeros(5), start, dur)
    parent, depth = nesting.derive_nesting(np.array([0, 5]), start[order], dur[order])
    rows = list(zip(start[order].tolist(), dur[order].tolist(), parent.tolist(), depth.tolist(), strict=True))
    assert rows == [
        (0.0, 10.0, -1, 0),
        (0.0, 4.0, 0, 1),
        (4.0, 6.0, 0, 1),
        (4.0, 0.0, 2, 2),
        (10.0, 2.0, -1, 0),
    ]


def test_missing_starts_and_durations() -> None:
    """A missing duration nests as 0 and a missing start is top level, whether or not the arrays hold a NaN
    (only then does the nesting make NaN-filled copies)."""
    start = np.array([0.0, 1.0, 2.0, np.nan, 5.0])
    dur = np.array([10.0, np.nan, 3.0, 1.0, np.nan])
    parent, depth = nesting.derive_nesting(np.array([0, 5]), start, dur)
    assert parent.tolist() == [-1, 0, 0, -1, -1]  # the event after a missing start: top level
    assert depth.tolist() == [0, 1, 1, 0, 0]
    clean = nesting.derive_nesting(np.array([0, 3]), start[:3], np.nan_to_num(dur[:3]))
    assert [a.tolist() for a in clean] == [[-1, 0, 0], [0, 1, 1]]
    values = np.array([1.0, 2.0])
    assert nesting.filled(values, 0.0) is values  # nothing missing: no copy
    assert nesting.filled(dur, 0.0).tolist() == [10.0, 0.0, 3.0, 1.0, 0.0]
    assert not nesting.has_missing(np.zeros(0)) and nesting.has_missing(dur)


def test_partial_overlap_is_counted() -> None:
    start = np.array([0.0, 5.0, 20.0])
    dur = np.array([10.0, 10.0, 1.0])
    assert nesting.count_partial_overlaps(np.array([0, 3]), start, dur) == 1


def test_self_time() -> None:
    parent = np.array([-1, 0, 0, 1])
    dur = np.array([10.0, 4.0, 3.0, 1.0])
    assert nesting.self_time(parent, dur).tolist() == [3.0, 3.0, 3.0, 1.0]


def _stack_pairs(is_b, pid, tid, ts):
    order = sorted(range(len(is_b)), key=lambda i: (pid[i], tid[i], ts[i], i))
    stacks: dict = {}
    pairs, lone_end = [], []
    for i in order:
        stack = stacks.setdefault((pid[i], tid[i]), [])
        if is_b[i]:
            stack.append(i)
        elif stack:
            pairs.append((stack.pop(), i))
        else:
            lone_end.append(i)
    return sorted(pairs), sorted(lone_end), sorted(j for s in stacks.values() for j in s)


@pytest.mark.parametrize("seed", range(6))
def test_begin_end_pairing_matches_a_stack(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    is_b = rng.random(n) < 0.55
    pid, tid = rng.integers(0, 2, n), rng.integers(0, 3, n)
    ts = rng.integers(0, 100, n).astype(float)
    if seed % 2:
        ts = np.sort(ts)
    result = match_begin_end(is_b, pid, tid, ts)
    pairs, lone_end, open_begin = _stack_pairs(is_b.tolist(), pid.tolist(), tid.tolist(), ts.tolist())
    assert sorted(zip(result.begin.tolist(), result.end.tolist(), strict=True)) == pairs
    assert result.unmatched_end.tolist() == lone_end
    assert result.unmatched_begin.tolist() == open_begin
