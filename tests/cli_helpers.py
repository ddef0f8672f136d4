"""Helpers for tests that run popprof's CLI in the test's own process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from popprof.cli import main


def summary_error(path: Path, capsys: pytest.CaptureFixture) -> str:
    """``popprof summary PATH`` in this process: exit 2 and one line on stderr, no traceback; the line."""
    capsys.readouterr()
    assert main(["-q", "summary", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("popprof: error: "), err
    return lines[0]


def one_error(capsys: pytest.CaptureFixture, *args: object) -> str:
    """``popprof ARGS`` in this process: exit 2, nothing on stdout, one error line on stderr besides read
    warnings, no traceback or internal error; the line."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code}, stderr: {err}"
    assert out == "" and "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("popprof: warning:")]
    assert len(lines) == 1 and lines[0].startswith("popprof: error: "), err
    return lines[0]


def redact_refusals(capsys: pytest.CaptureFixture, tmp_path: Path, data: bytes, at: int, flip: bytes):
    """``data`` with its byte at ``at`` replaced by ``flip``, written to ``tmp_path/trace.json`` and redacted
    with and without the scan: for each, the refusal's line (:func:`one_error`) and the byte of the file it
    names, with nothing written and the input untouched."""
    damaged = tmp_path / "trace.json"
    flipped = data[:at] + flip + data[at + 1 :]
    damaged.write_bytes(flipped)
    out = tmp_path / "shared.json"
    refusals = []
    for scan in ([], ["--no-scan"]):
        line = one_error(capsys, "redact", damaged, "-o", out, *scan)
        byte = int(re.search(r"\(byte ([\d,]+) of the file\)", line)[1].replace(",", ""))
        assert not out.exists() and not list(tmp_path.glob(".*"))
        assert damaged.read_bytes() == flipped
        refusals.append((line, byte))
    return refusals
