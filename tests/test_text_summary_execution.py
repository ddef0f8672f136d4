"""Execution sections built from the format facts: layouts, several labelled summaries, partial sections."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.model.errors import InputError
from popprof.readers import text_summary


def sdk3_section(
    total: int, sync: float, exchange: float, programs: str = "main, main.", indent: str = "  "
) -> str:
    """An SDK 2.x/3.x execution section with the given tile-average cycles (other categories small)."""

    def line(label: str, value: float) -> str:
        return f"{indent}{label + ':':<54}{value:,.1f} ({100 * value / total:.1f}% of total)\n"

    return (
        "Execution:\n\nPrograms executed:\n\n" + programs + "\n\n"
        f"{indent}{'Total cycles:':<54}{total:,} (approx {total / 1330:,.1f} microseconds)\n"
        + line("Tile average compute cycles (including idle threads)", 1_000.0)
        + line("Tile average compute cycles (excluding idle threads)", 900.0)
        + line("Tile average IPU exchange cycles", exchange)
        + line("Tile average global exchange cycles", 0.0)
        + line("Tile average host exchange cycles", 0.0)
        + line("Tile average sync cycles", sync)
    )


def write(tmp_path, text: str, name: str = "run.log"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_programs_list_after_a_blank_line_draws_no_warning(tmp_path):
    path = write(tmp_path, "compiling\n" + sdk3_section(1_000_000, 2_000.0, 3_000.0) + "done\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = popprof.open(path)
    assert json.loads(profile.meta["text_summary.programs_executed"]) == ["main", "main"]
    assert json.loads(profile.meta["text_summary.warnings"]) == []
    assert profile.execution_totals["cycles"].iloc[0] == 1_000_000


def test_programs_on_the_heading_line(tmp_path):
    text = sdk3_section(500_000, 10.0, 10.0).replace(
        "Programs executed:\n\nmain, main.\n", "Programs executed: train, eval.\n"
    )
    profile = popprof.open(write(tmp_path, text))
    assert json.loads(profile.meta["text_summary.programs_executed"]) == ["train", "eval"]


@pytest.mark.parametrize(
    ("sync", "exchange", "severity", "title"),
    [
        (990_000.0, 1_000.0, "error", "Sync-bound run"),  # sync dominates (a halo-exchange kernel)
        (1_000.0, 400_000.0, "warning", "Exchange-bound run"),
        (1_000.0, 2_000.0, "info", "Exchange share"),
    ],
)
def test_dominant_sync_or_exchange_is_flagged_from_the_summary_alone(
    tmp_path, sync, exchange, severity, title
):
    profile = popprof.open(write(tmp_path, sdk3_section(1_000_000, sync, exchange)))
    findings = popprof.check(profile, rules=["exchange.share"])
    assert [(f.severity, f.title) for f in findings] == [(severity, title)]
    assert findings.items[0].value == pytest.approx((sync + exchange) / 1_000_000)


def test_several_labelled_summaries_are_one_profile_each(tmp_path):
    text = (
        "Run 1 (batch 8):\n"
        + sdk3_section(1_000_000, 10.0, 10.0)
        + "Run 2 (batch 16):\n"
        + sdk3_section(2_000_000, 20.0, 20.0)
        + sdk3_section(3_000_000, 30.0, 30.0)
    )
    path = write(tmp_path, text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profiles = popprof.open_all(path)
    assert list(profiles) == ["Run_1_batch_8", "Run_2_batch_16", "run_3"]
    assert [int(p.execution_totals["cycles"].iloc[0]) for p in profiles.values()] == [
        1_000_000,
        2_000_000,
        3_000_000,
    ]
    assert profiles["Run_2_batch_16"].meta["text_summary.label"] == "Run 2 (batch 16)"
    with pytest.raises(InputError, match="holds several profiles"):
        popprof.open(path)
    one = popprof.open(path, engine="Run_2_batch_16")
    assert int(one.execution_totals["cycles"].iloc[0]) == 2_000_000
    result = subprocess.run(
        [sys.executable, "-m", "popprof", "summary", str(path), "--engine", "run_3", "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["execution"]["total_cycles"] == 3_000_000


def test_unlabelled_summaries_are_numbered(tmp_path):
    text = sdk3_section(1_000_000, 10.0, 10.0) + "\n" + sdk3_section(2_000_000, 20.0, 20.0)
    assert list(popprof.open_all(write(tmp_path, text))) == ["run_1", "run_2"]


def test_sdk1_layout_at_column_zero(tmp_path):
    text = (
        "Execution:\n\nTotal cycles:                 1,000 (approx 0.6 microseconds)\n"
        "Total compute cycles (including idle threads): 600\nTotal IPU exchange cycles: 200\n"
        "Total global exchange cycles: Must enable debug.instrumentExternalExchange\n"
        "Total host exchange cycles: 0\nTotal sync cycles: 150\n\nCycles by vertex type:\n"
        "    MyVertex<half>   (1,216 instances):   600\n"
    )
    profile = popprof.open(write(tmp_path, text))
    assert (
        dict(
            zip(
                profile.execution_totals["category"].astype(str),
                profile.execution_totals["cycles"],
                strict=True,
            )
        )["sync"]
        == 150
    )
    assert profile.vertex_cycles["instances"].tolist() == [1216]


def test_section_with_only_some_lines_warns_once(tmp_path):
    text = (
        "Execution:\n\n  Total cycles:        1,000 (approx 0.6 microseconds)\n"
        "  Tile average compute cycles (including idle threads): 600.0 (60.0% of total)\n"
    )
    path = write(tmp_path, text)
    with pytest.warns(text_summary.TruncatedSummaryWarning) as caught:
        profile = popprof.open(path)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert str(path) in message and "exchange, global_exchange, host_io, sync" in message
    assert len(profile.execution_totals) == 2
    result = subprocess.run(
        [sys.executable, "-m", "popprof", "summary", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert len(result.stderr.strip().splitlines()) == 1 and "popprof: warning:" in result.stderr


def test_number_that_does_not_parse_is_missing_with_a_warning(tmp_path):
    text = sdk3_section(1_000_000, 10.0, 10.0).replace("10.0 (0.0% of total)\n", "1O.0 (0.0% of total)\n", 1)
    with pytest.warns(text_summary.TruncatedSummaryWarning, match="does not parse"):
        profile = popprof.open(write(tmp_path, text))
    totals = profile.execution_totals
    assert totals["cycles"].isna().sum() == 1


def test_profiles_of_a_multi_summary_log_equal_reading_each_summary_alone(tmp_path):
    oom = "Out of memory on tile 5: 700,000 bytes used but tiles only have 638,976 bytes of memory\n"
    text = (
        "Run 1:\n"
        + sdk3_section(1_000_000, 10.0, 10.0)
        + oom
        + "Run 2:\n"
        + sdk3_section(2_000_000, 20.0, 20.0).replace("main, main.", "train.")
        + "\n"
        + (Path(__file__).parent.parent / "fixtures" / "text_summary" / "mk1_noexec.txt").read_text()
    )
    path = write(tmp_path, text)
    profiles = popprof.open_all(path)
    assert list(profiles) == ["Run_1", "Run_2", "run_3"]
    for k, profile in enumerate(profiles.values()):
        alone = text_summary.read(path, summary=k)
        assert profile.table_names == alone.table_names
        for table in alone.table_names:
            if table != "metadata":
                pd.testing.assert_frame_equal(profile[table], alone[table], obj=f"{k}.{table}")
        assert profile.meta == alone.meta
    assert profiles["Run_2"].out_of_memory["tile"].tolist() == [5]  # the message before it
    assert "out_of_memory" not in profiles["Run_1"].table_names


def test_memory_figure_that_does_not_parse_warns_once_and_the_rest_is_read(tmp_path):
    from test_text_summary_newer_layouts import NEWER

    text = NEWER.replace("Including Gaps:                   120,000,000 B", "Including Gaps:   12O,000,000 B")
    path = write(tmp_path, text, "broken.txt")
    with pytest.warns(text_summary.TruncatedSummaryWarning) as caught:
        profile = popprof.open(path)
    assert (
        len(caught) == 1 and "12O,000,000 B" in str(caught[0].message) and str(path) in str(caught[0].message)
    )
    totals = profile.memory_totals
    got = {(str(g), str(c)) for g, c in zip(totals["group"], totals["category"], strict=True)}
    assert ("total", "including_gaps") not in got and ("total", "excluding_gaps") in got


def test_figures_too_large_for_their_column_warn_instead_of_failing(tmp_path):
    from test_text_summary_newer_layouts import NEWER

    text = NEWER.replace(
        "Stack:                     15,000,000 B", "Stack:   15,000,000,000,000,000,000,000 B"
    ).replace("Tiles per IPU:       1,472", "Tiles per IPU:       99,999,999,999")
    path = write(tmp_path, text, "huge.txt")
    with pytest.warns(text_summary.TruncatedSummaryWarning, match="too large"):
        profile = popprof.open(path)
    totals = profile.memory_totals
    assert "Stack" not in set(totals["category"].astype(str))
    assert profile.target_value("tiles_per_ipu") == 1472  # the bad figure dropped; derived from the others
    assert profile.target_value("bytes_per_tile") == 638_976
