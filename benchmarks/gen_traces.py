"""Generate large PyTorch-profiler (kineto) Chrome traces into benchmarks/data/ (git-ignored).

Sizes (all trace events counted, flows included): ``10MB`` (~73,000 events), ``600k`` (600,000),
``100MB`` (~730,000) and ``1GB`` (10 million events, about 1.4 GB).
Traces come from :mod:`popprof.testing.trace_synth` with ``args="kineto"``, laid out like a real kineto trace:
the profiler records a few steps (``STEPS`` = 5 ``ProfilerStep#N``, as a profiler schedule's active
steps), so a larger trace is a larger model (more layers per step), not more steps; args on every
event (``External id``; ``correlation`` on the runtime call and on its kernel), ``ac2g`` flows from each
launch to its kernel / memcpy / memset, ``fwdbwd`` flows, GPU streams for compute and NCCL, host ops
on three threads, a memory counter, kineto's metadata, ``distributedInfo`` and the profiler's
bookkeeping span.

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

from popprof.testing import trace_synth as synth  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
#: profiler steps in every generated trace (a profiler schedule records a few active steps)
STEPS = 5
#: name -> layers per step (each step has synth.events_per_step(layers, "kineto") events)
SIZES = {"10MB": 582, "600k": 4_798, "100MB": 5_838, "1GB": 79_998}


def trace_path(size: str) -> Path:
    """Where the trace of ``size`` is generated (the ``kineto_`` prefix keeps older layouts apart)."""
    return DATA / f"kineto_{size}.json"


def ensure(size: str, *, force: bool = False) -> Path:
    """Generate the trace of ``size`` unless it exists (or ``force``); return its path."""
    path = trace_path(size)
    if force or not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        synth.write_chrome_trace(path, STEPS, seed=1, args="kineto", layers=SIZES[size])
        print(f"generated {path.name} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "sizes", nargs="*", metavar="SIZE", help=f"which traces to make: {', '.join(SIZES)} (default: all)"
    )
    parser.add_argument("--force", action="store_true", help="Remake traces that already exist.")
    args = parser.parse_args(argv)
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    rows = []
    for size in args.sizes or list(SIZES):
        path = ensure(size, force=args.force)
        rows.append(
            [
                size,
                str(path.relative_to(ROOT)),
                f"{path.stat().st_size / 1e6:,.0f}",
                f"{STEPS:,}",
                f"{SIZES[size]:,}",
                f"{STEPS * synth.events_per_step(SIZES[size], 'kineto'):,}",
            ]
        )
    print_table(["size", "file", "MB", "steps", "layers", "events (about)"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
