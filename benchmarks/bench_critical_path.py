"""The critical path: popprof's ``critical_paths`` against HTA 0.5.0's ``critical_path_analysis``, side by side.

Each run is a fresh process per tool, alternating. Inside it the trace is loaded (popprof: ``popprof.open`` with
the events' args, as ``summary --critical-path`` reads it; HTA: ``TraceAnalysis(trace_dir=...)``), then the
critical path of every rank is computed (HTA: ``critical_path_analysis(rank, annotation="", instance_id=None)``
and ``get_critical_path_breakdown()``, the figures popprof's match). Printed per tool: the median wall time of
the load and of the analysis (in-process ``perf_counter``), the median peak RSS of the process (its
``ru_maxrss``), and the path's length summed over ranks (the two must be equal).

HTA's critical path needs pandas 2 (it fails under pandas 3), so it runs in its own virtualenv:
``python -m venv /tmp/hta-cp && /tmp/hta-cp/bin/pip install holistictraceanalysis==0.5.0 "pandas<3"``.

Usage::

    HTA_CP_PYTHON=/tmp/hta-cp/bin/python python benchmarks/bench_critical_path.py [--repeat 3]
    HTA_CP_PYTHON=... python benchmarks/bench_critical_path.py --trace fixtures/real/traces/nccl_data.json.gz
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _table import doc_parser, mib, print_table  # noqa: E402
from gen_traces import ensure  # noqa: E402

POPPROF_SCRIPT = """
import json, resource, sys, time
t0 = time.perf_counter()
import popprof
from popprof.metrics.critical_path import critical_paths
profile = popprof.open(sys.argv[1], with_args=True)
profile.events
t1 = time.perf_counter()
paths = critical_paths(profile)
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "analysis": t2 - t1, "length": sum(p["length_us"] for p in paths),
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

HTA_SCRIPT = """
import json, logging, resource, shutil, sys, tempfile, time
logging.disable(logging.WARNING)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
folder = tempfile.mkdtemp()
shutil.copy(sys.argv[1], folder)
analysis = TraceAnalysis(trace_dir=folder)
t1 = time.perf_counter()
length = 0.0
for rank in sorted(analysis.t.traces):
    graph, ok = analysis.critical_path_analysis(rank=rank, annotation="", instance_id=None)
    length += float(graph.get_critical_path_breakdown()["duration"].sum())
t2 = time.perf_counter()
shutil.rmtree(folder)
print(json.dumps({"load": t1 - t0, "analysis": t2 - t1, "length": length,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _run(python: str, script: str, trace: Path, env: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(script)
    try:
        done = subprocess.run(
            [python, handle.name, str(trace)], capture_output=True, text=True, env=env, check=True
        )
    finally:
        os.unlink(handle.name)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = doc_parser(__doc__)
    parser.add_argument("--trace", type=Path, help="a trace (default: the 600k-event benchmark trace)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    hta = os.environ.get("HTA_CP_PYTHON")
    if not hta:
        sys.exit("set HTA_CP_PYTHON to a Python with HTA 0.5.0 and pandas 2 (see the docstring)")
    trace = args.trace or ensure("600k")
    compileall.compile_dir(str(ROOT / "popprof"), quiet=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs: dict[str, list[dict]] = {"popprof": [], "HTA 0.5.0": []}
    for _ in range(args.repeat):
        runs["popprof"].append(_run(sys.executable, POPPROF_SCRIPT, trace, env))
        runs["HTA 0.5.0"].append(_run(hta, HTA_SCRIPT, trace, dict(os.environ)))
    rows = []
    for tool, results in runs.items():
        rows.append(
            [
                tool,
                f"{statistics.median(r['load'] for r in results):.2f}",
                f"{statistics.median(r['analysis'] for r in results):.2f}",
                mib(statistics.median(r["peak"] for r in results)),
                f"{results[0]['length']:,.0f}",
            ]
        )
    print_table(
        ["tool", "load s", "critical path s", "peak MiB", "length us (all ranks)"],
        rows,
        title=f"{trace.name}, {args.repeat} runs each, medians",
    )
    lengths = {r[-1] for r in rows}
    print("\nlengths equal" if len(lengths) == 1 else "\nLENGTHS DIFFER")


if __name__ == "__main__":
    main()
