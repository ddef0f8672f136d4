"""Change points of a noisy series: the optimal partition under a median (L1) cost on robustly scaled values
(what PELT finds), each boundary then placed where one step most likely is, give or take
``PLACEMENT_TOLERANCE`` runs.

The values are divided by a robust sigma, ``1.4826 * MAD(first differences) / sqrt(2)`` (the differences
cancel level shifts, so a shift does not inflate its own noise estimate); the penalty is ``3 ln n`` (a
BIC-like beta of 3); segments are at least 3 runs long, so a one-run spike cannot be a segment, and the
median cost does not let a few spikes pull a segment's level. Deterministic: no randomness anywhere.

Detection: the least penalised L1 cost over partitions whose boundaries lie on a grid of every ``JUMP``-th
run, by dynamic programming over the table of every grid segment's cost, computed up front in one vectorised
pass (:func:`grid_costs`, :func:`optimal_partition`). That is PELT's answer (its pruning is exact for this
cost), the one ruptures' ``Pelt(jump=JUMP, min_size=MIN_SIZE)`` gives (tested against it), without its
import: ruptures imports scipy's stats, spatial and signal packages, 0.6 s, half of a ``popprof trend``.
Placement: the median cost finds *whether* the level moved, but places a step less precisely than squared
errors do (the median's efficiency is 64 % of the mean's under Gaussian noise); so each boundary is moved to
the run within ``2 * JUMP`` of where the grid put it whose ``PLACEMENT_TOLERANCE`` runs either side hold the
most likelihood of one step between the neighbouring boundaries, with squared errors clipped at
``CLIP_SIGMAS`` so that spikes weigh no more than a 4-sigma value (:func:`best_split`), twice over all
boundaries. The range to bisect is the span of the most likely runs holding ``RANGE_MASS`` of that
likelihood (:func:`step_range`). See ``docs/trend.md`` for the measured behaviour.
"""

from __future__ import annotations

import math

import numpy as np

MIN_SIZE = 3
PENALTY_BETA = 3.0
JUMP = 5
CLIP_SIGMAS = 4.0
PLACEMENT_ROUNDS = 2
PLACEMENT_TOLERANCE = 2
EXACT_WEIGHT = 0.05
RANGE_MASS = 0.99


def robust_sigma(values: np.ndarray) -> float:
    """The noise level of a series from its first differences (0 for a series that never changes by noise)."""
    if len(values) < 2:
        return 0.0
    diffs = np.diff(values)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return 1.4826 * mad / math.sqrt(2)


def l1_cost(values: np.ndarray) -> float:
    """Sum of absolute deviations from the median (the cost of one segment)."""
    return float(np.abs(values - np.median(values)).sum()) if len(values) else 0.0


def grid_costs(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``cost[i, j]``: the L1 cost of ``values[grid[i]:grid[j]]`` for every pair of grid points (i < j)."""
    n_grid = len(grid)
    out = np.full((n_grid, n_grid), np.inf)
    for i, start in enumerate(grid[:-1]):
        ends = grid[i + 1 :]
        lengths = ends - start
        tail = values[start : ends[-1]]
        rows = np.where(np.arange(len(tail))[None, :] < lengths[:, None], tail[None, :], np.inf)
        rows.sort(axis=1)
        finite = np.where(np.isfinite(rows), rows, 0.0)
        sums = np.cumsum(finite, axis=1)
        k = lengths // 2  # a median index; any value between the two middle ones gives the same L1 sum
        med = rows[np.arange(len(ends)), k]
        below = np.where(k > 0, sums[np.arange(len(ends)), np.maximum(k - 1, 0)], 0.0)
        total = sums[np.arange(len(ends)), lengths - 1]
        out[i, i + 1 :] = (total - below) - (lengths - k) * med + k * med - below
    return out


def optimal_partition(table: np.ndarray, grid: np.ndarray, penalty: float) -> list[int]:
    """The segment ends (grid runs, the last ``grid[-1]``) of the partition of ``grid[0]:grid[-1]`` into grid
    segments of at least ``MIN_SIZE`` runs with the least total ``table[i, j] + penalty``.

    ``best[j]`` is the least cost of ``grid[0]:grid[j]``: the least ``best[i] + table[i, j] + penalty`` over the
    earlier grid points ``i``; on ties the earliest ``i``, as PELT takes the first of its candidates."""
    n_grid = len(grid)
    best = np.zeros(n_grid)
    previous = np.zeros(n_grid, dtype=np.int64)
    for j in range(1, n_grid):
        starts = np.flatnonzero(grid[j] - grid[:j] >= MIN_SIZE)
        totals = best[starts] + table[starts, j] + penalty
        k = int(np.argmin(totals))
        best[j], previous[j] = totals[k], starts[k]
    ends, j = [], n_grid - 1
    while j > 0:
        ends.append(int(grid[j]))
        j = int(previous[j])
    return ends[::-1]


def step_likelihood(
    values: np.ndarray, lo: int, hi: int, near: int, within: int = 2 * JUMP
) -> tuple[np.ndarray, np.ndarray]:
    """The runs within ``within`` of ``near`` where one step could split ``values[lo:hi]`` (in sigma units),
    and the likelihood of each (the largest 1), both segments at least ``MIN_SIZE`` long.

    A step at run ``b`` (each segment the whole stretch to the neighbouring boundary, its level the median of
    all its runs) costs the squared errors of the values from their segment's level, each clipped at
    ``CLIP_SIGMAS ** 2`` so that a spike counts as a 4-sigma value and does not pull the step towards it;
    ``exp(-cost / 2)`` is the step's likelihood under Gaussian noise."""
    segment = values[lo:hi]
    n = len(segment)
    k = np.arange(max(MIN_SIZE, near - within - lo), min(n - MIN_SIZE, near + within - lo) + 1)
    if not len(k):
        return np.array([near]), np.ones(1)
    before = np.array([np.median(segment[:j]) for j in k])
    after = np.array([np.median(segment[j:]) for j in k])
    level = np.where(np.arange(n)[None, :] < k[:, None], before[:, None], after[:, None])
    cost = np.minimum((segment[None, :] - level) ** 2, CLIP_SIGMAS**2).sum(axis=1)
    return lo + k, np.exp(-(cost - cost.min()) / 2)


def best_split(values: np.ndarray, lo: int, hi: int, near: int, within: int = 2 * JUMP) -> int:
    """The run within ``within`` of ``near`` where one step most likely splits ``values[lo:hi]``, give or take
    ``PLACEMENT_TOLERANCE`` runs (:func:`step_likelihood`); the first such run on ties.

    The run chosen is the one whose ``PLACEMENT_TOLERANCE`` neighbours on each side hold the most
    likelihood: the Bayes rule for "the step is within that many runs of the answer" (the likelihood's mode,
    the rule for "exactly at the answer", is more often 3 runs off when the noise makes it flat), with the
    run's own likelihood counted ``1 + EXACT_WEIGHT`` times: where one run holds nearly all of it, the window
    rule alone would take any run within 2 of it as well. Only runs near where the grid put the step are
    searched, so a boundary never moves onto another change."""
    runs, likelihood = step_likelihood(values, lo, hi, near, within)
    window = np.ones(2 * PLACEMENT_TOLERANCE + 1)
    window[PLACEMENT_TOLERANCE] += EXACT_WEIGHT
    mass = np.convolve(likelihood, window, mode="same")
    return int(runs[np.argmax(mass)])


def step_range(values: np.ndarray, lo: int, hi: int, near: int, within: int = 2 * JUMP) -> tuple[int, int]:
    """The first and the last run where the step near ``near`` may start: the span of the most likely runs that
    together hold ``RANGE_MASS`` of the likelihood (:func:`step_likelihood`), the range to bisect."""
    runs, likelihood = step_likelihood(values, lo, hi, near, within)
    order = np.argsort(-likelihood, kind="stable")
    held = np.cumsum(likelihood[order]) / likelihood.sum()
    likely = runs[order[: int(np.searchsorted(held, RANGE_MASS)) + 1]]
    return int(likely.min()), int(likely.max())


def place(values: np.ndarray, bounds: list[int]) -> list[int]:
    """Each boundary moved to the most likely single step near it (:func:`best_split`, within ``2 * JUMP``
    runs of where the grid put it) between its neighbours, ``PLACEMENT_ROUNDS`` times over all."""
    out = list(bounds)
    for _ in range(PLACEMENT_ROUNDS):
        for i in range(len(out)):
            lo = out[i - 1] if i else 0
            hi = out[i + 1] if i + 1 < len(out) else len(values)
            if hi - lo >= 2 * MIN_SIZE:
                out[i] = best_split(values, lo, hi, bounds[i])
    return out


def change_points(values: np.ndarray) -> list[tuple[int, int, int]]:
    """Each change point as ``(run, first, last)``: the run where the new segment starts (by the optimal L1
    partition of the scaled values, then placed: :func:`place`) and the first and last runs where it may
    start (:func:`step_range`, which holds ``run``); [] when none.

    A series with no noise (sigma 0) has no change points here: it is an exact series (see trend).
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    sigma = robust_sigma(values)
    if n < 2 * MIN_SIZE or sigma == 0 or not math.isfinite(sigma):
        return []
    scaled = (values - np.median(values)) / sigma
    grid = np.array(sorted({*range(0, n, JUMP), n}))
    found = [
        b for b in optimal_partition(grid_costs(scaled, grid), grid, PENALTY_BETA * math.log(n)) if b < n
    ]
    placed = place(scaled, found)
    out = []
    for i, run in enumerate(placed):
        lo = placed[i - 1] if i else 0
        hi = placed[i + 1] if i + 1 < len(placed) else n
        first, last = step_range(scaled, lo, hi, found[i]) if hi - lo >= 2 * MIN_SIZE else (run, run)
        out.append((run, min(first, run), max(last, run)))
    return out


def boundaries(values: np.ndarray) -> list[int]:
    """Indices where a new segment starts (each > 0): the runs of :func:`change_points`; [] when none."""
    return [run for run, _, _ in change_points(values)]
