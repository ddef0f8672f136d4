#!/usr/bin/env python3
"""Benchmark: trend's change points on seeded synthetic 500-run histories (docs/trend.md, "False alarms").

    python benchmarks/bench_changepoints.py [--seeds 200]

For 1 % and 2 % noise, without and with spikes (2 % of the runs 25 % slower): ``--seeds`` histories with
+5 % at run 150-156 and -4 % at run 346-350; how many shifts are found within 2 and 5 runs, the worst
offset, the false change points (more than 20 runs from a shift), and, as the bound, how many a least-squares
placement knowing the true levels puts within 2. Then 100 stationary and 100 spiky histories (their change
points: 0 expected) and the CPU per series.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _table import load_line, print_table  # noqa: E402

from popprof.store.changepoints import boundaries  # noqa: E402
from popprof.testing.store_history import shifted_series  # noqa: E402

N = 500


def _history(seed: int, noise: float, spikes: float) -> tuple[np.ndarray, tuple[int, int]]:
    at = (150 + seed % 7, 350 - seed % 5)
    shifts = {at[0]: 0.05, at[1]: -0.04 / 1.05}
    return shifted_series(N, seed=2000 + seed, noise=noise, shifts=shifts, spikes=spikes), at


def _oracle(values: np.ndarray, at: tuple[int, int], noise: float) -> list[int]:
    """Each step placed by least squares on the log values with the true levels given (spikes clipped)."""
    logs = np.log(values)
    level = np.full(N, math.log(1000.0))
    level[at[0] :] += math.log(1.05)
    level[at[1] :] += math.log(0.96)
    out = []
    for a in at:
        window = np.arange(a - 40, a + 41)
        costs = [
            np.minimum(
                (logs[window] - np.where(window < b, level[a - 1], level[a])) ** 2, (3 * noise) ** 2
            ).sum()
            for b in window
        ]
        out.append(int(window[int(np.argmin(costs))]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description="Change points on seeded synthetic histories.")
    parser.add_argument("--seeds", type=int, default=60)
    args = parser.parse_args()
    rows = []
    series = 0
    cpu = time.process_time()
    for noise in (0.01, 0.02):
        for spikes in (0.0, 0.02):
            offsets, oracle, false = [], [], 0
            for seed in range(args.seeds):
                values, at = _history(seed, noise, spikes)
                found = boundaries(values)
                series += 1
                offsets += [min((abs(f - a) for f in found), default=N) for a in at]
                false += sum(1 for f in found if min(abs(f - a) for a in at) > 20)
                oracle += [abs(o - a) for o, a in zip(_oracle(values, at, noise), at, strict=True)]
            total = len(offsets)
            rows.append(
                [
                    f"{noise:.0%} noise, spikes {spikes:.0%}: {total} shifts",
                    f"{sum(o <= 2 for o in offsets)}",
                    f"{sum(o <= 5 for o in offsets)}",
                    f"{max(offsets)}",
                    f"{false}",
                    f"{sum(o <= 2 for o in oracle)}",
                ]
            )
    for label, spikes, base in (("100 stationary series", 0.0, 0), ("100 spiky series", 0.02, 1000)):
        found = sum(len(boundaries(shifted_series(N, seed=base + s, spikes=spikes))) for s in range(100))
        series += 100
        rows.append([label, "-", "-", "-", f"{found}", "-"])
    per_series = (time.process_time() - cpu) / series
    print_table(
        ["scenario", "within 2", "within 5", "worst", "false change points", "true levels: within 2"],
        rows,
        title=f"{load_line()}; {per_series * 1000:.0f} ms CPU per series (with the bound's own work)",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
