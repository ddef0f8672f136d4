"""Benchmark: popprof's rocprofv3 reader against AMD TraceLens's, side by side in one run.

The two loaders alternate (popprof, TraceLens, popprof, ...), each in a fresh process, so both see the
same machine load; the wall clock starts once each has imported its libraries. popprof's load is
``popprof.open(FILE)`` with its ``events`` and ``threads`` tables (kernels, copies and host calls, names,
device categories, nesting). TraceLens's is what its rocprof report starts from
(``TraceLens.util.RocprofParser``, commit 171dd747): ``load_rocprof_data``, then ``extract_kernel_events``,
``extract_memory_events`` and ``extract_api_events``, and the kernels as a pandas DataFrame (the table its
``RocprofAnalyzer`` works on). Figures per loader, medians over ``--repeat`` runs: wall seconds of the load,
CPU seconds, peak memory (the larger of the process's own peak RSS and its sampled PSS,
``bench_trace_hta.run_watched``'s measure) and the kernels each kept.

The file is the real MI350X training trace of ``fixtures/real/traces`` (43,915 kernel dispatches, 37 MB of
JSON gzipped to 1.6 MB) unless ``--file`` names another.

Usage::

    TRACELENS_SRC=/path/to/TraceLens TRACELENS_PYTHON=/path/to/venv/bin/python python benchmarks/bench_rocprof.py
    python benchmarks/bench_rocprof.py --repeat 7 --file other.json.gz

``TRACELENS_SRC`` is a source checkout of AMD-AGI/TraceLens (the PyPI name ``tracelens`` is another project);
``TRACELENS_PYTHON`` a virtualenv with its dependencies (pandas, tqdm, tabulate, orjson, pyyaml). Without
them only popprof is measured.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _table import doc_parser, load_line, mib, print_table  # noqa: E402
from bench_trace import COMMON  # noqa: E402
from bench_trace_hta import READY, run_watched  # noqa: E402

DEFAULT_FILE = ROOT / "fixtures" / "real" / "traces" / "rocprofv3_mi350_train.json.gz"
_PEAK = "\npeak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"

POPPROF_LOAD = (
    COMMON
    + """
sys.path.insert(0, {root!r})
import pandas, popprof, popprof.readers.rocprof  # the libraries and the reader load before the clock
base = rss()
print({ready!r}, flush=True)
cpu0, start = cpu(), time.perf_counter()
profile = popprof.open({path!r})
events, threads = profile.events, profile.threads
seconds, cpu_s = time.perf_counter() - start, cpu() - cpu0
"""
    + _PEAK
    + """
kernels = int((events["channel"] == "kernel").sum())
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_s, "peak_bytes": peak, "base_bytes": base,
                  "events": len(events), "kernels": kernels}}))
"""
)

TRACELENS_LOAD = (
    COMMON
    + """
sys.path.insert(0, {src!r})
import pandas as pd
from TraceLens.util import RocprofParser
base = rss()
print({ready!r}, flush=True)
cpu0, start = cpu(), time.perf_counter()
data = RocprofParser.load_rocprof_data({path!r})
kernels = pd.DataFrame(RocprofParser.extract_kernel_events(data))
copies = RocprofParser.extract_memory_events(data)
calls = RocprofParser.extract_api_events(data)
seconds, cpu_s = time.perf_counter() - start, cpu() - cpu0
"""
    + _PEAK
    + """
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_s, "peak_bytes": peak, "base_bytes": base,
                  "events": len(kernels) + len(copies) + len(calls), "kernels": len(kernels)}}))
"""
)


def main() -> None:
    parser = doc_parser(__doc__)
    parser.add_argument(
        "--file", type=Path, default=DEFAULT_FILE, help="a rocprofv3 JSON file (.json or .json.gz)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs of each loader (default 5)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a run is stopped")
    args = parser.parse_args()
    src, python = os.environ.get("TRACELENS_SRC"), os.environ.get("TRACELENS_PYTHON")
    tools = {
        "popprof": (sys.executable, POPPROF_LOAD.format(root=str(ROOT), path=str(args.file), ready=READY))
    }
    if src and python:
        tools["TraceLens"] = (python, TRACELENS_LOAD.format(src=src, path=str(args.file), ready=READY))
    else:
        print("TRACELENS_SRC / TRACELENS_PYTHON not set: popprof alone")
    print(f"{args.file.name}: {args.file.stat().st_size:,} bytes; {load_line()}")
    runs: dict[str, list[dict]] = {name: [] for name in tools}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for i in range(args.repeat):
        for name, (interpreter, code) in tools.items():
            result = run_watched(interpreter, code, timeout=args.timeout, env=env)
            runs[name].append(result)
            print(
                f"  run {i + 1} {name:10} {result['seconds']:6.2f} s  cpu {result['cpu_seconds']:6.2f} s  "
                f"peak {mib(result['peak_bytes'])} MiB  kernels {result['kernels']:,}"
            )
    rows = []
    for name, results in runs.items():
        rows.append(
            (
                name,
                f"{statistics.median(r['seconds'] for r in results):.2f}",
                f"{statistics.median(r['cpu_seconds'] for r in results):.2f}",
                mib(statistics.median(r["peak_bytes"] for r in results)),
                f"{results[0]['kernels']:,}",
                f"{results[0]['events']:,}",
            )
        )
    print_table(["loader", "wall s", "CPU s", "peak MiB", "kernels", "events"], rows, title="medians")


if __name__ == "__main__":
    main()
