"""A/B: the CPU time of ``popprof summary TRACE --format json`` from two checkouts, alternating.

Each run is a fresh process (``python -m popprof summary TRACE --format json -q -o OUT`` with
``PYTHONPATH`` set to the checkout); its CPU is the user + system time of it and its parse worker
(``RUSAGE_CHILDREN`` of this script before and after). The order alternates per pair (A B, B A, ...) so a
load that changes during the sitting weighs on both. CPU, not wall time: on a machine shared with other
sessions the wall clock measures the neighbours. Prints the median and minimum of each and B's change.

Usage::

    python benchmarks/bench_ab_summary.py --a /work/main --b . --pairs 10
    python benchmarks/bench_ab_summary.py --a /work/main --b . --b-args=--shapes   # B with an option
"""

from __future__ import annotations

import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _table import doc_parser, print_table  # noqa: E402
from gen_traces import ensure  # noqa: E402


def _cpu_of(checkout: Path, trace: Path, out: Path, extra: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [
        sys.executable,
        "-m",
        "popprof",
        "summary",
        str(trace),
        "--format",
        "json",
        "-q",
        "-o",
        str(out),
    ]
    subprocess.run(
        [*command, *extra], env={**os.environ, "PYTHONPATH": str(checkout)}, check=True, cwd=checkout
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = doc_parser(__doc__)
    parser.add_argument("--a", type=Path, required=True, help="Checkout A (the reference).")
    parser.add_argument("--b", type=Path, required=True, help="Checkout B (the change).")
    parser.add_argument("--trace", type=Path, help="A trace file (default: the generated 600k trace).")
    parser.add_argument("--pairs", type=int, default=8, help="Alternating pairs of runs (default 8).")
    parser.add_argument("--b-args", default="", help="Extra options for B's summary, one string.")
    args = parser.parse_args(argv)
    trace = (args.trace or ensure("600k")).resolve()
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    sides = {"A": (args.a.resolve(), []), "B": (args.b.resolve(), shlex.split(args.b_args))}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
                checkout, extra = sides[side]
                cpu[side].append(_cpu_of(checkout, trace, Path(tmp) / f"{side}.json", extra))
    rows = [
        [side, str(sides[side][0]), f"{statistics.median(v):.3f}", f"{min(v):.3f}"] for side, v in cpu.items()
    ]
    print(f"{trace.name}, {args.pairs} alternating pairs; load average {os.getloadavg()[0]:.1f}\n")
    print_table(["side", "checkout", "median CPU s", "min CPU s"], rows)
    median = statistics.median(cpu["B"]) / statistics.median(cpu["A"]) - 1
    least = min(cpu["B"]) / min(cpu["A"]) - 1
    print(f"\nB against A: median {median:+.1%}, minimum {least:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
