#!/usr/bin/env python3
"""Benchmark: trend's change points on seeded synthetic 500-run histories (docs/trend.md, "Guarantees").

    python benchmarks/bench_changepoints.py [--seeds 200] [--first-seed 0] [--noise 1,2]

Per noise level (lognormal, default 1 % and 2 %), without and with spikes (2 % of the runs 25 % slower):
``--seeds`` histories of 1,000 with +5 % at run 150-156 (to 1,050) and back by 4 % of 1,000 at run 346-350
(to 1,010). For each shift its location error (runs from the true first run of the new level to the nearest
change point found; "missed" beyond 20) as a distribution, recall within 2 and within 5 runs, the worst
error, and the false change points (more than 20 runs from every shift). Under each scenario the same for the
bound, "true levels": each step placed by the best rule there is for "within 2 runs" when the levels and the
noise are known (the run whose 2 neighbours either side hold the most likelihood, errors clipped at 4 sigma
against spikes as popprof's are); no method that does not know them does better on average, though over a
few hundred shifts either may be ahead by a few. Then false alarms: 100 stationary and 100 spiky histories
per noise level (0 expected). And for each shift whether the bisect range of the nearest change point (the
runs where the new level may start, 99 % of the placement's likelihood) holds its first run, and its width.
CPU per series counts the detector only.
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

from popprof.store.changepoints import CLIP_SIGMAS, PLACEMENT_TOLERANCE, boundaries, change_points  # noqa: E402
from popprof.testing.store_history import shifted_series  # noqa: E402

N = 500
LEVEL = 1000.0
STEPS = (0.05, -0.04)  # of the first level: 1,000 -> 1,050 -> 1,010 (the second step is -3.8 %)
FOUND_WITHIN = (
    20  # a change point further than this from every shift is a false one; a shift without one, missed
)
BUCKETS = ("0", "1", "2", "3", "4", "5", "6-10", "11-20", "missed")


def history(seed: int, noise: float, spikes: float) -> tuple[np.ndarray, tuple[int, int]]:
    """The seeded shift scenario of ``tests/test_store_changepoints.py``: values and the two shifts' runs."""
    at = (150 + seed % 7, 350 - seed % 5)
    shifts = {at[0]: STEPS[0], at[1]: STEPS[1] / (1 + STEPS[0])}
    return shifted_series(N, seed=2000 + seed, level=LEVEL, noise=noise, shifts=shifts, spikes=spikes), at


def oracle(values: np.ndarray, at: tuple[int, int], noise: float, reach: int = 40) -> list[int]:
    """Each step placed knowing the true log levels and noise: over the runs within ``reach`` of it, the run
    whose ``PLACEMENT_TOLERANCE`` neighbours either side hold the most likelihood (squared errors clipped at
    ``CLIP_SIGMAS`` noise, as popprof's)."""
    logs = np.log(values)
    level = np.full(N, math.log(LEVEL))
    level[at[0] :] += math.log(1 + STEPS[0])
    level[at[1] :] += math.log(1 + STEPS[1] / (1 + STEPS[0]))
    out = []
    for a in at:
        window = np.arange(a - reach, a + reach + 1)
        x = logs[window]
        before = np.minimum((x - level[a - 1]) ** 2, (CLIP_SIGMAS * noise) ** 2)
        after = np.minimum((x - level[a]) ** 2, (CLIP_SIGMAS * noise) ** 2)
        # a step at window[j]: runs before j take the old level, runs from j on the new one
        cost = np.concatenate([[0.0], np.cumsum(before)])[:-1] + np.cumsum(after[::-1])[::-1]
        likelihood = np.exp(-(cost - cost.min()) / (2 * noise**2))
        mass = np.convolve(likelihood, np.ones(2 * PLACEMENT_TOLERANCE + 1), mode="same")
        out.append(int(window[int(np.argmax(mass))]))
    return out


def bucket(error: int) -> str:
    if error <= 5:
        return str(error)
    return "6-10" if error <= 10 else "11-20" if error <= FOUND_WITHIN else "missed"


def row(label: str, errors: list[int], false: int | str) -> list[str]:
    counts = {b: 0 for b in BUCKETS}
    for error in errors:
        counts[bucket(error)] += 1
    found = [e for e in errors if e <= FOUND_WITHIN]
    return [
        label,
        str(len(errors)),
        *(str(counts[b]) for b in BUCKETS),
        f"{sum(e <= 2 for e in errors)} ({sum(e <= 2 for e in errors) / len(errors) * 100:.1f} %)",
        f"{sum(e <= 5 for e in errors)} ({sum(e <= 5 for e in errors) / len(errors) * 100:.1f} %)",
        str(max(found, default=0)),
        str(false),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=60, help="Shift histories per scenario (default 60).")
    parser.add_argument("--first-seed", type=int, default=0, help="The first seed (another range: held out).")
    parser.add_argument(
        "--noise", default="1,2", help="Noise levels in percent, comma-separated (default 1,2)."
    )
    args = parser.parse_args()
    noises = [float(x) / 100 for x in args.noise.split(",")]
    errors_rows, alarm_rows, range_rows = [], [], []
    series, cpu = 0, 0.0
    for noise in noises:
        for spikes in (0.0, 0.02):
            errors, bound, false, held, widths = [], [], 0, 0, []
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                values, at = history(seed, noise, spikes)
                start = time.process_time()
                points = change_points(values)
                cpu += time.process_time() - start
                series += 1
                found = [run for run, _, _ in points]
                for a in at:
                    run, first, last = min(points, key=lambda p: abs(p[0] - a), default=(N, 0, -1))
                    errors.append(abs(run - a))
                    held += first <= a <= last
                    widths.append(last - first + 1)
                false += sum(1 for f in found if min(abs(f - a) for a in at) > FOUND_WITHIN)
                bound += [abs(o - a) for o, a in zip(oracle(values, at, noise), at, strict=True)]
            name = f"{noise * 100:g} % noise, {'spikes' if spikes else 'no spikes'}"
            errors_rows += [row(f"{name}: popprof", errors, false), row(f"{name}: true levels", bound, "-")]
            range_rows.append(
                [
                    name,
                    str(len(errors)),
                    f"{held} ({held / len(errors) * 100:.1f} %)",
                    f"{np.median(widths):g}",
                    f"{np.mean(widths):.1f}",
                    str(max(widths)),
                ]
            )
        for label, spikes, base in (("100 stationary", 0.0, 0), ("100 spiky", 0.02, 1000)):
            start = time.process_time()
            found = sum(
                len(boundaries(shifted_series(N, seed=base + s, noise=noise, spikes=spikes)))
                for s in range(100)
            )
            cpu += time.process_time() - start
            series += 100
            alarm_rows.append([f"{noise * 100:g} % noise, {label} series", str(found)])
    seeds = f"seeds {args.first_seed}-{args.first_seed + args.seeds - 1}"
    print_table(
        ["scenario", "shifts", *(f"err {b}" for b in BUCKETS), "within 2", "within 5", "worst", "false cps"],
        errors_rows,
        title=f"location errors in runs, {seeds}; {load_line()}",
    )
    print_table(
        ["scenario", "shifts", "in the bisect range", "width median", "width mean", "width max"],
        range_rows,
        title="bisect ranges (runs where the new level may start, 99 % of the likelihood): how often they hold "
        "the shift's first run, and how many runs wide they are",
    )
    print_table(
        ["history", "change points (false alarms)"],
        alarm_rows,
        title=f"{cpu / series * 1000:.0f} ms CPU per 500-run series ({series} series, the detector only)",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
