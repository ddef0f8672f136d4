"""Findings of fuzzing the real inputs (2026-12-07, docs/limits.md "Fuzzed inputs"): each damaged input is
built from a real fixture in ``tmp_path`` (no fixture files of their own) and run through the commands that
ended in an internal error (exit 3): now a read warning and exit 0, or one error line and exit 2, never a
traceback, an internal error or a changed input.
"""

from __future__ import annotations

import gzip
import hashlib
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
    out = tmp_path / "out"
    out.mkdir()
    for args in _commands(bundle, out):
        _run(capsys, *args)
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
