"""``popprof plot --kind roofline``: GPU operators against the device's roofline (plots/roofline.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

import popprof  # noqa: E402
from popprof.cli import cli, main  # noqa: E402
from popprof.metrics import operations, peaks  # noqa: E402
from popprof.plots import plot  # noqa: E402

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
MI300X = REAL / "tracelens_mi300x_torch_compile_triton.json.gz"


def test_points_are_the_operators_and_the_roof_is_the_devices():
    profile = popprof.open(MI300X, with_args=True)
    fig = plot(profile, "roofline")
    ax = fig.axes[0]
    table = operations.operations(profile)
    modelled = table[table["tflops"].notna()]
    offsets = np.concatenate([c.get_offsets() for c in ax.collections])
    assert sorted(offsets[:, 1].round(6)) == sorted(modelled["tflops"].astype(float).round(6))
    assert sorted(offsets[:, 0].round(6)) == sorted(modelled["intensity"].astype(float).round(6))
    (roof,) = ax.get_lines()  # one dtype (bf16): one roofline, flat at the MI300X's bf16 peak
    peak = peaks.peak("MI300X", "bf16")
    assert roof.get_ydata().max() == pytest.approx(peak.tflops)
    assert "MI300X" in ax.get_title()


def test_cli_draws_it_and_a_trace_without_operators_says_so_in_one_line(tmp_path, capsys):
    out = tmp_path / "roof.png"
    result = CliRunner().invoke(cli, ["-q", "plot", str(MI300X), "--kind", "roofline", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG")
    code = main(
        ["plot", str(REAL / "cpu_only_rank-34.json.gz"), "--kind", "roofline", "-o", str(tmp_path / "x.png")]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no roofline" in err and not (tmp_path / "x.png").exists()
