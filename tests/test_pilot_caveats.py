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
    # right under the table's last row, before the diagnosis
    assert text[text.index("Diagnosis") - 2].startswith("  caveat: ipu: the step-time percentiles")
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
