"""The split parse's worker started early (readers/chrome/early.py): forked before pandas is imported, adopted by
the read of the same file with the same options, discarded otherwise; the tables are the same either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.readers.chrome import early, split
from popprof.readers.chrome import plan as chrome_plan
from popprof.testing import trace_synth as synth

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    return synth.write_chrome_trace(
        tmp_path_factory.mktemp("early") / "trace.json", 3, seed=3, args="kineto", layers=20
    )


@pytest.fixture
def small_pieces(trace: Path, monkeypatch) -> None:
    """Split the (small) test trace as a large one would be: in pieces, on two processes."""
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", trace.stat().st_size // 40)


def _serial(trace: Path, monkeypatch) -> popprof.Profile:
    with monkeypatch.context() as m:
        m.setenv("POPPROF_PARALLEL", "0")
        return popprof.open(trace)


def _same_tables(a: popprof.Profile, b: popprof.Profile) -> None:
    assert a.tables.keys() == b.tables.keys()
    how = chrome_plan.KEYS  # the figures that say how the file was parsed
    assert {k: v for k, v in a.meta.items() if k not in how} == {
        k: v for k, v in b.meta.items() if k not in how
    }
    for name in a.tables.keys() - {"metadata"}:
        # categories are numbered in the order the parse met them: the values are what must agree
        pd.testing.assert_frame_equal(
            a.tables[name], b.tables[name], check_exact=True, check_categorical=False
        )


def _ended(processes: list, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not any(p.is_alive() for p in processes)


def test_the_parse_imports_no_pandas() -> None:
    """What the early start needs, and the CLI up to a command's body, import without pandas; nor what only
    comes later (the source's hash, the atomic output), which would delay the fork."""
    code = (
        "import sys, popprof.readers.chrome.early, popprof.readers.chrome.split, popprof.cli.summary;"
        "print(sorted(m for m in ('pandas', 'hashlib', 'popprof.io.sources', 'popprof.io.atomic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_an_early_worker_is_adopted_and_the_tables_are_the_same(
    trace: Path, small_pieces, monkeypatch
) -> None:
    serial = _serial(trace, monkeypatch)
    assert early.start(trace)
    started = early._started[1]
    profile = popprof.open(trace)
    assert early._started is None  # adopted by the read
    assert int(profile.meta["chrome.parse_parts"]) > 2
    assert int(serial.meta["chrome.parse_parts"]) == 1
    _same_tables(profile, serial)
    assert _ended(started._pool.processes())


def test_a_worker_started_for_other_options_is_ended_not_used(trace: Path, small_pieces, monkeypatch) -> None:
    serial = _serial(trace, monkeypatch)
    assert early.start(trace, with_args=True)  # the read below keeps no args: the worker's pieces differ
    processes = early._started[1]._pool.processes()
    profile = popprof.open(trace)
    assert early._started is None
    assert _ended(processes)
    _same_tables(profile, serial)


def test_discard_ends_a_worker_nobody_read_from(trace: Path, small_pieces) -> None:
    assert early.start(trace)
    processes = early._started[1]._pool.processes()
    early.discard()
    assert early._started is None and _ended(processes)
    early.discard()  # nothing left: a no-op


def test_a_rewritten_file_is_not_read_from_the_early_worker(
    trace: Path, tmp_path: Path, small_pieces
) -> None:
    copy = tmp_path / "copy.json"
    copy.write_bytes(trace.read_bytes())
    assert early.start(copy)
    processes = early._started[1]._pool.processes()
    text = copy.read_bytes()
    copy.write_bytes(text.replace(b'"aten::linear"', b'"aten::lineAR"'))  # same size, new content
    os.utime(copy, ns=(time.time_ns(), time.time_ns() + 10**9))
    profile = popprof.open(copy)
    assert _ended(processes)
    assert "aten::lineAR" in set(profile.events["name"].astype(str))
    assert "aten::linear" not in set(profile.events["name"].astype(str))


def test_inputs_that_are_not_large_plain_traces_start_nothing(trace: Path, tmp_path: Path) -> None:
    """Too small, gzip, not a trace, a directory, a missing path, a FIFO (never opened: it would block)."""
    assert not early.start(trace)  # under PARALLEL_MIN_BYTES
    gz = synth.write_chrome_trace(tmp_path / "t.json.gz", 1)
    text = tmp_path / "notes.json"
    text.write_text(json.dumps({"graphProfile": {}, "pad": "x" * 100}))
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path in (gz, text, tmp_path, tmp_path / "missing.json", fifo):
        assert not early.start(path)
        assert early._started is None


@pytest.mark.parametrize("text_ts", [False, True], ids=["plain", "a-timestamp-written-as-text"])
def test_a_worker_forked_before_pandas_parses_without_importing_it(tmp_path: Path, text_ts: bool) -> None:
    """The worker keeps pyarrow from importing pandas (its mapped files hold no pandas library); a piece that
    does need pandas (a timestamp written as text, which pandas' to_numeric reads) is parsed again with it.
    Either way the parse is the serial one's. A plain parse also leaves out what pyarrow's type inference of
    Python values imports (dateutil, numpy.ma: 20-40 ms of the worker's time)."""
    path = synth.write_chrome_trace(tmp_path / "t.json", 3, seed=4, args="kineto", layers=20)
    if text_ts:
        text = path.read_bytes()
        at = text.rindex(b'"ts":', 0, len(text) - 2000)  # near the end: in the worker's first piece
        path.write_bytes(text[:at] + b'"ts":"soon"' + text[text.index(b",", at) :])
    script = textwrap.dedent(
        f"""
        import json, sys
        import numpy as np
        from pathlib import Path
        from popprof.readers.chrome import early, split
        from popprof.readers.chrome import plan as chrome_plan
        from popprof.readers.chrome.parse import parse_file
        path = Path({str(path)!r})
        chrome_plan.PARALLEL_MIN_BYTES = 0
        split.MIN_PIECE_BYTES = path.stat().st_size // 40
        state = Path({str(tmp_path / "worker.json")!r})
        parse_back = split._parse_back
        def traced_back(jobs):  # the worker's job: after each piece, what it has loaded so far
            result = parse_back(jobs)
            # type inference's imports (pyarrow.compute is imported before the fork: its public call_function)
            lazy = sorted(m for m in ("dateutil", "numpy.ma") if m in sys.modules)
            pandas = "pandas/_libs" in Path("/proc/self/maps").read_text()
            state.write_text(json.dumps([lazy, pandas]))
            return result
        split._parse_back = traced_back  # before the fork: the worker runs it
        assert early.start(path) and "pandas" not in sys.modules
        workers = early._started[1]
        parts = workers.parts()
        worker_lazy, worker_pandas = json.loads(state.read_text())
        split.unify_synthetic_ids(parts)
        merged = split.merge(parts)
        serial, _ = parse_file(path, "traceEvents.item", False)
        split.unify_synthetic_ids([serial])  # as the read numbers them (by their text)
        early.discard()
        def columns(parsed):
            x = dict(parsed.x)
            x["name"] = np.array(parsed.names + [None], dtype=object)[x["name"]]
            x["cat"] = np.array(parsed.cats + [None], dtype=object)[x["cat"]]
            cols = [np.where(np.isnan(v), None, v) if v.dtype.kind == "f" else v for v in x.values()]
            return sorted(map(repr, zip(*cols)))  # the events, whatever order the pieces left them in
        print(json.dumps({{
            "parts": len(parts),
            "worker_pandas": worker_pandas,
            "worker_lazy": worker_lazy,
            "same": columns(merged) == columns(serial),
            "parsed": [merged.parsed, serial.parsed],
            "warnings": [dict(merged.warnings), dict(serial.warnings)],
        }}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["parts"] > 2 and result["same"]
    assert result["parsed"][0] == result["parsed"][1]
    assert result["warnings"][0] == result["warnings"][1]
    assert result["worker_pandas"] is text_ts
    if not text_ts:  # typed Arrow values only: no type inference (dateutil, numpy.ma), no pyarrow.compute
        assert result["worker_lazy"] == []
    assert bool(result["warnings"][1].get("missing_fields")) is text_ts  # the text timestamp: dropped by both


def test_the_cli_reads_a_large_trace_through_the_early_worker(tmp_path: Path) -> None:
    """`popprof summary` on a trace split in pieces: the JSON is the serial read's."""
    path = synth.write_chrome_trace(tmp_path / "t.json", 3, seed=6, args="kineto", layers=20)
    script = textwrap.dedent(
        f"""
        import sys
        from popprof.readers.chrome import early, split
        from popprof.readers.chrome import plan as chrome_plan
        chrome_plan.PARALLEL_MIN_BYTES = 0
        split.MIN_PIECE_BYTES = {path.stat().st_size // 40}
        adopted = []
        adopt = early.adopt
        early.adopt = lambda *a: adopted.append(1) or adopt(*a)
        at_fork = []  # what is loaded when the worker forks: only what the worker needs (no output check yet)
        start_parallel = split.start_parallel
        split.start_parallel = lambda *a: at_fork.append("popprof.io.atomic" in sys.modules) or start_parallel(*a)
        from popprof.cli import main
        code = main(["summary", {str(path)!r}, "--format", "json"])
        print("atomic at fork" if any(at_fork) else "fork first", file=sys.stderr)
        print("adopted" if adopted and early._started is None else "not adopted", file=sys.stderr)
        sys.exit(code)
        """
    )
    env = {**os.environ, "POPPROF_PARALLEL": "1"}
    split_run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env
    )
    serial = subprocess.run(
        [sys.executable, "-m", "popprof", "summary", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "POPPROF_PARALLEL": "0"},
    )
    assert split_run.returncode == 0 and serial.returncode == 0, split_run.stderr + serial.stderr
    assert split_run.stderr.strip().splitlines()[-2:] == ["fork first", "adopted"]
    assert "parse_parts" not in split_run.stdout  # (the summary does not say how the file was parsed)
    assert json.loads(split_run.stdout) == json.loads(serial.stdout)
