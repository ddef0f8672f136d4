"""Benchmark: deriving nesting (parent_id, depth) and pairing B/E events, on 10 million events.

Synthetic per-thread training-step shapes: 8 threads, each with steps holding
a few levels of nested ops and long runs of siblings (the worst case for pointer
jumping), plus GPU-stream-like flat sequences. Prints median seconds of
``--repeat`` runs and the peak traced memory.

Usage: ``python benchmarks/bench_trace_nesting.py [--events 10000000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _table import load_line, print_table  # noqa: E402

from popprof.trace import nesting  # noqa: E402
from popprof.trace.begin_end import match_begin_end  # noqa: E402


def make_events(n: int, threads: int = 8) -> tuple[np.ndarray, ...]:
    """Events of ``threads`` threads: steps of 1 parent + 20 children (+ 2 grandchildren each) or flat."""
    per_step = 1 + 20 * 3
    steps = n // per_step
    s = np.arange(steps, dtype=np.float64) * 1000.0
    parent_start, parent_dur = s, np.full(steps, 990.0)
    child = s[:, None] + np.arange(20) * 49.0
    child_start, child_dur = child.ravel(), np.full(steps * 20, 45.0)
    grand_start = (child[:, :, None] + np.array([1.0, 20.0])).ravel()
    grand_dur = np.full(steps * 40, 15.0)
    start = np.concatenate((parent_start, child_start, grand_start))
    dur = np.concatenate((parent_dur, child_dur, grand_dur))
    step = np.concatenate(
        (np.arange(steps), np.repeat(np.arange(steps), 20), np.repeat(np.arange(steps), 40))
    )
    tid = step % threads  # a whole step runs on one thread
    flat = tid >= threads // 2  # half the threads: flat GPU-stream-like sequences
    dur[flat] = 0.5
    return np.zeros(len(start), dtype=np.int64), tid.astype(np.int64), start, dur


def run_nesting(pid, tid, start, dur) -> int:
    order = nesting.sort_order(pid, tid, start, dur)
    p, t, s, d = pid[order], tid[order], start[order], dur[order]
    parent, depth = nesting.derive_nesting(nesting.thread_bounds(p, t), s, d)
    return int(depth.max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pid, tid, start, dur = make_events(args.events)
    print(f"{len(start):,} events", file=sys.stderr)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        depth = run_nesting(pid, tid, start, dur)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    run_nesting(pid, tid, start, dur)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rows = [
        [
            f"nesting (sort + derive) of {len(start):,} events",
            f"{statistics.median(times):.2f}",
            f"max depth {depth}",
            f"{peak / 2**20:,.0f}",
        ]
    ]
    # B/E pairing: every event as a B and an E
    n = min(len(start), args.events // 2)
    is_b = np.concatenate((np.ones(n, bool), np.zeros(n, bool)))
    ts = np.concatenate((start[:n], start[:n] + dur[:n]))
    p2, t2 = np.concatenate((pid[:n], pid[:n])), np.concatenate((tid[:n], tid[:n]))
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        pairs = match_begin_end(is_b, p2, t2, ts)
        times.append(time.perf_counter() - t0)
    rows.append(
        [
            f"B/E pairing of {2 * n:,} events",
            f"{statistics.median(times):.2f}",
            f"{len(pairs.begin):,} pairs, {len(pairs.unmatched_end):,} unmatched E",
            "",
        ]
    )
    print_table(
        ["what", "wall s (median)", "result", "peak MiB (allocated)"],
        rows,
        title=f"median of {args.repeat} runs; {load_line()}",
    )


if __name__ == "__main__":
    main()
