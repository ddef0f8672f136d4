"""Change points on seeded synthetic histories: no false alarms on noise and spikes, shifts found, stable.

Issue 26's guarantees, at the noise level where each holds (docs/trend.md, "Guarantees"): 0 change points on
100 stationary and 100 spiky 500-run series; every 4-5 % shift within 2 runs at 1 % noise and within 5 at
2 % noise (where within 2 holds for about 98 % of shifts, as for a placement that knows the true levels);
the same answer every time. ``benchmarks/bench_changepoints.py`` measures the same over hundreds of seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ruptures", reason="the trend extra (ruptures) is not installed")

from popprof.store.changepoints import (
    CLIP_SIGMAS,
    EXACT_WEIGHT,
    PLACEMENT_TOLERANCE,
    best_split,
    boundaries,
    change_points,
    grid_costs,
    l1_cost,
    place,
)
from popprof.testing.store_history import shifted_series

N = 500


def test_grid_costs_equal_the_l1_cost_of_each_segment() -> None:
    values = np.random.default_rng(3).normal(size=41)
    grid = np.array([0, 5, 10, 15, 20, 25, 30, 35, 40, 41])
    table = grid_costs(values, grid)
    for i in range(len(grid)):
        for j in range(i + 1, len(grid)):
            assert table[i, j] == pytest.approx(l1_cost(values[grid[i] : grid[j]]), abs=1e-9)


def test_no_change_point_in_100_stationary_series() -> None:
    found = {seed: boundaries(shifted_series(N, seed=seed)) for seed in range(100)}
    assert {seed: b for seed, b in found.items() if b} == {}


def test_no_change_point_in_100_spiky_series() -> None:
    # 2 % of the runs 25 % slow: one-run spikes are not level shifts
    found = {seed: boundaries(shifted_series(N, seed=1000 + seed, spikes=0.02)) for seed in range(100)}
    assert {seed: b for seed, b in found.items() if b} == {}


def _outcomes(noise: float, spikes: float, seeds: range) -> dict[int, list[tuple[int, bool, int]]]:
    """Per seed of the shift scenario (+5 % at run 150-156, back by 4 % of the first level at run 346-350), for
    each shift: the distance to the nearest change point, whether its bisect range holds the shift's first
    run, and the range's width in runs; each change point more than 20 runs from both adds (999, False, 0)."""
    outcomes = {}
    for seed in seeds:
        at = (150 + seed % 7, 350 - seed % 5)
        shifts = {at[0]: 0.05, at[1]: -0.04 / 1.05}
        found = change_points(shifted_series(N, seed=2000 + seed, noise=noise, shifts=shifts, spikes=spikes))
        rows = []
        for a in at:
            run, first, last = min(found, key=lambda c: abs(c[0] - a), default=(999, 0, 0))
            rows.append((abs(run - a), first <= a <= last, last - first + 1))
        rows += [(999, False, 0)] * sum(1 for c in found if min(abs(c[0] - a) for a in at) > 20)
        outcomes[seed] = rows
    return outcomes


@pytest.mark.parametrize("spikes", [0.0, 0.02])
def test_every_4_to_5_percent_shift_is_found_within_two_runs_at_1_percent_noise(spikes: float) -> None:
    outcomes = _outcomes(0.01, spikes, range(50))
    assert {seed: o for seed, o in outcomes.items() if max(e for e, _, _ in o) > 2} == {}
    # and its bisect range holds it, a few runs wide at most (measured: 1 run in the median, 6 at most)
    assert {
        seed: o for seed, o in outcomes.items() if not all(held and width <= 6 for _, held, width in o)
    } == {}


@pytest.mark.parametrize("spikes", [0.0, 0.02])
def test_every_4_to_5_percent_shift_is_found_within_five_runs_at_2_percent_noise(spikes: float) -> None:
    # a 4-5 % step is 2-2.5 sigma here: its run is itself uncertain, and about 2 % of shifts land 3-7 runs
    # off, as they do for the best placement knowing the true levels (docs/trend.md); within 5 holds
    outcomes = _outcomes(0.02, spikes, range(50))
    assert {seed: o for seed, o in outcomes.items() if max(e for e, _, _ in o) > 5} == {}
    shifts = [o for rows in outcomes.values() for o in rows]
    assert sum(e <= 2 for e, _, _ in shifts) >= 95  # of 100 shifts (measured: 97-98 %)
    # the bisect range, wider where the step's run is uncertain, holds the step's first run (measured: 99.3 %)
    assert sum(held for _, held, _ in shifts) >= 97


@pytest.mark.parametrize(
    ("seed", "spikes", "at"),
    [
        # the first run of the -3.8 % step lies 4 sigma under a running median straddling the step: a despike
        # by that median took it for a spike and put the step 4 (3) runs late
        (69, 0.0, (156, 346)),
        (326, 0.0, (154, 349)),
        # four 25 % spikes in the 7 runs around the step at run 155: a despike by running medians replaced two
        # runs of the old level by the new one and put the step 3 runs early
        (544, 0.02, (155, 346)),
    ],
)
def test_the_histories_that_misplaced_a_step_at_1_percent_noise(seed: int, spikes: float, at: tuple) -> None:
    shifts = {at[0]: 0.05, at[1]: -0.04 / 1.05}
    found = boundaries(shifted_series(N, seed=2000 + seed, noise=0.01, shifts=shifts, spikes=spikes))
    assert len(found) == 2 and all(abs(f - a) <= 2 for f, a in zip(found, at, strict=True))


def _window_rule(values: np.ndarray, lo: int, hi: int, candidates: range) -> int:
    """The placement rule written out one candidate at a time: the clipped squared errors around each segment's
    median, likelihood exp(-cost / 2), the candidate whose tolerance window holds the most of it (its own
    likelihood counted 1 + EXACT_WEIGHT times)."""
    costs = []
    for b in candidates:
        left, right = values[lo:b], values[b:hi]
        cost = sum(min((x - np.median(left)) ** 2, CLIP_SIGMAS**2) for x in left)
        cost += sum(min((x - np.median(right)) ** 2, CLIP_SIGMAS**2) for x in right)
        costs.append(cost)
    like = [np.exp(-(c - min(costs)) / 2) for c in costs]
    t = PLACEMENT_TOLERANCE
    mass = [sum(like[max(0, i - t) : i + t + 1]) + EXACT_WEIGHT * like[i] for i in range(len(like))]
    return candidates[mass.index(max(mass))]


def test_placement_is_the_bayes_window_rule_of_clipped_squared_errors() -> None:
    rng = np.random.default_rng(5)
    differs = 0
    for _ in range(30):
        values = rng.normal(size=80)
        values[40:] += 2.0  # a 2-sigma step: a flat likelihood over several runs
        values[rng.integers(0, 80, 3)] += 15.0  # spikes
        near = 40 + int(rng.integers(-4, 5))
        got = best_split(values, 0, 80, near)
        assert got == _window_rule(values, 0, 80, range(near - 10, near + 11))
        costs = {
            b: sum(np.minimum((values[:b] - np.median(values[:b])) ** 2, 16))
            + sum(np.minimum((values[b:] - np.median(values[b:])) ** 2, 16))
            for b in range(near - 10, near + 11)
        }
        differs += got != min(costs, key=costs.get)
    assert differs  # the window rule is not the plain least-cost run


def test_placement_moves_the_grid_boundary_to_the_step_past_a_spike() -> None:
    values = np.array([0.0] * 30 + [6.0] * 30)
    values[31] = 40.0  # a spike right after the step
    assert place(values, [25]) == [30]  # moved from where the grid put it to the step, spike ignored
    assert place(np.concatenate([values, [12.0] * 30]), [27, 55]) == [30, 60]


def test_the_same_history_gives_the_same_answer() -> None:
    values = shifted_series(N, seed=7, shifts={200: 0.05}, spikes=0.02)
    first = boundaries(values)
    assert first and all(boundaries(values.copy()) == first for _ in range(3))


def test_a_series_without_noise_has_no_change_points_here() -> None:
    # exact series are trend's exact mode: the noise estimate is 0 and PELT is not run
    assert boundaries(np.array([10.0] * 50 + [11.0] * 50)) == []
