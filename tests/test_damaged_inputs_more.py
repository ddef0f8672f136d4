"""Damaged copies of the real inputs through the commands the first sweep did not run (redact, scan, export,
diff, query, plot, pilot, store add): one line on stderr and exit 2, or a warning where the other commands
read the damage with one, never a traceback, a partial output or a changed input.

Each test builds its damaged input from a real fixture in ``tmp_path`` (no fixture files of their own) and runs
the command line in-process, as the console script does.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import one_error as _one_error

import popprof
from popprof.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real"
KEY = "a-sound-benchmark-key-0123456789"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cut_in_half(tmp_path: Path, name: str = "tracelens_h100_bert_small.json.gz") -> Path:
    """A real trace cut off in the middle of its events (gzip-compressed whole again)."""
    data = gzip.decompress((REAL / "traces" / name).read_bytes())
    cut = tmp_path / name
    cut.write_bytes(gzip.compress(data[: len(data) // 2]))
    return cut


# --------------------------------------------------------------------------- store add


def test_store_add_of_a_trace_cut_off_says_what_was_read(capsys, tmp_path):
    """Every other command reads a trace cut off with a warning ('the file ends early'); ``store add`` stored
    its metrics without a word: exit 0, the run's events after the cut silently not in the store."""
    store = tmp_path / "runs"
    assert main(["store", "init", str(store)]) == 0
    cut = _cut_in_half(tmp_path)
    before = _digest(cut)
    capsys.readouterr()
    assert main(["store", "add", str(store), str(cut)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("added: run "), out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"popprof: warning: {cut}: read with problems: "), err
    assert "the file ends early" in lines[0]
    assert _digest(cut) == before
    assert main(["store", "fsck", str(store)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_store_add_of_a_whole_bundle_says_nothing_more(capsys, tmp_path):
    """A bundle keeps its source's problems in its metadata (shown by tables and summary): no warning."""
    store = tmp_path / "runs"
    assert main(["store", "init", str(store)]) == 0
    capsys.readouterr()
    assert main(["store", "add", str(store), str(FIXTURES / "mk2_training.popprof")]) == 0
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- redact


def test_redact_of_a_trace_cut_off_does_not_blame_text_after_it(capsys, tmp_path, monkeypatch):
    """A trace cut in half was refused as 'text follows the JSON value' (remove what follows the trace's
    JSON): nothing follows it, the file ends early. The tail cannot tell the two apart: the line names both."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    cut = _cut_in_half(tmp_path)
    before = _digest(cut)
    out = tmp_path / "shared.json.gz"
    line = _one_error(capsys, "redact", cut, "-o", out)
    assert line == (
        f"popprof: error: {cut}: the file does not end with '}}' or ']' (it was cut off, or text follows the "
        "JSON value): it would not be redacted (re-copy the file if it was cut off, else remove what follows "
        "the trace's JSON; then redact again)"
    )
    assert not out.exists() and not list(tmp_path.glob(".*"))
    assert _digest(cut) == before


def test_redact_of_a_trace_with_bytes_flipped_mid_file_says_it_is_damaged_or_redacts_it(
    capsys, tmp_path, monkeypatch
):
    """Two bytes flipped at offsets through the middle of a real trace: the redaction copied the damage into
    invalid JSON with a clean scan (exit 0), failed its leak scan blaming the policy (a '::{' made ':ń' kept a
    C++ name as public), or said 'text follows the JSON value' (a flipped '{'). Each is now refused, exit 2,
    in the reader's words (where the JSON is first invalid), nothing written, the input untouched; or, when
    the flipped bytes still make valid JSON, redacted into valid JSON with a clean scan."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    data = gzip.decompress((REAL / "traces" / "hta_simple_add.json.gz").read_bytes())
    # 76,413 (a string's bytes no longer UTF-8), 82,427 (a '{' flipped), 188,060 (valid UTF-8: 'ń'), then a
    # sweep through the middle
    offsets = [76_413, 82_427, 188_060, *range(len(data) // 4, 3 * len(data) // 4, len(data) // 23)]
    outcomes = {}
    for at in offsets:
        flipped = data[:at] + bytes(b ^ 0xFF for b in data[at : at + 2]) + data[at + 2 :]
        damaged = tmp_path / "trace.json"
        damaged.write_bytes(flipped)
        out = tmp_path / "shared.json"
        code = main(["-q", "redact", str(damaged), "-o", str(out)])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and "policy" not in captured.err, (at, captured.err)
        assert damaged.read_bytes() == flipped and not list(tmp_path.glob(".*")), at
        if code == 0:
            assert captured.err == "", (at, captured.err)
            json.loads(out.read_bytes())  # valid JSON, scanned clean
            out.unlink()
            outcomes[at] = "redacted"
            continue
        assert code == 2 and not out.exists(), (at, code, captured.err)
        # where the JSON is first invalid: the first flipped byte, or the second (the first a valid lead byte)
        expected = []
        for bad in (at, at + 1):
            line_no = data[:bad].count(b"\n") + 1
            column = bad - data.rfind(b"\n", 0, bad)
            expected.append(
                f"popprof: error: {damaged}: the file is damaged before its end (not cut off): invalid JSON at "
                f"line {line_no:,}, column {column:,} (byte {bad:,} of the file): lexical error: "
            )
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(tuple(expected)), (at, captured.err)
        assert captured.err.rstrip().endswith(
            "; it would not be redacted (the file may be damaged; write it again)"
        )
        outcomes[at] = "damaged"
    assert outcomes[76_413] == outcomes[82_427] == "damaged" and outcomes[188_060] == "redacted", outcomes
    assert list(outcomes.values()).count("damaged") >= len(offsets) // 2, outcomes
    # without the scan (no helper process to find the damage): the same line
    damaged.write_bytes(data[:76_413] + b"\x84\x84" + data[76_415:])
    line = _one_error(capsys, "redact", damaged, "-o", out, "--no-scan")
    assert line.startswith(f"popprof: error: {damaged}: the file is damaged before its end (not cut off)"), (
        line
    )
    assert not out.exists()
    # gzip-compressed, into a .gz output: where in the decompressed JSON
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(data[:76_413] + b"\x84\x84" + data[76_415:]))
    line = _one_error(capsys, "redact", packed, "-o", tmp_path / "shared.json.gz")
    assert line.startswith(
        f"popprof: error: {packed}: the file is damaged before its end (not cut off): invalid JSON at line 2,474, "
        "column 69 (byte 76,413 of the decompressed JSON): lexical error: invalid bytes in UTF8 string; it would "
        "not be redacted"
    ), line
    assert not (tmp_path / "shared.json.gz").exists() and not list(tmp_path.glob(".*"))


# --------------------------------------------------------------------------- scan


def _cut_member(bundle: Path, member: str, empty: bool) -> Path:
    file = bundle / member
    data = file.read_bytes()
    file.write_bytes(b"" if empty else data[: len(data) // 2])
    return file


@pytest.mark.parametrize("empty", [False, True], ids=["cut", "empty"])
def test_scan_against_an_original_with_a_damaged_table_is_one_line(capsys, tmp_path, monkeypatch, empty):
    """The scan read the original bundle's tables with pyarrow straight: a metadata.parquet cut in half (or
    emptied) was 'internal error: ArrowInvalid: Parquet magic bytes not found in footer', exit 3."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    redacted = tmp_path / "shared.popprof"
    assert main(["-q", "redact", str(FIXTURES / "mk2_training.popprof"), "-o", str(redacted)]) == 0
    original = tmp_path / "mk2_training.popprof"
    shutil.copytree(FIXTURES / "mk2_training.popprof", original)
    damaged = _cut_member(original, "metadata.parquet", empty)
    before = _digest(damaged)
    capsys.readouterr()
    line = _one_error(capsys, "scan", redacted, "--against", original)
    assert line.startswith(f"popprof: error: {damaged}: corrupt Parquet file ("), line
    assert line.endswith("(export the bundle again)"), line
    assert _digest(damaged) == before


def test_scan_of_a_redacted_bundle_with_a_damaged_table_is_one_line(capsys, tmp_path, monkeypatch):
    """The same read of the scanned output: its table cut in half was an internal error, exit 3; it is a
    damaged output that cannot be proved clean (exit 2), not a leak (exit 1)."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    redacted = tmp_path / "shared.popprof"
    assert main(["-q", "redact", str(FIXTURES / "mk2_training.popprof"), "-o", str(redacted)]) == 0
    damaged = _cut_member(redacted, "metadata.parquet", False)
    capsys.readouterr()
    line = _one_error(capsys, "scan", redacted, "--against", FIXTURES / "mk2_training.popprof")
    assert line.startswith(f"popprof: error: {damaged}: corrupt Parquet file ("), line
    assert line.endswith("(redact the original again)"), line


# --------------------------------------------------------------------------- Poplar text summaries


def test_a_text_summary_with_bytes_that_are_not_text_says_where_it_stopped(capsys, tmp_path, monkeypatch):
    """Bytes flipped at the start of a histogram row (not UTF-8: U+FFFD once decoded) ended the summary there
    unsaid: export, diff, pilot and store add went on without the figures after it (the fullest tile, the
    tiles out of memory), exit 0 and not a word."""
    text = (REAL / "poplar" / "tensorflow_logging_tile_histogram_mk1.txt").read_bytes()
    row = text.index(b"     488 - 496")
    damaged = tmp_path / "histogram.txt"
    damaged.write_bytes(text[:row] + b"\xff" + text[row + 1 :])
    line_no = text[:row].count(b"\n") + 1
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(damaged), "-o", "out.popprof"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not line.startswith("popprof: wrote")]
    assert lines == [
        f"popprof: warning: {damaged}: line {line_no} holds bytes that are not text (a damaged file?): the summary "
        "was read up to it, its figures after it are missing"
    ], err
    healthy = tmp_path / "healthy.txt"
    healthy.write_bytes(text)
    assert main(["-q", "export", str(healthy), "-o", "whole.popprof"]) == 0
    assert capsys.readouterr().err == ""  # the whole summary reads without a word


def test_redact_of_a_run_directory_with_a_rank_cut_off_says_what_was_read(capsys, tmp_path, monkeypatch):
    """A run directory becomes a redacted bundle through the readers, which keep rank-1's events up to the cut:
    export says so, redact said nothing (exit 0, the redacted bundle quietly short of the cut rank's events)."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    run, rank = _two_ranks_with_rank_1_cut(tmp_path)
    before = _digest(rank)
    out = tmp_path / "shared.popprof"
    assert main(["-q", "redact", str(run), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"popprof: warning: {run}: read with problems: the file ends early: events after the cut are missing "
        "(rank-1.json.gz: IncompleteJSONError: parse error: premature EOF)"
    ], err
    assert out.is_dir() and _digest(rank) == before


# --------------------------------------------------------------------------- diff against a baseline


@pytest.mark.parametrize("side", ["base", "new"])
def test_diff_of_a_baseline_metric_stored_as_null_says_not_in_it_not_0(capsys, tmp_path, monkeypatch, side):
    """A baseline's family member whose value is null (not measured) read as absent from the baseline, so the
    family's 'a member one side lacks is 0 there' made it 'added' from 0.0 us ('added better'), as if measured 0."""
    trace = REAL / "traces" / "tracelens_h100_bert_small.json.gz"
    monkeypatch.chdir(tmp_path)
    assert main(["-q", "baseline", str(trace), "-o", "whole.json"]) == 0
    document = json.loads((tmp_path / "whole.json").read_text())
    member = "trace.device_time_us.sync"  # a family member the trace has (0 us: no sync kernels)
    assert document["metrics"][member]["value"] == 0
    document["metrics"][member]["value"] = None
    (tmp_path / "null.json").write_text(json.dumps(document))
    pair = ["null.json", str(trace)] if side == "base" else [str(trace), "null.json"]
    capsys.readouterr()
    assert main(["-q", "diff", "--format", "json", *pair]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["metrics"]}
    other = "new" if side == "base" else "base"
    assert rows[member][side] is None and rows[member][other] == 0.0, rows[member]
    assert rows[member]["status"] == f"missing_{side}" and rows[member]["worse"] is None, rows[member]
    assert main(["-q", "diff", *pair]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if member in line)
    assert line.split()[1:4] == (["n/a", "0.0", "us"] if side == "base" else ["0.0", "us", "n/a"])
    assert line.rstrip().endswith(f"not in {side}") and "added" not in line and "removed" not in line, line


# --------------------------------------------------------------------------- store page checksums


def _flip_in_column(file: Path, column: str, dictionary: bool = False) -> None:
    """Flip one byte inside a column chunk's page data (the middle of its data page, or near the end of its
    dictionary page), past the page header, where only a page checksum tells."""
    import pyarrow.parquet as pq

    metadata = pq.read_metadata(file).row_group(0)
    chunk = next(
        c for c in (metadata.column(i) for i in range(metadata.num_columns)) if c.path_in_schema == column
    )
    end = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size
    at = chunk.data_page_offset - 4 if dictionary else (chunk.data_page_offset + end) // 2
    data = bytearray(file.read_bytes())
    data[at] ^= 0xFF
    file.write_bytes(bytes(data))


def _store_of_bert(tmp_path: Path, capsys) -> Path:
    store = tmp_path / "runs"
    assert main(["-q", "store", "init", str(store)]) == 0
    assert (
        main(["-q", "store", "add", str(store), str(REAL / "traces" / "tracelens_h100_bert_small.json.gz")])
        == 0
    )
    capsys.readouterr()
    return store


def test_a_byte_flipped_in_a_store_table_is_found_by_fsck_and_refused_by_compact(capsys, tmp_path):
    """The store's Parquet files carried no page checksums: a byte flipped in the events' start_us page read
    as other values or not, unsaid, and fsck found 0 problems; compact would have rewritten the damage into a
    compacted file with sound checksums of its own."""
    store = _store_of_bert(tmp_path, capsys)
    (events,) = (store / "tables" / "events").glob("month=*/*.parquet")
    _flip_in_column(events, "start_us")
    rel = events.relative_to(store).as_posix()
    assert main(["store", "fsck", str(store)]) == 1
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines() == [
        f"damaged: {rel} (a data page fails its checksum: changed since it was written (could not verify page "
        "integrity, CRC checksum verification failed for page_ordinal 0))",
        "1 problem",
    ], out
    before = _digest(events)
    line = _one_error(capsys, "store", "compact", "--before", "2999-01", store)
    assert line == (
        f"popprof: error: {events}: damaged store file: a data page fails its checksum: changed since it was "
        "written (could not verify page integrity, CRC checksum verification failed for page_ordinal 0) "
        "(popprof store fsck lists the files it cannot read)"
    )
    assert _digest(events) == before and list(events.parent.iterdir()) == [events]  # no compacted events


def test_store_add_over_a_damaged_catalogue_file_names_it(capsys, tmp_path):
    """The catalogue's rows are read with pyarrow before an add (is the run stored?): a page failing its
    checksum there is one line naming the file, exit 2, not the bare 'could not verify page integrity'."""
    store = _store_of_bert(tmp_path, capsys)
    (catalogue,) = (store / "runs").glob("month=*/*.parquet")
    _flip_in_column(catalogue, "content_sha256", dictionary=True)
    line = _one_error(capsys, "store", "add", store, REAL / "traces" / "tracelens_h100_bert_small.json.gz")
    assert line.startswith(
        f"popprof: error: {catalogue}: damaged store file: a data page fails its checksum"
    ), line
    assert line.endswith("(popprof store fsck lists the files it cannot read)"), line


def test_a_store_written_before_page_checksums_reads_as_before(capsys, tmp_path):
    """Files written without checksums (every store before 2026-12-07) have nothing to check: fsck finds no
    problem, queries and compact read them as they did."""
    import pyarrow.parquet as pq

    store = _store_of_bert(tmp_path, capsys)
    files = sorted(store.rglob("*.parquet"))
    assert len(files) >= 3
    for file in files:  # as an older popprof wrote them: no page checksums
        pq.write_table(pq.read_table(file), file, compression="zstd")
    assert main(["store", "fsck", str(store)]) == 0
    assert capsys.readouterr().out == "0 problems\n"
    assert main(["store", "query", "--format", "json", str(store), "SELECT count(*) AS n FROM events"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [{"n": popprof.open(REAL / "traces" / "tracelens_h100_bert_small.json.gz").rows("events")}]
    assert main(["-q", "store", "compact", "--before", "2999-01", str(store)]) == 0
    assert list(store.rglob("compact-*.parquet"))
    assert main(["store", "fsck", str(store)]) == 0


# --------------------------------------------------------------------------- redacted read notes


def test_a_redacted_bundle_keeps_its_read_notes_readable_and_their_values_redacted(
    capsys, tmp_path, monkeypatch
):
    """The redaction pseudonymised the keys of popprof's own read notes (``warnings.truncated`` became
    ``arg_...``): the redacted bundle's ``tables`` no longer said its source was cut off. The keys are popprof's
    words (kept, by the redactor and the leak scan alike); their values, and any other ``warnings.`` key, are
    redacted as before."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    run, rank = _two_ranks_with_rank_1_cut(tmp_path)
    bundle = tmp_path / "run.popprof"
    assert main(["-q", "export", str(run), "-o", str(bundle)]) == 0
    meta = pq.read_table(bundle / "metadata.parquet")
    original = dict(zip(meta["key"].to_pylist(), meta["value"].to_pylist(), strict=True))
    assert original["warnings.truncated"].startswith("rank-1.json.gz: ")
    planted = "warnings.alice_on_gpu_node_17"  # a warnings. key that is no read note of popprof's
    extra = pa.table({"key": [planted], "value": ["1"]}).cast(meta.schema)
    pq.write_table(pa.concat_tables([meta, extra]), bundle / "metadata.parquet")
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["tables"]["metadata"]["rows"] += 1
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "shared.popprof"
    capsys.readouterr()
    assert main(["-q", "redact", str(bundle), "-o", str(out)]) == 0  # the leak scan passed
    shared = pq.read_table(out / "metadata.parquet")
    redacted = dict(zip(shared["key"].to_pylist(), shared["value"].to_pylist(), strict=True))
    assert "warnings.truncated" in redacted, redacted
    assert (
        "rank-1" not in redacted["warnings.truncated"] and "premature" not in redacted["warnings.truncated"]
    )
    assert planted not in redacted and not any("alice" in k or "node_17" in k for k in redacted), redacted
    capsys.readouterr()
    assert main(["tables", str(out)]) == 0
    tables = " ".join(capsys.readouterr().out.split())  # the problems line wraps at 80 columns
    assert "read with problems: the file ends early: events after the cut are missing (" in tables
    assert main(["-q", "scan", str(out), "--against", str(bundle)]) == 0


def _two_ranks_with_rank_1_cut(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the real two-rank run directory whose rank 1 trace is cut off in its middle: (run, rank file)."""
    run = tmp_path / "two_ranks"
    shutil.copytree(REAL / "traces" / "two_ranks", run)
    rank = run / "rank-1.json.gz"
    data = gzip.decompress(rank.read_bytes())
    rank.write_bytes(gzip.compress(data[: len(data) // 2]))
    return run, rank


def _damaged_line(path: Path) -> str:
    return f"popprof: error: {path}: damaged store file: a data page fails its checksum: changed since it was written"


def test_store_queries_refuse_a_byte_flipped_in_the_files_they_read(capsys, tmp_path):
    """DuckDB reads Parquet without checking page checksums: a byte flipped in an events page gave other start
    times from ``store query`` (exit 0), one in the metrics' names a bare 'SQL error: ... ZSTD Decompression
    failure' blaming the query, one in the catalogue DuckDB's 'Could not read enough bytes'. Each read now checks
    the pages of the files it reads first: one line naming the file and ``store fsck``, exit 2. ``store ls``
    reads the catalogue only, ``trend`` the catalogue and the metrics: damage elsewhere is not theirs to see."""
    import shutil

    base = _store_of_bert(tmp_path, capsys)
    sql = "SELECT count(*) AS n, sum(start_us) AS s FROM events"
    assert main(["store", "query", "--format", "json", str(base), sql]) == 0
    sound = json.loads(capsys.readouterr().out)
    cases = [
        ("tables/events", "start_us", False),
        ("metrics", "name", True),
        ("runs", "content_sha256", True),
    ]
    for kind, column, dictionary in cases:
        store = tmp_path / ("copy-" + kind.replace("/", "-"))
        shutil.copytree(base, store)
        (file,) = (store / kind).glob("month=*/*.parquet")
        _flip_in_column(file, column, dictionary)
        before = _digest(file)
        readers = {
            "query": ["store", "query", "--format", "json", store, sql],
            "trend": ["trend", store, "trace.device_idle_us"],
            "ls": ["store", "ls", store],
        }
        reads = {
            "tables/events": ("query",),
            "metrics": ("query", "trend"),
            "runs": ("query", "trend", "ls"),
        }[kind]
        for name, args in readers.items():
            if name in reads:
                line = _one_error(capsys, *args)
                assert line.startswith(_damaged_line(file)), (kind, name, line)
                assert line.endswith("(popprof store fsck lists the files it cannot read)"), line
            else:
                assert main([str(a) for a in args]) == 0, (kind, name)
                out = capsys.readouterr().out
                if name == "query":
                    assert json.loads(out) == sound, out
        assert _digest(file) == before


def test_store_reads_check_each_file_once_and_again_when_it_changes(capsys, tmp_path):
    """The files whose pages passed are recorded by name, size, modification time and inode
    (``cache/verified.parquet``): the next read checks none of them again, a file changed since is checked
    again (and refused when damaged), and a deleted record only means the next read checks them all again."""
    from popprof.store import verified
    from popprof.store.layout import Location

    store = _store_of_bert(tmp_path, capsys)
    location = Location.of(store)
    files = sorted(p.relative_to(store).as_posix() for p in store.glob("*/**/month=*/*.parquet"))
    assert len(files) >= 3
    assert verified.check(location, files) == len(files)
    assert (store / verified.VERIFIED).is_file()
    assert verified.check(location, files) == 0  # one stat each
    (events,) = (store / "tables" / "events").glob("month=*/*.parquet")
    _flip_in_column(events, "start_us")
    with pytest.raises(popprof.InputError, match="damaged store file: a data page fails its checksum"):
        verified.check(location, files)
    (store / verified.VERIFIED).unlink()
    assert main(["store", "ls", str(store)]) == 0  # the catalogue's pages only
    capsys.readouterr()
    assert (
        verified.check(location, [f for f in files if not f.startswith("tables/events/")]) == len(files) - 2
    )


def test_arrow_dataset_checks_each_file_once_and_its_scans_check_pages(capsys, tmp_path):
    """``Store.arrow_dataset`` handed pyarrow the files as they were, to a scan that checks no page checksum: a
    byte flipped in a metrics data page reached Polars or Dask as Arrow's bare error or as other values. It now
    checks the files of its kind first, once per file (the record the queries keep), and its scans check every
    page they read (pyarrow's own check, for damage after the dataset was made)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from store_helpers import MK2, flip_in_data_page

    import popprof.store
    from popprof.store import verified

    root = tmp_path / "runs"
    popprof.store.init(root)
    popprof.store.add(root, [MK2], run_id="1", time="2026-01-05T00:00:00Z")
    s = popprof.store.open(root)
    plain = s.arrow_dataset("metrics", verify=False).to_table()
    assert not (root / verified.VERIFIED).exists()
    checked = s.arrow_dataset("metrics").to_table()
    assert checked.equals(plain)  # the same figures
    files = s.location.files("metrics", "month=*/*.parquet")
    assert set(verified._recorded(s.location)) == set(files)
    assert verified.check(s.location, files) == 0  # once per file: the second read checks none
    record = root / verified.VERIFIED  # as the first popprof to keep one wrote it (no ETags): read as it is
    pq.write_table(pq.read_table(record).drop_columns(["_etag"]), record)
    assert verified.check(s.location, files) == 0
    dataset = s.arrow_dataset("metrics")
    (metrics,) = root.glob("metrics/month=*/*.parquet")
    flip_in_data_page(metrics)
    with pytest.raises((OSError, pa.ArrowException), match="CRC checksum verification failed"):
        dataset.to_table()  # made before the damage: pyarrow's own check
    with pytest.raises(popprof.InputError) as refused:
        s.arrow_dataset("metrics")
    line = str(refused.value)
    assert line.startswith(f"{metrics}: damaged store file: a data page fails its checksum: changed since"), (
        line
    )
    assert line.endswith("(popprof store fsck lists the files it cannot read)") and "\n" not in line, line


def test_an_object_store_without_etags_is_checked_on_every_read(tmp_path):
    """An object is recorded by its ETag (S3's changes with every PUT); a file system whose listing gives none
    (fsspec's memory one here) has nothing that changes with the bytes, so its files are checked every time."""
    from store_helpers import MK2

    import popprof.store
    from popprof.store import verified

    root = f"memory://popprof-{tmp_path.name}/store"
    popprof.store.init(root)
    popprof.store.add(root, [MK2], run_id="1", time="2026-01-05T00:00:00Z")
    location = popprof.store.open(root).location
    files = location.files("metrics", "month=*/*.parquet")
    assert verified.check(location, files) == 1
    assert verified.check(location, files) == 1
    location.fs.rm(location._bare(""), recursive=True)


def test_a_trace_with_a_bracket_flipped_mid_file_is_damaged_not_text_after_it(capsys, tmp_path):
    """A '{' flipped in the middle of a trace closed the JSON guard's count of brackets early: the reader said
    'text follows the JSON value at byte 305,587 (an appended log line, ...)': remove what follows, at the end
    of a file nothing was appended to. Where the JSON is first invalid is the damage to name."""
    data = gzip.decompress((REAL / "traces" / "hta_simple_add.json.gz").read_bytes())
    at = 82_427
    assert data[at : at + 2] == b" {"
    damaged = tmp_path / "trace.json"
    damaged.write_bytes(data[:at] + b"\xdf\x84" + data[at + 2 :])
    line = _one_error(capsys, "tables", damaged)
    assert line == (
        f"popprof: error: {damaged}: the file is damaged before its end (not cut off): invalid JSON at line 2,668, "
        "column 12 (byte 82,427 of the file): lexical error: invalid char in json text. (the file may be damaged; "
        "write it again)"
    ), line


@pytest.mark.parametrize("scan", [True, False])
def test_redact_of_a_trace_with_an_escape_broken_inside_a_string_says_where(
    capsys, tmp_path, monkeypatch, scan
):
    """A byte flipped to a backslash inside a string (``"aten::`` -> ``"\\ten::`` is a tab; ``\\m`` is no
    escape) leaves valid UTF-8 and balanced brackets: the redaction decoded the string and ended in an
    internal error (orjson's ``invalid escaped sequence``), found by a fuzz of real traces. It is refused,
    exit 2, in the reader's words, nothing written, the input untouched; with and without the leak scan."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    data = gzip.decompress((REAL / "traces" / "hta_simple_add.json.gz").read_bytes())
    at = data.index(b'"aten::mul"') + 6  # the second ':' becomes a backslash: '\\m' is no escape
    flipped = data[:at] + b"\\" + data[at + 1 :]
    assert flipped[at : at + 2] == b"\\m"
    damaged = tmp_path / "trace.json"
    damaged.write_bytes(flipped)
    out = tmp_path / "shared.json"
    line = _one_error(capsys, "redact", damaged, "-o", out, *([] if scan else ["--no-scan"]))
    line_no = data[:at].count(b"\n") + 1
    column = at - data.rfind(b"\n", 0, at)
    assert line.startswith(
        f"popprof: error: {damaged}: the file is damaged before its end (not cut off): invalid JSON at line "
        f"{line_no:,}, column "
    ), line
    assert "inside a string, '\\' occurs before a character which it may not" in line, line
    assert abs(int(line.split("column ")[1].split(" ")[0].replace(",", "")) - column) <= 1, (line, column)
    assert not out.exists() and not list(tmp_path.glob(".*"))
    assert damaged.read_bytes() == flipped
