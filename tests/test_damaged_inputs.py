"""Damaged copies of the real inputs (fixtures/real, the bundled samples): one line on stderr and exit 2.

Each test builds its damaged input from a real fixture in ``tmp_path`` (no fixture files of their own) and
runs the command line in-process, as the console script does: exit 2, nothing on stdout, one
``popprof: error:`` line naming the file and what is wrong, never a traceback or an internal error (exit 3),
and no output file written.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import one_error as _one_error

import popprof
from popprof.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real"


# --------------------------------------------------------------------------- bundles


@pytest.mark.parametrize("command", [["summary"], ["tables"], ["check"], ["baseline", "-o", "out.json"]])
def test_a_bundle_manifest_without_tables_is_refused(capsys, tmp_path, monkeypatch, command):
    """A manifest that lost its 'tables' field read as a profile with no tables (exit 0, empty figures)."""
    bundle = tmp_path / "mk2_training.popprof"
    shutil.copytree(FIXTURES / "mk2_training.popprof", bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    del manifest["tables"]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.chdir(tmp_path)
    line = _one_error(capsys, command[0], bundle, *command[1:])
    assert str(bundle / "manifest.json") in line and "no field 'tables'" in line, line
    assert not (tmp_path / "out.json").exists()


# --------------------------------------------------------------------------- Nsight Systems SQLite exports

NSYS = REAL / "nsys" / "nvfuser_report1.sqlite"


def _nsys_copy(tmp_path: Path, *statements: str) -> Path:
    """A copy of the real nvFuser export with ``statements`` applied (a damaged schema)."""
    copy = tmp_path / "report.sqlite"
    copy.write_bytes(NSYS.read_bytes())
    connection = sqlite3.connect(copy)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()
    return copy


def test_an_nsys_export_whose_names_table_lost_its_column_is_one_line(capsys, tmp_path):
    """StringIds without 'value' was an SQL error quoted whole (the query, 'no such column: s0.value')."""
    copy = _nsys_copy(tmp_path, "ALTER TABLE StringIds RENAME COLUMN value TO other")
    line = _one_error(capsys, "summary", copy)
    assert line == (
        f"popprof: error: {copy}: table StringIds has no column value: the names cannot be read "
        "(export the report again with nsys export --type sqlite)"
    )


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "start"),
        ("CUPTI_ACTIVITY_KIND_KERNEL", "deviceId"),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"),
    ],
)
def test_an_nsys_event_table_without_a_needed_column_is_a_read_problem(capsys, tmp_path, table, column):
    """A kernel table that lost 'start' read as an export with no kernels at all: exit 0, not a word said."""
    copy = _nsys_copy(tmp_path, f"ALTER TABLE {table} RENAME COLUMN {column} TO other")
    rows = sqlite3.connect(NSYS).execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    assert main(["summary", "--format", "json", str(copy)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and json.loads(out)
    assert err.strip().splitlines() == [
        f"popprof: warning: {copy}: read with problems: {rows:,} rows of the export's event tables were not read: "
        "their table lacks a column popprof needs (the metadata's nsys.tables_lacking_columns names them)"
    ]
    meta = popprof.open(copy).meta
    assert json.loads(meta["nsys.tables_lacking_columns"]) == {table: [column]}


# --------------------------------------------------------------------------- rank directories


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (b"", "the file is empty"),
        (gzip.compress(b"not a trace\n" * 50), "holds no Chrome or rocprofv3 trace"),
    ],
    ids=["empty", "gzip-not-json"],
)
@pytest.mark.parametrize("command", [["summary"], ["tables"], ["check"], ["report", "-o", "r.html"]])
def test_a_damaged_rank_file_is_one_line_not_a_rank_fewer(
    capsys, tmp_path, monkeypatch, damage, message, command
):
    """An empty rank-1.json.gz (or one holding no JSON) was left out unsaid: two_ranks read as one rank, exit 0."""
    run = tmp_path / "two_ranks"
    shutil.copytree(REAL / "traces" / "two_ranks", run)
    (run / "rank-1.json.gz").write_bytes(damage)
    monkeypatch.chdir(tmp_path)
    line = _one_error(capsys, command[0], run, *command[1:])
    assert line == (
        f"popprof: error: {run / 'rank-1.json.gz'}: {message} "
        "(a damaged rank's trace? write it again, or move it out of the run directory)"
    )
    assert not (tmp_path / "r.html").exists()


def test_notes_beside_the_rank_traces_are_still_no_rank(capsys, tmp_path):
    """A plain *.json that is no trace (notes) stays left out: only a file that looks like a rank's is refused."""
    run = tmp_path / "two_ranks"
    shutil.copytree(REAL / "traces" / "two_ranks", run)
    (run / "notes.json").write_text('{"hello": 1}')
    assert main(["tables", str(run)]) == 0
    assert "rank" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", [["tables"], ["summary", "--format", "json"], ["timeline", "-o", "t.json"]]
)
def test_a_bundle_without_its_manifest_says_so(capsys, tmp_path, monkeypatch, command):
    """A bundle that lost manifest.json named its first Parquet file as 'not a recognised profile format'."""
    bundle = tmp_path / "mk2_oom.popprof"
    shutil.copytree(FIXTURES / "mk2_oom.popprof", bundle)
    (bundle / "manifest.json").unlink()
    monkeypatch.chdir(tmp_path)
    line = _one_error(capsys, command[0], *command[1:], bundle)
    count = len(list(bundle.glob("*.parquet")))
    assert line == (
        f"popprof: error: {bundle}: a popprof bundle without its manifest.json ({count} Parquet files): "
        "its tables cannot be read (export the bundle again)"
    )
    assert not (tmp_path / "t.json").exists()


# --------------------------------------------------------------------------- Chrome traces


def _read_cut_with_one_warning(capsys, tmp_path: Path, monkeypatch, cut: Path, command: list[str]) -> None:
    """``popprof COMMAND CUT`` exits 0 with one warning (the file ends early), and the allocations read on use
    equal those of a read with args."""
    monkeypatch.chdir(tmp_path)
    assert main([command[0], str(cut), *command[1:]]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not line.startswith("popprof: wrote")]
    assert len(lines) == 1 and lines[0].startswith(f"popprof: warning: {cut}: read with problems: "), err
    assert "the file ends early" in lines[0]
    on_use = popprof.open(cut).allocations
    assert len(on_use) and on_use.equals(popprof.open(cut, with_args=True).allocations)


@pytest.mark.parametrize("command", [["tables"], ["summary", "--no-shapes"], ["baseline", "-o", "b.json"]])
def test_a_gzip_trace_cut_off_reads_its_allocations_too(capsys, tmp_path, monkeypatch, command):
    """A .json.gz with its tail cut read with a warning, then its [memory] events' args, scanned on first use,
    stopped at the cut: 'gzip data is truncated', exit 2, after the warning (summary with shapes gave exit 0)."""
    cut = tmp_path / "bert.json.gz"
    cut.write_bytes((REAL / "traces" / "tracelens_h100_bert_small.json.gz").read_bytes()[:-40])
    _read_cut_with_one_warning(capsys, tmp_path, monkeypatch, cut, command)


@pytest.mark.parametrize("command", [["tables"], ["baseline", "-o", "b.json"]])
def test_a_trace_cut_in_half_reads_its_allocations_again_as_the_first_read(
    capsys, tmp_path, monkeypatch, command
):
    """The read again with args (for the allocator events' args) named the parser orjson, which refuses a stream
    it cannot cut into blocks of whole events: 'parser 'orjson' cannot read this file', exit 2, after the
    warning of the first read, which had fallen back to ijson."""
    data = gzip.decompress((REAL / "traces" / "tracelens_h100_falconsai_nsfw.json.gz").read_bytes())
    cut = tmp_path / "falconsai.json.gz"
    cut.write_bytes(gzip.compress(data[: len(data) // 2]))
    _read_cut_with_one_warning(capsys, tmp_path, monkeypatch, cut, command)


@pytest.mark.parametrize(
    ("name", "compressed"),
    [
        ("tracelens_h100_bert_small.json.gz", False),
        ("tracelens_h100_bert_small.json.gz", True),
        ("tracelens_mi300x_vllm_graph_capture.json.gz", False),  # the block parser: 'ends inside an event'
    ],
    ids=["json", "json.gz", "blocks"],
)
def test_a_trace_with_bytes_flipped_mid_file_says_where_the_json_is_invalid(
    capsys, tmp_path, name, compressed
):
    """Two bytes flipped in the middle of a trace (a key of an event) read the events up to them with 'the file
    ends early: events after the cut are missing' (the 34 MB trace: 'the file ends inside an event longer than
    the event-bytes limit', the block parser taking the rest for one event): the file ends where it should,
    the JSON is invalid there."""
    data = gzip.decompress((REAL / "traces" / name).read_bytes())
    at = data.index(b'"name"', len(data) // 2)
    flipped = data[:at] + bytes(b ^ 0xFF for b in data[at : at + 2]) + data[at + 2 :]
    damaged = tmp_path / ("trace.json.gz" if compressed else "trace.json")
    damaged.write_bytes(gzip.compress(flipped) if compressed else flipped)
    line_no = data[:at].count(b"\n") + 1
    column = at - data.rfind(b"\n", 0, at)
    assert main(["tables", str(damaged)]) == 0
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"popprof: warning: {damaged}: read with problems: "), err
    assert "ends early" not in err and "the file is damaged before its end (not cut off)" in err, err
    of = "of the decompressed JSON" if compressed else "of the file"
    assert (
        f"(invalid JSON at line {line_no:,}, column {column:,} (byte {at:,} {of}): lexical error: invalid char in "
        "json text.)" in err
    ), err


def test_a_trace_with_a_byte_not_utf8_mid_file_says_where_in_one_line(capsys, tmp_path):
    """yajl gives an invalid UTF-8 string's error as bytes: the warning quoted their repr, its context lines
    and the damaged byte with it (b'lexical error: ...\\n ... (right here) ------^\\n')."""
    data = gzip.decompress((REAL / "traces" / "tracelens_h100_bert_small.json.gz").read_bytes())
    at = data.index(b'"name": "', len(data) // 2) + len(b'"name": "')  # the first byte of an event's name
    damaged = tmp_path / "bert.json"
    damaged.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    assert main(["tables", str(damaged)]) == 0
    err = capsys.readouterr().err
    line_no, column = data[:at].count(b"\n") + 1, at - data.rfind(b"\n", 0, at)
    assert (
        f"(invalid JSON at line {line_no:,}, column {column:,} (byte {at:,} of the file): lexical error: invalid "
        "bytes in UTF8 string.);" in err
    ), err
    assert "right here" not in err and "b'" not in err and len(err.strip().splitlines()) == 1, err


# --------------------------------------------------------------------------- rocprofv3


def test_a_rocprof_gzip_with_flipped_bytes_names_the_gzip_damage(capsys, tmp_path):
    """Deflate wrote garbage from the flipped bytes that closed the JSON value early: the error blamed 'text
    follows the JSON value' (an appended log line?), not the damaged gzip its CRC check would have named."""
    data = bytearray((REAL / "traces" / "rocprofv3_mi350_train.json.gz").read_bytes())
    middle = len(data) // 2
    for i in range(16):
        data[middle + i * 7] ^= 0xFF
    damaged = tmp_path / "rocprof.json.gz"
    damaged.write_bytes(bytes(data))
    line = _one_error(capsys, "tables", damaged)
    assert line.startswith(f"popprof: error: {damaged}: corrupt gzip data (CRC check failed "), line
    assert line.endswith("(re-copy the file; it may be damaged)"), line


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda tool: tool.update(strings=5), "'strings' is an integer, not an object"),
        (lambda tool: tool.update(kernel_symbols={}), "'kernel_symbols' is an object, not a list"),
        (
            lambda tool: tool["buffer_records"].update(memory_copy="x"),
            "buffer_records.memory_copy is a string",
        ),
        (
            lambda tool: tool["buffer_records"]["kernel_dispatch"][0].update(end_timestamp=None),
            "buffer_records.kernel_dispatch[0].end_timestamp is null, not a whole number",
        ),
        (
            lambda tool: tool["buffer_records"]["kernel_dispatch"][0].update(start_timestamp="abc"),
            'buffer_records.kernel_dispatch[0].start_timestamp is "abc", not a whole number',
        ),
    ],
    ids=["strings", "symbols", "copies", "null-end", "text-start"],
)
def test_a_rocprof_field_of_the_wrong_json_type_is_named_in_json_words(capsys, tmp_path, damage, said):
    """The messages said Python's words: "'strings' is a int, not a dict", "end_timestamp is 'None'"."""
    document = json.loads(gzip.decompress((REAL / "traces" / "rocprofv3_mi350_train.json.gz").read_bytes()))
    damage(document["rocprofiler-sdk-tool"][0])
    damaged = tmp_path / "rocprof.json"
    damaged.write_text(json.dumps(document))
    line = _one_error(capsys, "summary", damaged)
    assert line.startswith(f"popprof: error: {damaged}: {said}"), line


ROCPROF = REAL / "traces" / "rocprofv3_mi350_train.json.gz"


@pytest.mark.parametrize(
    "damage",
    [
        lambda tool: tool.update(strings=5),
        lambda tool: tool.update(buffer_records=[]),
        lambda tool: tool.update(agents="none"),
    ],
    ids=["strings", "records", "agents"],
)
def test_a_rocprof_field_of_the_wrong_json_type_is_not_called_cut_off(capsys, tmp_path, damage):
    """A whole file holding a value of the wrong JSON type ended '...; the file may be cut off': a cut file
    does not parse at all, so the hint sent the reader to re-copy a file that had arrived whole."""
    document = json.loads(gzip.decompress(ROCPROF.read_bytes()))
    damage(document["rocprofiler-sdk-tool"][0])
    damaged = tmp_path / "rocprof.json"
    damaged.write_text(json.dumps(document))
    line = _one_error(capsys, "summary", damaged)
    assert "cut off" not in line and line.endswith("(the file may be damaged; write it again)"), line


def test_a_rocprof_file_cut_off_or_malformed_inside_says_which(capsys, tmp_path):
    """Only JSON that ends inside its value is a cut file; bytes flipped inside it are malformed JSON there."""
    data = gzip.decompress(ROCPROF.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2])
    line = _one_error(capsys, "summary", cut)
    assert line.startswith(f"popprof: error: {cut}: truncated JSON: the file ends inside its JSON value ("), (
        line
    )
    assert line.endswith("(the file is cut off: re-copy it, or write it again)"), line
    middle = data.index(b'"kernel_id"', len(data) // 2)  # a key of a record in the middle of the file
    damaged = tmp_path / "flipped.json"
    damaged.write_bytes(data[:middle] + b"\x00\x01" + data[middle + 2 :])
    line_no = data[:middle].count(b"\n") + 1
    line = _one_error(capsys, "summary", damaged)
    assert line.startswith(f"popprof: error: {damaged}: malformed JSON (") and f"line {line_no} " in line, (
        line
    )
    assert "cut off" not in line and line.endswith("(the file may be damaged; write it again)"), line


# --------------------------------------------------------------------------- bundle page checksums


def test_a_byte_flipped_in_a_bundles_table_data_is_refused_by_its_page_checksum(capsys, tmp_path):
    """A bundle's tables carry each data page's CRC-32 (docs/bundle.md): a byte flipped inside a page's
    compressed values (the middle of the events' start_us chunk) is one error line, exit 2, where the zstd page
    may decode to other values without an error."""
    import pyarrow.parquet as pq

    bundle = tmp_path / "bert.popprof"
    assert (
        main(["-q", "export", str(REAL / "traces" / "tracelens_h100_bert_small.json.gz"), "-o", str(bundle)])
        == 0
    )
    events = bundle / "events.parquet"
    chunk = next(
        c
        for c in (
            pq.read_metadata(events).row_group(0).column(i)
            for i in range(pq.read_metadata(events).num_columns)
        )
        if c.path_in_schema == "start_us"
    )
    # the chunk: its dictionary page, then its data page; the middle of the data page is values, not a header
    end = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size
    data = bytearray(events.read_bytes())
    data[(chunk.data_page_offset + end) // 2] ^= 0xFF
    events.write_bytes(bytes(data))
    before = pq.ParquetFile(events).read()  # without the check: read, other values or not, no error
    assert before.num_rows == popprof.open(REAL / "traces" / "tracelens_h100_bert_small.json.gz").rows(
        "events"
    )
    capsys.readouterr()
    line = _one_error(capsys, "tables", bundle)
    assert str(events) in line and "corrupt Parquet file" in line and "CRC" in line, line


def test_a_bundle_written_before_page_checksums_still_reads():
    """The bundled samples were written without page checksums: nothing to check, every table read as pyarrow
    reads it without the check."""
    import pyarrow.parquet as pq

    sample = FIXTURES / "mk2_training.popprof"
    profile = popprof.open(sample)
    tables = sorted(f.stem for f in sample.glob("*.parquet") if f.stem != "metadata")
    assert "tiles" in tables
    for name in tables:
        plain = pq.ParquetFile(sample / f"{name}.parquet", page_checksum_verification=False).read()
        assert len(profile.get(name)) == plain.num_rows > 0, name
