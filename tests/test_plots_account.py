"""The time account drawn (plots/account.py), and a figure for every real Poplar text summary (issue 44 item 7).

The account's bars are the account's shares (the same figures as "What limits this run"); a summary that holds
only execution totals draws its account, one that holds memory by data type draws that.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

import popprof  # noqa: E402
from popprof.cli import cli  # noqa: E402
from popprof.metrics import account  # noqa: E402
from popprof.plots import available_kinds, default_kind, plot  # noqa: E402
from popprof.report.html import render  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
POPLAR = ROOT / "fixtures" / "real" / "poplar"
#: Real Poplar texts that are summaries (execution or memory figures), not bare out-of-memory messages.
SUMMARIES = [
    "examples_tut7_execution_sdk1_mk1.txt",
    "tutorials_tut6_execution_hw_sdk3.txt",
    "tutorials_tut6_execution_ipumodel_sdk3.txt",
    "tensorflow_logging_target_graph_memory_mk1.txt",
    "tensorflow_logging_tile0_block_mk1.txt",
    "tensorflow_logging_tile_histogram_mk1.txt",
]


@pytest.mark.parametrize("name", SUMMARIES)
def test_every_real_poplar_summary_plots_and_its_report_has_a_figure(name, tmp_path):
    path = POPLAR / name
    out = tmp_path / "fig.png"
    result = CliRunner().invoke(cli, ["-q", "plot", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG")
    html = render(popprof.open(path))
    assert "data:image/png;base64," in html


def test_the_account_bars_are_the_accounts_shares():
    profile = popprof.open(ROOT / "fixtures" / "real" / "traces" / "dlrm_8ranks")
    fig = plot(profile, "account")
    runs = account.run_account(profile)
    bars = [p for p in fig.axes[0].patches]
    widths = sorted(round(b.get_width(), 9) for b in bars if b.get_width() > 0)
    expected = sorted(
        round(float(r[p]) / float(r["window_us"]), 9)
        for r in runs.to_dict("records")
        for p in account.GPU_PARTS
        if float(r[p]) > 0
    )
    assert widths == pytest.approx(expected)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0].startswith("rank 0 gpu:0")  # the first device on top


def test_a_summary_with_only_execution_totals_draws_its_account_by_default():
    profile = popprof.open(POPLAR / "tutorials_tut6_execution_ipumodel_sdk3.txt")
    assert default_kind(profile) == "account"
    fig = plot(profile, "account")
    widths = [b.get_width() for b in fig.axes[0].patches]
    assert max(widths) == pytest.approx(6663550.8 / 6681766.0)  # stream copies, the average tile's


def test_a_trace_without_device_time_cannot_draw_an_account():
    profile = popprof.open(ROOT / "fixtures" / "real" / "traces" / "cpu_only_rank-34.json.gz")
    assert "account" in available_kinds(profile)  # it has events ...
    with pytest.raises(popprof.PopprofError, match="no device time"):
        plot(profile, "account")  # ... but no device time: one line, no empty figure
