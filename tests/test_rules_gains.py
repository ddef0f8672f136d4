"""Findings priced and ranked (issue 41 item 3): every finding on the real artefacts carries an estimated gain
no larger than the figure it rests on nor its whole, ``check`` orders findings by that gain, and
``host.stream-copy`` judges a Poplar text summary's host exchange share."""

from __future__ import annotations

from pathlib import Path

import pytest

import popprof
from popprof.rules import check

ROOT = Path(__file__).resolve().parent.parent
REAL_POPLAR = ROOT / "fixtures" / "real" / "poplar"


def test_stream_copy_flags_a_summary_dominated_by_host_exchange():
    found = check(popprof.open(REAL_POPLAR / "tutorials_tut6_execution_ipumodel_sdk3.txt"))
    (f,) = found.by_rule("host.stream-copy")
    assert f.severity == "error" and f.value == pytest.approx(0.997, abs=1e-3)
    assert "99.7 % of the average tile's cycles" in f.message and "error at >= 20 %" in f.message
    gain = f.estimated_gain
    assert gain.unit == "us" and gain.rests_on == ("stream_copies",)
    assert gain.whole == pytest.approx(5023.9)  # the summary's "approx 5,023.9 microseconds"
    assert gain.value == pytest.approx(0.99727 * 5023.9, rel=1e-4) and gain.value <= gain.whole
    assert f.figure == "execution.summary_share.host_io" and f.share == pytest.approx(f.value)
    assert found.items[0] is f  # the largest gain comes first
    assert found.worst == "error"


def test_stream_copy_on_the_healthy_hardware_summary_is_no_error():
    found = check(popprof.open(REAL_POPLAR / "tutorials_tut6_execution_hw_sdk3.txt"))
    assert found.worst != "error"
    (f,) = found.by_rule("host.stream-copy")
    assert f.severity == "warning" and f.estimated_gain.value == pytest.approx(0.1038 * 19131.6, rel=1e-3)


def test_stream_copy_is_not_evaluated_where_host_exchange_is_summed_over_tiles():
    found = check(
        popprof.open(REAL_POPLAR / "examples_tut7_execution_sdk1_mk1.txt"), rules=["host.stream-copy"]
    )
    assert found.not_evaluated and "summed over all tiles" in found.not_evaluated[0][1]
