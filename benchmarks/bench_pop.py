#!/usr/bin/env python3
"""Benchmark: open a 16-IPU Mk2 profile.pop (23,552 tiles, 200,000 steps) through the pva test double.

    python benchmarks/bench_pop.py [--repeat 3] [--cprofile]

Each measurement runs in a fresh subprocess so its peak RSS is its own. Prints
the median wall and CPU time over the repeats and the peak RSS of:

- ``read``:  ``popprof.readers.pop.read`` with its default options (no per-program code
  bytes, only the peak liveness step's variables) as the CLI does it when a core is
  idle: the execution steps split with one spawned worker process (the target: < 15 s,
  < 3 GiB for parent and worker together);
- ``serial``: the same read in one process (``workers=1``);
- ``full``: the same read with the opt-in lists too (``code_bytes=True``,
  ``liveness_variables="all"``), serially;
- ``attrs``: a pass that only touches the pva attributes the default read uses
  (target, every tile's memory, programs, liveness, every step x IPU) without
  storing anything: the part of the read that is Python attribute access,
  including the double's materialisation of lazy objects (libpva pays the
  equivalent cost creating its Python wrappers);
- ``open``:  ``pva.openReport`` plus loading the double's arrays (its storage I/O).

The rest of ``read`` (read - attrs) is popprof's own work: copying values into
NumPy arrays, building categoricals, conforming to the schema, hashing the source.
With ``--cprofile`` it also prints the top functions of one profiled read.
The input is generated on first use into benchmarks/data/ (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
POP = DATA / "pod16" / "profile.pop"


def _setup_path() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "pva_double"))


def ensure_data() -> Path:
    """Generate the 16-IPU, 200,000-step profile.pop (double storage) when it is not there yet."""
    if not POP.is_file():
        _setup_path()
        import importlib.util

        spec = importlib.util.spec_from_file_location("fixtures_generate", ROOT / "fixtures" / "generate.py")
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        from popprof.testing.synth import make_profile

        print(f"generating {POP} ...", file=sys.stderr)
        gen.write_pop(make_profile(gen.LARGE_POD16), POP, compress=False)
    return POP


def touch_attributes(path: Path) -> int:
    """Touch every attribute the reader reads, store nothing; returns a checksum so nothing is skipped."""
    import pva

    report = pva.openReport(str(path))
    compilation = report.compilation
    total = 0
    target = compilation.target
    total += target.numIPUs + target.tilesPerIpu + target.numTiles + target.bytesPerTile
    first = compilation.tiles[0].memory.category
    categories = [c for c in dir(first) if not c.startswith("_") and hasattr(getattr(first, c), "total")]
    for tile in compilation.tiles:
        memory = tile.memory
        total += memory.total.includingGaps + memory.total.excludingGaps + memory.overflowed.excludingGaps
        total += memory.alwaysLiveBytes + memory.notAlwaysLiveBytes
        category = memory.category
        for c in categories:
            total += getattr(category, c).total
    for program in compilation.programs:
        total += len(program.name) + len(program.type.name)
    for variable in compilation.alwaysLiveVariables:
        total += variable.size + len(variable.name)
    live = []
    for step in compilation.livenessProgramSteps:
        total += len(step.program.name) + len(step.program.type.name)
        live.append(step.notAlwaysLiveMemory.bytes)
    peak = compilation.livenessProgramSteps[live.index(max(live))].notAlwaysLiveMemory
    total += sum(v.size for v in peak.variables)
    execution = report.execution
    for run in execution.runs:
        total += len(run.steps)
    for step in execution.steps:
        program = step.program
        total += len(program.name) + len(program.type.name)
        for u in step.ipus:
            a = u.activeCycles
            total += u.cycles + a.cyclesFrom.max + a.cyclesTo.max + u.dataIn + u.dataOut
            total += u.tileBalance > 0
    return total


def child(mode: str) -> None:
    """Run one measurement and print it as JSON."""
    _setup_path()
    path = ensure_data()
    start, cpu = time.perf_counter(), time.process_time()
    if mode in ("read", "serial", "full"):
        from popprof.readers import pop

        # "read" = what the CLI does when a core is idle (steps split with one worker process);
        # "serial" = everything in this process (what a plain script gets unless it passes workers);
        # "full" = serial with the opt-in per-program code bytes and every liveness step's variables.
        workers = 2 if mode == "read" else 1
        extra = {"code_bytes": True, "liveness_variables": "all"} if mode == "full" else {}
        profile = pop.read(path, progress=False, workers=workers, **extra)
        detail = {"steps_rows": len(profile.steps), "tiles_rows": len(profile.tiles)}
    elif mode == "attrs":
        detail = {"checksum": touch_attributes(path)}
    elif mode == "open":
        import pva

        report = pva.openReport(str(path))
        store = report._store  # the double's storage: load every array once
        for key in store._npz.files:
            store.array(key)
        detail = {}
    else:
        raise SystemExit(f"unknown mode {mode}")
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    detail["worker_peak_mib"] = workers.ru_maxrss / 1024
    detail["parent_cpu_s"] = cpu
    detail["worker_cpu_s"] = workers.ru_utime + workers.ru_stime
    cpu += workers.ru_utime + workers.ru_stime
    print(json.dumps({"mode": mode, "wall_s": wall, "cpu_s": cpu, "peak_mib": peak, **detail}))


def measure(mode: str, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--child", mode], check=True, capture_output=True, text=True
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return {
        "mode": mode,
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "peak_mib": max(r["peak_mib"] for r in runs),
        "worker_peak_mib": max(r["worker_peak_mib"] for r in runs),
        "parent_cpu_s": statistics.median(r["parent_cpu_s"] for r in runs),
        "worker_cpu_s": statistics.median(r["worker_cpu_s"] for r in runs),
        "walls": [round(r["wall_s"], 2) for r in runs],
    }


def cprofile_read() -> None:
    import cProfile
    import pstats

    _setup_path()
    from popprof.readers import pop

    profiler = cProfile.Profile()
    profiler.enable()
    pop.read(ensure_data(), progress=False)
    profiler.disable()
    stats = pstats.Stats(profiler)
    by_file: dict[str, float] = {}
    for (file, _, _), (_, _, tottime, _, _) in stats.stats.items():
        owner = (
            "pva double"
            if "pva_double" in file
            else "popprof reader"
            if "readers/pop.py" in file
            else "pandas/numpy/other"
        )
        by_file[owner] = by_file.get(owner, 0.0) + tottime
    total = sum(by_file.values())
    print("cProfile attribution of one read (own time; profiling inflates Python-level calls):")
    for owner, seconds in sorted(by_file.items(), key=lambda kv: -kv[1]):
        print(f"  {owner:20s} {seconds:7.2f} s  {seconds / total:5.1%}")
    stats.sort_stats("tottime").print_stats(8)


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark reading a 16-IPU profile.pop through the pva double."
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", action="store_true", help="also attribute one read with cProfile")
    parser.add_argument(
        "--modes",
        default="open,attrs,serial,read,full",
        help="comma-separated measurements to run (default: all)",
    )
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    ensure_data()
    print(
        f"input: {POP} ({POP.stat().st_size / 2**20:,.0f} MiB on disk); load average "
        f"{Path('/proc/loadavg').read_text().split()[0] if Path('/proc/loadavg').exists() else '?'}"
    )
    results = {mode: measure(mode, args.repeat) for mode in args.modes.split(",")}
    for r in results.values():
        worker = f" + worker {r['worker_peak_mib']:5.0f} MiB" if r["worker_peak_mib"] > 1 else ""
        split = (
            f" (this process {r['parent_cpu_s']:.2f} + worker {r['worker_cpu_s']:.2f})"
            if r["worker_cpu_s"] > 0.05
            else ""
        )
        print(
            f"{r['mode']:6s} median wall {r['wall_s']:6.2f} s  median CPU {r['cpu_s']:6.2f} s{split}  "
            f"peak RSS {r['peak_mib']:5.0f} MiB{worker}  (walls {r['walls']})"
        )
    if "serial" in results and "attrs" in results:
        serial, attrs = results["serial"], results["attrs"]
        print(
            f"Python attribute access (attrs pass) = {attrs['cpu_s'] / serial['cpu_s']:.0%} of a serial read's "
            f"CPU time ({attrs['cpu_s']:.1f} of {serial['cpu_s']:.1f} s); popprof's own work = "
            f"{serial['cpu_s'] - attrs['cpu_s']:.1f} s"
        )
    if "read" in results:
        read = results["read"]
        total_peak = read["peak_mib"] + read["worker_peak_mib"]
        ok = read["wall_s"] < 15 and total_peak < 3 * 1024
        print(
            f"target (default read < 15 s, < 3 GiB for parent + worker = {total_peak:,.0f} MiB): "
            f"{'met' if ok else 'NOT met'}; on two idle cores the wall is about the larger CPU share, "
            f"{max(read['parent_cpu_s'], read['worker_cpu_s']):.1f} s"
        )
    if args.cprofile:
        cprofile_read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
