"""Benchmark: read SDK 1.x JSON profiles, parsed whole (orjson) and streamed (ijson).

Usage: python benchmarks/bench_sdk1_json.py [--ipus 16] [--steps 200000] [--repeat 3]

Writes a combined SDK 1.x JSON file of a synthetic Mk2 profile, then reads it in
fresh subprocesses (so peak RSS is the read's own) both ways, printing the median
wall time and the peak resident memory (VmHWM, Linux) of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from popprof import synth
from popprof.writers.sdk1_json import write_sdk1_json

CHILD = """
import json, sys, time
from pathlib import Path
from popprof.readers import sdk1_json
start = time.perf_counter()
profile = sdk1_json.read(Path(sys.argv[1]), stream_threshold_bytes=int(sys.argv[2]))
elapsed = time.perf_counter() - start
rows = {name: len(frame) for name, frame in profile.tables.items()}
# VmHWM is this process's own peak RSS (ru_maxrss can carry the parent's high-water mark over fork).
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"seconds": elapsed, "maxrss_kib": hwm, "rows": rows}))
"""


def run_child(path: Path, threshold: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(threshold)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ipus", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    profile = synth.make_profile(num_ipus=args.ipus, num_steps=args.steps, num_programs=4_000,
                                 num_liveness_steps=100, num_variables=50, debug=False)
    print(f"synthetic profile: {args.ipus} IPUs, {len(profile.tiles):,} tiles, {args.steps:,} steps "
          f"(built in {time.perf_counter() - start:.1f} s)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.json"
        start = time.perf_counter()
        write_sdk1_json(profile, path)
        del profile
        print(f"wrote {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s")
        for label, threshold in (("whole (orjson)", 1 << 40), ("streamed (ijson)", 0)):
            runs = [run_child(path, threshold) for _ in range(args.repeat)]
            seconds = statistics.median(r["seconds"] for r in runs)
            peak = max(r["maxrss_kib"] for r in runs) / 1024
            print(f"{label:<18} median {seconds:6.2f} s   peak RSS {peak:7.0f} MiB   rows {runs[0]['rows']}")


if __name__ == "__main__":
    main()
