"""Benchmark: start-up of `popprof --version`, `--help` and a missing input against a bare `python -c pass`.

Usage: python benchmarks/bench_startup.py [--repeat 15]

Each case is a fresh interpreter (``python -m popprof ...``, what the console script runs),
alternated with the bare interpreter so load on a shared machine hits both alike. Prints the
median wall time and the median CPU time (user + system of the child) of each case, and each
case's ratio to ``python -c pass``. Target (issue 28): within 3x of the bare interpreter, which
needs the CLI to import nothing heavy (pandas, pyarrow, the readers) for these. Issue 46: an error about a
missing input answers within the same 3x (``summary`` and ``check`` of a path that does not exist, exit 2).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from _table import load_line, print_table

#: Target: each case within this many times the bare interpreter's median (CPU time).
TARGET_RATIO = 3.0

CASES: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "popprof --version": ["-m", "popprof", "--version"],
    "popprof --help": ["-m", "popprof", "--help"],
    "popprof summary --help": ["-m", "popprof", "summary", "--help"],
    "popprof summary MISSING": ["-m", "popprof", "summary", "/nonexistent/popprof-bench.json"],
    "popprof check MISSING": ["-m", "popprof", "check", "/nonexistent/popprof-bench.json"],
}

#: the exit code each case must end with (0 unless named): a missing input is exit 2
EXPECTED_EXIT = {"popprof summary MISSING": 2, "popprof check MISSING": 2}


def _once(args: list[str], expected: int = 0) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one fresh run, which must exit with ``expected``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if done.returncode != expected:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}, expected {expected}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs of each case (medians are printed)")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {name: [] for name in CASES}
    cpus: dict[str, list[float]] = {name: [] for name in CASES}
    env_note = load_line()
    for _ in range(args.repeat):
        for name, case in CASES.items():  # interleaved: the machine's load affects every case alike
            wall, cpu = _once(case, EXPECTED_EXIT.get(name, 0))
            walls[name].append(wall)
            cpus[name].append(cpu)
    bare_wall = statistics.median(walls["python -c pass"])
    bare_cpu = statistics.median(cpus["python -c pass"])
    rows = []
    met = True
    for name in CASES:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        ratio_cpu = cpu / bare_cpu if bare_cpu else float("nan")
        ratio_wall = wall / bare_wall if bare_wall else float("nan")
        if name != "python -c pass":
            met = met and ratio_cpu <= TARGET_RATIO
        rows.append(
            [name, f"{wall * 1000:.0f}", f"{ratio_wall:.1f}", f"{cpu * 1000:.0f}", f"{ratio_cpu:.1f}"]
        )
    print_table(
        ["case", "wall ms", "x bare (wall)", "CPU ms", "x bare (CPU)"],
        rows,
        title=f"start-up, medians of {args.repeat} fresh runs each; {env_note}; python {sys.version.split()[0]}",
    )
    print(
        f"\ntarget: within {TARGET_RATIO:g}x of `python -c pass` (CPU): {'met' if met else 'NOT met'}"
        f" (pid {os.getpid()})"
    )


if __name__ == "__main__":
    main()
