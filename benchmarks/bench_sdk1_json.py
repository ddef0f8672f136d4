"""Benchmark: read SDK 1.x JSON profiles, parsed whole (orjson) and streamed (ijson).

Usage: python benchmarks/bench_sdk1_json.py [--ipus 16] [--steps 200000] [--repeat 3] [--tile-array-steps 20000]

Writes a combined SDK 1.x JSON file of a synthetic Mk2 profile, then reads it in
fresh subprocesses (so peak RSS is the read's own) both ways, printing the median
wall time and the peak resident memory (VmHWM, Linux) of each. A second file
adds a per-tile ``cyclesByTile`` array to each of ``--tile-array-steps`` steps of
a 1-IPU profile (the case streaming is for: the reader drops those arrays).
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

import numpy as np
import orjson
from _table import load_line, print_table

from popprof.testing import synth
from popprof.testing.writers.sdk1_json import graph_profile, write_sdk1_json

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
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(threshold)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ipus", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tile-array-steps", type=int, default=20_000)
    args = parser.parse_args()
    start = time.perf_counter()
    profile = synth.make_profile(
        num_ipus=args.ipus,
        num_steps=args.steps,
        num_programs=4_000,
        num_liveness_steps=100,
        num_variables=50,
        debug=False,
    )
    print(
        f"synthetic profile: {args.ipus} IPUs, {len(profile.tiles):,} tiles, {args.steps:,} steps "
        f"(built in {time.perf_counter() - start:.1f} s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.json"
        start = time.perf_counter()
        write_sdk1_json(profile, path)
        del profile
        print(f"wrote {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s")
        rows = compare(path, f"{args.ipus} IPUs, {args.steps:,} steps", args.repeat)
        if args.tile_array_steps:
            path = Path(tmp) / "tile_arrays.json"
            write_with_tile_arrays(path, args.tile_array_steps)
            rows += compare(
                path, f"1 IPU, cyclesByTile on {args.tile_array_steps:,} steps x 1,472 tiles", args.repeat
            )
    print_table(
        ["profile", "MB", "parsed", "wall s (median)", "peak RSS MiB", "table rows"],
        rows,
        title=f"median of {args.repeat} runs, each in a fresh process; {load_line()}",
    )


def compare(path: Path, label: str, repeat: int) -> list[list[str]]:
    """One table row per way of parsing ``path``: whole with orjson, and streamed with ijson."""
    rows = []
    for how, threshold in (("whole (orjson)", 1 << 40), ("streamed (ijson)", 0)):
        runs = [run_child(path, threshold) for _ in range(repeat)]
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = max(r["maxrss_kib"] for r in runs) / 1024
        rows.append(
            [
                label,
                f"{path.stat().st_size / 1e6:,.1f}",
                how,
                f"{seconds:.2f}",
                f"{peak:,.0f}",
                f"{sum(runs[0]['rows'].values()):,}",
            ]
        )
    return rows


def write_with_tile_arrays(path: Path, steps: int) -> None:
    """A 1-IPU combined file whose steps carry per-tile cycle arrays, written piece by piece."""
    profile = synth.make_profile(
        num_ipus=1, num_steps=steps, num_programs=500, num_liveness_steps=50, num_variables=20, debug=False
    )
    rng = np.random.default_rng(0)
    rows = profile.steps
    with open(path, "wb") as handle:
        handle.write(
            b'{"graphProfile":' + orjson.dumps(graph_profile(profile), option=orjson.OPT_SERIALIZE_NUMPY)
        )
        handle.write(b',"executionProfile":{"simulation":{"cycles":%d,"steps":[' % int(rows["cycles"].sum()))
        for k, (kind, name, cycles) in enumerate(
            zip(
                rows["program_type"].astype(str),
                rows["program"].astype(str),
                rows["cycles"].astype("int64"),
                strict=True,
            )
        ):
            per_tile = rng.integers(0, int(cycles) + 1, 1472)
            record = {"type": kind, "name": name, "cycles": int(cycles), "cyclesByTile": per_tile}
            handle.write((b"," if k else b"") + orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY))
        handle.write(b"]}}}")


if __name__ == "__main__":
    main()
