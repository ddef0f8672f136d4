"""Helpers for tests that run popprof's CLI in the test's own process."""

from __future__ import annotations

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
