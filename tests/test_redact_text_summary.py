"""Redacting Poplar text summaries: numbers kept, public vertex names kept, names and free text replaced."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

import popprof
from popprof.metrics import compute
from popprof.redaction import redact, scan
from popprof.redaction.policy import Policy

sys.path.insert(0, str(Path(__file__).parent))
from redact_helpers import KEY_A, KEY_B, TEXT_SUMMARY, canary_profile  # noqa: E402


def _write(tmp_path: Path, text: str = TEXT_SUMMARY) -> Path:
    path = tmp_path / "summary.txt"
    path.write_text(text)
    return path


def test_canaries_gone_numbers_and_public_names_kept(tmp_path):
    src = _write(tmp_path)
    out = tmp_path / "red.txt"
    report = redact(src, out, key=KEY_A)
    assert report.passed and report.input_kind == "text_summary"
    text = out.read_text()
    assert "canary" not in text.lower()
    assert "poplin::ConvPartial1x1Out<half,float,true,false>" in text
    assert "popops::ScaledAddSupervisor<half,half,half,true>" in text
    assert (
        "OnTileExecute: prog_" in text and "Maximum (Including Gaps): 608,942 (594.7 K) on tile 289" in text
    )
    assert "vtx_" in text and "Clock Speed (approx):" in text
    # lines that are no Poplar label (the host, the command) are ordinary output: replaced whole
    assert {"vtx", "prog", "line"} <= set(report.replaced)
    a, b = popprof.open(src), popprof.open(out)
    assert compute(a) == compute(b)
    cols = ["tile", "group", "bytes"]
    pd.testing.assert_frame_equal(a.memory_totals[cols].astype(str), b.memory_totals[cols].astype(str))
    assert src.read_text() == TEXT_SUMMARY
    assert KEY_A.decode() not in text and KEY_A.hex() not in text


def test_written_summary_of_a_sensitive_profile(tmp_path):
    from popprof.testing.writers.text_summary import write_text_summary

    src = tmp_path / "synth.txt"
    write_text_summary(canary_profile(), src, show_execution_steps=True)
    out = tmp_path / "synth.red.txt"
    assert redact(src, out, key=KEY_A).passed
    assert "CanaryModel" in src.read_text() and "CanaryModel" not in out.read_text()
    assert compute(popprof.open(src)) == compute(popprof.open(out))


def test_pseudonyms_follow_the_key(tmp_path):
    src = _write(tmp_path)
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    redact(src, a, key=KEY_A)
    redact(src, b, key=KEY_A)
    redact(src, c, key=KEY_B)
    assert a.read_text() == b.read_text() != c.read_text()


def test_scrubbers_off_cannot_keep_an_ordinary_line(tmp_path):
    """Lines of ordinary output are replaced whole, so switching the user and path scrubbers off
    keeps nothing of them; a label's value that is not a figure is one pseudonym whatever they say."""
    src = _write(tmp_path)
    out = tmp_path / "red.txt"
    report = redact(src, out, key=KEY_A, policy=Policy(scrub={"users": False, "paths": False}))
    assert report.passed and "canary" not in out.read_text().lower()
    assert not scan(src, against=src).passed
    leaky = _write(tmp_path, TEXT_SUMMARY.replace("Total Tiles:  ", "Total Tiles:  /home/canary.smith/x.py"))
    out2 = tmp_path / "red2.txt"
    report = redact(leaky, out2, key=KEY_A, policy=Policy(scrub={"users": False, "paths": False}))
    assert report.passed and "canary" not in out2.read_text() and "Total Tiles:  arg_" in out2.read_text()
