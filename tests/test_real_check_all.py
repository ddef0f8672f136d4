"""`popprof check FILE --fail-on never` exits 0 on every real artefact in fixtures/real (issue 25: 0 or 1; with
``--fail-on never`` no finding fails the run, so 0: 1 would be a finding counted as failing, 2 a read error)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from popprof.cli import cli

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
NOT_PROFILES = {
    "README.md",
    "FUZZ-SEEDS.md",
    "hta_reference.json",
    "make_hta_reference.py",
    "tracelens_reference.json",
    "make_tracelens_reference.py",
}
#: Directories that are one run (a rank per file), checked as one input.
RUNS = {"two_ranks", "dlrm_8ranks"}


def _artefacts() -> list[Path]:
    out = []
    for path in sorted(REAL.rglob("*")):
        if path.parent.name in RUNS or path.name in NOT_PROFILES or path.name.startswith("LICENSE-"):
            continue
        if path.is_file() or path.name in RUNS:
            out.append(path)
    return out


@pytest.mark.parametrize("path", _artefacts(), ids=lambda p: p.relative_to(REAL).as_posix())
def test_check_reads_every_real_artefact(path):
    result = CliRunner().invoke(cli, ["-q", "check", str(path), "--fail-on", "never", "--format", "json"])
    assert result.exit_code == 0, result.output[-2000:]
