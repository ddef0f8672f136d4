"""Generate large PyTorch-profiler-like Chrome traces into benchmarks/data/ (git-ignored).

Sizes: ``10MB``, ``600k`` (600,000 events), ``100MB`` and ``1GB`` (the last holds 10 million complete
events; it is about 1.3 GB because every GPU event carries kineto-style args).
Traces come from :mod:`popprof.trace.synth`: an object with ``traceEvents``,
kernels / memcpy / memset / NCCL on GPU streams, host ops on three threads,
``args`` on GPU events (``device``, ``stream``, ``correlation``), counters and
``M`` metadata: the shape HolisticTraceAnalysis's parser expects.

Usage: ``python benchmarks/gen_traces.py [10MB 600k 100MB 1GB]`` (existing files are kept; ``--force`` remakes them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _table import print_table  # noqa: E402

from popprof.trace import synth  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
#: name -> number of training steps (each step has synth.events_per_step() events)
SIZES = {"10MB": 910, "600k": 6_977, "100MB": 9_100, "1GB": 116_280}


def trace_path(size: str) -> Path:
    return DATA / f"trace_{size}.json"


def ensure(size: str, *, force: bool = False) -> Path:
    """Generate the trace of ``size`` unless it exists (or ``force``); return its path."""
    path = trace_path(size)
    if force or not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        synth.write_chrome_trace(path, SIZES[size], seed=1, args="gpu")
        print(f"generated {path.name} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", metavar="SIZE",
                        help=f"which traces to make: {', '.join(SIZES)} (default: all)")
    parser.add_argument("--force", action="store_true", help="Remake traces that already exist.")
    args = parser.parse_args(argv)
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    rows = []
    for size in args.sizes or list(SIZES):
        path = ensure(size, force=args.force)
        rows.append([size, str(path.relative_to(ROOT)), f"{path.stat().st_size / 1e6:,.0f}",
                     f"{SIZES[size]:,}", f"{SIZES[size] * synth.events_per_step():,}"])
    print_table(["size", "file", "MB", "steps", "events (about)"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
