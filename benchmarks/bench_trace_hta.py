"""Benchmark: popprof against HolisticTraceAnalysis (HTA) loading one trace, side by side in one run.

The two loaders alternate (popprof, HTA, popprof, HTA, ...), each in a fresh
process, so both see the same machine load. popprof's load (``popprof.open``)
keeps everything the figures need: flows (``flows`` table), ``stream`` /
``correlation`` / ``device`` / ``rank`` columns, nesting and device categories.
HTA's load is, by default, what a user runs: ``TraceAnalysis(trace_dir=...)`` on a
directory holding the trace (parse, align, filter, index; ``--hta-load parse``
measures only its ``parse_trace_dataframe``). Peak memory: popprof's main process
plus its largest parse worker; HTA's process (plus its worker when it uses one).

Targets (issue 12): popprof at least 10x faster (wall) and at most a third of
HTA's peak memory on a 600,000-event trace.

Usage::

    bash benchmarks/setup_hta.sh          # once: HTA in benchmarks/.venv-hta (or pass --hta-python)
    python benchmarks/bench_trace_hta.py                  # 600k events, 3 runs each
    python benchmarks/bench_trace_hta.py --size 100MB --repeat 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from bench_trace import COMMON, HTA, POPPROF, run  # noqa: E402
from gen_traces import SIZES, ensure  # noqa: E402

DEFAULT_HTA_PYTHON = os.environ.get("HTA_PYTHON", str(HERE / ".venv-hta" / "bin" / "python"))


HTA_ANALYSIS = COMMON + """
import logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
base = rss()
cpu0, start = cpu(), time.perf_counter()
analysis = TraceAnalysis(trace_dir={folder!r})
seconds, cpu_s = time.perf_counter() - start, cpu() - cpu0
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
peak = own + max(0, worker - base)
events = sum(len(df) for df in analysis.t.traces.values())
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_s, "peak_bytes": peak, "extra_bytes": peak - base,
                  "events": events, "parts": 1}}))
"""


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--size", default="600k", choices=list(SIZES), help="Generated trace (default 600k events).")
    parser.add_argument("--repeat", type=int, default=3, help="Runs of each loader (alternating).")
    parser.add_argument("--hta-python", default=DEFAULT_HTA_PYTHON,
                        help="Interpreter of a virtualenv with HolisticTraceAnalysis (env HTA_PYTHON).")
    parser.add_argument("--hta-max-gib", type=float, default=8.0, help="Address-space cap for the HTA runs.")
    parser.add_argument("--timeout", type=float, default=1800.0, help="Seconds per run.")
    parser.add_argument("--hta-load", choices=["analysis", "parse"], default="analysis",
                        help="HTA's TraceAnalysis(trace_dir=...) (default) or only its parse_trace_dataframe.")
    parser.add_argument("--json", type=Path, help="Write the results here.")
    args = parser.parse_args()
    if not Path(args.hta_python).exists():
        sys.exit(f"no HTA interpreter at {args.hta_python}: run `bash benchmarks/setup_hta.sh` or pass --hta-python")
    path = ensure(args.size)
    print(f"{path.name}: {path.stat().st_size / 1e6:,.0f} MB; load average before: {_load_average()}",
          file=sys.stderr)
    popprof_code = POPPROF.format(root=str(ROOT), path=str(path)).replace(
        "from popprof.readers import chrome_trace", "import popprof").replace(
        "chrome_trace.read(Path(", "popprof.open((")
    if args.hta_load == "parse":
        hta_code = HTA.format(path=str(path), backend="")
    else:
        folder = path.parent / f"hta_{path.stem}"
        folder.mkdir(exist_ok=True)
        link = folder / path.name
        if not link.exists():
            link.symlink_to(path)
        hta_code = HTA_ANALYSIS.format(folder=str(folder))
    runs: dict[str, list[dict]] = {"popprof": [], "hta": []}
    for i in range(args.repeat):
        for name, python, code, cap in (("popprof", sys.executable, popprof_code, None),
                                        ("hta", args.hta_python, hta_code, int(args.hta_max_gib * 2**30))):
            try:
                result = run(python, code, args.timeout, cap)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                sys.exit(f"{name} run {i + 1} failed: {exc}")
            runs[name].append(result)
            print(f"  run {i + 1} {name:<8} {result['seconds']:7.2f} s  cpu {result['cpu_seconds']:7.2f} s  "
                  f"peak {result['peak_bytes'] / 2**30:5.2f} GiB  {result['events']:,} events", file=sys.stderr)
    med = {name: {key: statistics.median(r[key] for r in rs) for key in ("seconds", "cpu_seconds", "peak_bytes")}
           for name, rs in runs.items()}
    p, h = med["popprof"], med["hta"]
    speed = h["seconds"] / p["seconds"]
    memory = p["peak_bytes"] / h["peak_bytes"]
    print(f"\nload average after: {_load_average()}")
    print("| trace | events | popprof wall s (CPU s) | popprof peak GiB | HTA wall s (CPU s) | HTA peak GiB | "
          "speed-up | popprof / HTA peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.size} ({path.stat().st_size / 1e6:,.0f} MB) | {runs['popprof'][0]['events']:,} | "
          f"{p['seconds']:.2f} ({p['cpu_seconds']:.2f}) | {p['peak_bytes'] / 2**30:.2f} | "
          f"{h['seconds']:.2f} ({h['cpu_seconds']:.2f}) | {h['peak_bytes'] / 2**30:.2f} | {speed:.1f}x | "
          f"{memory:.2f} |")
    print(f"\ntargets: >= 10x faster: {'met' if speed >= 10 else 'NOT met'} ({speed:.1f}x); "
          f"<= 1/3 of HTA's peak: {'met' if memory <= 1 / 3 else 'NOT met'} ({memory:.2f})")
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "runs": runs, "median": med}, indent=2))


if __name__ == "__main__":
    main()
