"""Chrome trace reader: formats, phases, nesting, device categories, args, bad input."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from trace_helpers import stack_nesting

from popprof.io import sources
from popprof.model.errors import InputError
from popprof.readers import chrome, detect, read_path
from popprof.readers.chrome import framing, parse, sniffing, split
from popprof.readers.chrome import plan as chrome_plan
from popprof.testing import trace_synth as synth
from popprof.trace import frame

COLS = [
    "event_id",
    "pid",
    "tid",
    "parent_id",
    "depth",
    "name",
    "channel",
    "start_us",
    "dur_us",
    "device_category",
]


def _write(tmp_path: Path, events: list | dict, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(events), encoding="utf-8")
    return path


def _plain(frame: pd.DataFrame) -> list[tuple]:
    return [
        tuple(r) for r in frame[COLS].astype(object).where(frame[COLS].notna(), None).itertuples(index=False)
    ]


def test_fixture_json_and_gz_read_the_same(fixtures_dir: Path) -> None:
    a = read_path(fixtures_dir / "traces" / "training_loop.json")
    b = read_path(fixtures_dir / "traces" / "training_loop.json.gz")
    assert detect(fixtures_dir / "traces" / "training_loop.json.gz") is chrome
    assert _plain(a.events) == _plain(b.events)
    raw = json.loads((fixtures_dir / "traces" / "training_loop.json").read_text())["traceEvents"]
    complete = [e for e in raw if e["ph"] == "X"]
    assert len(a.events) == len(complete)
    assert a.target_value("source_format") == "chrome_trace"
    # totals per name agree with the raw JSON
    expected: dict[str, float] = {}
    for e in complete:
        expected[e["name"]] = expected.get(e["name"], 0.0) + e["dur"]
    got = a.events.groupby("name", observed=True)["dur_us"].sum()
    assert set(got.index.astype(str)) == set(expected)
    assert np.allclose([got[k] for k in sorted(expected)], [expected[k] for k in sorted(expected)])
    # counters: one row per series of every C event
    counters = [(e["ts"], k, v) for e in raw if e["ph"] == "C" for k, v in e["args"].items()]
    assert sorted(
        zip(a.counters["ts_us"], a.counters["series"].astype(str), a.counters["value"], strict=True)
    ) == sorted(counters)
    names = a.threads.set_index(["pid", "tid"])["thread_name"].to_dict()
    assert names[(synth.GPU_PID, synth.NCCL_STREAM)] == "stream 20 (nccl)"
    assert set(a.threads["process_name"]) == {"python3 train.py", "GPU 0"}


def test_nesting_matches_a_stack_walk(fixtures_dir: Path) -> None:
    ev = read_path(fixtures_dir / "traces" / "training_loop.json").events
    expected = stack_nesting(
        list(zip(ev["event_id"], ev["pid"], ev["tid"], ev["start_us"], ev["dur_us"], strict=True))
    )
    parent = ev["parent_id"].astype(object).where(ev["parent_id"].notna(), None)
    got = {
        int(i): (None if p is None else int(p), int(d))
        for i, p, d in zip(ev["event_id"], parent, ev["depth"], strict=True)
    }
    assert got == expected
    steps = ev[ev["name"].astype(str).str.startswith("ProfilerStep#")]
    assert (steps["depth"] == 0).all()
    kernels = ev[ev["pid"] == synth.GPU_PID]
    assert (kernels["depth"] == 0).all()


def test_device_categories_of_gpu_events(fixtures_dir: Path) -> None:
    ev = read_path(fixtures_dir / "traces" / "training_loop.json").events
    cat = dict(zip(ev["name"].astype(str), ev["device_category"].astype(object), strict=True))
    assert cat["ampere_sgemm_128x64_tn"] == "compute"
    assert cat[synth._NCCL] == "exchange"
    assert cat["Memcpy HtoD (Pageable -> Device)"] == "host_io"
    assert cat["Memcpy DtoH (Device -> Pageable)"] == "host_io"
    assert cat["Memset (Device)"] == "other"
    assert cat["cudaStreamSynchronize"] == "host_wait"  # the host blocking on the device: host time
    for host in ("aten::mm", "cudaLaunchKernel", "nccl:all_reduce", "ProfilerStep#0"):
        assert pd.isna(cat[host]), host


def test_device_map_override(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            {"ph": "X", "name": "ampere_sgemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 0, "dur": 5},
            {"ph": "X", "name": "my_collective", "cat": "kernel", "pid": 0, "tid": 7, "ts": 10, "dur": 5},
            {
                "ph": "X",
                "name": "Memset (Device)",
                "cat": "gpu_memset",
                "pid": 0,
                "tid": 7,
                "ts": 20,
                "dur": 1,
            },
        ],
    )
    ev = read_path(path, device_map={"exchange": r"^kernel:my_", "other": None}).events
    assert ev["device_category"].astype(object).tolist()[:2] == ["compute", "exchange"]
    assert pd.isna(ev["device_category"].iloc[2])  # the "other" default was switched off


def test_array_form_with_begin_end_instants_counters_and_metadata(fixtures_dir: Path) -> None:
    p = read_path(fixtures_dir / "traces" / "begin_end.json")
    ev = p.events
    steps = ev[ev["name"].astype(str).str.startswith("train_step")]
    assert steps["dur_us"].tolist() == [100.0, 100.0, 100.0]
    inner = ev[ev["name"] == "ExecutorState::Process"]
    assert inner["dur_us"].tolist() == [85.0, 85.0, 85.0]
    assert (inner["parent_id"].to_numpy() == steps["event_id"].to_numpy()).all()
    marks = ev[ev["name"] == "checkpoint"]
    assert marks["dur_us"].tolist() == [0.0] * 3 and marks["depth"].tolist() == [2] * 3
    shutdown = ev[ev["name"] == "shutdown"]
    assert len(shutdown) == 1 and shutdown["dur_us"].isna().all()  # unclosed B kept, not dropped
    meta = p.meta
    assert meta["warnings.unmatched_end"] == "1"
    assert meta["warnings.unmatched_begin"] == "1"
    assert "chrome.skipped_phases" not in meta  # the flow event is kept, in the flows table
    assert meta["chrome.flows"] == "1" and p.flows["phase"].astype(str).tolist() == ["s"]
    assert p.threads.set_index("pid")["process_name"].to_dict() == {1: "/host:CPU", 2: "/device:GPU:0"}
    assert len(p.counters) == 3


def test_with_args_keeps_json_and_merges_end_args(fixtures_dir: Path) -> None:
    plain = read_path(fixtures_dir / "traces" / "begin_end.json")
    assert "args" not in plain.events.columns
    p = read_path(fixtures_dir / "traces" / "begin_end.json", with_args=True)
    steps = p.events[p.events["name"].astype(str).str.startswith("train_step")]
    assert [json.loads(a) for a in steps["args"]] == [{"loss": 0.5}, {"loss": 0.4}, {"loss": 0.3}]
    p = read_path(fixtures_dir / "traces" / "training_loop.json", with_args=True)
    gemm = p.events[p.events["name"] == "ampere_sgemm_128x64_tn"]["args"].map(json.loads)
    assert all(a["stream"] == 7 and "correlation" in a for a in gemm)


def test_bad_events_are_counted_not_fatal(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "traceEvents": [
                {"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
                {"ph": "X", "name": "no ts", "pid": 1, "tid": 1, "dur": 5},
                {"ph": "X", "name": "negative", "pid": 1, "tid": 1, "ts": 20, "dur": -3},
                {"ph": "X", "name": "no dur", "pid": 1, "tid": 1, "ts": 30},
                {"ph": "E", "pid": 1, "tid": 2, "ts": 5},
                {"ph": "B", "name": "late", "pid": 1, "tid": 2, "ts": 50},
                {"ph": "E", "pid": 1, "tid": 2, "ts": 60},
                {"ph": "B", "name": "early", "pid": 1, "tid": 2, "ts": 40},
                {"ph": "E", "pid": 1, "tid": 2, "ts": 45},
                "not an event",
                {"ph": "X", "name": "string ids", "pid": "Main", "tid": "worker", "ts": 70, "dur": 1},
            ]
        },
    )
    p = read_path(path)
    meta = p.meta
    assert meta["warnings.missing_fields"] == "2"  # no ts (dropped) and no dur (kept as 0)
    assert meta["warnings.negative_duration"] == "1"
    assert meta["warnings.unmatched_end"] == "1"
    assert meta["warnings.out_of_order_timestamps"] == "1"
    assert meta["warnings.malformed_events"] == "1"
    ev = p.events.set_index(p.events["name"].astype(str))
    assert ev.loc["negative", "dur_us"] == 0.0 and ev.loc["no dur", "dur_us"] == 0.0
    assert "no ts" not in ev.index
    assert ev.loc["early", "dur_us"] == 5.0 and ev.loc["late", "dur_us"] == 10.0
    named = p.threads[p.threads["process_name"] == "Main"]
    assert len(named) == 1 and named["pid"].iloc[0] == ev.loc["string ids", "pid"]


def test_truncated_file_keeps_what_was_read(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(50)]
    text = json.dumps({"traceEvents": events})
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    p = read_path(path)
    assert 0 < len(p.events) < 50
    assert p.events["name"].astype(str).tolist() == [f"e{i}" for i in range(len(p.events))]
    assert "IncompleteJSONError" in p.meta["warnings.truncated"]


@pytest.mark.parametrize(
    "content, problem",
    [
        (b'{"traceEvents": [{"ph": "X", "na', "not valid JSON"),
        (b'{"traceEvents": []}', "no usable trace events"),
        (b'[{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]', "no usable trace events"),
    ],
)
def test_unusable_input_is_a_clear_error(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=problem):
        read_path(path)


def test_gzip_that_is_not_gzip(tmp_path: Path) -> None:
    path = tmp_path / "trace.json.gz"
    path.write_bytes(b"\x1f\x8b" + b"this is not deflate data" * 10)
    with pytest.raises(InputError, match="gzip|not valid JSON"):
        read_path(path)
    good = gzip.compress(
        json.dumps([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]).encode()
    )
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(InputError):
        read_path(path)


def test_sniff_claims_traces_only(tmp_path: Path) -> None:
    assert chrome.sniff(tmp_path / "a.json", b'  [ {"name": "x", "ph": "X"')
    assert chrome.sniff(tmp_path / "a.json", b'{"schemaVersion": 1, "traceEvents": [')
    assert not chrome.sniff(tmp_path / "a.json", b'{"graphProfile": {"target": {}}}')
    assert not chrome.sniff(tmp_path / "a.json", b"[1, 2, 3]")
    assert not chrome.sniff(tmp_path / "a.json", b'<?xml version="1.0"?>')


def test_input_is_not_modified(fixtures_dir: Path) -> None:
    path = fixtures_dir / "traces" / "training_loop.json.gz"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    p = read_path(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert json.loads(p.meta["source_files"])[0]["sha256"] == before


def test_parallel_parse_equals_serial(tmp_path: Path, monkeypatch) -> None:
    path = synth.write_chrome_trace(tmp_path / "t.json", 30, seed=3, args="all")
    serial = chrome.read(path, parallel=False)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    parallel = chrome.read(path, with_args=False)
    assert parallel.meta["chrome.parse_parts"] == "2"
    assert _plain(parallel.events) == _plain(serial.events)
    assert parallel.counters.equals(serial.counters)
    assert parallel.threads.equals(serial.threads)
    # a boundary inside nested args (a list of objects) makes a part fail to parse: one serial pass instead
    array = tmp_path / "a.json"
    events = [
        {
            "ph": "X",
            "name": f"n{i}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 0.5,
            "args": {"inputs": [{"name": k} for k in range(30)]},
        }
        for i in range(40)
    ]
    array.write_text(json.dumps(events))
    result = chrome.read(array)
    assert result.meta["chrome.parse_parts"] == "1"
    assert result.events["name"].astype(str).tolist() == [e["name"] for e in events]


def _logged_part(job: tuple):
    """``split._parse_part`` that appends ``pid piece-start`` to $POPPROF_TEST_PIECE_LOG (module level:
    the forked worker runs it too)."""
    with open(os.environ["POPPROF_TEST_PIECE_LOG"], "a") as log:
        log.write(f"{os.getpid()} {job[1]}\n")
    return _real_parse_part(job)


_real_parse_part = split._parse_part


def test_parallel_parse_in_many_pieces_equals_serial(tmp_path: Path, monkeypatch) -> None:
    """Pieces are taken from both ends, this process from the front and the worker from the back: every
    piece is parsed exactly once, both processes take some, and the tables equal one serial pass."""
    path = synth.write_chrome_trace(tmp_path / "k.json", 4, seed=6, args="kineto", layers=12)
    serial = chrome.read(path, parallel=False)
    log = tmp_path / "pieces.log"
    monkeypatch.setenv("POPPROF_TEST_PIECE_LOG", str(log))
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", path.stat().st_size // 40)
    monkeypatch.setattr(split, "_parse_part", _logged_part)
    parallel = chrome.read(path)
    pieces = int(parallel.meta["chrome.parse_parts"])
    assert pieces >= 8
    taken = [line.split() for line in log.read_text().splitlines()]
    starts = sorted(int(start) for _, start in taken)
    assert len(starts) == len(set(starts)) == pieces  # each piece once
    by_process = {pid for pid, _ in taken}
    assert str(os.getpid()) in by_process and len(by_process) == 2
    mine = sorted(int(start) for pid, start in taken if pid == str(os.getpid()))
    assert mine == starts[: len(mine)]  # this process's pieces are the front ones, the worker's the rest
    assert _plain(parallel.events) == _plain(serial.events)
    assert parallel.threads.equals(serial.threads)
    assert parallel.flows.equals(serial.flows)
    assert parallel.counters.equals(serial.counters)


def test_pieces_halve_toward_the_middle() -> None:
    size = 100 << 20
    fractions = split._piece_fractions(size)
    assert fractions[0] == 0.25 and 0.5 in fractions
    assert fractions == sorted(fractions) and all(
        abs(a + b - 1) < 1e-12 for a, b in zip(fractions, fractions[::-1], strict=True)
    )
    widths = [b - a for a, b in zip([0.0, *fractions], [*fractions, 1.0], strict=True)]
    assert min(widths) * size >= split.MIN_PIECE_BYTES > min(widths) * size / 2  # small where they meet
    assert split._piece_fractions(split.MIN_PIECE_BYTES) == [0.5]  # a small file: two halves


def test_pieces_halve_toward_where_a_worker_started_early_meets_the_reader() -> None:
    """The early worker parses alone while the reading process imports pandas: they meet before the middle,
    so the small pieces are there (the one that finishes first waits at most for a small piece)."""
    size = 83 << 20
    middle = split.meeting_point(size, split.EARLY_HEAD_START_BYTES)
    assert 0.4 < middle < 0.5 and split.meeting_point(size) == 0.5
    assert split.meeting_point(20 << 20, split.EARLY_HEAD_START_BYTES) == 0.25  # never before a quarter
    assert split.meeting_point(1400 << 20, split.EARLY_HEAD_START_BYTES) > 0.49  # a large file: the middle
    fractions = split._piece_fractions(size, middle)
    assert fractions == sorted(fractions) and middle in fractions
    bounds = [0.0, *fractions, 1.0]
    widths = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
    at = bounds.index(middle)
    assert max(widths[at - 1], widths[at]) * size < 2 * split.MIN_PIECE_BYTES  # small where they meet
    assert widths[0] < widths[-1]  # the reading process's first piece is the smaller: it joins late


def test_claims_give_each_piece_once_from_either_end(monkeypatch) -> None:
    import multiprocessing

    claims = split._Claims(multiprocessing.get_context("fork"), 5)
    order = [claims.take(from_back=back) for back in (False, True, True, False, True, False)]
    assert order == [0, 4, 3, 1, 2, None]
    assert claims.take(from_back=True) is None
    stuck = split._Claims(multiprocessing.get_context("fork"), 3)
    stuck._lock.acquire()  # as if a process died holding it: no piece, rather than waiting for ever
    monkeypatch.setattr(split, "CLAIM_TIMEOUT", 0.01)
    assert stuck.take(from_back=False) is None


#: the real description (the test below replaces the module's with its own, which calls this)
_SOURCE_METADATA = sources.source_metadata


def test_parallel_parse_ends_the_worker_before_the_tables(tmp_path: Path, monkeypatch) -> None:
    """Once the pieces are in, the worker ends (its heap does not add to the read's peak while this process
    builds the tables), and the file's SHA-256 is made in this process, equal to the serial read's."""
    path = synth.write_chrome_trace(tmp_path / "t.json", 30, seed=5, args="kineto", layers=4)
    serial = chrome.read(path, parallel=False)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    started: list = []
    start_parallel = split.start_parallel

    def watched_start(*args, **kwargs):
        workers = start_parallel(*args, **kwargs)
        started.append(workers)
        return workers

    alive_at_tables: list[bool] = []
    build_events = frame.build_events

    def watched_build(**kwargs):
        (workers,) = started
        workers._pool.close()  # waits until the thread that reaps the workers is done (told to end with the pieces)
        for process in workers._pool._started:
            alive_at_tables.append(process.exitcode != 0)  # ended by itself, not terminated
        return build_events(**kwargs)

    described_by: list[int] = []

    def describe_where(fmt: str, paths: list) -> dict:
        described_by.append(os.getpid())
        return _SOURCE_METADATA(fmt, paths)

    monkeypatch.setattr(split, "start_parallel", watched_start)
    monkeypatch.setattr(frame, "build_events", watched_build)
    monkeypatch.setattr(sources, "source_metadata", describe_where)
    parallel = chrome.read(path)
    assert parallel.meta["chrome.parse_parts"] == "2"
    assert alive_at_tables == [False]  # one worker, ended cleanly before build_events
    assert described_by == [os.getpid()]
    assert parallel.meta["source_files"] == serial.meta["source_files"]
    assert (
        json.loads(parallel.meta["source_files"])[0]["sha256"]
        == hashlib.sha256(path.read_bytes()).hexdigest()
    )


def test_parallel_parse_keeps_string_pids_of_a_kineto_trace(tmp_path: Path, monkeypatch) -> None:
    """Kineto's bookkeeping pids are strings ("Spans", "Traces"): a split parse must still be used.

    Each part numbers string ids in its own order; the merge must give each string one id, the
    one a serial pass gives (before: any string pid sent the file to a second, serial parse).
    """
    path = synth.write_chrome_trace(
        tmp_path / "k.json",
        2,
        seed=4,
        args="kineto",
        layers=30,
        extra_events=['{"ph":"X","name":"early","pid":"B","tid":"t","ts":1,"dur":1}'],
    )
    text = path.read_text()
    # a later string pid that part 1 sees before "B": part-local numbering differs from the merged one
    path.write_text(
        text.replace(
            '{"ph":"X","cat":"Trace"',
            '{"ph":"X","name":"late","pid":"A","tid":"t",'
            '"ts":2,"dur":1},\n{"ph":"X","name":"again","pid":"B","tid":"t","ts":3,"dur":1},\n'
            '{"ph":"X","cat":"Trace"',
        )
    )
    serial = chrome.read(path, parallel=False)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    parallel = chrome.read(path)
    assert parallel.meta["chrome.parse_parts"] == "2"
    assert _plain(parallel.events) == _plain(serial.events)
    assert parallel.threads.equals(serial.threads)
    assert parallel.flows.equals(serial.flows)
    pids = parallel.events.groupby("name", observed=True)["pid"].first()
    assert pids["early"] == pids["again"] != pids["late"]
    spans = parallel.events[parallel.events["name"] == "PyTorch Profiler (0)"]
    assert len(spans) == 1 and spans["bookkeeping"].all()
    assert parallel.threads.set_index("pid").loc[spans["pid"].iloc[0], "process_name"] == "Spans"


@pytest.mark.parametrize("form", ["object", "pretty-crlf", "array", "array-unterminated"])
def test_block_framer_equals_ijson(tmp_path: Path, monkeypatch, form: str) -> None:
    """Small blocks force many cuts, some inside nested args lists; both engines must agree."""
    monkeypatch.setattr(framing, "BLOCK_BYTES", 2048)
    events = [
        {
            "ph": "X",
            "name": f"op{i % 7}",
            "cat": "cpu_op",
            "pid": 1,
            "tid": i % 3,
            "ts": i * 2.5,
            "dur": 1.25,
            "args": {"inputs": [{"name": k, "s": "}, {"} for k in range(i % 4)]},
        }
        for i in range(300)
    ]
    events.insert(10, {"ph": "C", "name": "mem", "pid": 1, "ts": 3, "args": {"a": 1}})
    if form == "object":
        text = json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "x]"})
    elif form == "pretty-crlf":  # kineto writes one key per line
        text = json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0}]}, indent=2).replace(
            "\n", "\r\n"
        )
    else:
        text = json.dumps(events)
        if form == "array-unterminated":
            text = text.rstrip("]") + ",\n"
    fast, slow = _parse_both_ways(tmp_path, text, with_args=True)
    assert fast.parsed == 301
    assert fast.names == slow.names and fast.cats == slow.cats
    for key in ("name", "cat", "pid", "tid", "ts", "dur"):
        assert np.array_equal(fast.x[key], slow.x[key])
    assert [fast.names[c] for c in fast.x["name"]] == [e["name"] for e in events if e["ph"] == "X"]
    assert [json.loads(a) for a in fast.x_args] == [e["args"] for e in events if e["ph"] == "X"]
    assert fast.counters == slow.counters


def _mixed_kineto_events(n: int) -> list[dict]:
    """Plain X / flow events with, here and there, everything the Arrow fast path must hand to orjson."""
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host"}}]
    for i in range(n):
        corr = 1000 + i
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1 + i % 2,
                "ts": 10.0 * i,
                "dur": 4,
                "args": {"External id": i, "correlation": corr, "cbid": 211},
            }
        )
        events.append(
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1 + i % 2, "ts": 10.0 * i}
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i % 5}",
                "pid": 0,
                "tid": 7,
                "ts": 10.0 * i + 5,
                "dur": 3.5,
                "args": {"device": 0, "stream": 7, "correlation": corr, "grid": [1, 2, 3]},
            }
        )
        events.append(
            {
                "ph": "f",
                "cat": "ac2g",
                "name": "ac2g",
                "id": corr,
                "pid": 0,
                "tid": 7,
                "ts": 10.0 * i + 5,
                "bp": "e",
            }
        )
        odd = i % 97
        if odd == 3:
            events.append(
                {
                    "ph": "X",
                    "name": "rocm",
                    "pid": 1,
                    "tid": 1,
                    "ts": 10.0 * i + 1,
                    "dur": 1,
                    "args": {"stream": "0x0"},
                }
            )
        elif odd == 11:
            events.append(
                {
                    "ph": "X",
                    "cat": "Trace",
                    "name": "PyTorch Profiler (0)",
                    "pid": "Spans",
                    "tid": "PyTorch Profiler",
                    "ts": 10.0 * i,
                    "dur": 2,
                }
            )
        elif odd == 19:
            events.append({"ph": "i", "s": "g", "name": "mark", "pid": 1, "tid": 1, "ts": 10.0 * i + 2})
        elif odd == 23:
            events.append({"ph": "C", "name": "mem", "pid": 0, "ts": 10.0 * i, "args": {"a": i, "b": 2.5}})
        elif odd == 31:
            events.append(
                {"ph": "t", "cat": "x", "name": "v2", "bind_id": f"b{i}", "pid": 1, "tid": 1, "ts": 10.0 * i}
            )
        elif odd == 41:
            events.append({"ph": "X", "name": "no dur", "pid": 1, "tid": 1, "ts": 10.0 * i + 3})
            events.append({"ph": "X", "name": "no ts", "pid": 1, "tid": 1, "dur": 3})
            events.append({"ph": "X", "name": "negative", "pid": 1, "tid": 1, "ts": 10.0 * i + 3, "dur": -2})
        elif odd == 53:
            events.append(
                {
                    "ph": "X",
                    "name": "nested",
                    "pid": 1,
                    "tid": 1,
                    "ts": 10.0 * i,
                    "dur": 1,
                    "args": {"inputs": [{"name": "a"}, {"name": "}, {"}]},
                }
            )
        elif odd == 61:
            events.append(
                {
                    "ph": "X",
                    "name": "float pid",
                    "pid": 1.5,
                    "tid": 1,
                    "ts": 10.0 * i,
                    "dur": 1,
                    "args": {"correlation": 2.5},
                }
            )
        elif odd == 67:
            events.append({"ph": "X", "name": 12, "cat": None, "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 1})
        elif odd == 71:
            events.append({"ph": "B", "name": "open", "pid": 1, "tid": 3, "ts": 10.0 * i})
            events.append({"ph": "E", "pid": 1, "tid": 3, "ts": 10.0 * i + 1})
    return events


@pytest.mark.parametrize("first_step", [700, 1 << 16])
@pytest.mark.parametrize("form", ["object", "pretty", "array", "kineto", "compact"])
def test_arrow_fast_path_equals_ijson(tmp_path: Path, monkeypatch, form: str, first_step: int) -> None:
    """Blocks of plain X / flow events go through Arrow, the rest through orjson: the result is ijson's
    (orjson taking a short step where Arrow stopped, 700 bytes doubling to a block, or a whole block)."""
    monkeypatch.setattr(framing, "FAST_BLOCK_BYTES", 6000)
    monkeypatch.setattr(framing, "BLOCK_BYTES", 2500)
    monkeypatch.setattr(framing, "FIRST_STEP_BYTES", first_step)
    monkeypatch.setattr(framing, "FAST_MISSES", 10**6)  # keep trying the fast path after odd blocks
    taken: list = []
    real_parse = framing.arrow.parse_block

    def counted(text: bytes, flows: bool = True):
        table, covered = real_parse(text, flows)
        taken.append("all" if covered == len(text) else "part" if table is not None else "none")
        return table, covered

    monkeypatch.setattr(framing.arrow, "parse_block", counted)
    events = _mixed_kineto_events(600)
    if form == "object":
        text = json.dumps({"schemaVersion": 1, "traceEvents": events, "distributedInfo": {"rank": 3}})
    elif form == "pretty":
        text = json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0}]}, indent=2)
    elif form == "kineto":  # kineto's own layout: "  {", keys on indented lines, "  }," between events
        body = ",\n".join(
            "  {\n    " + json.dumps(e)[1:-1].replace(', "args"', ',\n    "args"') + "\n  }" for e in events
        )
        text = '{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + body + "\n  ]\n}"
    elif form == "compact":  # one event a line (benchmarks/gen_traces.py)
        text = '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(map(json.dumps, events)) + "\n]}"
    else:
        text = json.dumps(events)
    fast, slow = _parse_both_ways(tmp_path, text, with_args=False)
    assert min(Counter(taken)[k] for k in ("all", "part", "none")) >= 3  # fast, partly fast, orjson: all used
    assert fast.parsed == slow.parsed == len(events)
    assert (
        fast.top
        == {
            "object": {"schemaVersion": 1, "distributedInfo": {"rank": 3}},
            "pretty": {"deviceProperties": [{"id": 0}]},
            "array": {},
            "kineto": {"schemaVersion": 1},
            "compact": {"schemaVersion": 1},
        }[form]
    )
    assert fast.warnings == slow.warnings and fast.warnings["missing_fields"] > 0
    assert fast.counters == slow.counters and fast.process_names == slow.process_names

    def labelled(parsed) -> dict:
        x = dict(parsed.x)
        x["name"] = [parsed.names[c] if c >= 0 else None for c in x["name"]]
        x["cat"] = [parsed.cats[c] if c >= 0 else None for c in x["cat"]]
        flows = {
            k: (
                v.to_pylist()
                if k == "id"
                else [parsed.flow_labels[c] if c >= 0 else None for c in v]
                if k in ("phase", "name", "cat", "bp")
                else v.tolist()
            )
            for k, v in parsed.flows.items()
        }
        synthetic = {v: k for k, v in parsed.synthetic.items()}
        for key in ("pid", "tid"):
            x[key] = [synthetic.get(v, v) for v in x[key].tolist()]
            flows[key] = [synthetic.get(v, v) for v in flows[key]]

        def plain(values) -> list:  # NaN as None: NaN != NaN would fail equal rows
            return [
                None if isinstance(v, float) and v != v else v
                for v in (values if isinstance(values, list) else values.tolist())
            ]

        return {k: plain(v) for k, v in x.items()}, {k: plain(v) for k, v in flows.items()}

    fast_x, fast_flows = labelled(fast)
    slow_x, slow_flows = labelled(slow)
    # the fast path takes a block's X events after its flows and odd events: compare as multisets of rows
    assert sorted(zip(*fast_x.values(), strict=True), key=repr) == sorted(
        zip(*slow_x.values(), strict=True), key=repr
    )
    assert sorted(zip(*fast_flows.values(), strict=True), key=repr) == sorted(
        zip(*slow_flows.values(), strict=True), key=repr
    )
    assert len(fast_flows["id"]) == sum(e["ph"] in ("s", "t", "f") for e in events)


def test_an_id_maps_the_same_whatever_else_its_chunk_holds(tmp_path: Path) -> None:
    # 1.5 is not an integer: it gets a synthetic id (2^40 up), the same in a chunk of events that only use
    # it (fast path) as in the metadata event naming it. "7" is the integer 7 written as text (old Kineto
    # writes one thread both ways): the same process as 7 (issue 25).
    path = _write(
        tmp_path,
        {
            "traceEvents": [
                {"ph": "M", "name": "process_name", "pid": "7", "args": {"name": "Seven"}},
                {"ph": "M", "name": "thread_name", "pid": "7", "tid": 1.5, "args": {"name": "worker"}},
                *({"ph": "X", "name": "a", "pid": "7", "tid": 1.5, "ts": i, "dur": 1} for i in range(3)),
                {"ph": "X", "name": "b", "pid": 7, "tid": 1, "ts": 0, "dur": 1},
            ]
        },
    )
    p = read_path(path)
    a = p.events[p.events["name"] == "a"]
    b = p.events[p.events["name"] == "b"]
    assert a["pid"].nunique() == 1 and a["pid"].iloc[0] == 7 and a["tid"].iloc[0] >= 2**40
    assert (b["pid"].iloc[0], b["tid"].iloc[0]) == (7, 1)  # the same process, another thread
    row = p.threads.set_index(["pid", "tid"]).loc[(a["pid"].iloc[0], a["tid"].iloc[0])]
    assert (row["process_name"], row["thread_name"]) == ("Seven", "worker")
    assert len(p.threads) == 2


def test_counter_with_a_non_numeric_timestamp_is_counted_not_fatal(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1},
            {"ph": "C", "name": "mem", "pid": 1, "ts": "soon", "args": {"bytes": 5}},
            {"ph": "C", "name": "mem", "pid": 1, "ts": 3, "args": {"bytes": 7}},
        ],
    )
    p = read_path(path)
    assert p.counters["value"].tolist() == [7.0] and p.counters["ts_us"].tolist() == [3.0]
    assert p.meta["warnings.missing_fields"] == "1"


def _parse_both_ways(tmp_path: Path, text: str, *, with_args: bool):
    """``text`` written to a file and parsed by the block parser (Arrow and orjson; orjson alone with ``args``)
    and by ijson."""
    path = tmp_path / "t.json"
    path.write_text(text)
    prefix = sniffing.event_prefix(path)
    parsed = []
    for parser in ("orjson" if with_args else "arrow", "ijson"):
        with open(path, "rb") as handle:
            parsed.append(parse.parse_stream(handle, prefix, with_args, parser))
    return parsed[0], parsed[1]


def test_the_parallel_switch_turns_the_split_parse_off(tmp_path: Path, monkeypatch) -> None:
    """POPPROF_PARALLEL=0 (io/parallel's one switch) reaches the split parse: one pass in this process."""
    path = synth.write_chrome_trace(tmp_path / "t.json", 30, seed=3, args="kineto", layers=4)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    assert chrome.read(path).meta["chrome.parse_parts"] == "2"
    monkeypatch.setenv("POPPROF_PARALLEL", "0")
    assert chrome.read(path).meta["chrome.parse_parts"] == "1"


def test_the_workers_pieces_come_back_through_the_pool_as_protocol_5_pickles(
    tmp_path: Path, monkeypatch
) -> None:
    """Each piece the worker parsed comes back through the pool's pipe, pickled with protocol 5 (no file
    anywhere: the temporary folder stays empty); the read gives the serial read's tables and names its plan."""
    import pickletools

    path = synth.write_chrome_trace(tmp_path / "t.json", 30, seed=5, args="kineto", layers=4)
    serial = chrome.read(path, workers=1)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", path.stat().st_size // 20)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    taken: list[bytes] = []
    unpacked = split._unpacked
    monkeypatch.setattr(split, "_unpacked", lambda data: taken.append(data) or unpacked(data))
    parallel = chrome.read(path, workers=2)
    assert int(parallel.meta["chrome.parse_parts"]) > 2 and parallel.meta["chrome.workers"] == "2"
    assert taken and all(next(pickletools.genops(data))[1] == 5 for data in taken)  # the PROTO opcode
    assert list(temp.iterdir()) == []
    assert parallel.events.equals(serial.events)
    assert parallel.flows.equals(serial.flows)
