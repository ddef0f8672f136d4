"""Issue 28, pilot: a caveat where percentiles come from a single steady step, the fullest tile as a
percentage, a two-step histogram without overlapping bars, timelines at the page's width, and a
``--help`` example that does what it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from popprof.cli import main
from popprof.pilot import pilot
from popprof.pilot.render import render_markdown, render_text
from popprof.readers import open_profile

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

FIX = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def doc():
    ipu = open_profile(FIX / "mk2_training.popprof")  # 2 runs: 1 warm-up + 1 steady step
    gpu = open_profile(FIX / "traces" / "training_loop.json")  # 12 profiler steps
    return pilot([("ipu", ipu)], [("gpu", gpu)], warmup_steps=1)


def test_a_single_steady_step_gets_a_caveat_next_to_the_table(doc):
    ipu, gpu = doc["columns"]
    assert ipu["figures"]["step_count"]["value"] == 1
    assert len(ipu["caveats"]) == 1 and "single steady step" in ipu["caveats"][0]
    assert gpu["caveats"] == []
    text = render_text(doc).splitlines()
    # right under the table's last row, before the diagnosis (wrapped to 80 columns, its rest indented)
    last_row = max(i for i, line in enumerate(text) if line.startswith("finding "))
    caveat = text[last_row + 1 : text.index("Diagnosis") - 1]
    assert caveat[0].startswith("  caveat: ipu: the step-time percentiles")
    assert all(line.startswith("      ") for line in caveat[1:]) and max(map(len, caveat)) <= 80
    assert " ".join(" ".join(caveat).split()) == f"caveat: {ipu['caveats'][0]}"
    assert "> caveat: ipu:" in render_markdown(doc)


def test_fullest_tile_is_a_percentage(doc):
    row = next(line for line in render_text(doc).splitlines() if line.startswith("fullest tile / capacity"))
    share = doc["columns"][0]["figures"]["memory_utilisation"]["value"]
    assert f"{100 * share:.1f} %" in row


def test_two_step_histogram_has_no_overlapping_bars():
    from popprof.pilot.plots import step_distribution

    profile = open_profile(FIX / "mk2_training.popprof")
    column = {"figures": {"warmup_steps": {"value": 1}, "step_p50_us": {"missing": None}}}
    fig, _ = step_distribution(profile, column)
    bars = [(p.get_x(), p.get_x() + p.get_width()) for p in fig.axes[0].patches if p.get_height() > 0]
    assert len(bars) == 2
    (a0, a1), (b0, b1) = sorted(bars)
    assert a1 <= b0 + 1e-12  # side by side, not drawn over each other


def test_html_timelines_take_the_page_width(tmp_path, capsys):
    out = tmp_path / "pilot.html"
    code = main(
        [
            "pilot",
            str(FIX / "mk2_training.popprof"),
            "--baseline",
            str(FIX / "traces" / "training_loop.json"),
            "-o",
            str(out),
        ]
    )
    assert code == 0
    html = out.read_text("utf-8")
    timeline = html.split("<h3>Timeline</h3>", 1)[1]
    assert timeline.lstrip().startswith('<div class="stack">')
    assert 'class="caveats"' in html and "single steady step" in html


def test_help_example_does_not_contradict_itself(capsys):
    assert main(["pilot", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--format markdown -o pilot.html" not in text
    assert "-o pilot.html" in text and "--format markdown -o pilot.md" in text


# -- issue 25 item 12: shares on different bases ------------------------------------------------------------

REAL = FIX / "real"


def test_a_text_summary_next_to_a_gpu_trace_says_the_shares_have_different_bases():
    """The real SDK 3 text summary's shares are tile averages; the real ROCm trace's are shares of device
    time (HTA's breakdown): the page says so, next to the table, in every format."""
    text = open_profile(REAL / "poplar" / "tutorials_tut6_execution_hw_sdk3.txt")
    gpu = open_profile(REAL / "traces" / "amd_mi250_minitoy.json.gz")
    result = pilot([("ipu", text)], [("gpu", gpu)])
    ipu_col, gpu_col = result["columns"]
    assert (ipu_col["shares_basis"], gpu_col["shares_basis"]) == ("tile average cycles", "device time")
    (caveat,) = ipu_col["caveats"]
    assert caveat.startswith("ipu: the compute, exchange, stream copies and sync shares are Poplar's tile")
    assert "while gpu gives each device's share of its time: different bases" in caveat
    assert not [c for c in gpu_col["caveats"] if "bases" in c]
    assert f"caveat: {caveat}" in " ".join(render_text(result).split())  # wrapped to 80 columns
    assert f"caveat: {caveat}" in render_text(result, width=len(caveat) + 10)
    assert "> caveat: ipu: the compute" in render_markdown(result)


def test_shares_on_one_basis_get_no_basis_caveat():
    """Two text summaries (tile averages both), and a profile's per-IPU shares next to a GPU trace's (device
    time both): nothing to say."""
    hw = open_profile(REAL / "poplar" / "tutorials_tut6_execution_hw_sdk3.txt")
    model = open_profile(REAL / "poplar" / "tutorials_tut6_execution_ipumodel_sdk3.txt")
    both = pilot([("hw", hw)], [("model", model)])
    assert [c["caveats"] for c in both["columns"]] == [[], []]


def test_profile_shares_and_gpu_shares_are_one_basis(doc):
    assert [c["shares_basis"] for c in doc["columns"]] == ["device time", "device time"]
    assert not [c for col in doc["columns"] for c in col["caveats"] if "different bases" in c]
