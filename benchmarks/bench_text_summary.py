"""Benchmark: parse Poplar text summaries (target: 64 IPUs with 5 per-tile blocks in under 1 s).

Usage: python benchmarks/bench_text_summary.py [--ipus 64] [--repeat 7] [--log-mb 50] [--steps 200000]

Prints the median and spread of repeated parses, and the peak Python memory of
one parse (tracemalloc), for: the summary alone; the summary at the end of a
large log (the reader has to find it); the summary with ``showExecutionSteps``
lines for ``--steps`` steps.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from popprof.readers import open_profile
from popprof.testing import synth
from popprof.testing.writers.text_summary import Layout, render_text_summary


def measure(path: Path, repeat: int) -> tuple[float, float, float, int]:
    """(median s, min s, max s, peak traced bytes) of open_profile(path)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        open_profile(path)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    open_profile(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), min(times), max(times), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ipus", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--log-mb", type=float, default=50.0, help="size of the log the summary is embedded in"
    )
    parser.add_argument("--steps", type=int, default=200_000, help="execution step lines for the third case")
    args = parser.parse_args()

    start = time.perf_counter()
    profile = synth.make_profile(
        num_ipus=args.ipus,
        num_programs=2_000,
        num_liveness_steps=100,
        num_variables=50,
        oom_tiles=4,
        debug=False,
        execution=False,
    )
    # The step lines only name the steps of the first IPU: one IPU carries them.
    stepped = synth.make_profile(
        num_ipus=1,
        num_steps=args.steps,
        num_programs=2_000,
        num_liveness_steps=100,
        num_variables=50,
        debug=False,
    )
    print(
        f"synthetic profile: {args.ipus} IPUs, {len(profile.tiles):,} tiles "
        f"(built in {time.perf_counter() - start:.1f} s)"
    )
    summary = render_text_summary(profile, per_tile_blocks=5)
    with tempfile.TemporaryDirectory() as tmp:
        cases = {}
        plain = Path(tmp) / "summary.txt"
        plain.write_text(summary)
        cases["summary, 5 per-tile blocks"] = plain
        log = Path(tmp) / "train.log"
        filler = (
            "2026-11-30 10:00:01.123456 INFO [trainer] step 1234 loss 0.4321 throughput 1234.5 samples/s\n"
        )
        with open(log, "w") as handle:
            handle.write(filler * int(args.log_mb * 1e6 / len(filler)))
            handle.write(summary)
        cases[f"same, at the end of a {log.stat().st_size / 1e6:.0f} MB log"] = log
        steps = Path(tmp) / "steps.txt"
        steps.write_text(
            summary
            + "\n"
            + render_text_summary(stepped, layout=Layout(sections=("execution",)), show_execution_steps=True)
        )
        cases[f"same + {args.steps:,} execution step lines"] = steps
        print(f"{'case':<48} {'size':>10} {'median':>9} {'min':>9} {'max':>9} {'peak mem':>10}")
        for name, path in cases.items():
            median, low, high, peak = measure(path, args.repeat)
            print(
                f"{name:<48} {path.stat().st_size / 1e6:>8.2f}MB {median:>8.3f}s {low:>8.3f}s {high:>8.3f}s "
                f"{peak / 2**20:>8.1f}MiB"
            )


if __name__ == "__main__":
    main()
