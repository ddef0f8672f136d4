"""The vectorised interval helpers against straightforward per-interval reference computations."""

from __future__ import annotations

import numpy as np
import pytest

from popprof.trace.spans import busy_before, merge_intervals, overlap_pairs, touching, window_sums


def random_intervals(rng, n=200, span=10_000.0, max_len=400.0):
    start = rng.uniform(0, span, n)
    return start, start + rng.uniform(0, max_len, n)


def covered(start, end, a, b):
    """Length of the union of intervals inside [a, b], by a sweep over sorted intervals (reference)."""
    total, reach = 0.0, a
    for s, e in sorted(zip(start, end, strict=True)):
        s, e = max(s, reach), min(e, b)
        if e > s:
            total += e - s
            reach = e
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_merge_and_busy_time_match_a_sweep(seed):
    rng = np.random.default_rng(seed)
    start, end = random_intervals(rng)
    us, ue = merge_intervals(start, end)
    assert np.all(us[1:] > ue[:-1]) and np.all(ue >= us)
    assert (ue - us).sum() == pytest.approx(covered(start, end, -1, 1e9))
    probes = rng.uniform(-100, 10_500, 50)
    expected = [covered(start, end, -1, t) for t in probes]
    assert busy_before(us, ue, probes) == pytest.approx(expected)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_touching_finds_every_interval_that_meets_one_of_a(seed):
    rng = np.random.default_rng(seed)
    a_start, a_end = merge_intervals(*random_intervals(rng, n=20, max_len=300.0))
    b_start, b_end = random_intervals(rng, n=300, max_len=50.0)  # unsorted, some touching A, most not
    expected = [
        any(s <= ae and e >= as_ for as_, ae in zip(a_start, a_end, strict=True))
        for s, e in zip(b_start, b_end, strict=True)
    ]
    got = touching(b_start, b_end, a_start, a_end)
    assert got.tolist() == expected
    assert 0 < got.sum() < len(got)
    assert not touching(b_start, b_end, np.empty(0), np.empty(0)).any()


def test_touching_intervals_merge():
    us, ue = merge_intervals(np.array([0.0, 10.0, 30.0]), np.array([10.0, 20.0, 40.0]))
    assert list(us) == [0.0, 30.0] and list(ue) == [20.0, 40.0]


@pytest.mark.parametrize("seed", [0, 3])
def test_overlap_pairs_match_all_pairs(seed):
    rng = np.random.default_rng(seed)
    start, end = random_intervals(rng, n=300, max_len=2_000)
    gs, ge = merge_intervals(*random_intervals(rng, n=40, max_len=300))
    ev, gap, ov = overlap_pairs(start, end, gs, ge)
    got = {(int(i), int(g)): o for i, g, o in zip(ev, gap, ov, strict=True)}
    expected = {}
    for i, (s, e) in enumerate(zip(start, end, strict=True)):
        for g, (a, b) in enumerate(zip(gs, ge, strict=True)):
            o = min(e, b) - max(s, a)
            if o > 0:
                expected[(i, g)] = o
    assert got.keys() == expected.keys()
    assert [got[k] for k in expected] == pytest.approx(list(expected.values()))


@pytest.mark.parametrize("width", [37.0, 100.0, 3_000.0])
def test_window_sums_match_per_window_overlap(width):
    rng = np.random.default_rng(4)
    start, end = random_intervals(rng, n=150, max_len=900)
    origin = float(start.min())
    count = int(np.ceil((end.max() - origin) / width))
    got = window_sums(start, end, origin, width, count)
    expected = [
        sum(
            max(0.0, min(e, origin + (k + 1) * width) - max(s, origin + k * width))
            for s, e in zip(start, end, strict=True)
        )
        for k in range(count)
    ]
    assert got.dtype == np.float64
    assert got == pytest.approx(expected)
    assert got.sum() == pytest.approx((end - start).sum())


def test_window_sums_when_every_interval_crosses_a_window_edge():
    got = window_sums(np.array([5.0, 15.0]), np.array([25.0, 35.0]), 0.0, 10.0, 4)
    assert list(got) == [5.0, 15.0, 15.0, 5.0]
