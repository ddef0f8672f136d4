"""Benchmark: redaction with its independent leak scan (targets: a 1 GB Chrome trace at >= 50 MB/s and a
16-IPU 200,000-step bundle in under 5 s, both with the scan, which re-reads the original on its own).

Usage: python benchmarks/bench_redact.py [--repeat 3] [--trace-size 1GB|100MB|10MB] [--skip-trace]
                                         [--skip-bundle]
       python benchmarks/bench_redact.py --guard TRACE [--repeat 7] [--code CHECKOUT]

``--guard``: only the JSON guard's read of TRACE, as the redaction reads it (``structure=True``: brackets,
separators, numbers, literals and the order of values checked) and as the parsing readers do (off), in this
process: median / min CPU and wall seconds;
``--code`` reads through another checkout's popprof (one from before the flag was named ``structure`` is given
``match_brackets=True``).

Each run is a fresh subprocess calling ``popprof.redaction.redact`` (with and without the
scan), so the figures include reading, writing and the interpreter's imports; the script prints
median / min / max wall time, CPU time (user + system of the redaction's process and the leak
scan's forked helpers), throughput of wall time and of CPU time (input MB per CPU second), the
peak RSS of the redaction's process and of its largest helper (``resource.getrusage``; their sum
bounds the total), the load average, since a shared machine's load inflates wall time, and the
machine's own speed (SHA-256 MB/s of 64 MiB, best of 5: the same work runs 1.5-2.4x slower on
some days on the shared development VM). Inputs are generated on first use into
``benchmarks/data/`` (git-ignored): the trace with the traces helper's ``benchmarks/gen_traces.py``,
the bundle with :mod:`popprof.testing.synth` (``sensitive=True``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _table import load_line, print_table

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
from popprof.redaction import redact
start = time.perf_counter()
report = redact(sys.argv[1], sys.argv[2], key=b"benchmark-key-0123456789", scan=sys.argv[3] == "1")
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
helpers = resource.getrusage(resource.RUSAGE_CHILDREN)  # the leak scan's forked halves
print(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime + helpers.ru_utime + helpers.ru_stime,
                  "sys": usage.ru_stime + helpers.ru_stime,
                  "rss_mb": usage.ru_maxrss / 1024, "helper_rss_mb": helpers.ru_maxrss / 1024,
                  "passed": report.passed, "bytes_in": report.bytes_in,
                  "replaced": sum(v["distinct"] for v in report.replaced.values())}))
"""


def run_once(src: Path, out: Path, scan: bool) -> dict:
    """One redaction in a fresh interpreter; returns its measurements."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(out), "1" if scan else "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"redaction failed: {proc.stderr.strip()[-2000:]}")
    if out.is_dir():
        shutil.rmtree(out)
    else:
        out.unlink(missing_ok=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(label: str, src: Path, out: Path, repeat: int, size_bytes: int) -> list[list[str]]:
    """Table rows: one redaction without and one with the leak scan."""
    medians: dict[bool, float] = {}
    rows = []
    for scan in (False, True):
        runs = [run_once(src, out, scan) for _ in range(repeat)]
        walls = [r["wall"] for r in runs]
        med = statistics.median(walls)
        medians[scan] = med
        cpu = statistics.median(r["cpu"] for r in runs)
        rows.append(
            [
                label,
                "on" if scan else "off",
                f"{med:.2f}",
                f"{min(walls):.2f}-{max(walls):.2f}",
                f"{cpu:.2f}",
                f"{statistics.median(r['sys'] for r in runs):.2f}",
                f"{size_bytes / 1e6 / med:.1f}",
                f"{size_bytes / 1e6 / cpu:.1f}",
                f"{max(r['rss_mb'] for r in runs):,.0f}",
                f"{max(r['helper_rss_mb'] for r in runs):,.0f}",
                str(all(r["passed"] for r in runs)),
                f"{runs[0]['replaced']:,}",
            ]
        )
    rows[-1][1] += f" ({medians[True] / medians[False] - 1:+.0%})"
    return rows


def machine_speed() -> float:
    """SHA-256 throughput of this machine (MB/s, best of 5 over 64 MiB): compares runs made on different days."""
    import hashlib

    data = bytes(range(256)) * (1 << 18)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        hashlib.sha256(data).digest()
        best = min(best, time.perf_counter() - start)
    return len(data) / 1e6 / best


def ensure_bundle() -> Path:
    path = DATA / "redact_pod16.popprof"
    if not (path / "manifest.json").exists():
        from popprof.readers import bundle
        from popprof.testing import synth

        start = time.perf_counter()
        profile = synth.make_profile(
            num_ipus=16,
            num_steps=200_000,
            num_programs=4_000,
            num_variables=3_000,
            num_liveness_steps=5_000,
            sensitive=True,
        )
        bundle.write(profile, path)
        print(f"generated {path.name} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return path


def guard_read(trace: Path, repeat: int, code: Path | None) -> None:
    """Print the CPU and wall seconds of reading ``trace`` through the JSON guard, with the redaction's check
    and without it (median and min of ``repeat``)."""
    if code is not None:
        sys.path.insert(0, str(code))
        for name in [m for m in sys.modules if m == "popprof" or m.startswith("popprof.")]:
            del sys.modules[name]
    from popprof.io.files import open_json

    def once(check: bool) -> tuple[float, float]:
        options = {}
        if check:
            try:
                open_json(trace, structure=True).close()
                options = {"structure": True}
            except TypeError:
                options = {"match_brackets": True}
        wall, cpu = time.perf_counter(), time.process_time()
        with open_json(trace, **options) as handle:
            while handle.read(1 << 22):
                pass
        return time.process_time() - cpu, time.perf_counter() - wall

    import popprof

    print(
        f"{trace.name} ({trace.stat().st_size / 1e6:.1f} MB) through {Path(popprof.__file__).parent}; {load_line()}"
    )
    for check in (True, False):
        runs = [once(check) for _ in range(repeat)]
        cpus, walls = [r[0] for r in runs], [r[1] for r in runs]
        print(
            f"  check {'on ' if check else 'off'}: CPU {statistics.median(cpus):.3f} s (min {min(cpus):.3f}), "
            f"wall {statistics.median(walls):.3f} s, median of {repeat}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace-size", default="1GB", choices=["10MB", "100MB", "1GB"])
    parser.add_argument("--skip-trace", action="store_true")
    parser.add_argument("--skip-bundle", action="store_true")
    parser.add_argument("--guard", type=Path, help="time only the JSON guard's read of this trace")
    parser.add_argument("--code", type=Path, help="with --guard: the checkout whose popprof reads it")
    args = parser.parse_args()
    if args.guard is not None:
        guard_read(args.guard, args.repeat, args.code)
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-redact-", dir=DATA if DATA.exists() else None) as tmp:
        if not args.skip_trace:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            from gen_traces import ensure

            trace = ensure(args.trace_size)
            rows += measure(
                f"Chrome trace {args.trace_size}",
                trace,
                Path(tmp) / "trace.json",
                args.repeat,
                trace.stat().st_size,
            )
        if not args.skip_bundle:
            src = ensure_bundle()
            size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
            rows += measure("bundle 16 IPU x 200k steps", src, Path(tmp) / "pod16.popprof", args.repeat, size)
    print_table(
        [
            "input",
            "leak scan (cost)",
            "wall s (median)",
            "wall s (min-max)",
            "CPU s (all processes)",
            "of it system s",
            "MB/s (wall)",
            "MB/s (CPU)",
            "peak RSS MB",
            "largest helper RSS MB",
            "scan passed",
            "values replaced",
        ],
        rows,
        title=f"median of {args.repeat} runs; {load_line()}; machine: SHA-256 {machine_speed():,.0f} MB/s",
    )


if __name__ == "__main__":
    main()
