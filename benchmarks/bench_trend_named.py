#!/usr/bin/env python3
"""Benchmark: what ``popprof trend`` pays to explain a change of a time metric, account and names included.

    python benchmarks/bench_trend_named.py [--runs 10000] [--repeat 3] [--data DIR] [--code CHECKOUT]
                                           [--table steps|events] [--last 500]

Writes once (cached under ``--data``, default ``benchmarks/data``) a compacted store of ``--runs`` runs whose
metrics are those of ``fixtures/mk2_training.popprof`` (the time account, ``execution.total_time_us``,
``execution.run_count``) and, for the last 250 runs, of ``mk2_training_v2`` (exchange +565.1 us), each run with
the fixture's ``steps`` table (2,000 rows a run), one file per month as ``store compact`` writes them. With
``--table events`` the runs are HTA's ``trace_compare`` pair instead (``trace.profiler_step_count``, the
account; each run's ``events`` table). Then, each in a fresh process, ``trend`` of
``execution.total_time_us`` (``account.window_us``) over the last ``--last`` runs (500: one change, 250 runs either
side; 10,000: 9,750 before it): the call (imports apart) and the whole CLI process. ``--code``: the popprof
that runs (another checkout, or ``git archive`` of a commit, measures the same store before a change). The
first read of a store checks the page checksums of its files (``cache/verified.parquet``); a warm-up run does
it before the timings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _table import load_line, print_table

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
TRACES = ROOT / "fixtures" / "real" / "traces"
SOURCES = {
    "steps": (ROOT / "fixtures" / "mk2_training.popprof", ROOT / "fixtures" / "mk2_training_v2.popprof"),
    "events": (TRACES / "hta_trace_compare_base.json.gz", TRACES / "hta_trace_compare_test.json.gz"),
}
METRIC = {"steps": "execution.total_time_us", "events": "account.window_us"}
KEEP = (
    "account.",
    "execution.total_time_us",
    "execution.run_count",
    "trace.profiler_step_count",
    "trace.span_us",
)


def build(runs: int, table: str, data: Path) -> Path:
    """The compacted store (written once): metrics and ``table`` of ``runs`` runs, the last 250 the new
    source's."""
    sys.path.insert(0, str(ROOT))
    import pyarrow as pa

    import popprof
    import popprof.store as store
    from popprof.compare.baseline import metric_values
    from popprof.store.catalogue import write_parquet
    from popprof.store.identity import month_of
    from popprof.store.layout import COMPACT_PREFIX, Location
    from popprof.store.schemas import table_kind, to_arrow
    from popprof.testing.store_history import write_history

    path = data / f"store-named-{table}-{runs}"
    if (path / "popprof-store.json").exists():
        return path
    store.init(path)
    profiles = [popprof.open(str(source)) for source in SOURCES[table]]
    values = [metric_values(p) for p in profiles]
    names = sorted(
        n for n in set(values[0]) | set(values[1]) if n.startswith(KEEP) and values[0].get(n) is not None
    )
    step = runs - 250  # the last 500 runs: 250 either side of the change
    series = {n: [values[0 if i < step else 1][n] for i in range(runs)] for n in names}
    ids = write_history(path, series, profile="bench", compacted=True)
    import datetime as dt

    start, every = dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.timedelta(hours=2)
    kind = table_kind(table)
    frames = [p.get(table) for p in profiles]
    months: dict[str, list] = {}
    for i, run_id in enumerate(ids):
        ingest = hashlib.sha256(f"{run_id}\0bench\0synthetic".encode()).hexdigest()[:16]
        rows = to_arrow(kind, frames[0 if i < step else 1], run_id=run_id, profile="bench", ingest_id=ingest)
        months.setdefault(month_of(start + i * every), []).append(rows)
    location = Location.of(path)
    for month, tables in months.items():
        digest = hashlib.sha1(month.encode()).hexdigest()[:12]
        rel = f"{kind}/month={month}/{COMPACT_PREFIX}000001-{digest}.parquet"
        write_parquet(location, rel, pa.concat_tables(tables))
    return path


def _child(code: Path, script: str) -> dict:
    """``script`` (which sets ``result``) in a fresh interpreter running the popprof of ``code``."""
    program = (
        "import json, sys, time\n"
        f"sys.path.insert(0, {str(code)!r})\n"
        "start, cpu = time.perf_counter(), time.process_time()\n"
        "result = {}\n" + script + "\n"
        "result.setdefault('wall_s', time.perf_counter() - start)\n"
        "result.setdefault('cpu_s', time.process_time() - cpu)\n"
        "status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
        "result['peak_mib'] = int(status.split()[0]) / 1024\n"
        "print(json.dumps(result))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=code
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description="Benchmark trend's explanation of a change, names included.")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--code", type=Path, default=ROOT)
    parser.add_argument("--table", choices=sorted(SOURCES), default="steps")
    parser.add_argument(
        "--last", type=int, default=500, help="The window (default 500: 250 runs either side)."
    )
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    path = build(args.runs, args.table, args.data.resolve())
    metric, code = METRIC[args.table], args.code.resolve()
    call = (
        "from popprof.store.trend import trend\n"
        "t, c = time.perf_counter(), time.process_time()\n"
        f"series = trend({str(path)!r}, [{metric!r}], last={args.last})\n"
        "result['call_s'], result['call_cpu_s'] = time.perf_counter() - t, time.process_time() - c\n"
        "doc = series[0].changes[0].what_changed\n"
        "result['named'] = len(((doc or {}).get('contributors') or {}).get('rows', []))\n"
    )
    cli = (
        "import contextlib, io\n"
        "from popprof.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['trend', {str(path)!r}, {metric!r}, '--last', '{args.last}'])\n"
    )
    _child(code, call)  # the first read checks the files' page checksums
    calls = [_child(code, call) for _ in range(args.repeat)]
    clis = [_child(code, cli) for _ in range(args.repeat)]
    rows = [
        [
            f"trend call, {metric}, last {args.last:,} of {args.runs:,} ({args.table}; {calls[0]['named']} named)",
            f"{statistics.median(c['call_s'] for c in calls):.2f}",
            f"{statistics.median(c['call_cpu_s'] for c in calls):.2f} CPU",
            f"{max(c['peak_mib'] for c in calls):.0f}",
        ],
        [
            "popprof trend CLI, the same (whole process)",
            f"{statistics.median(c['wall_s'] for c in clis):.2f}",
            f"{statistics.median(c['cpu_s'] for c in clis):.2f} CPU",
            f"{max(c['peak_mib'] for c in clis):.0f}",
        ],
    ]
    print_table(
        ["case", "wall s (median)", "CPU s", "peak RSS MiB"], rows, title=f"{load_line()}; code {code}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
