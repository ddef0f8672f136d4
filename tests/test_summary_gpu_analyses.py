"""The text summary's collectives and kernel launch blocks, on real traces (fixtures/real/traces/README.md).

The figures printed are the summary document's, formatted by ``io/units.py``; every line fits 80 columns.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import popprof
from popprof.io import units
from popprof.report.gpu_analyses import render_collectives, render_launches, skew_share
from popprof.report.summary import render_text

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"


@pytest.fixture(scope="module")
def dlrm() -> dict:
    """The 8-rank DLRM run with its args read: skew measured across ranks, bytes and bandwidths known."""
    return popprof.summary(popprof.open(REAL / "dlrm_8ranks", with_args=True))


def _block(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))
    return lines[start:end]


def test_collectives_block_prints_the_documents_figures(dlrm) -> None:
    text = render_text(dlrm)
    block = _block(text, "Collectives (8 ranks)")
    assert "synchronisation skew measured across ranks" in block[1]
    for row in dlrm["collectives"]["by_type"]:
        line = next(x for x in block if x.split()[0] == row["collective"])
        assert units.count(row["count"]) in line and units.duration(row["time_us"]) in line
        assert units.duration(row["skew_us"]) in line and units.percent(skew_share(row)) in line
        assert line.endswith(units.bandwidth(row["busbw_gbps"]))
    # the all_to_all of this run is nearly all waiting: skew over 90 % of its time
    (a2a,) = [r for r in dlrm["collectives"]["by_type"] if r["collective"] == "all_to_all"]
    assert skew_share(a2a) > 0.9
    assert all(len(line) <= 80 for line in text.splitlines() if line in block)


def test_one_rank_without_args_says_what_is_not_measured() -> None:
    doc = popprof.summary(popprof.open(REAL / "nccl_data.json.gz"))
    block = render_collectives(doc["collectives"])
    joined = " ".join(block)
    assert "Collectives (1 rank)" in block and "not measured" in joined and "--shapes" in joined
    assert all(line.rstrip().endswith("-") for line in block if line.split()[:1] == ["broadcast"])
    assert all(len(line) <= 80 for line in block)


def test_launch_block_prints_the_documents_figures(dlrm) -> None:
    doc = dlrm["launches"]
    block = render_launches(doc)
    joined = "\n".join(block)
    assert block[1].startswith(f"Kernel launches (HTA's): {units.count(doc['count'])},")
    for key in ("delay_median_us", "delay_p95_us", "short_gpu_us", "launch_idle_us", "short_launch_idle_us"):
        assert units.duration(doc[key]) in joined, key
    assert f"short kernels {units.count(doc['short_count'])}:" in joined
    assert all(len(line) <= 80 for line in block)
    assert "\n".join(block[1:]) in render_text(dlrm)


def test_no_block_without_the_analysis() -> None:
    """An IPU profile has neither collectives nor launches: no empty headings."""
    text = render_text(
        popprof.summary(popprof.open(REAL.parent / "poplar" / "tutorials_tut6_execution_hw_sdk3.txt"))
    )
    assert "Collectives" not in text and "Kernel launches" not in text
    assert render_collectives(None) == [] and render_launches(None) == []
