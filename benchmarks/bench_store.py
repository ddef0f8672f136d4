#!/usr/bin/env python3
"""Benchmark: the run store: store add per run, trend over 10,000 runs, store query, Spark vs DuckDB.

    python benchmarks/bench_store.py [--modes add,add-many,add-cli,add-judged,ls,trend,query,spark,verify,
                                             trend-findings]
                                     [--runs 10000] [--adds 10] [--sources 100] [--ls-runs 2000] [--repeat 3]
                                     [--data DIR] [--code CHECKOUT] [--before CHECKOUT]

- add: ``popprof.store.add`` of the Mk2 fixture bundle (12 tables) under ``--adds`` run ids in one fresh
  process; the median per add and that process's peak RSS. Target: under 0.3 s per run.
- add-many: ``popprof store add STORE SRC...`` of ``--sources`` small runs (a 3 KB trace under as many
  names) in one command, against one command per run, alternated, each into a fresh store. Target: one
  command at least 5x faster.
- add-cli: one ``popprof store add`` of the Mk2 bundle into a fresh store against ``popprof summary`` of it
  (whole processes, alternated). Target: within 1.5x.
- add-judged: what keeping each run's findings and time account costs ``store add``: one whole-process
  ``popprof store add`` of each of the Mk2 bundle, a small real trace (BERT on an H100, 71 KB) and the largest
  real trace of the fixtures (vLLM on an MI300X, 2.4 MB) into a fresh store, with the popprof of ``--code`` and
  of ``--before CHECKOUT`` (a checkout without them), alternated; then, in one process of this checkout, the
  rules and the account alone (``store.judged``, with the second read of a trace recording shapes).
- ls: ``popprof store ls`` of ``--ls-runs`` uncompacted runs (one catalogue file each), without the
  catalogue cache and the record of files whose page checksums were checked (removed first; that read
  checks and writes them) and with them.
- ``--code CHECKOUT``: the popprof the add-many, add-cli and ls commands run (another worktree, or
  ``git archive`` of a commit, measures the same cases before a change).
- trend: a ``--runs`` history (two metrics: an exact one and a noisy one with a shift) written per run into
  ``<data>/store-<runs>/`` (``--data``, default ``benchmarks/data``: give each concurrent run its own),
  compacted (timed once), then ``trend`` in fresh processes: the exact metric over all runs, the noisy one
  over its default window (the last 500). Target: under 1 s.
- query: ``store query`` (the sandbox) of a metric's history joined with the catalogue and a group-by, over
  the per-run files and over the compacted store.
- spark: the same trend query through ``Store.spark`` in a local[1] session against DuckDB, compacted store.
- verify: what checking page checksums costs the reads last covered (``--verify-runs`` uncompacted runs, default
  500): DuckDB over an object store (moto's S3 server on 127.0.0.1), ``arrow_dataset``, Spark local[1]; the
  first checked read (no record), a later one, and the read unchecked.
- spark-jvm: the JVM's own CPU time (``/proc/<pid>/stat``) for a local session's start, ``Store.spark`` and the
  trend query, with ``local_session``'s small-JVM options (C1 JIT, serial GC) and without them.

Every measurement runs in its own subprocess (its wall, CPU and peak RSS); medians over ``--repeat``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _table import load_line, print_table

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
MK2 = ROOT / "fixtures" / "mk2_training.popprof"
TRACES = ROOT / "fixtures" / "real" / "traces"
JUDGED = (
    ("Mk2 bundle", MK2),
    ("BERT H100 trace, 71 KB", TRACES / "tracelens_h100_bert_small.json.gz"),
    ("vLLM MI300X trace, 2.4 MB", TRACES / "tracelens_mi300x_vllm_graph_capture.json.gz"),
)
SMALL = ROOT / "fixtures" / "traces" / "begin_end.json"  # a 3 KB Chrome trace: a small run
EXACT = "memory.total_incl_gaps_bytes"
NOISY = "trace.device_idle_us"
TREND_SQL = (
    "SELECT m.run_id, r.commit, m.value FROM metrics m JOIN runs r "
    "ON m.run_id = r.run_id AND m.profile = r.profile AND m.ingest_id = r.ingest_id "
    f"WHERE m.name = '{NOISY}' ORDER BY m.created"
)
GROUP_SQL = "SELECT name, count(*) AS n, avg(value) AS mean FROM metrics GROUP BY name ORDER BY name"


def _child(code: str) -> dict:
    """Run ``code`` (which sets ``result``) in a fresh interpreter; its figures as a dict."""
    script = (
        "import json, sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "start, cpu = time.perf_counter(), time.process_time()\n"
        "result = {}\n" + code + "\n"
        "result.setdefault('wall_s', time.perf_counter() - start)\n"
        "result.setdefault('cpu_s', time.process_time() - cpu)\n"
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child forked from this (large) process
        # would report this process's size
        "status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
        "result['peak_mib'] = int(status.split()[0]) / 1024\n"
        "print(json.dumps(result))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_add(adds: int, repeat: int, data: Path) -> list[list[str]]:
    rows = []
    for _ in range(repeat):
        target = data / "store-add"
        shutil.rmtree(target, ignore_errors=True)
        rows.append(
            _child(
                "import popprof.store as store\n"
                f"store.init({str(target)!r})\n"
                "times, cpus = [], []\n"
                f"for i in range({adds}):\n"
                "    t, c = time.perf_counter(), time.process_time()\n"
                f"    store.add({str(target)!r}, [{str(MK2)!r}], run_id=f'{{i:05d}}')\n"
                "    times.append(time.perf_counter() - t)\n"
                "    cpus.append(time.process_time() - c)\n"
                "result['first_s'] = times[0]\n"
                "result['per_add_s'] = sorted(times[1:])[len(times[1:]) // 2]\n"
                "result['per_add_cpu_s'] = sorted(cpus[1:])[len(cpus[1:]) // 2]\n"
            )
        )
    per_add = statistics.median(r["per_add_s"] for r in rows)
    cpu = statistics.median(r["per_add_cpu_s"] for r in rows)
    first = statistics.median(r["first_s"] for r in rows)
    peak = max(r["peak_mib"] for r in rows)
    verdict = "met" if per_add < 0.3 else "NOT met"
    notes = f"{cpu:.3f} CPU; first add {first:.2f}"
    return [["store add, Mk2 bundle (per run)", f"{per_add:.3f}", notes, f"{peak:.0f}", verdict]]


def _cli(code: Path, *args: object) -> tuple[float, float]:
    """Run ``popprof ARGS`` (the popprof of ``code``) in a fresh interpreter; (wall s, CPU s of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "popprof", *(str(a) for a in args)],
        env=dict(os.environ, PYTHONPATH=str(code)),
        cwd=code,  # ``python -m`` puts the working directory first on the path
        stdout=subprocess.DEVNULL,
        check=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_add_many(sources: int, repeat: int, data: Path, code: Path) -> list[list[str]]:
    """``store add STORE SRC...`` with ``sources`` small runs in one command, against one command per run
    (alternated, each into a fresh store)."""
    folder = data / f"add-many-src-{sources}"
    if len(list(folder.glob("*.json"))) != sources:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for i in range(sources):  # one profile per name: each a run of its own series
            shutil.copyfile(SMALL, folder / f"r{i:05d}.json")
    files = sorted(folder.glob("*.json"))
    one, each = [], []
    for _ in range(repeat):
        target = data / "store-add-many"
        shutil.rmtree(target, ignore_errors=True)
        _cli(code, "store", "init", target)
        one.append(_cli(code, "store", "add", target, *files))
        shutil.rmtree(target, ignore_errors=True)
        _cli(code, "store", "init", target)
        walls, cpus = zip(*(_cli(code, "store", "add", target, f) for f in files), strict=True)
        each.append((sum(walls), sum(cpus)))
    one_wall, one_cpu = statistics.median(w for w, _ in one), statistics.median(c for _, c in one)
    each_wall, each_cpu = statistics.median(w for w, _ in each), statistics.median(c for _, c in each)
    ratio = each_wall / one_wall
    return [
        [
            f"store add, {sources:,} small runs in one command",
            f"{one_wall:.2f}",
            f"{one_cpu:.2f} CPU; {one_wall / sources * 1000:.0f} ms a run",
            "",
            "",
        ],
        [
            f"store add, {sources:,} small runs, one command each",
            f"{each_wall:.2f}",
            f"{each_cpu:.2f} CPU; {each_wall / sources * 1000:.0f} ms a run",
            "",
            ("met" if ratio >= 5 else "NOT met") + f": one command {ratio:.1f}x faster (target 5x)",
        ],
    ]


def bench_add_cli(repeat: int, data: Path, code: Path) -> list[list[str]]:
    """One CLI ``store add`` of the Mk2 bundle into a fresh store against ``popprof summary`` of it
    (alternated)."""
    add, summary = [], []
    for _ in range(repeat):
        target = data / "store-add-cli"
        shutil.rmtree(target, ignore_errors=True)
        _cli(code, "store", "init", target)
        add.append(_cli(code, "store", "add", target, MK2))
        summary.append(_cli(code, "summary", MK2))
    add_wall, sum_wall = statistics.median(w for w, _ in add), statistics.median(w for w, _ in summary)
    ratio = add_wall / sum_wall
    return [
        ["popprof summary, Mk2 bundle (whole process)", f"{sum_wall:.2f}", _cpu(summary), "", ""],
        [
            "popprof store add, Mk2 bundle (whole process)",
            f"{add_wall:.2f}",
            _cpu(add),
            "",
            ("met" if ratio <= 1.5 else "NOT met") + f": {ratio:.2f}x summary (target 1.5x)",
        ],
    ]


def bench_add_judged(repeat: int, data: Path, code: Path, before: Path | None) -> list[list[str]]:
    """Whole-process ``store add`` of each :data:`JUDGED` source into a fresh store, with the popprof of
    ``code`` and of ``before`` (alternated), then the findings and account alone in one process of this
    checkout (the median of ``repeat``, each on a fresh read)."""
    rows = []
    for label, source in JUDGED:
        timed: dict[str, list[tuple[float, float]]] = {"after": [], "before": []}
        for _ in range(repeat):
            for which, checkout in (("before", before), ("after", code)):
                if checkout is None:
                    continue
                target = data / "store-add-judged"
                shutil.rmtree(target, ignore_errors=True)
                _cli(checkout, "store", "init", target)
                timed[which].append(_cli(checkout, "store", "add", target, source))
        judged = _child(
            "from pathlib import Path\n"
            "from popprof.readers import open_all\n"
            "from popprof.readers.chrome.sniffing import source_records\n"
            "from popprof.store.judged import account_frame, findings_frame\n"
            f"source = Path({str(source)!r})\n"
            "reads, judges = [], []\n"
            f"for _ in range({repeat}):\n"
            "    t = time.perf_counter()\n"
            "    (profile,) = open_all(source).values()\n"
            "    reads.append(time.perf_counter() - t)\n"
            "    t = time.perf_counter()\n"
            "    if source_records(source):\n"
            "        (profile,) = open_all(source, with_args=True).values()\n"
            "    findings_frame(profile)\n"
            "    account_frame(profile)\n"
            "    judges.append(time.perf_counter() - t)\n"
            "result['read_s'] = sorted(reads)[len(reads) // 2]\n"
            "result['judge_s'] = sorted(judges)[len(judges) // 2]\n"
            "result['args'] = source_records(source)\n"
        )
        after = statistics.median(w for w, _ in timed["after"])
        note = f"{_cpu(timed['after'])}"
        if timed["before"]:
            was = statistics.median(w for w, _ in timed["before"])
            note += f"; before {was:.2f} ({_cpu(timed['before'])}), {after / was:.2f}x"
        judge = f"{judged['judge_s']:.2f} s of it judging"
        judge += " (incl. the read with args)" if judged["args"] else ""
        rows.append([f"popprof store add, {label}", f"{after:.2f}", note, "", judge])
    return rows


def _cpu(figures: list[tuple[float, float]]) -> str:
    return f"{statistics.median(c for _, c in figures):.2f} CPU"


def bench_ls(runs: int, repeat: int, data: Path, code: Path) -> list[list[str]]:
    """``popprof store ls`` of ``runs`` uncompacted runs (one catalogue file each): without the catalogue
    cache and the record of checked files (removed first; this read checks every file's pages and writes
    both) and with them."""
    sys.path.insert(0, str(ROOT))
    import popprof.store as store
    from popprof.testing.store_history import write_history

    path = data / f"store-ls-{runs}"
    if not (path / "popprof-store.json").exists():
        shutil.rmtree(path, ignore_errors=True)
        store.init(path)
        write_history(path, {NOISY: [1.0 + i % 7 for i in range(runs)]})
    cold, warm = [], []
    for _ in range(repeat):
        # the first read of the store: no catalogue cache, no record of the files whose pages were checked
        for name in ("runs.parquet", "verified.parquet"):
            (path / "cache" / name).unlink(missing_ok=True)
        cold.append(_cli(code, "store", "ls", path))
        warm.append(_cli(code, "store", "ls", path))
    return [
        [
            f"store ls, {runs:,} uncompacted runs, first read (writes the caches)",
            f"{statistics.median(w for w, _ in cold):.2f}",
            _cpu(cold),
            "",
            "",
        ],
        [
            f"store ls, {runs:,} uncompacted runs, the caches written",
            f"{statistics.median(w for w, _ in warm):.2f}",
            _cpu(warm),
            "",
            "",
        ],
    ]


def ensure_history(runs: int, data: Path) -> tuple[Path, Path, float]:
    """The per-run store and its compacted copy (made once); the compaction's wall time (0 when cached)."""
    sys.path.insert(0, str(ROOT))
    import popprof.store as store
    from popprof.store.compact import compact
    from popprof.testing.store_history import shifted_series, write_history

    per_run, compacted = data / f"store-{runs}", data / f"store-{runs}-compacted"
    if not (per_run / "popprof-store.json").exists():
        shutil.rmtree(per_run, ignore_errors=True)
        store.init(per_run)
        exact = [1_000_000 + 4096 * (i // (runs // 5)) for i in range(runs)]
        noisy = shifted_series(runs, seed=1, shifts={runs - 120: 0.08})
        started = time.perf_counter()
        write_history(per_run, {EXACT: exact, NOISY: noisy})
        print(f"wrote {runs:,} runs per run in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    took = 0.0
    if not (compacted / "popprof-store.json").exists():
        shutil.rmtree(compacted, ignore_errors=True)
        shutil.copytree(per_run, compacted)
        started = time.perf_counter()
        compact(compacted, before="9999-12")
        took = time.perf_counter() - started
    return per_run, compacted, took


def bench_trend(runs: int, repeat: int, data: Path) -> list[list[str]]:
    _, compacted, took = ensure_history(runs, data)
    rows = []
    cases = [
        (f"trend, exact metric, all {runs:,} runs (compacted)", EXACT, runs),
        (f"trend, noisy metric, last 500 of {runs:,} (compacted)", NOISY, 500),
    ]
    for label, metric, last in cases:
        figures = [
            _child(
                "t, c = time.perf_counter(), time.process_time()\n"
                "from popprof.store.trend import trend\n"
                "result['import_s'] = time.perf_counter() - t\n"
                "t, c = time.perf_counter(), time.process_time()\n"
                f"series = trend({str(compacted)!r}, [{metric!r}], last={last})\n"
                "result['call_s'], result['call_cpu_s'] = time.perf_counter() - t, time.process_time() - c\n"
                "result['changes'] = len(series[0].changes)\n"
            )
            for _ in range(repeat)
        ]
        call = statistics.median(f["call_s"] for f in figures)
        rows.append(
            [
                label,
                f"{call:.2f}",
                f"{statistics.median(f['call_cpu_s'] for f in figures):.2f} CPU; imports "
                f"{statistics.median(f['import_s'] for f in figures):.2f} s",
                f"{max(f['peak_mib'] for f in figures):.0f}",
                ("met" if call < 1 else "NOT met") + f" ({figures[0]['changes']} changes)",
            ]
        )
        # what a person waits for: the command in a fresh interpreter, imports and output included
        figures = [
            _child(
                "import contextlib, io\n"
                "from popprof.cli import main\n"
                "with contextlib.redirect_stdout(io.StringIO()):\n"
                f"    main(['trend', {str(compacted)!r}, {metric!r}, '--last', '{last}'])\n"
            )
            for _ in range(repeat)
        ]
        wall = statistics.median(f["wall_s"] for f in figures)
        rows.append(
            [
                "popprof trend CLI, the same (whole process)",
                f"{wall:.2f}",
                f"{statistics.median(f['cpu_s'] for f in figures):.2f} CPU",
                f"{max(f['peak_mib'] for f in figures):.0f}",
                "met" if wall < 1 else "NOT met",
            ]
        )
    if took:
        rows.append([f"store compact, {runs:,} runs (once)", f"{took:.1f}", "", "", ""])
    return rows


def bench_trend_findings(runs: int, repeat: int, data: Path) -> list[list[str]]:
    """``trend --findings`` over a compacted ``runs``-run store whose runs are judged with five rules: one always
    fires, one starts firing 120 runs from the end, one changes severity every 1,000 runs, two never fire."""
    sys.path.insert(0, str(ROOT))
    import popprof.store as store
    from popprof.testing.store_history import write_history

    root = data / f"store-{runs}-findings"
    if not (root / "popprof-store.json").exists():
        shutil.rmtree(root, ignore_errors=True)
        store.init(root)
        findings = {
            "memory.headroom": ["error"] * runs,
            "host.launch-overhead": [None] * (runs - 120) + ["warning"] * 120,
            "exchange.share": [("info", "warning")[(i // 1000) % 2] for i in range(runs)],
        }
        write_history(root, {EXACT: [1.0] * runs}, compacted=True, findings=findings)
    rows = []
    for label, last in ((f"all {runs:,} runs", runs), (f"last 500 of {runs:,}", 500)):
        figures = [
            _child(
                "t, c = time.perf_counter(), time.process_time()\n"
                "from popprof.store.trend_findings import findings_trend\n"
                "result['import_s'] = time.perf_counter() - t\n"
                "t, c = time.perf_counter(), time.process_time()\n"
                f"profiles = findings_trend({str(root)!r}, last={last})\n"
                "result['call_s'], result['call_cpu_s'] = time.perf_counter() - t, time.process_time() - c\n"
                "result['changes'] = sum(len(r.changes) for p in profiles for r in p.rules)\n"
            )
            for _ in range(repeat)
        ]
        rows.append(
            [
                f"trend --findings, {label} (compacted, 3 rules firing)",
                f"{statistics.median(f['call_s'] for f in figures):.2f}",
                f"{statistics.median(f['call_cpu_s'] for f in figures):.2f} CPU; imports "
                f"{statistics.median(f['import_s'] for f in figures):.2f} s",
                f"{max(f['peak_mib'] for f in figures):.0f}",
                f"{figures[0]['changes']} transitions",
            ]
        )
    return rows


def bench_query(runs: int, repeat: int, data: Path) -> list[list[str]]:
    per_run, compacted, _ = ensure_history(runs, data)
    rows = []
    for where, path in (("per-run files", per_run), ("compacted", compacted)):
        for name, sql in (("metric history join", TREND_SQL), ("group-by", GROUP_SQL)):
            figures = [
                _child(
                    "import popprof.store as store\n"
                    f"frame = store.open({str(path)!r}).query({sql!r}, timeout_s=3600)\n"
                    "result['rows'] = len(frame)\n"
                )
                for _ in range(repeat if where == "compacted" else 1)
            ]
            wall = statistics.median(f["wall_s"] for f in figures)
            rows.append(
                [
                    f"store query {name}, {runs:,} runs, {where}",
                    f"{wall:.2f}",
                    f"{statistics.median(f['cpu_s'] for f in figures):.2f}",
                    f"{max(f['peak_mib'] for f in figures):.0f}",
                    f"{figures[0]['rows']:,} rows",
                ]
            )
    return rows


def bench_spark(runs: int, repeat: int, data: Path) -> list[list[str]]:
    _, compacted, _ = ensure_history(runs, data)
    spark = _child(
        "from popprof.store.engine_spark import local_session\n"
        "import popprof.store as store\n"
        "t = time.perf_counter(); session = local_session('bench'); result['session_s'] = time.perf_counter() - t\n"
        f"s = store.open({str(compacted)!r}); s.spark(session)\n"
        "times = []\n"
        f"for _ in range({max(repeat, 2)}):\n"
        "    t = time.perf_counter()\n"
        f"    rows = session.sql({TREND_SQL!r}).toArrow().num_rows\n"
        "    times.append(time.perf_counter() - t)\n"
        "result['first_s'], result['query_s'], result['rows'] = times[0], sorted(times[1:])[0], rows\n"
        "session.stop()\n"
    )
    duck = _child(
        "import popprof.store as store\n"
        f"con = store.open({str(compacted)!r}).duckdb()\n"
        "times = []\n"
        f"for _ in range({max(repeat, 2)}):\n"
        "    t = time.perf_counter()\n"
        f"    rows = con.sql({TREND_SQL!r}).to_arrow_table().num_rows\n"
        "    times.append(time.perf_counter() - t)\n"
        "result['first_s'], result['query_s'], result['rows'] = times[0], sorted(times[1:])[0], rows\n"
    )
    return [
        [
            f"Spark local[1]: metric history join, {runs:,} runs (compacted)",
            f"{spark['query_s']:.2f}",
            f"first {spark['first_s']:.2f}, session {spark['session_s']:.1f}",
            f"{spark['peak_mib']:.0f} (driver; JVM apart)",
            f"{spark['rows']:,} rows",
        ],
        [
            f"DuckDB: the same query, {runs:,} runs (compacted)",
            f"{duck['query_s']:.3f}",
            f"first {duck['first_s']:.3f}",
            f"{duck['peak_mib']:.0f}",
            f"{duck['rows']:,} rows",
        ],
    ]


def bench_spark_jvm(runs: int, repeat: int, data: Path) -> list[list[str]]:
    _, compacted, _ = ensure_history(runs, data)
    rows = []
    for label, options in (("small JVM (default)", None), ("JVM defaults", "")):
        figures = []
        for _ in range(repeat):
            figures.append(
                _child(
                    "import os\n"
                    "from popprof.store.engine_spark import SMALL_JVM, local_session\n"
                    "import popprof.store as store\n"
                    f"options = {options!r}\n"
                    "session = local_session('bench', java_options=SMALL_JVM if options is None else options)\n"
                    "pid = session._jvm.java.lang.ProcessHandle.current().pid()\n"
                    "def jvm_cpu():\n"
                    "    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()\n"
                    "    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')\n"
                    "result['start_cpu_s'] = jvm_cpu()\n"
                    f"store.open({str(compacted)!r}).spark(session)\n"
                    f"session.sql({TREND_SQL!r}).toArrow()\n"
                    "result['jvm_cpu_s'] = jvm_cpu()\n"
                    "session.stop()\n"
                )
            )
        mid = sorted(figures, key=lambda f: f["jvm_cpu_s"])[len(figures) // 2]
        rows.append(
            [
                f"Spark local[1] session + views + trend query, {label}",
                f"{mid['wall_s']:.1f}",
                f"JVM CPU {mid['jvm_cpu_s']:.1f} (start {mid['start_cpu_s']:.1f})",
                f"{mid['peak_mib']:.0f} (driver; JVM apart)",
                f"{runs:,} runs",
            ]
        )
    return rows


_MOTO = """
import os, socket
from moto.server import ThreadedMotoServer
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
server.start()
os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                  AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
import fsspec
fsspec.filesystem("s3").mkdir("popprof-bench")
"""


def bench_verify(runs: int, repeat: int, data: Path) -> list[list[str]]:
    """What checking page checksums costs the reads it covers, ``runs`` uncompacted runs (two files each that a
    metric history reads): DuckDB over an object store (moto's S3 server on 127.0.0.1: no network latency, so
    the listing and each object's GET are cheap here), ``arrow_dataset`` of a local store, Spark local[1]. Each
    unchecked read against the first checked one (no record: every page read twice) and a later one."""
    sys.path.insert(0, str(ROOT))
    import popprof.store as store
    from popprof.testing.store_history import write_history

    local = data / f"store-verify-{runs}"
    if not (local / "popprof-store.json").exists():
        shutil.rmtree(local, ignore_errors=True)
        store.init(local)
        write_history(local, {NOISY: [1.0 + i % 7 for i in range(runs)]})
    rounds = max(repeat, 2)
    timed = (
        "import os\n"
        "def timed(read):\n"
        "    t = time.perf_counter(); n = read(); return time.perf_counter() - t, n\n"
        "def med(xs):\n"
        "    return sorted(xs)[len(xs) // 2]\n"
    )
    s3 = _child(
        _MOTO + timed + "import popprof.store as store\n"
        "from popprof.store import verified\n"
        "from popprof.testing.store_history import write_history\n"
        "root = 's3://popprof-bench/store'\n"
        "store.init(root)\n"
        f"write_history(root, {{{NOISY!r}: [1.0 + i % 7 for i in range({runs})]}})\n"
        "s = store.open(root)\n"
        "fs = s.location.fs\n"
        "def read(verify):\n"
        "    con = s.duckdb(kinds=['metrics'], verify=verify)\n"
        f"    n = con.sql({TREND_SQL!r}).to_arrow_table().num_rows\n"
        "    con.close(); return n\n"
        "plain, first, later = [], [], []\n"
        f"for _ in range({rounds}):\n"
        "    plain.append(timed(lambda: read(False))[0])\n"
        "    fs.rm(s.location._bare(verified.VERIFIED))\n"
        "    first.append(timed(lambda: read(True))[0])\n"
        "    later.append(timed(lambda: read(True))[0])\n"
        "result.update(plain=med(plain), first=med(first), later=med(later))\n"
        "server.stop()\n"
    )
    arrow = _child(
        timed + "import popprof.store as store\n"
        "from popprof.store import verified\n"
        f"s = store.open({str(local)!r})\n"
        "record = s.location.path(verified.VERIFIED)\n"
        "def read(verify):\n"
        "    return s.arrow_dataset('metrics', verify=verify).to_table().num_rows\n"
        "plain, first, later = [], [], []\n"
        f"for _ in range({rounds}):\n"
        "    plain.append(timed(lambda: read(False))[0])\n"
        "    os.path.exists(record) and os.remove(record)\n"
        "    first.append(timed(lambda: read(True))[0])\n"
        "    later.append(timed(lambda: read(True))[0])\n"
        "result.update(plain=med(plain), first=med(first), later=med(later))\n"
    )
    spark = _child(
        timed + "from popprof.store.engine_spark import local_session\n"
        "import popprof.store as store\n"
        "session = local_session('bench')\n"
        f"s = store.open({str(local)!r})\n"
        "def read(verify):\n"
        "    s.spark(session, verify=verify)\n"
        f"    return session.sql({TREND_SQL!r}).toArrow().num_rows\n"
        "read(False); read(True)  # the JIT's warm-up, apart\n"
        "plain, checked = [], []\n"
        f"for _ in range({rounds}):\n"
        "    plain.append(timed(lambda: read(False))[0])\n"
        "    checked.append(timed(lambda: read(True))[0])\n"
        "result.update(plain=med(plain), first=med(checked), later=med(checked))\n"
        "session.stop()\n"
    )
    rows = []
    for name, got in (
        ("DuckDB over S3 (moto, 127.0.0.1): metric history", s3),
        ("arrow_dataset('metrics').to_table(), local", arrow),
        ("Spark local[1]: metric history (views registered each read)", spark),
    ):
        rows.append(
            [
                f"{name}, {runs:,} runs",
                f"{got['first']:.2f}",
                f"unchecked {got['plain']:.2f}, later checked reads {got['later']:.2f}",
                f"{got['peak_mib']:.0f}",
                "",
            ]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description="Benchmark the run store, trend, store query and Spark.")
    parser.add_argument(
        "--modes",
        default="add,add-many,add-cli,ls,trend,query,spark",
        help="Any of add, add-many, add-cli, add-judged, ls, trend, trend-findings, query, spark, spark-jvm, verify "
        "(comma-separated).",
    )
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--adds", type=int, default=10)
    parser.add_argument("--sources", type=int, default=100, help="Small runs of add-many (default 100).")
    parser.add_argument("--ls-runs", type=int, default=2000, help="Uncompacted runs of ls (default 2,000).")
    parser.add_argument(
        "--code",
        type=Path,
        default=ROOT,
        help="The checkout whose popprof the add-many, add-cli and ls commands run (default this one): "
        "another worktree measures the same cases before a change.",
    )
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="add-judged: a checkout without findings and account in the store, measured alternately.",
    )
    parser.add_argument(
        "--verify-runs", type=int, default=500, help="Uncompacted runs of verify (default 500)."
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="Where the stores are written and cached (default benchmarks/data).",
    )
    args = parser.parse_args()
    args.data = args.data.resolve()
    args.data.mkdir(parents=True, exist_ok=True)
    rows = []
    modes = args.modes.split(",")
    if "add" in modes:
        rows += bench_add(args.adds, args.repeat, args.data)
    if "add-many" in modes:
        rows += bench_add_many(args.sources, args.repeat, args.data, args.code.resolve())
    if "add-cli" in modes:
        rows += bench_add_cli(args.repeat, args.data, args.code.resolve())
    if "add-judged" in modes:
        before = args.before.resolve() if args.before else None
        rows += bench_add_judged(args.repeat, args.data, args.code.resolve(), before)
    if "ls" in modes:
        rows += bench_ls(args.ls_runs, args.repeat, args.data, args.code.resolve())
    if "trend" in modes:
        rows += bench_trend(args.runs, args.repeat, args.data)
    if "trend-findings" in modes:
        rows += bench_trend_findings(args.runs, args.repeat, args.data)
    if "query" in modes:
        rows += bench_query(args.runs, args.repeat, args.data)
    if "spark" in modes:
        rows += bench_spark(args.runs, args.repeat, args.data)
    if "spark-jvm" in modes:
        rows += bench_spark_jvm(args.runs, args.repeat, args.data)
    if "verify" in modes:
        rows += bench_verify(args.verify_runs, args.repeat, args.data)
    print_table(
        ["case", "wall s (median)", "CPU s / notes", "peak RSS MiB", "result"], rows, title=load_line()
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
