"""The writer's SDK 2.x/3.x memory layout and Execution sections, read back figure for figure."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from test_text_summary_newer_layouts import NEWER

import popprof
import popprof.metrics
from popprof.testing import synth
from popprof.testing.writers.text_summary import (
    Layout,
    execution_figures,
    render_text_summary,
    summary_totals,
    write_text_summary,
)

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "poplar"


def figures(frame: pd.DataFrame) -> dict[tuple, int]:
    tiles = frame["tile"].astype("Int64").fillna(-1).astype(int)
    return dict(
        zip(
            zip(tiles, frame["group"].astype(str), frame["category"].astype(str), strict=True),
            frame["bytes"].astype(int),
            strict=True,
        )
    )


def execution(frame: pd.DataFrame) -> list[tuple]:
    def f(v: float) -> float | None:
        return None if math.isnan(v) else round(float(v), 6)

    return [
        (str(c), str(b), f(cy), f(sh), bool(e), f(t))
        for c, b, cy, sh, e, t in zip(
            frame["category"],
            frame["basis"],
            frame["cycles"],
            frame["share"],
            frame["estimated"],
            frame["time_us"],
            strict=True,
        )
    ]


@pytest.fixture(scope="module")
def profile():
    return synth.make_profile(
        num_ipus=2,
        oom_tiles=2,
        hot_tiles=3,
        num_steps=80,
        num_programs=40,
        num_liveness_steps=20,
        num_variables=10,
        seed=11,
    )


@pytest.mark.parametrize("style", ["sdk1", "sdk3"])
def test_writer_execution_totals_read_back(profile, tmp_path, style):
    path = write_text_summary(
        profile,
        tmp_path / f"{style}.txt",
        memory_style=style,
        execution_totals=style,
        show_execution_steps=True,
    )
    back = popprof.open(path)
    assert execution(back.execution_totals) == execution(execution_figures(profile, style))
    steps = profile.steps
    busiest = steps.groupby("ipu")["cycles"].sum().max()
    assert back.execution_totals["cycles"].iloc[0] == busiest
    assert figures(back.memory_totals) == figures(summary_totals(profile, 5, style))
    assert (
        len(back.programs)
        == steps[steps["ipu"] == steps["ipu"].min()].drop_duplicates(["program_type", "program"]).shape[0]
    )


def test_sdk3_layout_has_the_newer_headings(profile):
    text = render_text_summary(profile, layout=Layout(memory_style="sdk3", execution_totals="sdk3"))
    assert "  Total for all IPUs:\n" in text and "        Not Overlapped\n" in text
    assert "Tile average sync cycles:" in text and "% of total)" in text and "Programs executed:" in text


@pytest.mark.parametrize(
    "name",
    [
        "examples_tut7_execution_sdk1_mk1.txt",
        "tutorials_tut6_execution_hw_sdk3.txt",
        "tutorials_tut6_execution_ipumodel_sdk3.txt",
    ],
)
def test_real_execution_summaries_render_and_read_back_the_same(tmp_path, name):
    real = popprof.open(REAL / name)
    style = "sdk3" if (real.execution_totals["basis"].astype(str) == "tile_average").any() else "sdk1"
    path = write_text_summary(real, tmp_path / name, execution_totals=style)
    back = popprof.open(path)
    assert execution(back.execution_totals) == execution(real.execution_totals)
    if real.has("vertex_cycles"):
        pd.testing.assert_frame_equal(back.vertex_cycles, real.vertex_cycles)
    assert back.meta.get("text_summary.programs_executed") == real.meta.get("text_summary.programs_executed")
    assert back.meta.get("text_summary.execution_not_printed") == real.meta.get(
        "text_summary.execution_not_printed"
    )


def test_newer_memory_layout_renders_and_reads_back(tmp_path):
    src = tmp_path / "sdk3.txt"
    src.write_text(NEWER)
    read = popprof.open(src)
    path = write_text_summary(read, tmp_path / "again.txt", memory_style="sdk3")
    back = popprof.open(path)
    assert figures(back.memory_totals) == figures(summary_totals(read, 5, "sdk3"))
    kept = {k: v for k, v in figures(read.memory_totals).items() if k[1] != "other"}
    assert figures(back.memory_totals) == kept


@pytest.mark.parametrize(
    ("name", "text", "style"),
    [
        ("mk2_training", "mk2_training_sdk3.txt", "sdk3"),
        ("pod4_pipeline", "pod4_pipeline_sdk1_exec.txt", "sdk1"),
    ],
)
def test_generated_newer_layout_fixtures(fixtures_dir, name, text, style):
    bundle = popprof.open(fixtures_dir / f"{name}.popprof")
    back = popprof.open(fixtures_dir / "text_summary" / text)
    assert execution(back.execution_totals) == execution(execution_figures(bundle, style))
    m = popprof.metrics.compute(back)
    assert m["execution.total_cycles"] == popprof.metrics.compute(bundle)["execution.total_cycles"]
    whole = back.memory_totals[back.memory_totals["tile"].isna()]
    incl = whole[(whole["group"] == "total") & (whole["category"] == "including_gaps")]["bytes"].iloc[0]
    assert incl == int(bundle.tiles["bytes_incl_gaps"].sum())
