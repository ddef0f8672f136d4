"""A stand-in for a Poplar program, run as CMD by tests/test_record*.py (never imported by popprof).

It checks the environment ``popprof record`` gave it, saves what it saw, then
writes what Poplar and libpvti would: a run directory through the pva test
double (``profile.pop`` per engine plus ``debug.cbor``, in the double's own
storage, not Poplar's), a ``.pvti`` trace of the double, a printed profile
summary, an out-of-memory message on stderr, and exits with the code asked.

    python record_child.py [--engines training,inference] [--oom] [--abort] [--summary] [--pvti]
                           [--broken-engine NAME] [--stdout-from FILE] [--exit N] [--chatter N]
                           [--wait-signal READY_FILE] [--seen FILE] [--own-group]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "pva_double"))
# popprof from this source tree, as the tests that run CMD import it: its fixture writers (popprof.testing)
# are not in the installed wheel
sys.path.insert(1, str(HERE.parent))

#: Real Poplar output (provenance and licences: fixtures/real/poplar/README.md).
REAL = HERE.parent / "fixtures" / "real" / "poplar"
#: A graph_memory_allocation_error as Poplar prints it when compilation runs out of memory.
OOM_MESSAGE = REAL / "tutorials_tut4_oom_message_mk2.txt"
#: A Poplar profile summary of a Mk2 training run (fixtures/README.md), fullest tile at 95.3 % of capacity.
SUMMARY = HERE.parent / "fixtures" / "text_summary" / "mk2_training.txt"


def _options(name: str) -> dict:
    value = os.environ.get(name)
    return json.loads(value) if value else {}


def _spec(name: str, seed: int):
    from popprof.testing.synth import SynthSpec

    return SynthSpec(
        name=name,
        num_steps=120,
        num_programs=60,
        num_liveness_steps=40,
        num_variables=30,
        hot_tiles=3,
        oom_tiles=2 if name == "training" else 0,
        seed=seed,
    )


def write_run_directory(directory: Path, engines: list[str]) -> None:
    """What ``autoReport.all`` writes: ``ENGINE/profile.pop`` per engine and ``debug.cbor`` at the root."""
    from report_store import write_debug, write_pop

    from popprof.testing.synth import make_profile

    profiles = [make_profile(_spec(name, seed)) for seed, name in enumerate(engines, start=40)]
    for profile in profiles:
        write_pop(profile, directory / profile.name / "profile.pop")
    write_debug(profiles, directory / "debug.cbor")


def write_pvti(directory: Path) -> None:
    """One host trace named as libpvti names it (date, time, zone, pid)."""
    from trace_store import write_trace

    rows = [
        ["Engine::run(main)", 4000.0, 1000.0, "Poplar", -1],
        ["StreamCopy", 900.0, 1200.0, "Poplar", 0],
        ["Compile", 20000.0, 0.0, "Framework", -1],
    ]
    write_trace(
        directory / f"Tue_Nov_24_11:59:17_2020_GMT_{os.getpid()}.pvti",
        [{"pid": os.getpid(), "threads": [{"tid": 1, "events": rows}]}],
    )


def print_summary() -> None:
    """A printed profile summary, as ``printProfileSummary`` prints it (the project's generated sample)."""
    sys.stdout.write(SUMMARY.read_text("utf-8"))
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engines", default="")
    parser.add_argument("--oom", action="store_true", help="print Poplar's out-of-memory message on stderr")
    parser.add_argument(
        "--abort", action="store_true", help="end as an uncaught C++ exception does (SIGABRT)"
    )
    parser.add_argument("--stdout-from", action="append", default=[], help="print this (real) log on stdout")
    parser.add_argument("--summary", action="store_true")
    parser.add_argument(
        "--broken-engine", default=None, help="also leave a cut-off profile.pop for this engine"
    )
    parser.add_argument("--pvti", action="store_true")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--chatter", type=int, default=0, help="lines to print on each stream (interleaved)")
    parser.add_argument("--wait-signal", default=None, metavar="READY_FILE")
    parser.add_argument("--seen", default=None)
    parser.add_argument("--own-group", action="store_true", help="leave popprof's process group first")
    args = parser.parse_args()
    if args.own_group:
        os.setpgid(0, 0)

    engine, pvti = _options("POPLAR_ENGINE_OPTIONS"), _options("PVTI_OPTIONS")
    if args.seen:
        Path(args.seen).write_text(
            json.dumps(
                {
                    "POPLAR_ENGINE_OPTIONS": engine,
                    "PVTI_OPTIONS": pvti,
                    "MY_OWN_VAR": os.environ.get("MY_OWN_VAR"),
                    "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                }
            )
        )
    print("child: starting", flush=True)
    for i in range(args.chatter):
        print(f"out {i}", flush=(i % 97 == 0))
        print(f"err {i}", file=sys.stderr, flush=(i % 89 == 0))
    sys.stdout.flush()
    sys.stderr.flush()
    if args.engines and engine.get("autoReport.all") == "true":
        write_run_directory(Path(engine["autoReport.directory"]), args.engines.split(","))
    if args.broken_engine and engine.get("autoReport.all") == "true":
        broken = Path(engine["autoReport.directory"]) / args.broken_engine / "profile.pop"
        broken.parent.mkdir(parents=True, exist_ok=True)
        broken.write_bytes(b"PK\x03\x04 cut off")  # the start of an archive, then nothing
    if args.pvti and pvti.get("enable") == "true":
        write_pvti(Path(pvti.get("directory", ".")))
    if args.summary:
        print_summary()
    for log in args.stdout_from:
        sys.stdout.write(Path(log).read_text("utf-8"))
        sys.stdout.flush()
    if args.wait_signal:
        got: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda number, _frame: got.append(number))
        Path(args.wait_signal).write_text("ready")
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a duplicate (e.g. a terminal's Ctrl-C forwarded once more) would arrive by now
        name = signal.Signals(got[0]).name if got else "nothing"
        print(f"child: got {name} x{len(got)}; finishing", flush=True)
        return 128 + got[0] if got else 99
    if args.oom:
        sys.stderr.write(OOM_MESSAGE.read_text("utf-8"))
        sys.stderr.flush()
    if args.abort:
        signal.signal(signal.SIGABRT, signal.SIG_DFL)
        os.abort()
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
