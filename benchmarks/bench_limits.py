"""Cost of the hostile-input guards (docs/limits.md): the JSON guard and the gzip guard on a large trace.

Reads a generated Chrome trace (benchmarks/gen_traces.py, plain and gzipped) three ways, each in a
fresh subprocess: the byte stream (``open_binary``: for gzip, with the bomb guard only), the
JSON-guarded stream (``open_json``), and the whole reader (``popprof.readers.chrome.read``, serial) with and
without the guard. Prints medians of wall and CPU seconds and the peak RSS of each, as a table.

Usage: ``python benchmarks/bench_limits.py [--size 100MB] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from gen_traces import SIZES, trace_path  # noqa: E402

STREAM = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from popprof.io.files import open_binary, open_json
opener = {{"raw": open_binary, "guarded": open_json}}[{mode!r}]
t0, c0 = time.perf_counter(), time.process_time()
total = 0
with opener({path!r}) as handle:
    while block := handle.read(4 << 20):
        total += len(block)
print(json.dumps({{"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "bytes": total,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
"""

READ = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from popprof.io.files import open_binary
from popprof.readers import chrome
from popprof.readers.chrome import parse, split
split.PARALLEL_MIN_BYTES = 1 << 62
if {mode!r} == "unguarded":
    parse.open_json = open_binary
t0, c0 = time.perf_counter(), time.process_time()
from pathlib import Path
profile = chrome.read(Path({path!r}))
print(json.dumps({{"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "events": len(profile.events), "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
"""


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="100MB", choices=list(SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    plain = trace_path(args.size)
    if not plain.exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gen_traces.py"), args.size], check=True)
    packed = plain.with_suffix(".json.gz")
    if not packed.exists():
        with open(plain, "rb") as source, gzip.open(packed, "wb", compresslevel=6) as sink:
            shutil.copyfileobj(source, sink, 4 << 20)
    print(
        f"# {plain.name}: {plain.stat().st_size / 2**20:.0f} MiB, gzipped {packed.stat().st_size / 2**20:.0f} MiB; "
        f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeat}"
    )
    print(f"{'what':<34} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9}")
    for label, template, mode, path in (
        ("stream plain, open_binary", STREAM, "raw", plain),
        ("stream plain, open_json", STREAM, "guarded", plain),
        ("stream gzip, open_binary", STREAM, "raw", packed),
        ("stream gzip, open_json", STREAM, "guarded", packed),
        ("chrome.read plain, unguarded", READ, "unguarded", plain),
        ("chrome.read plain, guarded", READ, "guarded", plain),
    ):
        results = [
            run(template.format(root=str(ROOT), mode=mode, path=str(path))) for _ in range(args.repeat)
        ]
        wall = statistics.median(r["seconds"] for r in results)
        cpu = statistics.median(r["cpu"] for r in results)
        peak = max(r["peak"] for r in results) / 2**20
        print(f"{label:<34} {wall:>8.2f} {cpu:>8.2f} {peak:>9.0f}")


if __name__ == "__main__":
    main()
