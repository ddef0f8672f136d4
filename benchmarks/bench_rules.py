"""Benchmark: all rules on a 16-IPU, 200,000-step synthetic profile plus a 10-million-event trace.

Run: ``python benchmarks/bench_rules.py [--repeat 3] [--events 10000000] [--steps 200000] [--ipus 16]``

Prints the build times (not part of the budget), the median time of each
rule and of a whole ``check()`` per profile over ``--repeat`` runs, and the
process's peak resident memory. Target: all rules on both under 15 s.
Every run starts with cold caches, so each trace rule's time includes the
pass over the events table it would pay alone; ``check()`` pays it once.

The trace is generated directly with numpy (no file parsing): a training
loop where, per step, a host data-loader wait (5 % of steps stall for
20 ms), forward ops launching kernels, a host wait for the device, an
all-reduce and sync on the device, and a host optimizer step while the
device idles; a data-loader worker thread runs alongside.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _table import load_line, print_table  # noqa: E402

from popprof.model.profile import Profile  # noqa: E402
from popprof.rules import RULES, check  # noqa: E402
from popprof.rules.base import plan  # noqa: E402
from popprof.trace.intervals import clear_cache  # noqa: E402

OPS_PER_STEP = 48


def make_trace_profile(num_events: int = 10_000_000, seed: int = 0) -> Profile:
    """A trace Profile with about ``num_events`` events of a host-driven training loop."""
    rng = np.random.default_rng(seed)
    host_per_step = OPS_PER_STEP + 6  # step, loader wait, forward, ops, sync wait, optimizer, worker
    dev_per_step = OPS_PER_STEP + 3  # memcpy, kernels, all-reduce, sync
    steps = max(1, num_events // (host_per_step + dev_per_step))
    load = np.where(rng.random(steps) < 0.05, 20_000.0, 200.0)
    kdur = rng.uniform(30, 80, (steps, OPS_PER_STEP))
    kernels_len = (kdur + 2).sum(axis=1)
    opt = rng.uniform(1_200, 1_800, steps)
    # Step length: load, memcpy and launch lead-in, kernels, all-reduce and sync, optimizer, a small pause.
    length = load + 60 + kernels_len + 2 + 300 + 20 + 5 + opt + 10
    t = 1_000.0 + np.concatenate([[0.0], np.cumsum(length)[:-1]])
    fwd0 = t + load
    kstart = (
        fwd0[:, None]
        + 60
        + np.concatenate([np.zeros((steps, 1)), np.cumsum(kdur + 2, axis=1)[:, :-1]], axis=1)
    )
    kend = kstart + kdur
    comp_end = kend[:, -1]
    ar_start = comp_end + 2
    sync_start = ar_start + 300
    opt_start = sync_start + 20 + 5
    step_end = opt_start + opt
    op_start = fwd0[:, None] + 5 + 10 * np.arange(OPS_PER_STEP)[None, :]
    fwd_end = op_start[:, -1] + 8

    # Host events of one step in a fixed order; ids are assigned step by step.
    base = np.arange(steps)[:, None] * (host_per_step + dev_per_step)
    host_names = (
        ["ProfilerStep", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "forward"]
        + ["aten::linear"] * OPS_PER_STEP
        + ["cudaStreamSynchronize", "Optimizer.step#Adam.step", "worker.fetch_batch"]
    )
    h_start = np.column_stack([t, t, fwd0, op_start, fwd_end, opt_start, t])
    h_end = np.column_stack([step_end, fwd0, fwd_end, op_start + 8, sync_start + 20, step_end, fwd0 - 5])
    h_depth = np.array([0, 1, 1] + [2] * OPS_PER_STEP + [1, 1, 0], dtype=np.int16)
    h_parent_local = np.array([-1, 0, 0] + [2] * OPS_PER_STEP + [0, 0, -1])
    h_tid = np.array([1, 1, 1] + [1] * OPS_PER_STEP + [1, 1, 3])
    h_ids = base + np.arange(host_per_step)[None, :]
    h_parent = np.where(h_parent_local[None, :] >= 0, base + h_parent_local[None, :], -1)

    d_start = np.column_stack([fwd0 + 5, kstart, ar_start, sync_start])
    d_end = np.column_stack([fwd0 + 55, kend, sync_start, sync_start + 20])
    d_names = (
        ["Memcpy HtoD (Pageable -> Device)"]
        + ["ampere_sgemm_128x64_tn"] * OPS_PER_STEP
        + ["ncclKernel_AllReduce_RING_LL_Sum_float", "cudaDeviceSynchronize (device)"]
    )
    d_cats = ["host_io"] + ["compute"] * OPS_PER_STEP + ["exchange", "sync"]
    d_ids = base + host_per_step + np.arange(dev_per_step)[None, :]

    n_host, n_dev = steps * host_per_step, steps * dev_per_step
    vocabulary = list(dict.fromkeys(host_names + d_names))
    code = {name: i for i, name in enumerate(vocabulary)}
    names = pd.Categorical.from_codes(
        np.concatenate(
            [np.tile([code[n] for n in host_names], steps), np.tile([code[n] for n in d_names], steps)]
        ),
        categories=pd.Index(vocabulary, dtype="str"),
    )
    device_categories = ["compute", "exchange", "host_io", "sync", "other"]
    cats = pd.Categorical.from_codes(
        np.concatenate([np.full(n_host, -1), np.tile([device_categories.index(c) for c in d_cats], steps)]),
        categories=pd.Index(device_categories, dtype="str"),
    )
    parent = np.concatenate([h_parent.ravel(), np.full(n_dev, -1)])
    events = pd.DataFrame(
        {
            "event_id": np.concatenate([h_ids.ravel(), d_ids.ravel()]).astype(np.int64),
            "pid": np.concatenate([np.full(n_host, 100), np.zeros(n_dev, dtype=np.int64)]).astype(np.int64),
            "tid": np.concatenate([np.tile(h_tid, steps), np.full(n_dev, 7)]).astype(np.int64),
            "parent_id": pd.arrays.IntegerArray(
                np.where(parent >= 0, parent, 0).astype(np.int64), parent < 0
            ),
            "depth": np.concatenate([np.tile(h_depth, steps), np.zeros(n_dev, dtype=np.int16)]),
            "name": names,
            "channel": pd.Categorical.from_codes(
                np.repeat(np.array([0, 1], dtype=np.int8), [n_host, n_dev]),
                categories=pd.Index(["cpu_op", "kernel"], dtype="str"),
            ),
            "start_us": np.concatenate([h_start.ravel(), d_start.ravel()]),
            "dur_us": np.concatenate([(h_end - h_start).ravel(), (d_end - d_start).ravel()]),
            "device_category": cats,
        }
    )
    threads = pd.DataFrame(
        {
            "pid": [100, 100, 0],
            "tid": [1, 3, 7],
            "process_name": ["python train.py", "python train.py", "GPU 0"],
            "thread_name": ["MainThread", "pt_data_worker", "stream 7"],
        }
    )
    return Profile("trace", {"events": events, "threads": threads}, source="bench:numpy-trace")


def timed(func, repeat: int) -> tuple[float, float, object]:
    """Median wall and CPU time of ``func`` over ``repeat`` runs, each with cold trace caches."""
    wall, cpu, result = [], [], None
    for _ in range(repeat):
        clear_cache()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = func()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--ipus", type=int, default=16)
    args = parser.parse_args(argv)

    from popprof.testing.synth import make_profile

    start = time.perf_counter()
    ipu = make_profile(
        name="ipu16",
        num_ipus=args.ipus,
        num_steps=args.steps,
        num_programs=4_000,
        num_liveness_steps=20_000,
        oom_tiles=3,
        host_stall=(0.2, 0.25),
    )
    print(
        f"built IPU profile: {args.ipus} IPUs, {len(ipu.steps):,} step rows, {len(ipu.tiles):,} tiles "
        f"in {time.perf_counter() - start:.1f} s"
    )
    start = time.perf_counter()
    trace = make_trace_profile(args.events)
    print(f"built trace: {len(trace.events):,} events in {time.perf_counter() - start:.1f} s")

    _, params = plan()
    grand = grand_cpu = 0.0
    rows = []
    for profile in (ipu, trace):
        for rule in RULES.values():
            if rule.missing_reason(profile) is not None:
                continue
            wall, cpu, found = timed(lambda r=rule, p=profile: _run(r, p, params[r.id]), args.repeat)
            rows.append([profile.name, rule.id, f"{wall * 1000:.1f}", f"{cpu * 1000:.1f}", found])
        wall, cpu, findings = timed(lambda p=profile: check(p), args.repeat)
        grand, grand_cpu = grand + wall, grand_cpu + cpu
        rows.append(
            [profile.name, "check(): all rules", f"{wall * 1000:.1f}", f"{cpu * 1000:.1f}", repr(findings)]
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print_table(
        ["profile", "rule", "wall ms (median)", "CPU ms (median)", "result"],
        rows,
        title=f"median of {args.repeat} run(s); {load_line()}",
    )
    print_table(
        ["figure", "value", "target"],
        [
            [
                "all rules on both profiles, wall s",
                f"{grand:.2f}",
                "< 15 s: " + ("met" if grand < 15 else "NOT met"),
            ],
            ["all rules on both profiles, CPU s", f"{grand_cpu:.2f}", ""],
            ["peak RSS MiB", f"{peak:,.0f}", ""],
        ],
    )
    return 0 if grand < 15 else 1


def _run(rule, profile, params) -> str:
    from popprof.rules import NotEvaluated
    from popprof.rules.base import RuleContext
    from popprof.rules.platform import platform_of

    try:
        found = rule.func(profile, RuleContext(rule, params, platform_of(profile)))
    except NotEvaluated as exc:
        return f"not evaluated: {exc}"
    return ", ".join(f.severity for f in found) or "no findings"


if __name__ == "__main__":
    sys.exit(main())
