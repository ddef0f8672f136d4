"""Benchmark: loading large Chrome traces, popprof against HolisticTraceAnalysis (HTA).

For each generated trace (``benchmarks/gen_traces.py``, Kineto's layout: 10MB, 600k, 100MB,
1GB = 10M events) this runs each loader in a fresh subprocess ``--repeat`` times
and prints the median wall time and the peak resident memory:

- popprof: ``popprof.readers.chrome.read`` (events, threads, counters,
  nesting and device categories; a large file is parsed by the reading process and
  one worker, so its peak is the main process's plus the worker's growth);
- HTA: ``hta.common.trace_parser.parse_trace_dataframe`` with HTA's default
  parser backend (json) and, with ``--hta-ijson``, its IJSON_BATCH_AND_COMPRESS
  backend; HTA runs in benchmarks/.venv-hta (``bash benchmarks/setup_hta.sh``).

Usage::

    python benchmarks/bench_trace.py                      # all sizes, popprof and HTA
    python benchmarks/bench_trace.py --sizes 10MB 100MB --repeat 5
    python benchmarks/bench_trace.py --sizes 1GB --repeat 1 --no-hta

Results are printed as a Markdown table (copy into docs/traces.md) and, with
``--json FILE``, saved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from gen_traces import SIZES, ensure  # noqa: E402

HTA_PYTHON = HERE / ".venv-hta" / "bin" / "python"

COMMON = """
import json, resource, sys, time
def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
def own_cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    return s.ru_utime + s.ru_stime
"""

# peak = the main process's peak plus what a forked parse worker added above the baseline it shared
POPPROF = (
    COMMON
    + """
sys.path.insert(0, {root!r})
from pathlib import Path
from popprof.readers import chrome
import ijson, orjson
base = rss()
cpu0, own0, start = cpu(), own_cpu(), time.perf_counter()
profile = chrome.read(Path({path!r}))
seconds, cpu_s, main_cpu = time.perf_counter() - start, cpu() - cpu0, own_cpu() - own0
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
extra = (own - base) + max(0, worker - base)
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_s, "main_cpu_seconds": main_cpu,
                  "peak_bytes": base + extra, "extra_bytes": extra,
                  "events": len(profile.events), "parts": int(profile.meta.get("chrome.parse_parts", 1))}}))
"""
)

HTA = (
    COMMON
    + """
import logging
logging.disable(logging.WARNING)
from hta.common.trace_parser import parse_trace_dataframe
from hta.configs.parser_config import ParserBackend, ParserConfig
cfg = ParserConfig.get_default_cfg()
backend = {backend!r}
if backend:
    cfg.set_parser_backend(ParserBackend[backend])
base = rss()
cpu0, start = cpu(), time.perf_counter()
meta, df, symbols = parse_trace_dataframe({path!r}, cfg)
seconds, cpu_s = time.perf_counter() - start, cpu() - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_s, "peak_bytes": peak, "extra_bytes": peak - base,
                  "events": len(df), "parts": 1}}))
"""
)


def _limit(max_bytes: int | None):
    """A preexec_fn capping the child's address space (a runaway loader fails instead of hitting the OOM killer)."""
    if not max_bytes:
        return None

    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))

    return apply


def run(python: str, code: str, timeout: float, max_bytes: int | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; return the JSON it prints last."""
    done = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        preexec_fn=_limit(max_bytes),
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(
    name: str, python: str, code: str, repeat: int, timeout: float, max_bytes: int | None = None
) -> dict:
    try:
        runs = [run(python, code, timeout, max_bytes) for _ in range(repeat)]
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"  {name:<22} FAILED: {exc}", file=sys.stderr)
        return {"loader": name, "failed": str(exc)}
    result = {
        "loader": name,
        "seconds": statistics.median(r["seconds"] for r in runs),
        "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
        "peak_bytes": statistics.median(r["peak_bytes"] for r in runs),
        "extra_bytes": statistics.median(r["extra_bytes"] for r in runs),
        "events": runs[0]["events"],
        "parts": runs[0]["parts"],
        "runs": [r["seconds"] for r in runs],
    }
    if "main_cpu_seconds" in runs[0]:
        main = statistics.median(r["main_cpu_seconds"] for r in runs)
        workers = result["cpu_seconds"] - main
        # on two free cores: the workers run side by side, then the main process builds the tables
        result["main_cpu_seconds"] = main
        result["idle_estimate_seconds"] = main + (workers / runs[0]["parts"] if runs[0]["parts"] > 1 else 0.0)
    estimate = (
        f", main {result['main_cpu_seconds']:.1f} s, ~{result['idle_estimate_seconds']:.1f} s on 2 free cores"
        if "idle_estimate_seconds" in result
        else ""
    )
    print(
        f"  {name:<22} {result['seconds']:8.2f} s (cpu {result['cpu_seconds']:.2f} s{estimate})  "
        f"peak {result['peak_bytes'] / 2**30:6.2f} GiB (+{result['extra_bytes'] / 2**30:.2f} for the load)  "
        f"{result['events']:>12,} events  runs={[round(s, 1) for s in result['runs']]}",
        file=sys.stderr,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-hta", action="store_true", help="Only measure popprof.")
    parser.add_argument("--hta-ijson", action="store_true", help="Also measure HTA's ijson backend.")
    parser.add_argument("--timeout", type=float, default=3600.0, help="Seconds per run.")
    parser.add_argument("--json", type=Path, help="Write the results here.")
    parser.add_argument(
        "--hta-max-gib",
        type=float,
        default=16.0,
        help="Address-space cap for HTA runs (it fails with MemoryError beyond it).",
    )
    args = parser.parse_args()
    have_hta = HTA_PYTHON.exists() and not args.no_hta
    if not have_hta and not args.no_hta:
        print(
            "HTA venv missing: run `bash benchmarks/setup_hta.sh` (measuring popprof only)", file=sys.stderr
        )
    results = []
    for size in args.sizes:
        path = ensure(size)
        print(f"{size}: {path.stat().st_size / 1e6:,.0f} MB", file=sys.stderr)
        row = {"size": size, "bytes": path.stat().st_size}
        row["popprof"] = measure(
            "popprof",
            sys.executable,
            POPPROF.format(root=str(ROOT), path=str(path)),
            args.repeat,
            args.timeout,
        )
        if have_hta:
            cap = int(args.hta_max_gib * 2**30)
            row["hta"] = measure(
                "HTA (json backend)",
                str(HTA_PYTHON),
                HTA.format(path=str(path), backend=""),
                args.repeat,
                args.timeout,
                cap,
            )
            if args.hta_ijson:
                row["hta_ijson"] = measure(
                    "HTA (ijson backend)",
                    str(HTA_PYTHON),
                    HTA.format(path=str(path), backend="IJSON_BATCH_AND_COMPRESS"),
                    args.repeat,
                    args.timeout,
                    cap,
                )
        results.append(row)
    print(
        "| trace | events | loader | wall s | CPU s | peak GiB | of which the load | HTA/popprof wall (CPU) | "
        "popprof/HTA peak (load only) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for row in results:
        p = row["popprof"]
        for key in ("popprof", "hta", "hta_ijson"):
            r = row.get(key)
            if r is None:
                continue
            label = (
                f"| {row['size']} ({row['bytes'] / 1e6:,.0f} MB) | {p.get('events', 0):,} | {r['loader']} |"
            )
            if "failed" in r:
                print(f"{label} failed: {r['failed']} | | | | | |")
                continue
            ratio = (
                ""
                if key == "popprof" or "seconds" not in p
                else (
                    f"{r['seconds'] / p['seconds']:.1f}x ({r['cpu_seconds'] / p['cpu_seconds']:.1f}x) | "
                    f"{p['peak_bytes'] / r['peak_bytes']:.2f} "
                    f"({p['extra_bytes'] / r['extra_bytes']:.2f})"
                )
            )
            print(
                f"{label} {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['peak_bytes'] / 2**30:.2f} | "
                f"{r['extra_bytes'] / 2**30:.2f} | {ratio or ' | '} |"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
