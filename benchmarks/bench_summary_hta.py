"""End to end: ``popprof summary TRACE --format json`` against HTA's load plus its four analyses.

Each run is a fresh process, popprof's and HTA's alternating, timed from outside as a user
times a command. Every repeat runs each tool twice: a *timed* run, left alone (wall clock
from start to exit, CPU of the process and everything it waited for, its parse worker
included: ``RUSAGE_CHILDREN`` of this script before and after), and a *watched* run for the
peak memory (the larger of the process's own VmHWM and the total PSS of its process tree,
sampled from /proc every 0.1 s; ``bench_trace_hta.run_watched``'s measure). Timing the
watched run instead would add the sampler's reads of /proc to the process it samples (on two
cores popprof's two processes leave no core free for it, HTA's one process does) and round
the wall time up to the next sample. Imports are inside both figures: this is the time a
person waits for the answer.

popprof: ``popprof summary TRACE --format json -q -o OUT`` through the console script's entry point
(``popprof.launch.run``; the JSON the reports and CI read), in this interpreter with this tree's popprof,
or in ``--popprof-python`` (a venv with ``pip install .``: popprof as a user installs it, measured as HTA is,
each tool in its own venv; this interpreter may carry start-up costs of its own, such as an editable
install's import finder or another tool's ``.pth`` file).
HTA 0.5.0: ``TraceAnalysis(trace_dir=...)`` followed by the four analyses issue 28 names, without
plots: ``get_temporal_breakdown``, ``get_gpu_kernel_breakdown`` (kernel types and top kernels),
``get_idle_time_breakdown`` and ``get_comm_comp_overlap``. The HTA child prints its own phase times, shown per run.

Target (issue 28): popprof at least 10x faster than HTA on the 600,000-event Kineto trace,
at no more than a third of its peak memory. ``--popprof-only`` times popprof alone (for the
1 GB trace's end-to-end time, where HTA takes minutes).

Usage::

    HTA_PYTHON=/path/to/venv-hta/bin/python python benchmarks/bench_summary_hta.py [--repeat 3]
    POPPROF_PYTHON=/path/to/venv-popprof/bin/python HTA_PYTHON=... python benchmarks/bench_summary_hta.py
    python benchmarks/bench_summary_hta.py --trace /work/benchdata/kineto_1GB.json --popprof-only
"""

from __future__ import annotations

import compileall
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _table import doc_parser, mib, print_table  # noqa: E402
from bench_trace_hta import DEFAULT_HTA_PYTHON, _load_average, _Watch  # noqa: E402
from gen_traces import SIZES, ensure  # noqa: E402

#: HTA's load and the four analyses; prints the phase times (in-process wall) as JSON.
HTA_SCRIPT = """
import json, logging, time
logging.disable(logging.WARNING)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
phases = {{"imports": time.perf_counter() - t0}}
def timed(name, call):
    start = time.perf_counter()
    result = call()
    phases[name] = time.perf_counter() - start
    return result
analysis = timed("load", lambda: TraceAnalysis(trace_dir={folder!r}))
timed("temporal", lambda: analysis.get_temporal_breakdown(visualize=False))
timed("kernels", lambda: analysis.get_gpu_kernel_breakdown(visualize=False))
timed("idle", lambda: analysis.get_idle_time_breakdown(visualize=False))
timed("overlap", lambda: analysis.get_comm_comp_overlap(visualize=False))
print(json.dumps(phases))
"""


#: ``popprof summary`` as the console script runs it (``popprof.launch.run``, the entry point ``pip`` installs:
#: it asks OpenBLAS for one thread, then hands over to ``popprof.cli.run``), plus the main process's own CPU on
#: stderr at exit: on two idle cores the parse worker runs beside it, so that is about the wall time.
POPPROF_SCRIPT = """
import atexit, json, resource, sys
def own_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({{"own_cpu_seconds": usage.ru_utime + usage.ru_stime}}), file=sys.stderr)
sys.argv = ["popprof", *{argv!r}]
import popprof.cli as cli
command = cli.main
def main():
    # registered while the command runs, as the command's own handlers are: it runs before run() ends the
    # process (a handler registered before run() would not run at all: popprof.cli.run)
    atexit.register(own_cpu)
    return command()
cli.main = main
from popprof.launch import run
run()
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], timeout: float, *, watched: bool) -> dict:
    """Run ``argv``; its last stdout line and stderr, with the wall and CPU time of a timed run (``watched``
    false: nothing else runs beside it) or the peak memory of a watched one (its tree sampled every 0.1 s)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        cpu0 = _children_cpu()
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, cwd=ROOT)
        watch = _Watch(proc.pid) if watched else None
        # the bound is a timer that kills the process: Popen.wait(timeout=...) polls with sleeps growing to
        # 50 ms, which added up to 50 ms to every timed run (popprof's times came in steps of 0.05 s)
        limit = threading.Timer(timeout, proc.kill)
        limit.start()
        try:
            while watch is not None and proc.poll() is None:
                watch.sample()
                time.sleep(0.1)
            proc.wait()  # a blocking wait: returns when the process ends
        finally:
            limit.cancel()
        seconds = time.perf_counter() - start
        if proc.returncode == -signal.SIGKILL and seconds >= timeout:
            raise RuntimeError(f"stopped after {timeout:.0f} s")
        cpu = _children_cpu() - cpu0
        out.seek(0)
        err.seek(0)
        text, error = out.read(), err.read()
    if proc.returncode != 0:  # the last line that says something (not the wrapper's CPU line)
        said = [line for line in error.strip().splitlines() if '{"own_cpu_seconds"' not in line]
        raise RuntimeError(f"exit {proc.returncode}: {said[-1] if said else ''}")
    lines = text.strip().splitlines()
    # the wrapper's line (anything the run left on the line before it, such as a carriage return, cut off)
    errors = [line[line.index("{") :] for line in error.splitlines() if '{"own_cpu_seconds"' in line]
    result = {"last_line": lines[-1] if lines else "", "last_error_line": errors[-1] if errors else "{}"}
    if watch is not None:
        result["peak_bytes"] = watch.peak_kib * 1024
    else:
        result.update(seconds=seconds, cpu_seconds=cpu)
    return result


def _hta_folder(path: Path) -> Path:
    folder = path.parent / f"hta_{path.stem}"  # HTA reads a directory of rank traces
    folder.mkdir(exist_ok=True)
    link = folder / path.name
    if not link.exists():
        link.symlink_to(path)
    return folder


def main() -> None:
    parser = doc_parser(__doc__)
    parser.add_argument("--size", default="600k", choices=list(SIZES), help="Generated trace (default 600k).")
    parser.add_argument("--trace", type=Path, help="A trace file instead of a generated one.")
    parser.add_argument("--repeat", type=int, default=3, help="Runs of each (alternating).")
    parser.add_argument(
        "--hta-python", default=DEFAULT_HTA_PYTHON, help="HTA's interpreter (env HTA_PYTHON)."
    )
    parser.add_argument(
        "--popprof-python",
        default=os.environ.get("POPPROF_PYTHON", sys.executable),
        help="popprof's interpreter (env POPPROF_PYTHON; default this one, with this tree's popprof): e.g. a "
        "venv with `pip install .`, popprof as a user installs it, beside HTA in its own venv.",
    )
    parser.add_argument("--popprof-only", action="store_true", help="Time popprof alone.")
    parser.add_argument("--timeout", type=float, default=3600.0, help="Seconds per run before it fails.")
    parser.add_argument("--json", type=Path, help="Write the runs here.")
    args = parser.parse_args()
    path = args.trace if args.trace else ensure(args.size)
    if not args.popprof_only and not Path(args.hta_python).exists():
        sys.exit(
            f"no HTA interpreter at {args.hta_python}: run `bash benchmarks/setup_hta.sh` or pass --hta-python"
        )
    compileall.compile_dir(ROOT / "popprof", quiet=1)  # as an installed package: imports read .pyc
    loads = [_load_average()]
    print(f"{path.name}: {path.stat().st_size / 1e6:,.0f} MB; load average {loads[0]}", file=sys.stderr)
    where = subprocess.run(
        [args.popprof_python, "-P", "-c", "import popprof; print(popprof.__file__)"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.strip()
    print(f"popprof: {args.popprof_python} ({where})", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "summary.json"
        argv = ["summary", str(path), "--format", "json", "-q", "-o", str(out)]
        # -P: the working directory (the repository) is not put first on the path, so --popprof-python's
        # installed popprof is the one imported, not this tree beside it
        tools = {"popprof": [args.popprof_python, "-P", "-c", POPPROF_SCRIPT.format(argv=argv)]}
        if not args.popprof_only:
            tools["hta"] = [args.hta_python, "-c", HTA_SCRIPT.format(folder=str(_hta_folder(path)))]
        runs: dict[str, list[dict]] = {name: [] for name in tools}
        for i in range(args.repeat):
            for name, argv in tools.items():
                try:
                    result = run(argv, args.timeout, watched=False)
                    result["peak_bytes"] = run(argv, args.timeout, watched=True)["peak_bytes"]
                except RuntimeError as exc:
                    sys.exit(f"{name} run {i + 1} failed: {exc}")
                result["load_average"] = _load_average()
                loads.append(result["load_average"])
                phases = ""
                if name == "popprof":
                    result["own_cpu_seconds"] = json.loads(result["last_error_line"]).get(
                        "own_cpu_seconds", math.nan
                    )
                    phases = f"  main process cpu {result['own_cpu_seconds']:.2f} s"
                if name == "hta":
                    result["phases"] = json.loads(result["last_line"])
                    phases = "  " + ", ".join(f"{k} {v:.2f}" for k, v in result["phases"].items())
                runs[name].append(result)
                print(
                    f"  run {i + 1} {name:<8} {result['seconds']:7.2f} s  cpu {result['cpu_seconds']:7.2f} s  "
                    f"peak {mib(result['peak_bytes'])} MiB  load {result['load_average']}{phases}",
                    file=sys.stderr,
                )
        keys = ("seconds", "cpu_seconds", "peak_bytes")
        med = {name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in runs.items()}
        med["popprof"]["own_cpu_seconds"] = statistics.median(r["own_cpu_seconds"] for r in runs["popprof"])
    p = med["popprof"]
    rows = [
        [
            "popprof summary --format json",
            f"{p['seconds']:.2f}",
            f"{p['cpu_seconds']:.2f}",
            f"{p['own_cpu_seconds']:.2f}",
            mib(p["peak_bytes"]),
            "",
        ]
    ]
    verdict = ""
    if "hta" in med:
        h = med["hta"]
        speed, cpu_ratio, path_ratio, memory = (
            h["seconds"] / p["seconds"],
            h["cpu_seconds"] / p["cpu_seconds"],
            h["cpu_seconds"] / p["own_cpu_seconds"],
            p["peak_bytes"] / h["peak_bytes"],
        )
        rows.append(
            [
                "HTA load + 4 analyses",
                f"{h['seconds']:.2f}",
                f"{h['cpu_seconds']:.2f}",
                f"{h['cpu_seconds']:.2f}",
                mib(h["peak_bytes"]),
                f"{speed:.1f}x wall, {cpu_ratio:.1f}x CPU, {path_ratio:.1f}x main-process CPU; peak {memory:.2f}",
            ]
        )
        verdict = (
            f"targets: >= 10x faster: {'met' if speed >= 10 else 'NOT met'} in wall ({speed:.1f}x; "
            f"{cpu_ratio:.1f}x in CPU of all processes, {path_ratio:.1f}x in the main process's CPU, about the "
            f"wall on two idle cores); <= 1/3 of HTA's peak: {'met' if memory <= 1 / 3 else 'NOT met'} "
            f"({memory:.2f})"
        )
    print(f"\n{path.name}, {args.repeat} runs each, alternating; load average: {', '.join(loads)}")
    print_table(["end to end", "wall s", "CPU s", "main-process CPU s", "peak MiB", "HTA / popprof"], rows)
    if verdict:
        print(verdict)
    if args.json:
        args.json.write_text(
            json.dumps({"trace": str(path), "load_average": loads, "runs": runs, "median": med}, indent=2)
        )


if __name__ == "__main__":
    main()
