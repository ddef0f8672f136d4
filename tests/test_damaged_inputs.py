"""Damaged copies of the real inputs (fixtures/real, the bundled samples): one line on stderr and exit 2.

Each test builds its damaged input from a real fixture in ``tmp_path`` (no fixture files of their own) and
runs the command line in-process, as the console script does: exit 2, nothing on stdout, one
``popprof: error:`` line naming the file and what is wrong, never a traceback or an internal error (exit 3),
and no output file written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from popprof.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real"


def _one_error(capsys, *args: object) -> str:
    """Run ``popprof ARGS``; assert exit 2 with one error line and nothing on stdout; give that line."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code}, stderr: {err}"
    assert out == "" and "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("popprof: warning:")]
    assert len(lines) == 1 and lines[0].startswith("popprof: error: "), err
    return lines[0]


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
