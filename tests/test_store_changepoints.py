"""Change points on seeded synthetic histories: no false alarms on noise and spikes, shifts found, stable."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ruptures", reason="the trend extra (ruptures) is not installed")

from popprof.store.changepoints import boundaries, despike, grid_costs, l1_cost, place  # noqa: E402
from popprof.testing.store_history import shifted_series  # noqa: E402

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


def _misses(noise: float, spikes: float, within: int, seeds: range) -> dict:
    """Shift scenarios (+5 % and -4 % at varying runs) whose shifts are not both found within ``within`` runs."""
    misses = {}
    for seed in seeds:
        at = (150 + seed % 7, 350 - seed % 5)
        shifts = {at[0]: 0.05, at[1]: -0.04 / 1.05}
        values = shifted_series(N, seed=2000 + seed, noise=noise, shifts=shifts, spikes=spikes)
        found = boundaries(values)
        if len(found) != 2 or any(abs(f - a) > within for f, a in zip(found, at, strict=True)):
            misses[seed] = (at, found)
    return misses


@pytest.mark.parametrize("spikes", [0.0, 0.02])
def test_every_4_to_5_percent_shift_is_found_within_two_runs_at_1_percent_noise(spikes: float) -> None:
    assert _misses(0.01, spikes, 2, range(20)) == {}


@pytest.mark.parametrize("spikes", [0.0, 0.02])
def test_every_4_to_5_percent_shift_is_found_within_two_runs_at_2_percent_noise(spikes: float) -> None:
    # at 2 % noise a 4-5 % shift is 2-2.5 sigma and its run is itself uncertain: over 200 seeds a few shifts
    # land 3-6 runs off, as they do for least squares knowing the true levels (docs/trend.md); these 20
    # seeds (the same since the detector's first version) are all within 2
    assert _misses(0.02, spikes, 2, range(20)) == {}


def test_placement_is_least_squares_on_despiked_values() -> None:
    values = np.array([0.0] * 30 + [3.0] * 30)
    values[31] = 40.0  # a spike right after the step
    assert despike(values)[31] == 3.0 and (despike(values)[[29, 30]] == [0.0, 3.0]).all()  # the step stays
    assert place(values, [25]) == [30]  # moved from where the grid put it to the step, spike ignored
    assert place(np.concatenate([values, [9.0] * 30]), [27, 55]) == [30, 60]


def test_the_same_history_gives_the_same_answer() -> None:
    values = shifted_series(N, seed=7, shifts={200: 0.05}, spikes=0.02)
    first = boundaries(values)
    assert first and all(boundaries(values.copy()) == first for _ in range(3))


def test_a_series_without_noise_has_no_change_points_here() -> None:
    # exact series are trend's exact mode: the noise estimate is 0 and PELT is not run
    assert boundaries(np.array([10.0] * 50 + [11.0] * 50)) == []
