"""Benchmark: diff (and gate) two 16-IPU profiles with 200,000 execution steps each.

Measures, on synthetic Mk2 profiles (popprof.testing.synth, different seeds):

1. ``popprof.compare`` + ``gate`` + text rendering in-process: median wall time of
   repeated runs, and the peak of memory allocated during one run (tracemalloc);
2. the CLI end to end (``popprof diff A.popprof B.popprof``: read both bundles,
   diff, gate, render) in a subprocess: median wall time and peak RSS
   (``ru_maxrss`` of the child).

Usage: python benchmarks/bench_diff.py [--ipus 16] [--steps 200000] [--repeat 5]
The target is under 10 s for the diff.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from _table import load_line, print_table

from popprof.compare import diff, gate
from popprof.readers import bundle
from popprof.report.diff import render
from popprof.testing import synth


def _timed(func, repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeat`` calls (CPU time tells load on a shared machine apart)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        func()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ipus", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    start = time.perf_counter()
    base = synth.make_profile(num_ipus=args.ipus, num_steps=args.steps, seed=1, oom_tiles=2)
    new = synth.make_profile(num_ipus=args.ipus, num_steps=args.steps, seed=2, oom_tiles=5)
    print(
        f"generated 2 profiles ({args.ipus} IPUs, {args.steps:,} steps, {len(base.steps):,} step rows each) "
        f"in {time.perf_counter() - start:.1f} s"
    )

    def run_once():
        result = diff(base, new)
        render(result, gate(result), "text")

    times, cpu = _timed(run_once, args.repeat)
    tracemalloc.start()
    run_once()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows = [
        [
            "diff + gate + text render, in process",
            f"{statistics.median(times):.2f}",
            f"{min(times):.2f}-{max(times):.2f}",
            f"{statistics.median(cpu):.2f}",
            f"{peak / 2**20:.0f} (allocated)",
        ]
    ]

    with tempfile.TemporaryDirectory() as tmp:
        a = bundle.write(base, Path(tmp) / "a.popprof")
        b = bundle.write(new, Path(tmp) / "b.popprof")
        cli_times, cli_cpu, rss = [], [], []
        for _ in range(args.repeat):
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "popprof", "diff", str(a), str(b), "--no-gate"],
                capture_output=True,
                text=True,
                check=False,
            )
            cli_times.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"CLI failed ({done.returncode}): {done.stderr}")
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu.append(usage.ru_utime + usage.ru_stime - cpu_before)
            rss.append(max(before, usage.ru_maxrss))
        rows.append(
            [
                "CLI: read 2 bundles + diff + render",
                f"{statistics.median(cli_times):.2f}",
                f"{min(cli_times):.2f}-{max(cli_times):.2f}",
                f"{statistics.median(cli_cpu):.2f}",
                f"{max(rss) / 1024:.0f} (RSS)",
            ]
        )
    print_table(
        ["what", "wall s (median)", "wall s (min-max)", "CPU s (median)", "peak MiB"],
        rows,
        title=f"median of {args.repeat} runs; {load_line()} (target < 10 s)",
    )


if __name__ == "__main__":
    main()
