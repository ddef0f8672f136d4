"""Benchmark: per-device figures on a 10M-event trace, and an 8-rank directory loading on every core.

Two measurements, each in a fresh process (peak RSS from ``getrusage``; for the
directory the largest worker's peak is reported too):

- ``figures``: load ``benchmarks/data/kineto_1GB.json`` (10 million events in Kineto's
  layout, flows and correlation included, generated on first use), then compute every per-device
  figure (``device_breakdown``,
  ``kernel_breakdown``, ``idle_breakdown``, ``launch_delays``). Target: the figures
  in under 10 s on top of the load.
- ``ranks``: 8 rank traces of ~100 MB each (``benchmarks/data/kineto_ranks8/rank-N.json``)
  opened as one profile three ways: with the workers (one whole file per worker, as many
  workers as cores: the default), files in turn (each split in two parts on two
  processes), and all in one process; CPU time / wall time shows how many cores were
  used (on a machine shared with other jobs it shows the share the run got).

Usage::

    python benchmarks/bench_trace_devices.py figures        # needs ~2.5 GiB; the first run also writes
                                                            # benchmarks/data/kineto_1GB.popprof, later runs load it
    python benchmarks/bench_trace_devices.py ranks [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from _table import doc_parser  # noqa: E402
from gen_traces import DATA, SIZES, STEPS, ensure  # noqa: E402

COMMON = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
def peaks():
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""

FIGURES = (
    COMMON
    + """
import os
import popprof
from popprof.metrics import devices
bundle = {bundle!r}
t0, c0 = time.perf_counter(), cpu()
profile = popprof.open(bundle if os.path.isdir(bundle) else {path!r})
load_s, load_cpu = time.perf_counter() - t0, cpu() - c0
load_peak = peaks()[0]
t1, own0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
table = devices.device_breakdown(profile)
kinds = devices.kernel_breakdown(profile)
idle = devices.idle_breakdown(profile)
launches = devices.launch_delays(profile)
figures_s = time.perf_counter() - t1
own1 = resource.getrusage(resource.RUSAGE_SELF)
figures_cpu = own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime
source = "bundle" if os.path.isdir(bundle) else "json"
if source == "json":  # later runs load this bundle (seconds) instead of the JSON (minutes)
    popprof.export(profile, bundle)
print(json.dumps({{"events": len(profile.events), "load_seconds": load_s, "load_cpu_seconds": load_cpu,
                  "load_peak_bytes": load_peak, "figures_seconds": figures_s, "figures_cpu_seconds": figures_cpu,
                  "source": source, "peak_bytes": peaks()[0],
                  "worker_peak_bytes": peaks()[1], "devices": len(table), "launches": len(launches),
                  "idle_rows": len(idle), "kernel_type_rows": len(kinds)}}))
"""
)

RANKS = (
    COMMON
    + """
import popprof
from popprof.readers import rank_dir
mode = {mode!r}
if mode != "workers":
    rank_dir.PARALLEL_MIN_BYTES = 1 << 62
t0, c0 = time.perf_counter(), cpu()
profile = popprof.open({path!r}, parallel=mode != "one process")
wall, used = time.perf_counter() - t0, cpu() - c0
own, worker = peaks()
print(json.dumps({{"events": len(profile.events), "ranks": sorted(set(profile.events["rank"].dropna().tolist())),
                  "seconds": wall, "cpu_seconds": used, "peak_bytes": own, "worker_peak_bytes": worker}}))
"""
)


def _run(code: str, timeout: float) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if done.returncode != 0:
        sys.exit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "benchmark run failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def ensure_ranks(count: int = 8) -> Path:
    """``count`` rank traces of about 100 MB each (different seeds), generated once."""
    from popprof.testing import trace_synth as synth

    folder = DATA / f"kineto_ranks{count}"
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(count):
        path = folder / f"rank-{rank}.json"
        if not path.exists():
            start = time.perf_counter()
            synth.write_chrome_trace(
                path,
                STEPS,
                seed=100 + rank,
                args="kineto",
                layers=SIZES["100MB"],
                rank=rank,
                world_size=count,
            )
            print(
                f"generated {path.name}: {path.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - start:.0f} s",
                file=sys.stderr,
            )
    return folder


def figures(args: argparse.Namespace) -> None:
    path = ensure("1GB")
    print(f"{path.name}: {path.stat().st_size / 1e9:.2f} GB; load average {_load_average()}", file=sys.stderr)
    bundle = DATA / "kineto_1GB.popprof"
    runs = [
        _run(FIGURES.format(root=str(ROOT), path=str(path), bundle=str(bundle)), args.timeout)
        for _ in range(args.repeat)
    ]
    for r in runs:
        print(
            f"  load ({r['source']}) {r['load_seconds']:.1f} s (cpu {r['load_cpu_seconds']:.1f} s), figures "
            f"{r['figures_seconds']:.2f} s (cpu {r['figures_cpu_seconds']:.2f} s), "
            f"peak {r['peak_bytes'] / 2**30:.2f} GiB",
            file=sys.stderr,
        )
    fig = statistics.median(r["figures_seconds"] for r in runs)
    fig_cpu = statistics.median(r["figures_cpu_seconds"] for r in runs)
    r = runs[0]
    print(
        "| events | load s (CPU s) | per-device figures s (CPU s) | peak GiB (after load) | devices | launches |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {r['events']:,} | {statistics.median(x['load_seconds'] for x in runs):.1f} "
        f"({statistics.median(x['load_cpu_seconds'] for x in runs):.1f}) | {fig:.2f} ({fig_cpu:.2f}) | "
        f"{max(x['peak_bytes'] for x in runs) / 2**30:.2f} ({r['load_peak_bytes'] / 2**30:.2f}) | "
        f"{r['devices']} | {r['launches']:,} |"
    )
    print(
        f"\ntarget: figures under 10 s on top of the load: {'met' if fig < 10 else 'NOT met'} ({fig:.2f} s); "
        f"load average after: {_load_average()}"
    )


def ranks(args: argparse.Namespace) -> None:
    folder = ensure_ranks(8)
    size = sum(f.stat().st_size for f in folder.glob("rank-*.json"))
    print(f"{folder}: 8 files, {size / 1e6:,.0f} MB; load average {_load_average()}", file=sys.stderr)
    rows = {}
    for label in ("workers", "files in turn", "one process"):
        runs = [
            _run(RANKS.format(root=str(ROOT), path=str(folder), mode=label), args.timeout)
            for _ in range(args.repeat)
        ]
        rows[label] = {k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu_seconds")}
        rows[label].update(
            events=runs[0]["events"],
            ranks=runs[0]["ranks"],
            peak_bytes=max(r["peak_bytes"] for r in runs),
            worker_peak_bytes=max(r["worker_peak_bytes"] for r in runs),
        )
        print(
            f"  {label:<14} {rows[label]['seconds']:.1f} s wall, {rows[label]['cpu_seconds']:.1f} s CPU, "
            f"peak {rows[label]['peak_bytes'] / 2**30:.2f} GiB "
            f"(+ worker {rows[label]['worker_peak_bytes'] / 2**30:.2f})",
            file=sys.stderr,
        )
    print(
        "| load | events | ranks | wall s | CPU s | cores used (CPU / wall) | main peak GiB | largest worker GiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, r in rows.items():
        print(
            f"| {label} | {r['events']:,} | {len(r['ranks'])} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
            f"{r['cpu_seconds'] / r['seconds']:.2f} | {r['peak_bytes'] / 2**30:.2f} | "
            f"{r['worker_peak_bytes'] / 2**30:.2f} |"
        )
    print(
        f"\nspeed-up from the workers: {rows['one process']['seconds'] / rows['workers']['seconds']:.2f}x "
        f"over one process, {rows['files in turn']['seconds'] / rows['workers']['seconds']:.2f}x over files in "
        "turn (each split in two parts); "
        f"load average after: {_load_average()}"
    )


def main() -> None:
    parser = doc_parser(__doc__)
    parser.add_argument("what", choices=["figures", "ranks"], help="Which measurement.")
    parser.add_argument("--repeat", type=int, default=1, help="Runs (medians are printed).")
    parser.add_argument("--timeout", type=float, default=3600.0, help="Seconds per run.")
    args = parser.parse_args()
    figures(args) if args.what == "figures" else ranks(args)


if __name__ == "__main__":
    main()
