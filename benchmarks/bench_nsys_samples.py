"""Benchmark: reading an Nsight Systems export's CPU samples, with and without the call each was inside.

``cpu_samples.call`` needs every frame of every sample's call stack, not only the leaf, and the thread's
traced MPI calls (NVTX ranges: a sample inside one is communication). This measures what that costs:
``popprof.readers.nsys.host.cpu_samples`` as shipped (leaf function, call from the stacks and the traced MPI
ranges) against the same read without the ranges (the call from the stacks alone) and with the call left out
(the leaf function only, as before the column existed), each in a fresh process, alternating, medians of wall
seconds and peak RSS over ``--repeat`` runs. The NVTX ranges are read before the clock starts (the reader
reads them for its events anyway).

The input is the real pipit export (``fixtures/real/nsys``: 5,451 samples, 12,326 frames) copied ``--copies``
times into one export under ``benchmarks/data/`` (default 200: 1,090,200 samples, 2,465,200 frames, 137 MiB),
made on first use. Its NVTX ranges are the original's (17 ``MPI_*`` ranges): every copy of a sample falls
in the same ranges as the original.

Usage::

    PYTHONPATH=. python benchmarks/bench_nsys_samples.py [--copies 200] [--repeat 3]
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _table import doc_parser, load_line, mib, print_table  # noqa: E402

SOURCE = ROOT / "fixtures" / "real" / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"

RUN = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from popprof.readers.nsys import host, reading
from popprof.readers.nsys.database import opened
if {variant!r} == "leaf":
    host._sample_calls = lambda export, ids, has_stack: None  # the leaf function only
    host._traced_calls = lambda call, pid, tid, start, ranges: None
ranges = None
if {variant!r} == "shipped":
    with opened(Path({path!r})) as export:
        ranges = reading._nvtx(export)
start = time.perf_counter()
with opened(Path({path!r})) as export:
    samples = host.cpu_samples(export, None, ranges)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"seconds": seconds, "peak": peak, "rows": len(samples)}}))
"""


def make_input(copies: int) -> Path:
    """The pipit export with its samples and frames repeated ``copies`` times (new ids, same times)."""
    out = HERE / "data" / f"nsys_samples_x{copies}.sqlite"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    shutil.copyfile(SOURCE, partial)
    with sqlite3.connect(partial) as db:
        (last,) = db.execute("SELECT max(id) FROM COMPOSITE_EVENTS").fetchone()
        samples = ", ".join(r[1] for r in db.execute("PRAGMA table_info(COMPOSITE_EVENTS)") if r[1] != "id")
        frames = ", ".join(r[1] for r in db.execute("PRAGMA table_info(SAMPLING_CALLCHAINS)") if r[1] != "id")
        for k in range(1, copies):
            shift = k * (last + 1)
            db.execute(
                f"INSERT INTO COMPOSITE_EVENTS (id, {samples}) SELECT id + {shift}, {samples} "
                f"FROM COMPOSITE_EVENTS WHERE id <= {last}"
            )
            db.execute(
                f"INSERT INTO SAMPLING_CALLCHAINS (id, {frames}) SELECT id + {shift}, {frames} "
                f"FROM SAMPLING_CALLCHAINS WHERE id <= {last}"
            )
    partial.replace(out)
    return out


#: what each run reads, in the table's order
VARIANTS = {
    "leaf": "leaf function only",
    "stacks": "call from the stacks",
    "shipped": "call, MPI ranges (shipped)",
}


def run(path: Path, variant: str) -> dict:
    """One read of the samples in a fresh process: ``variant`` one of :data:`VARIANTS`."""
    code = RUN.format(root=str(ROOT), path=str(path), variant=variant)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = doc_parser(__doc__)
    parser.add_argument("--copies", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = make_input(args.copies)
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for _ in range(args.repeat):
        for variant in VARIANTS:
            runs[variant].append(run(path, variant))
    rows = []
    for variant, label in VARIANTS.items():
        figures = runs[variant]
        rows.append(
            [
                label,
                f"{figures[0]['rows']:,}",
                f"{statistics.median(f['seconds'] for f in figures):.2f}",
                mib(statistics.median(f["peak"] for f in figures)),
            ]
        )
    print_table(
        ["cpu_samples read", "samples", "wall s", "peak MiB"], rows, title=f"{path.name}; {load_line()}"
    )


if __name__ == "__main__":
    main()
