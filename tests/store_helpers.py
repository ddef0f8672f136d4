"""Helpers of the store tests: a CLI runner and small stores built from the fixtures."""

from __future__ import annotations

from pathlib import Path

from popprof.cli import main

ROOT = Path(__file__).resolve().parent.parent
MK2 = ROOT / "fixtures" / "mk2_training.popprof"
TWO_RANKS = ROOT / "fixtures" / "real" / "traces" / "two_ranks"


def run(capsys, *args: object) -> tuple[int, str, str]:
    """Run the CLI; returns (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err
