"""Change points of a noisy series: PELT (ruptures) with a median (L1) cost on robustly scaled values, each
boundary then placed where one step most likely is, give or take
``PLACEMENT_TOLERANCE`` runs.

The values are divided by a robust sigma, ``1.4826 * MAD(first differences) / sqrt(2)`` (the differences
cancel level shifts, so a shift does not inflate its own noise estimate); the penalty is ``3 ln n`` (a
BIC-like beta of 3); segments are at least 3 runs long, so a one-run spike cannot be a segment, and the
median cost does not let a few spikes pull a segment's level. Deterministic: no randomness anywhere.

Detection: ruptures' ``Pelt(jump=JUMP, min_size=MIN_SIZE)`` on a grid of every ``JUMP``-th run, with the
L1 cost of every grid segment computed up front in one vectorised pass (:func:`grid_costs`) and looked up by
PELT (:func:`pelt_partition`); ruptures' own L1 cost calls ``numpy.median`` once per candidate segment, about
1 s for 500 runs. ruptures is the ``trend`` extra; without it noisy series find no change points and say what
to install (:data:`INSTALL_HINT`).
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
INSTALL_HINT = "noisy metrics need the change-point library: pip install 'popprof[trend]'"


class MissingTrendExtra(ImportError):
    """ruptures is not installed (the ``trend`` extra)."""


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


def pelt_partition(scaled: np.ndarray, grid: np.ndarray, penalty: float) -> list[int]:
    """The segment ends (grid runs, the last ``len(scaled)``) that ruptures' PELT finds on ``grid`` with the L1
    cost of each grid segment looked up in :func:`grid_costs`' table (exact costs off the grid).

    Raises :class:`MissingTrendExtra` when ruptures is not installed."""
    try:
        from ruptures import Pelt
        from ruptures.base import BaseCost
    except ImportError:
        raise MissingTrendExtra(INSTALL_HINT) from None
    table = grid_costs(scaled, grid)
    position = {int(g): i for i, g in enumerate(grid)}

    class GridL1(BaseCost):
        """ruptures' L1 cost, looked up from the table computed once."""

        model = "l1"
        min_size = MIN_SIZE

        def fit(self, signal: np.ndarray) -> GridL1:
            self.signal = signal
            return self

        def error(self, start: int, end: int) -> float:
            i, j = position.get(start), position.get(end)
            if i is None or j is None:
                return l1_cost(scaled[start:end])
            return float(table[i, j])

    algo = Pelt(custom_cost=GridL1(), min_size=MIN_SIZE, jump=JUMP).fit(scaled.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=penalty)]


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
    """Each change point as ``(run, first, last)``: the run where the new segment starts (by PELT-L1 on
    the scaled values, then placed: :func:`place`) and the first and last runs where it may
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
    found = [b for b in pelt_partition(scaled, grid, PENALTY_BETA * math.log(n)) if b < n]
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


#: A step is "far beyond the noise" when the gap between the two levels (nearest values either side) is at
#: least this many times the spread (max - min) within the levels: what a noisy series reports even when it is
#: too short, or the step too recent, for the change points (which need segments of ``MIN_SIZE`` runs on a
#: grid of ``JUMP``).
JUMP_FACTOR = 10.0
#: Runs of the new level a far jump needs: one run beyond the rest is a spike until the next run confirms it.
JUMP_MIN_NEW = 2


def far_jump(values: np.ndarray, start: int = 0) -> int | None:
    """The run (index into ``values``) where the one step of ``values[start:]`` far beyond its noise starts,
    None when there is none.

    The runs before and after the step must not overlap (every new value beyond every old one), the new level
    must hold at least :data:`JUMP_MIN_NEW` runs, and the gap between the two levels must be at least
    :data:`JUMP_FACTOR` times the larger spread (max - min) within them; of several such runs, the one with the
    largest ratio (the first among equals). Deterministic, O(n); no noise estimate across the step is needed, so
    three runs suffice (6.68 M, then 25.44 M and 25.94 M: a gap of 18.76 M, 37.5 times the new level's 0.5 M).
    """
    seg = np.asarray(values, dtype=np.float64)[start:]
    n = len(seg)
    if n < 1 + JUMP_MIN_NEW or not np.isfinite(seg).all():
        return None
    head_max, head_min = np.maximum.accumulate(seg), np.minimum.accumulate(seg)
    tail_max = np.maximum.accumulate(seg[::-1])[::-1]
    tail_min = np.minimum.accumulate(seg[::-1])[::-1]
    splits = np.arange(1, n - JUMP_MIN_NEW + 1)  # the first new run
    before_max, before_min = head_max[splits - 1], head_min[splits - 1]
    after_max, after_min = tail_max[splits], tail_min[splits]
    gap = np.maximum(after_min - before_max, before_min - after_max)
    spread = np.maximum(before_max - before_min, after_max - after_min)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(spread > 0, gap / np.where(spread > 0, spread, 1.0), np.inf)
    ratio = np.where(gap > 0, ratio, 0.0)
    best = int(np.argmax(ratio))
    if ratio[best] < JUMP_FACTOR:
        return None
    return start + int(splits[best])
