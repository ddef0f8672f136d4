"""Benchmark: a large log of real-shaped Poplar text (target: 50 MB, 200 summaries, 1,000 out-of-memory
messages read in under 3 s at under 500 MB peak).

Usage: python benchmarks/bench_real_text.py [--log-mb 50] [--summaries 200] [--oom 1000] [--repeat 5]

Writes the logs on demand under benchmarks/data/ (git-ignored): program output with labelled
summaries (SDK 2.x/3.x memory tree and tile-average Execution section, by popprof's writer) and
out-of-memory messages spread through it. Each case is read ``--repeat`` times, each in a fresh
process (``popprof.open_all``: every summary as its own profile, every table of every profile built),
and the table gives the median and
range of the read time and the median peak RSS of the reading process (interpreter and libraries
included; the baseline line shows what importing popprof alone costs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"

CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
import popprof
import popprof.readers.oom_log  # the facade imports lazily: the readers load before the clock
import popprof.readers.text_summary
start, cpu = time.perf_counter(), time.process_time()
profiles = popprof.open_all(sys.argv[1]) if sys.argv[1] != "-" else {}
tables = sum(len(p.tables) for p in profiles.values())  # every table built (some are built on first use)
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
rows = sum(len(p.get("out_of_memory")) for p in profiles.values() if p.get("out_of_memory") is not None)
print(json.dumps({"seconds": elapsed, "cpu": cpu, "profiles": len(profiles), "oom_rows": rows,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

FILLER = "2026-11-30 10:00:01.123456 INFO [trainer] step 1234 loss 0.4321 throughput 1234.5 samples/s\n"
OOM = (
    "terminate called after throwing an instance of 'poplar::graph_memory_allocation_error'\n"
    "  what():  Out of memory on tile {tile}: {used} bytes used but tiles only have 638976 bytes of memory\n"
)


def make_log(path: Path, log_mb: float, summaries: int, ooms: int) -> None:
    """Write a log of about ``log_mb`` MB with ``summaries`` labelled summaries and ``ooms`` OOM messages."""
    from popprof.testing import synth
    from popprof.testing.writers.text_summary import Layout, render_text_summary

    profile = synth.make_profile(
        num_ipus=1,
        num_steps=200,
        num_programs=50,
        num_liveness_steps=20,
        num_variables=10,
        oom_tiles=1,
        debug=False,
        seed=3,
    )
    summary = render_text_summary(
        profile, per_tile_blocks=2, layout=Layout(memory_style="sdk3", execution_totals="sdk3")
    )
    pieces = summaries + ooms
    target = int(log_mb * 1e6)
    fixed = summaries * (len(summary) + 40) + ooms * (len(OOM) + 10)
    filler_lines = max(0, (target - fixed) // len(FILLER)) // max(pieces, 1)
    block = FILLER * filler_lines
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as out:
        s = o = 0
        for i in range(pieces):
            out.write(block)
            if s < summaries and (o >= ooms or i % max(1, pieces // max(summaries, 1)) == 0):
                out.write(f"Run {s + 1} (micro-batch {s % 7 + 1}):\n{summary}\n")
                s += 1
            else:
                out.write(OOM.format(tile=o % 1472, used=638_977 + o))
                o += 1


def run_child(path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-mb", type=float, default=50.0, help="size of the log")
    parser.add_argument("--summaries", type=int, default=200, help="labelled summaries in the log")
    parser.add_argument("--oom", type=int, default=1000, help="out-of-memory messages in the log")
    parser.add_argument("--repeat", type=int, default=5, help="fresh-process reads per case (median)")
    args = parser.parse_args()

    cases = {
        "summaries + OOM messages": (
            DATA / f"real_text_{args.log_mb:g}mb_{args.summaries}s_{args.oom}oom.log",
            args.summaries,
            args.oom,
        ),
        "OOM messages only": (DATA / f"real_text_{args.log_mb:g}mb_0s_{args.oom}oom.log", 0, args.oom),
    }
    for path, summaries, ooms in cases.values():
        if not path.exists():
            start = time.perf_counter()
            make_log(path, args.log_mb, summaries, ooms)
            print(
                f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1e6:.1f} MB) in "
                f"{time.perf_counter() - start:.1f} s",
                file=sys.stderr,
            )
    base = [run_child("-") for _ in range(max(1, args.repeat // 2))]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; targets: < 3 s, < 500 MB peak")
    print(
        f"{'case':<28} {'size':>9} {'profiles':>9} {'OOM rows':>9} {'median':>8} {'min':>8} {'max':>8} "
        f"{'CPU':>8} {'peak RSS':>10}"
    )
    print(
        f"{'baseline (import popprof)':<28} {'':>9} {'':>9} {'':>9} {'':>8} {'':>8} {'':>8} {'':>8} "
        f"{statistics.median(r['peak_rss_mb'] for r in base):>8.0f}MB"
    )
    for name, (path, _, _) in cases.items():
        runs = [run_child(str(path)) for _ in range(args.repeat)]
        secs = [r["seconds"] for r in runs]
        print(
            f"{name:<28} {path.stat().st_size / 1e6:>7.1f}MB {runs[0]['profiles']:>9,} {runs[0]['oom_rows']:>9,} "
            f"{statistics.median(secs):>7.2f}s {min(secs):>7.2f}s {max(secs):>7.2f}s "
            f"{statistics.median(r['cpu'] for r in runs):>7.2f}s "
            f"{statistics.median(r['peak_rss_mb'] for r in runs):>8.0f}MB"
        )


if __name__ == "__main__":
    main()
