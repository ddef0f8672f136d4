"""Benchmark: the cost of popprof record's output passthrough (CMD printing a lot on stdout and stderr).

Usage: python benchmarks/bench_record.py [--mb 200] [--repeat 3]

A CMD writes --mb MB on each of stdout and stderr (4 KiB lines, interleaved).
It runs directly (output to /dev/null), under ``popprof record --no-check``
(the passthrough alone: popprof's own output to /dev/null, both streams saved
in DIR), and under ``popprof record`` (then the saved logs are also scanned
by the readers for Poplar summaries and out-of-memory messages). Prints the
medians of wall time, the throughput, and the peak RSS (fresh process per run,
``resource.getrusage`` of the waited-for children: popprof or CMD, whichever
is larger). Wall times include starting a wrapper process (~30 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITER = """
import sys
line = b"x" * 4095 + b"\\n"
out, err = sys.stdout.buffer, sys.stderr.buffer
for _ in range(int({mb} * 1e6 / 4096)):
    out.write(line)
    err.write(line)
"""


#: Runs argv[1:] with output to /dev/null and prints the peak RSS (KiB) of its process tree's largest member.
MEASURE = (
    "import resource, subprocess, sys; "
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, "
    "stdin=subprocess.DEVNULL, check=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def run(cmd: list[str]) -> tuple[float, float]:
    """(wall s, peak RSS MiB) of one fresh run of ``cmd`` (measured in its own wrapper process)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    return wall, int(done.stdout.strip()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="MB CMD writes on each stream")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    writer = [sys.executable, "-c", WRITER.format(mb=args.mb)]
    print(f"load average {os.getloadavg()[0]:.1f}; CMD writes {args.mb:.0f} MB on stdout and on stderr")
    cases: dict[str, list[float]] = {"CMD alone": [], "popprof record --no-check": [], "popprof record": []}
    peaks: dict[str, float] = dict.fromkeys(cases, 0.0)
    expected = 2 * int(args.mb * 1e6 / 4096) * 4096
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for name, options in (
                ("CMD alone", None),
                ("popprof record --no-check", ["--no-check"]),
                ("popprof record", []),
            ):
                out = Path(tmp) / f"run{i}-{len(cases[name])}-{len(options or [])}"
                cmd = (
                    writer
                    if options is None
                    else [sys.executable, "-m", "popprof", "record", "-o", str(out), *options, "--", *writer]
                )
                wall, peak = run(cmd)
                cases[name].append(wall)
                peaks[name] = max(peaks[name], peak)
                if options is not None:
                    saved = (out / "stdout.log").stat().st_size + (out / "stderr.log").stat().st_size
                    assert saved == expected, f"saved {saved} bytes, expected {expected}"
    total_mb = 2 * args.mb
    print(f"{'case':<28} {'median':>9} {'min':>9} {'max':>9} {'MB/s':>8} {'peak RSS':>10}")
    for name, times in cases.items():
        median = statistics.median(times)
        rss = f"{peaks[name]:>8.0f}MiB"
        print(
            f"{name:<28} {median:>8.2f}s {min(times):>8.2f}s {max(times):>8.2f}s {total_mb / median:>8.0f} {rss}"
        )


if __name__ == "__main__":
    main()
