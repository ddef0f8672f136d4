"""Benchmark: popprof against HolisticTraceAnalysis (HTA) loading one trace, side by side in one run.

The two loaders alternate (popprof, HTA, popprof, HTA, ...), each in a fresh
process, so both see the same machine load. popprof's load (``popprof.open``
plus its ``events`` and ``flows`` tables) keeps everything the figures need:
flows, the ``stream`` / ``correlation`` / ``device`` / ``rank`` columns, nesting
and device categories; each run reports how many flows and correlated events it
kept. HTA's load is, by default, what a user runs: ``TraceAnalysis(trace_dir=...)``
on a directory holding the trace (parse, correlate, assign iterations, align,
filter, index; ``--hta-load parse`` measures only its ``parse_trace_dataframe``).

Figures per loader (medians over ``--repeat`` runs): wall seconds of the load
(after imports), CPU seconds (process + workers) and peak memory: the larger of
the process's own peak RSS (``ru_maxrss``, exact) and the highest total PSS of
the process and its worker processes sampled from /proc every 0.1 s (PSS splits
the pages a forked worker shares with its parent, so nothing is counted twice;
workers that run at the same time are added up).

``--hta-timeout T`` stops an HTA run after T seconds of loading (the process
group is killed). The run then counts as "HTA > T s": the speed-up is a lower
bound (T / popprof's wall) and HTA's peak is the highest VmHWM / total PSS
sampled from /proc until then (the process and its children), a lower bound on
its peak, so popprof's share of it is an upper bound. Bounds are labelled as such.

The trace comes from ``benchmarks/gen_traces.py`` (kineto layout: 5 profiler
steps, flows, correlation ids on both sides). Targets (issue 12): popprof at
least 10x faster (wall) and at most a third of HTA's peak memory on a
600,000-event trace.

Usage::

    bash benchmarks/setup_hta.sh          # once: HTA in benchmarks/.venv-hta (or pass --hta-python)
    python benchmarks/bench_trace_hta.py                  # 600k events, 3 runs each
    python benchmarks/bench_trace_hta.py --repeat 5 --hta-timeout 600 --json out.json
    PYTHONPATH=/path/to/other/tree python benchmarks/bench_trace_hta.py   # that tree's popprof, same measure

The popprof measured is the tree ``--tree`` names, else the first ``PYTHONPATH`` entry holding
``popprof/``, else this script's own tree; each run prints the ``popprof/__init__.py`` it imported.
Another tree is byte-compiled under a cache prefix in the temporary directory (``PYTHONPYCACHEPREFIX``),
so it is never written to; HTA's runs get no ``PYTHONPATH``.
"""

from __future__ import annotations

import compileall
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _table import doc_parser, mib, print_table  # noqa: E402
from bench_trace import COMMON, HTA, _limit  # noqa: E402
from gen_traces import SIZES, ensure  # noqa: E402

DEFAULT_HTA_PYTHON = os.environ.get("HTA_PYTHON", str(HERE / ".venv-hta" / "bin" / "python"))
#: printed by a loader process once its imports are done: the load's wall clock starts there
READY = "READY"

# the process's own peak (exact); its workers are measured from outside (sampled PSS of the tree)
_PEAK = """
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
"""

POPPROF_LOAD = (
    COMMON
    + """
sys.path.insert(0, {root!r})
import pandas  # the facade and the reader import lazily: the libraries and the reading stack load before the clock
import importlib, importlib.util, popprof
for reader in ("popprof.readers.chrome", "popprof.readers.chrome_trace"):  # the package (older trees: a module)
    if importlib.util.find_spec(reader):
        importlib.import_module(reader)
        break
popprof_file = popprof.__file__
base = rss()
print({ready!r}, flush=True)
cpu0, start = cpu(), time.perf_counter()
profile = popprof.open({path!r})
events, flows = profile.events, profile.flows
seconds, cpu_s = time.perf_counter() - start, cpu() - cpu0
"""
    + _PEAK
    + """
kept = {{"flows": len(flows), "correlation": int(events["correlation"].notna().sum()),
         "stream": int(events["stream"].notna().sum()), "device": int(events["device"].notna().sum()),
         "rank": int(events["rank"].notna().sum())}}
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_s, "peak_bytes": peak, "base_bytes": base,
                  "events": len(events), "kept": kept, "popprof_file": popprof_file}}))
"""
)

HTA_ANALYSIS = (
    COMMON
    + """
import logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
base = rss()
print({ready!r}, flush=True)
cpu0, start = cpu(), time.perf_counter()
analysis = TraceAnalysis(trace_dir={folder!r})
seconds, cpu_s = time.perf_counter() - start, cpu() - cpu0
"""
    + _PEAK
    + """
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_s, "peak_bytes": peak, "base_bytes": base,
                  "events": sum(len(df) for df in analysis.t.traces.values())}}))
"""
)

HTA_PARSE = HTA.replace("base = rss()\n", "base = rss()\nprint({ready!r}, flush=True)\n").replace(
    '"extra_bytes": peak - base', '"base_bytes": base'
)

_TICK = os.sysconf("SC_CLK_TCK")


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith(key)), 0)
    except OSError:
        return 0


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process and of its waited-for children, from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICK


def _children(pid: int) -> set[int]:
    """All descendants of ``pid`` (from /proc/PID/task/*/children)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            for kid in kids:
                if kid not in found:
                    found.add(kid)
                    todo.append(kid)
    return found


class _Watch:
    """Peak memory and CPU of a process tree, sampled from /proc (lower bounds: samples can miss a peak)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = 0  # max(the process's VmHWM, total PSS of the tree) over the samples
        self.cpu = 0.0
        self._child_cpu: dict[int, float] = {}

    def sample(self) -> None:
        kids = _children(self.pid)
        total = _pss_kib(self.pid) + sum(_pss_kib(kid) for kid in kids)
        self.peak_kib = max(self.peak_kib, total, _status_kib(self.pid, "VmHWM:"))
        for kid in kids:
            self._child_cpu[kid] = max(self._child_cpu.get(kid, 0.0), _cpu_seconds(kid))
        self.cpu = max(self.cpu, _cpu_seconds(self.pid) + sum(self._child_cpu.values()))


def run_watched(
    python: str,
    code: str,
    *,
    timeout: float,
    load_timeout: float | None = None,
    max_bytes: int | None = None,
    interval: float = 0.1,
    env: dict[str, str] | None = None,
) -> dict:
    """Run ``code`` in a fresh interpreter; return the JSON it prints last, or bounds when it is stopped.

    ``load_timeout`` counts from the loader's READY line (imports done); a stopped run returns
    ``{"timed_out": True, "seconds": T, "cpu_seconds": ..., "peak_bytes": ...}`` with lower bounds.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [python, "-c", code],
            stdout=out,
            stderr=err,
            text=True,
            cwd=ROOT,
            preexec_fn=_limit(max_bytes),
            start_new_session=True,
            env=env,
        )
        watch = _Watch(proc.pid)
        started = time.perf_counter()
        ready_at: float | None = None
        cpu_at_ready = (
            0.0  # the imports' CPU time, left out of a stopped run's figure as it is of a finished one's
        )
        try:
            while proc.poll() is None:
                watch.sample()
                now = time.perf_counter()
                if ready_at is None:
                    out.seek(0)
                    if READY in out.read():
                        ready_at, cpu_at_ready = now, watch.cpu
                if now - started > timeout or (load_timeout and ready_at and now - ready_at > load_timeout):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return {
                        "timed_out": True,
                        "seconds": now - (ready_at or started),
                        "cpu_seconds": watch.cpu - cpu_at_ready,
                        "peak_bytes": watch.peak_kib * 1024,
                        "sampled_peak_bytes": watch.peak_kib * 1024,
                        "events": None,
                    }
                time.sleep(interval)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.seek(0)
        err.seek(0)
        text, error = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(error.strip().splitlines()[-1] if error.strip() else f"exit {proc.returncode}")
    result = json.loads(text.strip().splitlines()[-1])
    result["timed_out"] = False
    result["own_peak_bytes"] = result["peak_bytes"]
    result["sampled_peak_bytes"] = watch.peak_kib * 1024
    result["peak_bytes"] = max(result["peak_bytes"], result["sampled_peak_bytes"])
    return result


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _tree(given: Path | None) -> tuple[Path, dict[str, str]]:
    """The tree whose popprof is measured and the environment of its runs (another tree's .pyc files go
    under a cache prefix in the temporary directory, so that tree is only read)."""
    candidates = (
        [given] if given else [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    tree = next((p.resolve() for p in candidates if (p / "popprof" / "__init__.py").is_file()), None)
    if given and tree is None:
        sys.exit(f"--tree {given}: no popprof/__init__.py there")
    tree = tree or ROOT
    env = dict(os.environ)
    if tree != ROOT:
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "popprof-bench-pycache")
    return tree, env


def _compile(tree: Path, env: dict[str, str]) -> None:
    """Byte-compile ``tree``'s popprof where its runs will look for the .pyc files."""
    prefix = env.get("PYTHONPYCACHEPREFIX")
    before = sys.pycache_prefix
    sys.pycache_prefix = prefix
    try:
        compileall.compile_dir(tree / "popprof", quiet=1)
    finally:
        sys.pycache_prefix = before


def _hta_code(path: Path, load: str) -> str:
    if load == "parse":
        return HTA_PARSE.format(path=str(path), backend="", ready=READY)
    folder = path.parent / f"hta_{path.stem}"  # HTA reads a directory of rank traces
    folder.mkdir(exist_ok=True)
    link = folder / path.name
    if not link.exists():
        link.symlink_to(path)
    return HTA_ANALYSIS.format(folder=str(folder), ready=READY)


def main() -> None:
    parser = doc_parser(__doc__)
    parser.add_argument(
        "--size", default="600k", choices=list(SIZES), help="Generated trace (default 600k events)."
    )
    parser.add_argument("--repeat", type=int, default=3, help="Runs of each loader (alternating).")
    parser.add_argument(
        "--hta-python",
        default=DEFAULT_HTA_PYTHON,
        help="Interpreter of a virtualenv with HolisticTraceAnalysis (env HTA_PYTHON).",
    )
    parser.add_argument("--hta-max-gib", type=float, default=8.0, help="Address-space cap for the HTA runs.")
    parser.add_argument(
        "--hta-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Stop an HTA load after this many seconds and report bounds (default: wait).",
    )
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="Seconds per run before it counts as failed."
    )
    parser.add_argument(
        "--hta-load",
        choices=["analysis", "parse"],
        default="analysis",
        help="HTA's TraceAnalysis(trace_dir=...) (default) or only its parse_trace_dataframe.",
    )
    parser.add_argument(
        "--tree",
        type=Path,
        default=None,
        help="The source tree whose popprof is measured (default: the first PYTHONPATH entry with popprof/, "
        "else this script's tree).",
    )
    parser.add_argument("--json", type=Path, help="Write the results here.")
    args = parser.parse_args()
    tree, popprof_env = _tree(args.tree)
    if not Path(args.hta_python).exists():
        sys.exit(
            f"no HTA interpreter at {args.hta_python}: run `bash benchmarks/setup_hta.sh` or pass --hta-python"
        )
    path = ensure(args.size)
    # byte-compiled as pip compiles an installed package (HTA's venv is): imports read .pyc, not source
    _compile(tree, popprof_env)
    loads = [_load_average()]
    print(
        f"{path.name}: {path.stat().st_size / 1e6:,.0f} MB; load average before: {loads[0]}", file=sys.stderr
    )
    popprof_code = POPPROF_LOAD.format(root=str(tree), path=str(path), ready=READY)
    hta_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONPYCACHEPREFIX")}
    hta_code = _hta_code(path, args.hta_load)
    runs: dict[str, list[dict]] = {"popprof": [], "hta": []}
    for i in range(args.repeat):
        for name, python, code, cap, load_timeout, env in (
            ("popprof", sys.executable, popprof_code, None, None, popprof_env),
            ("hta", args.hta_python, hta_code, int(args.hta_max_gib * 2**30), args.hta_timeout, hta_env),
        ):
            try:
                result = run_watched(
                    python, code, timeout=args.timeout, load_timeout=load_timeout, max_bytes=cap, env=env
                )
            except RuntimeError as exc:
                sys.exit(f"{name} run {i + 1} failed: {exc}")
            result["load_average"] = _load_average()
            loads.append(result["load_average"])
            runs[name].append(result)
            stopped = " (stopped: lower bounds)" if result["timed_out"] else ""
            kept = f"  kept {result['kept']}  ({result['popprof_file']})" if "kept" in result else ""
            print(
                f"  run {i + 1} {name:<8} {result['seconds']:7.2f} s  cpu {result['cpu_seconds']:7.2f} s  "
                f"peak {mib(result['peak_bytes'])} MiB (own {mib(result.get('own_peak_bytes', 0))}, "
                f"tree {mib(result['sampled_peak_bytes'])})  "
                f"events {result['events']}  load {result['load_average']}{stopped}{kept}",
                file=sys.stderr,
            )
    med = {
        name: {key: statistics.median(r[key] for r in rs) for key in ("seconds", "cpu_seconds", "peak_bytes")}
        for name, rs in runs.items()
    }
    p, h = med["popprof"], med["hta"]
    bound = any(r["timed_out"] for r in runs["hta"])
    speed, cpu_ratio, memory = (
        h["seconds"] / p["seconds"],
        h["cpu_seconds"] / p["cpu_seconds"],
        p["peak_bytes"] / h["peak_bytes"],
    )
    ge, le = ("≥ ", "≤ ") if bound else ("", "")
    hta_label = "HTA TraceAnalysis" if args.hta_load == "analysis" else "HTA parse_trace_dataframe"
    rows = [
        [
            "popprof.open",
            f"{runs['popprof'][0]['events']:,}",
            f"{p['seconds']:.2f}",
            f"{p['cpu_seconds']:.2f}",
            mib(p["peak_bytes"]),
            "",
        ],
        [
            hta_label + (" (stopped)" if bound else ""),
            "-" if runs["hta"][0]["events"] is None else f"{runs['hta'][0]['events']:,}",
            f"{'> ' if bound else ''}{h['seconds']:.2f}",
            f"{'> ' if bound else ''}{h['cpu_seconds']:.2f}",
            f"{'> ' if bound else ''}{mib(h['peak_bytes'])}",
            f"{ge}{speed:.1f}x wall, {ge}{cpu_ratio:.1f}x CPU; peak {le}{memory:.2f}",
        ],
    ]
    print(
        f"\n{args.size} ({path.stat().st_size / 1e6:,.0f} MB), {args.repeat} runs each, alternating; "
        f"load average before/after runs: {', '.join(loads)}; popprof from {tree}"
    )
    print_table(["loader", "events", "wall s", "CPU s", "peak MiB", "HTA / popprof"], rows)
    kept = runs["popprof"][0]["kept"]
    print(
        f"\npopprof kept {kept['flows']:,} flows; correlation on {kept['correlation']:,} events, stream on "
        f"{kept['stream']:,}, device on {kept['device']:,}, rank on {kept['rank']:,}"
    )
    print(
        f"targets{' (bounds: HTA was stopped)' if bound else ''}: >= 10x faster: "
        f"{'met' if speed >= 10 else 'NOT met' if not bound else 'not shown'} ({ge}{speed:.1f}x); "
        f"<= 1/3 of HTA's peak: {'met' if memory <= 1 / 3 else 'NOT met' if not bound else 'not shown'} "
        f"({le}{memory:.2f})"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "size": args.size,
                    "hta_load": args.hta_load,
                    "load_average": loads,
                    "runs": runs,
                    "median": med,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
