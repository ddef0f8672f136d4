"""`popprof check FILE --fail-on never` exits 0 on every real artefact in fixtures/real (issue 25: 0 or 1; with
``--fail-on never`` no finding fails the run, so 0: 1 would be a finding counted as failing, 2 a read error)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from real_inputs import REAL, real_inputs

from popprof.cli import cli


def _artefacts() -> list[Path]:
    return real_inputs()


@pytest.mark.parametrize("path", _artefacts(), ids=lambda p: p.relative_to(REAL).as_posix())
def test_check_reads_every_real_artefact(path):
    result = CliRunner().invoke(cli, ["-q", "check", str(path), "--fail-on", "never", "--format", "json"])
    assert result.exit_code == 0, result.output[-2000:]
