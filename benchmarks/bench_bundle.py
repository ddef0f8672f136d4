#!/usr/bin/env python3
"""Benchmark: write and read back the bundle of a 16-IPU Mk2 profile (23,552 tiles, 200,000 steps).

    python benchmarks/bench_bundle.py [--repeat 3]

The profile is read once from the pva-double profile.pop (see bench_pop.py),
then ``bundle.write`` is timed ``--repeat`` times in that process. Reading back
(``popprof.open`` of the bundle) runs in ``--repeat`` fresh subprocesses, so each
peak RSS is its own. Prints medians (wall and CPU), peak RSS, and the bundle's
size on disk per table. Targets: < 5 s to write, < 5 s to read.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _table import load_line, print_table

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
BUNDLE = DATA / "pod16.popprof"


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_bundles(repeat: int) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT / "tests" / "pva_double"))
    import bench_pop

    from popprof.readers import bundle, pop

    profile = pop.read(bench_pop.ensure_data(), progress=False)
    before = _peak_mib()
    runs = []
    for _ in range(repeat):
        if BUNDLE.exists():
            shutil.rmtree(BUNDLE)
        start, cpu = time.perf_counter(), time.process_time()
        bundle.write(profile, BUNDLE)
        runs.append({"wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu})
    print(json.dumps({"runs": runs, "peak_mib": _peak_mib(), "before_mib": before}))
    return runs


def child_read() -> None:
    sys.path.insert(0, str(ROOT))
    import popprof

    start, cpu = time.perf_counter(), time.process_time()
    profile = popprof.open(BUNDLE)
    rows = sum(len(t) for t in profile.tables.values())
    print(
        json.dumps(
            {
                "wall_s": time.perf_counter() - start,
                "cpu_s": time.process_time() - cpu,
                "peak_mib": _peak_mib(),
                "rows": rows,
            }
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark writing and reading the bundle of a 16-IPU profile."
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child-read", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-write", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_read:
        child_read()
        return 0
    if args.child_write:
        write_bundles(args.repeat)
        return 0
    # Every measurement runs in a subprocess of this lean process: on Linux a child's ru_maxrss
    # starts from its parent's RSS at fork, so a fat parent would inflate the children's peaks.
    out = subprocess.run(
        [sys.executable, __file__, "--child-write", "--repeat", str(args.repeat)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    written = json.loads(out.strip().splitlines()[-1])
    writes = written["runs"]
    reads = []
    for _ in range(args.repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--child-read"], check=True, capture_output=True, text=True
        ).stdout
        reads.append(json.loads(out.strip().splitlines()[-1]))
    sizes = {f.name: f.stat().st_size for f in sorted(BUNDLE.iterdir())}
    total = sum(sizes.values())
    rows = []
    for label, runs in (("write", writes), ("read", reads)):
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        peak = (
            f"{max(r['peak_mib'] for r in runs):,.0f}"
            if "peak_mib" in runs[0]
            else f"{written['peak_mib']:,.0f}"
        )
        rows.append(
            [
                label,
                f"{wall:.2f}",
                f"{cpu:.2f}",
                peak,
                ", ".join(f"{r['wall_s']:.2f}" for r in runs),
                "met" if wall < 5 else "NOT met",
            ]
        )
    print_table(
        ["step", "wall s (median)", "CPU s (median)", "peak RSS MiB", "walls s", "target < 5 s"],
        rows,
        title=f"bundle {BUNDLE}: median of {args.repeat} runs; {load_line()}; the write's peak includes "
        f"{written['before_mib']:,.0f} MiB of the profile read before writing",
    )
    print_table(
        ["file", "MiB on disk"],
        [[name, f"{size / 2**20:,.1f}"] for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])]
        + [["total", f"{total / 2**20:,.1f}"]],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
