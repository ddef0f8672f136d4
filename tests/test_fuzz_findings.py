"""Findings of fuzzing the real inputs (2026-12-07, docs/limits.md "Fuzzed inputs"): each damaged input is
built from a real fixture in ``tmp_path`` (no fixture files of their own) and run through the commands that
ended in an internal error (exit 3): now a read warning and exit 0, or one error line and exit 2, never a
traceback, an internal error or a changed input.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from popprof.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real"


def _digest(path: Path) -> str:
    """One hash of every file under ``path`` (names and bytes)."""
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
        h.update(str(file.relative_to(path.parent)).encode())
        h.update(file.read_bytes())
    return h.hexdigest()


def _rewrite(member: Path, change) -> None:
    """Rewrite one Parquet member of a bundle with ``change(table) -> table``, keeping its schema metadata."""
    table = pq.read_table(member)
    pq.write_table(change(table), member)


def _run(capsys: pytest.CaptureFixture, *args: object) -> tuple[int, str]:
    """``popprof ARGS`` in this process: the exit code and stderr; never a traceback or an internal error."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    _, err = capsys.readouterr()
    assert code in (0, 1), f"exit {code}, stderr: {err}"
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


def _commands(bundle: Path, out: Path) -> list[list[object]]:
    """The commands the fuzzer ran on the damaged bundle."""
    return [
        ["summary", bundle],
        ["summary", bundle, "--format", "json", "-o", out / "s.json"],
        ["check", bundle, "--format", "json", "--fail-on", "never"],
        ["diff", bundle, FIXTURES / "mk2_training.popprof", "--no-gate"],
        ["query", bundle, "SELECT count(*) FROM tiles"],
        ["export", bundle, "-o", out / "e.popprof"],
    ]


def _run_all(capsys: pytest.CaptureFixture, bundle: Path, tmp_path: Path) -> None:
    """Every command of :func:`_commands` on ``bundle`` (outputs under ``tmp_path``), none failing inside."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for args in _commands(bundle, out):
        _run(capsys, *args)


def test_bundle_with_a_tile_written_twice_is_read_with_a_warning(capsys, tmp_path):
    """tiles.parquet of mk2_training with two rows set to the same tile (2^31 - 1, as a fuzzed 'huge' value):
    summary, check, diff and query ended in 'internal error: InvalidIndexError: Reindexing only valid with
    uniquely valued Index objects' (the tile map indexes by tile). The repeated row is dropped with a
    warning, as a metadata row without a key is."""
    bundle = tmp_path / "mk2_training.popprof"
    shutil.copytree(FIXTURES / "mk2_training.popprof", bundle)

    def twice(table: pa.Table) -> pa.Table:
        tiles = table.column("tile").to_pylist()
        tiles[5] = tiles[6] = 2**31 - 1
        return table.set_column(table.column_names.index("tile"), "tile", pa.array(tiles, type=pa.int32()))

    _rewrite(bundle / "tiles.parquet", twice)
    before = _digest(bundle)
    out = tmp_path / "out"
    out.mkdir()
    for args in _commands(bundle, out):
        _, err = _run(capsys, *args)
        warnings = [line for line in err.splitlines() if "repeating" in line]
        assert warnings == [
            f"popprof: warning: {bundle}: 1 row of table 'tiles' repeating a tile already read, ignored"
        ], (args, err)
    assert _digest(bundle) == before


def test_bundle_without_variable_sizes_is_summarised(capsys, tmp_path):
    """liveness_variables.parquet of mk1_noexec without its 'bytes' column (a nullable column: read as
    missing sizes): summary, check and query ended in 'internal error: TypeError: float() argument must be a
    string or a real number, not 'NAType'' (the liveness-peak rule ranked the variables by size). A variable
    without a size is now not ranked."""
    bundle = tmp_path / "mk1_noexec.popprof"
    shutil.copytree(FIXTURES / "mk1_noexec.popprof", bundle)
    _rewrite(bundle / "liveness_variables.parquet", lambda table: table.drop_columns(["bytes"]))
    before = _digest(bundle)
    _run_all(capsys, bundle, tmp_path)
    assert _digest(bundle) == before


def test_diff_of_a_bundle_without_memory_categories(capsys, tmp_path):
    """tile_memory.parquet of mk1_noexec without its 'category' column (read as missing categories): diff
    against an intact bundle ended in 'internal error: IndexError: index -1 is out of bounds for axis 0 with
    size 0' (a row without a category looked up in an empty list of categories). Such a row is now in no
    category, as a missing category of one row was."""
    bundle = tmp_path / "mk1_noexec.popprof"
    shutil.copytree(FIXTURES / "mk1_noexec.popprof", bundle)
    _rewrite(bundle / "tile_memory.parquet", lambda table: table.drop_columns(["category"]))
    before = _digest(bundle)
    out = tmp_path / "out"
    out.mkdir()
    intact = FIXTURES / "mk2_training.popprof"
    for args in [
        *_commands(bundle, out),
        ["diff", intact, bundle, "--no-gate", "--format", "junit", "-o", out / "d.xml"],
        ["diff", intact, bundle, "--no-gate", "--format", "html", "-o", out / "d.html"],
    ]:
        _run(capsys, *args)
    assert _digest(bundle) == before


@pytest.mark.parametrize("name", ['"name": null, ', ""], ids=["null", "absent"])
def test_trace_with_a_nameless_device_sync(capsys, tmp_path, name):
    """hta_cuda_event_sync with its device-side 'Event Sync' event's name null or left out (the fuzzer set
    it to null): summary, check, pilot, query of findings, the timeline plot and store add ended in
    'internal error: ValueError: 'list' argument must have no negative elements' (the exchange phases
    ranked the phase's events by name code, -1 for none). The event now counts in the phase's time and
    not among its names."""
    text = gzip.decompress((REAL / "traces" / "hta_cuda_event_sync.json.gz").read_bytes()).decode()
    old = '"cat": "cuda_sync", "name": "Event Sync", '
    assert old in text
    trace = tmp_path / "hta_cuda_event_sync.json"
    trace.write_text(text.replace(old, f'"cat": "cuda_sync", {name}', 1))
    before = _digest(trace)
    out = tmp_path / "out"
    out.mkdir()
    store = tmp_path / "runs"
    for args in [
        ["summary", trace],
        ["summary", trace, "--format", "json", "-o", out / "s.json"],
        ["check", trace, "--format", "json", "--fail-on", "never"],
        ["query", trace, "SELECT count(*) FROM findings"],
        ["pilot", FIXTURES / "mk2_training.popprof", "--baseline", trace],
        ["plot", trace, "--kind", "timeline", "-o", out / "t.png"],
        ["store", "init", store],
        ["store", "add", store, trace],
    ]:
        _run(capsys, *args)
    assert _digest(trace) == before


# -- Plausible but wrong values, several members at once (2026-12-08) -----------------------------------------


def _summary_doc(capsys: pytest.CaptureFixture, path: Path, out: Path) -> tuple[dict, str]:
    """``popprof summary PATH --format json``: the document and stderr."""
    _, err = _run(capsys, "summary", path, "--format", "json", "-o", out)
    return json.loads(out.read_text()), err


def test_bundle_runs_ending_before_they_start_and_negative_live_bytes(capsys, tmp_path):
    """pod4_pipeline with, at once, a run whose end_us is -1 (before its start) and steps of liveness whose
    not_always_live_bytes are negative: summary gave an iteration of -1,001 us and a peak of -101,408,868
    live bytes, silently. The bundle reader now reads both as missing, with one warning per table: the run's
    time comes from its cycles, and the peak from the steps that hold a size."""
    bundle = tmp_path / "pod4_pipeline.popprof"
    shutil.copytree(FIXTURES / "pod4_pipeline.popprof", bundle)

    def end_before_start(table: pa.Table) -> pa.Table:
        ends = table.column("end_us").to_pylist()
        ends[0] = -1.0
        return table.set_column(
            table.column_names.index("end_us"), "end_us", pa.array(ends, type=pa.float64())
        )

    def negative_bytes(table: pa.Table) -> pa.Table:
        live = [-abs(v) if v is not None else v for v in table.column("not_always_live_bytes").to_pylist()]
        index = table.column_names.index("not_always_live_bytes")
        return table.set_column(index, "not_always_live_bytes", pa.array(live, type=pa.int64()))

    _rewrite(bundle / "runs.parquet", end_before_start)
    live = pq.read_table(bundle / "liveness.parquet").column("not_always_live_bytes").to_pylist()
    _rewrite(
        bundle / "liveness.parquet", lambda t: pa.concat_tables([negative_bytes(t.slice(0, 50)), t.slice(50)])
    )
    before = _digest(bundle)
    doc, err = _summary_doc(capsys, bundle, tmp_path / "s.json")
    assert (
        f"popprof: warning: {bundle}: table 'runs': impossible values read as missing: start_us, end_us"
        in err
    )
    assert (
        f"popprof: warning: {bundle}: table 'liveness': impossible values read as missing: not_always_live"
        in err
    )
    assert all(step["dur_us"] > 0 for step in doc["iterations"]["steps"]), doc["iterations"]
    assert doc["memory"]["peak_not_always_live_bytes"] == max(v for v in live[50:] if v is not None)
    _run_all(capsys, bundle, tmp_path)
    assert _digest(bundle) == before


def test_bundle_tiles_with_more_bytes_without_gaps_than_with(capsys, tmp_path):
    """pod4_pipeline with the tiles' bytes_incl_gaps and bytes_excl_gaps columns swapped, and tile_memory
    holding a negative size: summary gave a gap share of -4 % and the fullest tile -21,537 gap bytes. The
    bundle reader now reads a tile's bytes excluding gaps above those including them as missing (warned), and
    the gap bytes count only tiles that know both figures; the negative size row is dropped (warned)."""
    bundle = tmp_path / "pod4_pipeline.popprof"
    shutil.copytree(FIXTURES / "pod4_pipeline.popprof", bundle)

    def swap(table: pa.Table) -> pa.Table:
        incl, excl = table.column("bytes_incl_gaps"), table.column("bytes_excl_gaps")
        table = table.set_column(table.column_names.index("bytes_incl_gaps"), "bytes_incl_gaps", excl)
        return table.set_column(table.column_names.index("bytes_excl_gaps"), "bytes_excl_gaps", incl)

    def negative(table: pa.Table) -> pa.Table:
        sizes = table.column("bytes").to_pylist()
        sizes[0] = -5
        return table.set_column(table.column_names.index("bytes"), "bytes", pa.array(sizes, type=pa.int64()))

    _rewrite(bundle / "tiles.parquet", swap)
    _rewrite(bundle / "tile_memory.parquet", negative)
    doc, err = _summary_doc(capsys, bundle, tmp_path / "s.json")
    assert "table 'tiles': impossible values read as missing: bytes_excl_gaps (above bytes_incl_gaps)" in err
    assert (
        "table 'tile_memory': impossible values read as missing: bytes (below zero, not finite or huge)"
        in err
    )
    assert doc["memory"]["gap_share"] is None or 0 <= doc["memory"]["gap_share"] <= 1, doc["memory"]
    assert doc["fullest_tile"]["gap_bytes"] is None or doc["fullest_tile"]["gap_bytes"] >= 0
    assert all(c["bytes"] >= 0 for c in doc["memory"]["by_data_type"])


def test_bundle_sizes_near_the_integer_maximum_do_not_wrap(capsys, tmp_path):
    """mk1_noexec with one tile's always_live_bytes set to 2^63 - 1 (a fuzzed 'type maximum') and programs'
    code_bytes likewise: summary gave always-live bytes of -9,223,372,036,814,461,952 (the sum over the tiles
    wrapped around 64 bits). A size beyond 2^48 bytes is now read as missing, warned."""
    bundle = tmp_path / "mk1_noexec.popprof"
    shutil.copytree(FIXTURES / "mk1_noexec.popprof", bundle)

    def at_maximum(column: str):
        def change(table: pa.Table) -> pa.Table:
            values = table.column(column).to_pylist()
            values[3] = 2**63 - 1
            return table.set_column(
                table.column_names.index(column), column, pa.array(values, type=pa.int64())
            )

        return change

    _rewrite(bundle / "tiles.parquet", at_maximum("always_live_bytes"))
    _rewrite(bundle / "programs.parquet", at_maximum("code_bytes"))
    doc, err = _summary_doc(capsys, bundle, tmp_path / "s.json")
    assert "table 'tiles': impossible values read as missing: always_live_bytes (below zero" in err
    assert "table 'programs': impossible values read as missing: code_bytes (below zero" in err
    tiles = pq.read_table(FIXTURES / "mk1_noexec.popprof" / "tiles.parquet").column("always_live_bytes")
    assert doc["memory"]["always_live_bytes"] == sum(v for i, v in enumerate(tiles.to_pylist()) if i != 3)


@pytest.mark.parametrize("clock", [-1.33e9, 0.0, float("inf")], ids=["negative", "zero", "inf"])
def test_bundle_with_an_impossible_clock(capsys, tmp_path, clock):
    """mk2_training_v2 whose target clock_hz is negative (with liveness steps and tile_memory damaged too):
    summary gave a total execution time of -18.708 us. A clock of zero or less, or not finite, is now
    unknown (as a count of zero tiles is): the execution is in cycles only, never a negative time."""
    bundle = tmp_path / "mk2_training_v2.popprof"
    shutil.copytree(FIXTURES / "mk2_training_v2.popprof", bundle)

    def set_clock(table: pa.Table) -> pa.Table:
        return table.set_column(table.column_names.index("clock_hz"), "clock_hz", pa.array([clock]))

    _rewrite(bundle / "target.parquet", set_clock)
    doc, _ = _summary_doc(capsys, bundle, tmp_path / "s.json")
    assert doc["execution"]["total_time_us"] is None, doc["execution"]
    assert doc["execution"]["total_cycles"] > 0
    _run_all(capsys, bundle, tmp_path)


def test_trace_with_its_device_events_written_twice_has_no_negative_idle(capsys, tmp_path):
    """hta_simple_add with every kernel, memcpy and memset event written twice (a trace merged with itself):
    summary's idle causes ('Why the device idled') held minus the device's busy time (each copy's gap ran from
    the end of its twin to its own start). A gap is now measured from the latest end of the stream's earlier
    items and is never below zero: the idle causes are the intact trace's."""
    source = REAL / "traces" / "hta_simple_add.json.gz"
    trace = json.loads(gzip.decompress(source.read_bytes()))
    device = [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(device) == 98
    trace["traceEvents"].extend(json.loads(json.dumps(device)))
    twice = tmp_path / "hta_simple_add.json"
    twice.write_text(json.dumps(trace))
    intact, _ = _summary_doc(capsys, source, tmp_path / "intact.json")
    doc, _ = _summary_doc(capsys, twice, tmp_path / "twice.json")
    assert all(cause["idle_us"] >= 0 for cause in doc["trace"]["idle_causes"]), doc["trace"]["idle_causes"]
    assert doc["trace"]["idle_causes"] == intact["trace"]["idle_causes"]
    assert doc["time_account"] == intact["time_account"]


def test_trace_with_overlapping_long_host_events_keeps_thread_shares_within_the_span(capsys, tmp_path):
    """cupti_range_profiler with three host events of one thread lasting 10^15 us each (a fuzzed 'huge'
    duration: each starts inside the one before and ends after it, so all three are top-level): summary's
    'Busiest threads' gave the thread a busy share of 300 % of the trace's span (the events' durations summed).
    A thread's busy time is now the union of its top-level events."""
    text = gzip.decompress((REAL / "traces" / "cupti_range_profiler.json.gz").read_bytes())
    trace = json.loads(text)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    thread = ops[0]["tid"]
    long_ones = [e for e in ops if e["tid"] == thread][:40:15]
    assert len(long_ones) == 3
    for event in long_ones:
        event["dur"] = 10**15
    damaged = tmp_path / "cupti_range_profiler.json"
    damaged.write_text(json.dumps(trace))
    doc, _ = _summary_doc(capsys, damaged, tmp_path / "s.json")
    threads = doc["trace"]["busiest_threads"]
    assert threads[0]["tid"] == thread
    assert threads[0]["busy_us"] <= doc["trace"]["span_us"]
    assert all(0 <= t["busy_share"] <= 1 for t in threads), threads


def test_trace_with_kernels_lasting_centuries(capsys, tmp_path):
    """tracelens_h100_bert_small with three kernels lasting 2^53 us (285 years; a fuzzed 'huge' duration):
    the time account's window became 9 * 10^15 us and a step's parts no longer summed to its window (float
    rounding at absolute times of 10^16 us). A duration beyond 2^40 us (12.7 days) is now counted as 0 with a
    read warning, as a negative one is."""
    trace = json.loads(gzip.decompress((REAL / "traces" / "tracelens_h100_bert_small.json.gz").read_bytes()))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    for event in kernels[5:8]:
        event["dur"] = 2**53
    damaged = tmp_path / "tracelens_h100_bert_small.json"
    damaged.write_text(json.dumps(trace))
    doc, err = _summary_doc(capsys, damaged, tmp_path / "s.json")
    assert "3 events lasted longer than 12 days (beyond any profiler's recording): counted as 0" in err
    for row in doc["time_account"]:
        assert 0 < row["window_us"] < 86400e6, row
        assert sum(row["parts"].values()) == pytest.approx(row["window_us"], rel=1e-9, abs=1e-6), row


def test_trace_with_zero_length_launch_calls_and_annotations(capsys, tmp_path):
    """amd_mi250_minitoy (nanosecond times) with its launch calls, kernels and GPU annotations lasting 0 us:
    summary gave each call -1 us on the CPU (launches' cpu_us -14), short kernels -1 us on the GPU and each
    annotation -1 us (HTA's rounding takes a start
    up and an end down to whole microseconds: an event under one that crosses no whole microsecond ended
    before it began). A rounded end is now never before the rounded start; the launch delays, from the
    rounded end, are HTA's as before."""
    source = REAL / "traces" / "amd_mi250_minitoy.json.gz"
    trace = json.loads(gzip.decompress(source.read_bytes()))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    zeroed = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("gpu_user_annotation", "cuda_runtime", "kernel")
    ]
    assert len(zeroed) == 37
    for event in zeroed:
        event["dur"] = 0
    damaged = tmp_path / "amd_mi250_minitoy.json"
    damaged.write_text(json.dumps(trace))
    intact, _ = _summary_doc(capsys, source, tmp_path / "intact.json")
    doc, _ = _summary_doc(capsys, damaged, tmp_path / "s.json")
    assert doc["launches"]["cpu_us"] == 0
    assert doc["launches"]["short_gpu_us"] >= 0
    assert all(row["cpu_mean_us"] == 0 for row in doc["trace"]["launch_delays"])
    assert [a["sum_us"] for a in doc["trace"]["gpu_annotations"]] == [0, 0]
    assert doc["launches"]["delay_median_us"] >= intact["launches"]["delay_median_us"]


@pytest.mark.parametrize("rank", [-3, 2**40], ids=["negative", "huge"])
def test_trace_with_an_impossible_rank(capsys, tmp_path, rank):
    """kineto2021_resnet50_worker0 whose distributedInfo.rank is -3: summary and check ended in 'internal error:
    KeyError: None' (the long-events rule keyed a rank below 0 as no rank on one side only). A rank below 0 or
    beyond 2^31 - 1 is now no rank (the file name's, if it names one), and the rule keys both sides alike."""
    trace = json.loads(
        gzip.decompress((REAL / "traces" / "kineto2021_resnet50_worker0.pt.trace.json.gz").read_bytes())
    )
    trace.setdefault("distributedInfo", {})["rank"] = rank
    damaged = tmp_path / "resnet50_worker0.json"
    damaged.write_text(json.dumps(trace))
    doc, _ = _summary_doc(capsys, damaged, tmp_path / "s.json")
    assert {row["rank"] for row in doc["time_account"]} == {None}
    _run(capsys, "check", damaged, "--format", "json", "--fail-on", "never")
    _run(capsys, "query", damaged, "SELECT count(*) FROM findings")


def test_store_fsck_with_another_kinds_file_in_the_catalogue(capsys, tmp_path):
    """A store of mk2_training whose catalogue file (runs/month=.../RUN.parquet) was overwritten by the run's
    tiles file: store fsck ended in 'internal error: AttributeError: 'NoneType' object has no attribute
    'astimezone'' (a catalogue row without its creation time has no month). fsck now reports the file as
    unreadable (not a catalogue file), exit 1; the other commands read the store as before."""
    store = tmp_path / "runs"
    _run(capsys, "store", "init", store)
    _run(capsys, "store", "add", store, FIXTURES / "mk2_training.popprof")
    _run(capsys, "store", "add", store, FIXTURES / "pod4_pipeline.popprof")
    [catalogue] = [p for p in (store / "runs").rglob("*.parquet") if "--mk2_training--" in p.name]
    [tiles] = (store / "tables" / "tiles").rglob(catalogue.name)
    shutil.copy(tiles, catalogue)
    capsys.readouterr()
    code = main(["store", "fsck", str(store)])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert "Traceback" not in captured.err and "internal error" not in captured.err, captured.err
    expected = (
        f"unreadable: runs/{catalogue.parent.name}/{catalogue.name} (not a catalogue file: no created column)"
    )
    assert expected in captured.out
    for args in (["store", "ls", store], ["store", "query", store, "SELECT count(*) FROM runs"]):
        _run(capsys, *args)


def test_pop_with_impossible_values_from_pva(capsys, tmp_path, pva_double):
    """mk2_training as the pva double's profile.pop, its stored arrays then damaged at once as a damaged file
    could make pva return them: a run ending before it starts, a tile's always-live bytes at the 64-bit
    maximum (negative liveness bytes the reader already refuses, exit 2). summary gave an iteration of minus a
    millisecond and always-live bytes of -9.2 * 10^18 (or ended in 'internal error: TypeError: cannot safely cast
    non-equivalent float64 to int64'); the .pop reader now applies the bundle reader's check of impossible
    values (popprof.readers.values), warned per table."""
    import numpy as np
    from pop_helpers import report_store

    import popprof

    pop = report_store().write_pop(
        popprof.open(FIXTURES / "mk2_training.popprof"), tmp_path / "run" / "profile.pop"
    )
    with np.load(pop) as stored:
        arrays = {key: stored[key] for key in stored.files}
    arrays["run_end_us"] = arrays["run_start_us"] - 1000.0
    arrays["tile_always_live"] = arrays["tile_always_live"].copy()
    arrays["tile_always_live"][7] = np.iinfo(np.int64).max
    with open(pop, "wb") as handle:
        np.savez(handle, **arrays)
    doc, err = _summary_doc(capsys, pop, tmp_path / "s.json")
    for table in ("runs", "tiles"):
        assert f"{pop}: table '{table}': impossible values read as missing" in err, err
    assert all(step["dur_us"] > 0 for step in doc["iterations"]["steps"]), doc["iterations"]
    assert 0 < doc["memory"]["always_live_bytes"] < 2**48


def test_nsys_copies_on_a_negative_stream_a_year_late(capsys, tmp_path):
    """pipit_saxpy_mpi_cuda_perlmutter with every memcpy on streamId -7 and moved a year later (start and end):
    summary and check ended in 'internal error: TypeError: boolean value of NA is ambiguous' (the reader reads
    a negative stream as none, NA; the dependency-waits rule named the stream of the copy that ended the
    longest wait with 'stream == stream'). The copy is now named without a stream."""
    import sqlite3

    export = tmp_path / "pipit_saxpy.sqlite"
    shutil.copy(REAL / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter.sqlite", export)
    year_ns = 365 * 86400 * 10**9
    with contextlib.closing(sqlite3.connect(export)) as db:
        db.execute(
            f'UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET streamId = -7, start = start + {year_ns}, "end" = "end" + {year_ns}'
        )
        db.commit()
    before = _digest(export)
    out = tmp_path / "out"
    out.mkdir()
    for args in [
        ["summary", export],
        ["summary", export, "--format", "json", "-o", out / "s.json"],
        ["check", export, "--format", "json", "--fail-on", "never"],
    ]:
        _run(capsys, *args)
    assert _digest(export) == before
