"""Change points of a noisy series: PELT with a median (L1) cost on robustly scaled values (ruptures).

The values are divided by a robust sigma, ``1.4826 * MAD(first differences) / sqrt(2)`` (the differences
cancel level shifts, so a shift does not inflate its own noise estimate); the penalty is ``3 ln n`` (a
BIC-like beta of 3); segments are at least 3 runs long, so a one-run spike cannot be a segment, and the
median cost does not let a few spikes pull a segment's level. Deterministic: no randomness anywhere.

ruptures' PELT runs on a grid of every ``JUMP``-th run with the segment costs computed up front in one
vectorised pass (its own L1 cost calls ``numpy.median`` once per candidate segment: ~1 s for 500 runs);
each boundary found is then placed exactly, at the run within ``JUMP`` of it that minimises the L1 cost
of its two segments. See ``docs/trend.md`` for the measured false-alarm behaviour.
"""

from __future__ import annotations

import math

import numpy as np

MIN_SIZE = 3
PENALTY_BETA = 3.0
JUMP = 5
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


def _precomputed_cost(values: np.ndarray, grid: np.ndarray):
    from ruptures.base import BaseCost

    table = grid_costs(values, grid)
    position = {int(g): i for i, g in enumerate(grid)}

    class GridL1(BaseCost):
        """ruptures' L1 cost, looked up from the table computed once (exact costs off the grid)."""

        model = "l1"
        min_size = MIN_SIZE

        def fit(self, signal: np.ndarray) -> GridL1:
            self.signal = signal
            return self

        def error(self, start: int, end: int) -> float:
            i, j = position.get(start), position.get(end)
            if i is None or j is None:
                return l1_cost(values[start:end])
            return float(table[i, j])

    return GridL1()


def _refine(values: np.ndarray, bounds: list[int]) -> list[int]:
    """Move each boundary to the run within JUMP of it that minimises its two segments' L1 cost."""
    n = len(values)
    edges = [0, *bounds, n]
    out = []
    for k in range(1, len(edges) - 1):
        lo, hi = (out[-1] if out else edges[k - 1]), edges[k + 1]
        candidates = range(max(lo + MIN_SIZE, edges[k] - JUMP), min(hi - MIN_SIZE, edges[k] + JUMP) + 1)
        out.append(
            min(candidates, key=lambda b: (l1_cost(values[lo:b]) + l1_cost(values[b:hi]), abs(b - edges[k])))
        )
    return out


def boundaries(values: np.ndarray) -> list[int]:
    """Indices where a new segment starts (each > 0), by PELT-L1 on the scaled values; [] when none.

    A series with no noise (sigma 0) has no change points here: it is an exact series (see trend).
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    sigma = robust_sigma(values)
    if n < 2 * MIN_SIZE or sigma == 0 or not math.isfinite(sigma):
        return []
    try:
        import ruptures
    except ImportError:
        raise MissingTrendExtra(INSTALL_HINT) from None
    scaled = (values - np.median(values)) / sigma
    grid = np.array(sorted({*range(0, n, JUMP), n}))
    algo = ruptures.Pelt(custom_cost=_precomputed_cost(scaled, grid), min_size=MIN_SIZE, jump=JUMP)
    found = [int(b) for b in algo.fit(scaled.reshape(-1, 1)).predict(pen=PENALTY_BETA * math.log(n)) if b < n]
    return _refine(scaled, found)
