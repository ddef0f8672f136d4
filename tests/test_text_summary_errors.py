"""Bad input for the text summary reader: one clear InputError, partial results with a warning when cut off."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
import warnings

import pytest
from test_text_summary_tolerance import FACTS_EXAMPLE

from popprof.model.errors import InputError
from popprof.readers import detect, open_profile
from popprof.readers import text_summary as reader


def test_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("")
    with pytest.raises(InputError, match="empty"):
        open_profile(path)
    with pytest.raises(InputError, match="not a Poplar profile summary"):
        reader.read(path)


def test_text_that_is_not_a_summary(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("Target: ship on Friday\nGraph: see dashboard\n  nothing here\nMemory Usage: fine\n")
    assert not reader.sniff(path, path.read_bytes())
    with pytest.raises(InputError, match="not a recognised profile format"):
        open_profile(path)
    with pytest.raises(InputError, match="not a Poplar profile summary") as info:
        reader.read(path)
    assert str(path) in str(info.value)


def test_binary_file_is_not_sniffed(tmp_path):
    path = tmp_path / "blob.txt"
    path.write_bytes(b"\x00\x01Target:\n  Number of IPUs: 2\n")
    assert not reader.sniff(path, path.read_bytes())


def test_headings_without_figures(tmp_path):
    path = tmp_path / "hollow.txt"
    path.write_text("Target:\n  Number of IPUs:\n  Tiles per IPU:\n")
    with pytest.raises(InputError, match="holds no figures"):
        reader.read(path)


def test_truncated_mid_line_gives_what_was_parsed(tmp_path):
    cut = FACTS_EXAMPLE.index("80,200,000 B") + len("80,2")
    path = tmp_path / "cut.txt"
    path.write_text(FACTS_EXAMPLE[:cut])
    with pytest.warns(reader.TruncatedSummaryWarning, match="mid-line"):
        p = open_profile(path)
    totals = p.memory_totals
    got = dict(zip(totals["category"].astype(str), totals["bytes"].astype(int), strict=True))
    assert got["including_gaps"] == 812_004_112
    assert got["Variables"] == 402_100_000
    assert "Vertex Code" not in got  # the cut line is dropped, not misread as 802 bytes
    assert "mid-line" in json.loads(p.meta["text_summary.warnings"])[0]
    assert not p.has("tile_histogram")


def test_truncated_after_a_heading(tmp_path):
    cut = FACTS_EXAMPLE.index("By Data Type:") + len("By Data Type:\n")
    path = tmp_path / "cut.txt"
    path.write_text(FACTS_EXAMPLE[:cut])
    with pytest.warns(reader.TruncatedSummaryWarning, match="By Data Type"):
        p = open_profile(path)
    assert p.target_value("num_tiles") == 2944


def test_wrong_summary_index(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text(FACTS_EXAMPLE)
    with pytest.raises(InputError, match="holds 1 profile summaries"):
        reader.read(path, summary=3)


def test_gzip_summary(tmp_path):
    path = tmp_path / "s.txt.gz"
    path.write_bytes(gzip.compress(FACTS_EXAMPLE.encode()))
    assert detect(path) is reader
    assert open_profile(path).meta["tiles_out_of_memory"] == "3"


def test_input_is_never_modified(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text(FACTS_EXAMPLE)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    open_profile(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.txt"]


def test_cli_one_line_and_exit_2(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some words\n")
    proc = subprocess.run(
        [sys.executable, "-m", "popprof", "tables", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert str(path) in proc.stderr


def test_complete_summary_without_final_newline(tmp_path):
    path = tmp_path / "pasted.txt"
    path.write_text(FACTS_EXAMPLE.rstrip("\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = open_profile(path)
    assert p.meta["tiles_out_of_memory"] == "3"
    assert json.loads(p.meta["text_summary.warnings"]) == []


def test_cut_inside_a_unitless_last_line_is_dropped(tmp_path):
    text = FACTS_EXAMPLE[: FACTS_EXAMPLE.index("       600 - 700")] + "       600 - 700 *     4"
    path = tmp_path / "cut.txt"
    path.write_text(text)
    with pytest.warns(reader.TruncatedSummaryWarning):
        p = open_profile(path)
    assert p.tile_histogram["num_tiles"].tolist() == [2900]


def test_writer_refuses_to_write_over_its_input(tmp_path):
    from popprof.model.errors import UsageError
    from popprof.testing.writers.text_summary import write_text_summary

    path = tmp_path / "s.txt"
    path.write_text(FACTS_EXAMPLE)
    profile = open_profile(path)
    with pytest.raises(UsageError, match="overwrite the input"):
        write_text_summary(profile, path)
    assert path.read_text() == FACTS_EXAMPLE
    write_text_summary(profile, tmp_path / "again.txt")  # anywhere else is fine
    assert open_profile(tmp_path / "again.txt").target_value("num_tiles") == 2944
