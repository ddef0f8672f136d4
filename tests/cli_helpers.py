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
