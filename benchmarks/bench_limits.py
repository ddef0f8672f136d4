"""Cost of the hostile-input guards (docs/limits.md): the JSON guard and the gzip guard on a large trace.

Reads a generated Chrome trace (benchmarks/gen_traces.py, plain and gzipped) three ways, each in a
fresh subprocess: the byte stream (``open_binary``: for gzip, with the bomb guard only), the
JSON-guarded stream (``open_json``), and the whole reader (``popprof.readers.chrome.read``, serial) with and
without the guard. Prints medians of wall and CPU seconds and the peak RSS of each, as a table.

With ``--long-event MB`` it measures instead one trace of 2,000 small kernel events around one event whose
``args`` hold an MB-megabyte array of small objects (issue 27; written to a temporary directory), read
serially and split: wall and CPU seconds, peak RSS and the peak as a multiple of the file, and whether
the long event's figures survived. ``--root DIR`` reads with another checkout (a before tree), so
before and after can be alternated in the same minutes.

Usage: ``python benchmarks/bench_limits.py [--size 100MB] [--repeat 3] [--long-event 200] [--root DIR]``
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
import tempfile
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


LONG_READ = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from popprof.readers.chrome import reading
t0, c0 = time.perf_counter(), time.process_time()
profile = reading.read(Path({path!r}), parallel={parallel!r})
big = profile.events[profile.events["name"] == "big"].iloc[0]
print(json.dumps({{"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "ok": [float(big["start_us"]), float(big["dur_us"]), int(big["stream"]), int(big["correlation"])]
                  == [5000.0, 5.0, 7, 99],
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
"""
#: one element of the long event's args array (an input description, as a profiler writes it)
LONG_ITEM = '{"name": "t", "shape": [1, 2]}'


def write_long_event_trace(path: Path, megabytes: int) -> None:
    """2,000 kernel events, with one in the middle whose ``args.inputs`` is ``megabytes`` MB of small objects."""
    small = [
        json.dumps(
            {
                "ph": "X",
                "name": f"op{i}",
                "cat": "kernel",
                "pid": 1,
                "tid": 7,
                "ts": i,
                "dur": 1,
                "args": {"stream": 7, "correlation": i},
            }
        )
        for i in range(2000)
    ]
    chunk = ", ".join([LONG_ITEM] * 10_000) + ", "
    with open(path, "w") as out:
        out.write('{"traceEvents": [\n' + ",\n".join(small[:1000]) + ",\n")
        out.write('{"ph": "X", "name": "big", "cat": "kernel", "pid": 1, "tid": 7, "ts": 5000, "dur": 5, ')
        out.write('"args": {"stream": 7, "correlation": 99, "device": 0, "inputs": [')
        for _ in range((megabytes << 20) // len(chunk)):
            out.write(chunk)
        out.write(LONG_ITEM + "]}},\n" + ",\n".join(small[1000:]) + '\n], "schemaVersion": 1}\n')


def long_event(megabytes: int, repeat: int, root: Path) -> None:
    """The ``--long-event`` table: one trace with one long event, read serially and split."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"long_event_{megabytes}MB.json"
        write_long_event_trace(path, megabytes)
        size = path.stat().st_size
        print(
            f"# {path.name}: {size / 2**20:.0f} MiB, one event of {megabytes} MB; code from {root}; "
            f"load average {os.getloadavg()[0]:.1f}; medians of {repeat}"
        )
        print(f"{'what':<24} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'x file':>7} {'figures':>8}")
        for label, parallel in (("chrome.read serial", False), ("chrome.read split", True)):
            code = LONG_READ.format(root=str(root), path=str(path), parallel=parallel)
            results = [run(code) for _ in range(repeat)]
            wall = statistics.median(r["seconds"] for r in results)
            cpu = statistics.median(r["cpu"] for r in results)
            peak = max(r["peak"] for r in results)
            ok = "kept" if all(r["ok"] for r in results) else "WRONG"
            print(f"{label:<24} {wall:>8.2f} {cpu:>8.2f} {peak / 2**20:>9.0f} {peak / size:>7.1f} {ok:>8}")


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="100MB", choices=list(SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--long-event", type=int, metavar="MB", help="Measure one event of MB megabytes instead."
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="The checkout to read with (default: this one)."
    )
    args = parser.parse_args()
    if args.long_event:
        long_event(args.long_event, args.repeat, args.root.resolve())
        return
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
