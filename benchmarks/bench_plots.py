"""Time every plot kind on a POD64-sized profile: 64 Mk2 IPUs (94,208 tiles), 200,000 execution steps.

    python benchmarks/bench_plots.py [--repeat 3] [--ipus 64] [--steps 200000] [--events 1000000]
                                     [--allocations 500000] [--kinds device-memory,timeline]

Builds the profile with ``popprof.testing.synth`` (plus a synthetic trace of
``--events`` host and device events for the timeline, and one of ``--allocations``
allocator events, each under its operator, over 50 profiler steps for the
device memory; each run of that kind on a fresh profile, so it includes
finding the curve and the peak), then for each kind
draws the figure and saves it as a PNG (100 dpi), ``--repeat`` times, and
prints the median wall time, the median CPU time, and the extra memory the
plot allocated at its peak (tracemalloc, one extra run). Peak RSS of the whole
process and the load average are printed at the end. Target: every kind in
a few seconds.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from popprof import plots
from popprof.model.profile import Profile  # noqa: E402
from popprof.testing import synth  # noqa: E402


def trace_events(count: int, seed: int = 0) -> pd.DataFrame:
    """``count`` events: 8 host threads with nested events, a device lane with gaps (vectorised)."""
    rng = np.random.default_rng(seed)
    host = count // 2
    dev = count - host
    threads = rng.integers(0, 8, host)
    start = np.sort(rng.uniform(0, 60e6, host))
    dur = rng.exponential(40.0, host)
    depth = (rng.random(host) < 0.5).astype(np.int16)
    dstart = np.sort(rng.uniform(0, 60e6, dev))
    ddur = rng.exponential(50.0, dev)
    categories = np.array(["compute", "exchange", "host_io", "sync"])[rng.integers(0, 4, dev)]
    return pd.DataFrame(
        {
            "event_id": np.arange(count),
            "pid": np.r_[np.full(host, 100), np.full(dev, 1)],
            "tid": np.r_[threads + 1, np.zeros(dev, dtype=np.int64)],
            "depth": np.r_[depth, np.zeros(dev, np.int16)],
            "name": pd.Categorical(
                np.r_[
                    np.array([f"op_{i % 50}" for i in range(50)])[rng.integers(0, 50, host)],
                    np.array(["kernel"] * dev),
                ]
            ),
            "channel": "bench",
            "start_us": np.r_[start, dstart],
            "dur_us": np.r_[dur, ddur],
            "device_category": pd.Categorical(np.r_[np.full(host, None, dtype=object), categories]),
        }
    )


def memory_trace(count: int, seed: int = 0) -> list[Profile]:
    """A trace of ``count`` operators each allocating or freeing one block on ``gpu:0`` (a ``[memory]``
    event under it, the allocator's totals given) and 50 ``ProfilerStep#N`` spans, growing a little per step
    (a leak), as fresh profiles (tables shared, caches not): one per call of :func:`measure`'s runs."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(1, 64, count) * 1 << 20
    blocks = np.where(rng.random(count) < 0.5, blocks, -blocks) + (1 << 12)  # a 4 KiB leak per operator
    total = np.cumsum(blocks)
    total += (1 << 30) - min(int(total.min()), 0)  # in use never below 1 GiB
    start = np.arange(count, dtype=np.float64) * 10.0
    steps = 50
    bounds = np.linspace(0, count * 10.0, steps + 1)
    n = 2 * count + steps
    events = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "pid": 1,
            "tid": 1,
            "depth": np.r_[np.ones(count), np.full(count, 2), np.zeros(steps)].astype(np.int16),
            "parent_id": np.r_[np.full(count, -1), np.arange(count), np.full(steps, -1)],
            "name": pd.Categorical(
                np.r_[
                    np.full(count, "aten::addmm"),
                    np.full(count, "[memory]"),
                    [f"ProfilerStep#{k}" for k in range(steps)],
                ]
            ),
            "channel": np.r_[
                np.full(count, "cpu_op"),
                np.full(count, "cpu_instant_event"),
                np.full(steps, "user_annotation"),
            ],
            "start_us": np.r_[start, start + 1.0, bounds[:-1]],
            "dur_us": np.r_[np.full(count, 5.0), np.zeros(count), np.diff(bounds)],
        }
    )
    allocations = pd.DataFrame(
        {
            "event_id": np.arange(count, 2 * count),
            "pid": 1,
            "tid": 1,
            "ts_us": start + 1.0,
            "device": "gpu:0",
            "bytes": blocks,
            "total_allocated": total,
            "total_reserved": np.maximum.accumulate(total) + (1 << 28),
        }
    )
    return [Profile("memory", {"events": events, "allocations": allocations}) for _ in range(8)]


def measure(func, repeat: int) -> tuple[float, float, float]:
    """Median wall and CPU seconds over ``repeat`` runs, and the tracemalloc peak (MiB) of one more run."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        func()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    tracemalloc.start()
    func()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return statistics.median(walls), statistics.median(cpus), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ipus", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--liveness-steps", type=int, default=200_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--allocations", type=int, default=500_000)
    parser.add_argument("--kinds", default=None, help="comma-separated kinds to time (default: all)")
    args = parser.parse_args()

    t0 = time.perf_counter()
    profile = synth.make_profile(
        num_ipus=args.ipus,
        num_steps=args.steps,
        num_liveness_steps=args.liveness_steps,
        num_programs=2_000,
        oom_tiles=20,
        hot_tiles=200,
        exchange_heavy=(0.40, 0.45),
        sensitive=False,
        seed=7,
    )
    trace = Profile("trace", {"events": trace_events(args.events)})
    fresh = memory_trace(args.allocations)[: args.repeat + 1]
    print(
        f"built {profile!r}, a trace of {args.events:,} events and one of {args.allocations:,} allocator "
        f"events in {time.perf_counter() - t0:.1f} s"
    )

    exchange_phase = (int(args.steps * 0.40), int(args.steps * 0.45))
    stalls = [(10e6, 10.5e6), (31e6, 31.8e6), (50e6, 50.2e6)]
    cases = {
        "memory": lambda: plots.tile_memory(profile),
        "histogram": lambda: plots.tile_histogram(profile),
        "tilemap": lambda: plots.tile_map(profile),
        "liveness": lambda: plots.liveness(profile),
        "execution": lambda: plots.execution(profile, phases=[exchange_phase]),
        "timeline": lambda: plots.timeline(trace, stalls=stalls),
        "device-memory": lambda: plots.device_memory_timeline(fresh.pop()),
    }
    print(
        f"\n{'kind':<13} {'wall s (median)':>16} {'cpu s':>8} {'peak MiB':>9}   (plot + PNG at 100 dpi, "
        f"{args.repeat} runs)"
    )
    chosen = args.kinds.split(",") if args.kinds else list(cases)
    for kind, make in ((k, cases[k]) for k in chosen):

        def run(make=make) -> None:
            fig = make()
            fig.savefig(io.BytesIO(), format="png", dpi=100)

        wall, cpu, peak = measure(run, args.repeat)
        print(f"{kind:<13} {wall:>16.2f} {cpu:>8.2f} {peak:>9.1f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\npeak RSS of the process (profile + trace + plots): {rss:,.0f} MiB; "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
