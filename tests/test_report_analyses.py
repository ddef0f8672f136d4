"""The HTML report's analyses sections read the summary: one definition per figure.

On the real 8-rank DLRM trace (HTA's public test trace, ``fixtures/real/traces/README.md``) the report's GPU
operators, collectives and kernel launches show the figures of ``popprof summary --format json``, formatted
by ``io/units.py``; on the generated 4-IPU pipeline (``fixtures/README.md``; no real pipelined profile is
public) its pipeline and fullest tile. Each section shows only when the profile has it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.io import units, words
from popprof.io.names import shape_words
from popprof.report.html import render as render_html

ROOT = Path(__file__).resolve().parent.parent
DLRM = ROOT / "fixtures" / "real" / "traces" / "dlrm_8ranks"
PIPELINE = ROOT / "fixtures" / "pod4_pipeline.popprof"
SECTIONS = ("operations", "collectives", "launches", "pipeline", "fullest-tile")


def _json(path: Path, *options: str) -> dict:
    result = CliRunner().invoke(cli, ["-q", "summary", str(path), "--format", "json", *options])
    assert result.exit_code == 0, result.output[-1000:]
    return json.loads(result.stdout)


def _cells(html: str, table: str) -> list[list[str]]:
    """The data rows of ``<table class="table">`` as lists of cell texts (header row left out)."""
    body = re.search(rf'<table class="{table}">(.*?)</table>', html, re.S)
    assert body, f"no {table} table"
    rows = re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).replace("&#39;", "'").strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in rows
        if "<td" in row
    ]


@pytest.fixture(scope="module")
def dlrm() -> tuple[dict, str]:
    return _json(DLRM, "--shapes"), render_html(popprof.open(DLRM, with_args=True), plots=False)


def test_collectives_in_the_report_are_the_summarys(dlrm) -> None:
    doc, html = dlrm
    rows = _cells(html, "collectives")
    assert len(rows) == len(doc["collectives"]["by_type"]) == 2
    for cells, row in zip(rows, doc["collectives"]["by_type"], strict=True):
        assert cells == [
            row["collective"],
            units.count(row["count"]),
            units.duration(row["time_us"]),
            units.duration(row["skew_us"]),
            units.duration(row["transfer_us"]),
            units.percent(row["skew_us"] / row["time_us"]),
            units.nbytes(row["bytes"]),
            units.bandwidth(row["algbw_gbps"]),
            units.bandwidth(row["busbw_gbps"]),
        ]
    assert "8 ranks; synchronisation skew measured across ranks" in html


def test_launches_in_the_report_are_the_summarys(dlrm) -> None:
    doc, html = dlrm
    text = " ".join(cell for row in _cells(html, "launches") for cell in row)
    launches = doc["launches"]
    assert f"{units.count(launches['count'])} (launch calls {units.duration(launches['cpu_us'])})" in text
    for key in ("delay_median_us", "delay_p95_us", "short_gpu_us", "short_cpu_us", "launch_idle_us"):
        assert units.duration(launches[key]) in text, key
    assert f"{units.count(launches['short_count'])}:" in text


def test_operations_in_the_report_are_the_summarys(dlrm) -> None:
    doc, html = dlrm
    rows = _cells(html, "operations")
    assert 0 < len(rows) <= len(doc["operations"])
    for cells, row in zip(rows, doc["operations"], strict=False):
        assert cells[1] == (shape_words(row["input_shapes"], width=60) or "-")
        assert cells[3:] == [
            units.count(row["count"]),
            units.duration(row["device_time_us"]),
            units.number(row["tflops"], missing="-"),
            units.number(row["tbps"], missing="-"),
            row["bound"] or "-",
        ]


def test_ipu_analyses_in_the_report_are_the_summarys() -> None:
    doc = _json(PIPELINE)
    html = render_html(popprof.open(PIPELINE), plots=False)
    pipeline = doc["pipeline"]
    assert f"{words.STAGE_IMBALANCE} {units.duration(pipeline['imbalance_us'])}" in html
    assert _cells(html, "pipeline") == [
        [str(s["ipu"]), units.duration(s["stage_us"]), units.count(s["slowest_steps"])]
        for s in pipeline["stages"]
    ]
    tile = doc["fullest_tile"]
    assert _cells(html, "fullest-tile") == [
        [r["category"], units.nbytes(r["bytes"])] for r in tile["categories"]
    ]
    savings = {cells[0]: cells[1] for cells in _cells(html, "savings")}
    for key, word in words.MEMORY_SAVING_WORDS.items():
        value = tile["savings"][key]["bytes"]
        assert savings[word] == ("unknown" if value is None else units.nbytes(value))
    for gpu_only in ("operations", "collectives", "launches"):
        assert f'<table class="{gpu_only}">' not in html


def test_no_section_without_its_analysis() -> None:
    """A real Poplar text summary has none of them: no empty heading."""
    html = render_html(
        popprof.open(ROOT / "fixtures" / "real" / "poplar" / "tutorials_tut6_execution_hw_sdk3.txt"),
        plots=False,
    )
    assert not any(f'<table class="{name}">' in html for name in SECTIONS)
    assert "<h3>Collectives</h3>" not in html and "<h3>Kernel launches</h3>" not in html
