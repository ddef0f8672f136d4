"""The rule operations.below-roofline on real traces: thresholds, the gain (time minus roofline time)."""

from __future__ import annotations

from pathlib import Path

import pytest

import popprof
from popprof.metrics import account, peaks
from popprof.rules import check
from popprof.rules.operations import roofline_frame

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
RULE = "operations.below-roofline"


def _findings(path: Path, **options):
    return check(popprof.open(path, **options), rules=RULE)


def test_mi300x_attention_below_a_quarter_of_the_roofline_is_priced_at_its_time_minus_its_roofline_time():
    profile = popprof.open(REAL / "tracelens_mi300x_torch_compile_triton.json.gz", with_args=True)
    (finding,) = check(profile, rules=RULE)
    assert finding.severity == "warning"
    assert finding.where["operations"] == ["aten::_scaled_dot_product_flash_attention"]
    # Q, K, V [8, 16, 4096, 128] bf16, not causal: 4 * B * H * N^2 * d FLOPs at the MI300X's bf16 peak
    peak = peaks.peak("MI300X", "bf16")
    flops = 4.0 * 8 * 16 * 4096 * 4096 * 128
    frame = roofline_frame(profile)
    attention = frame[frame["category"] == "attention"].iloc[0]
    roofline_us = flops / (peak.tflops * 1e12) * 1e6  # compute-bound: the flat part of the roof
    assert attention["roofline_us"] == pytest.approx(roofline_us)
    gain = finding.estimated_gain
    assert gain.value == pytest.approx(attention["device_time_us"] - roofline_us)
    assert gain.rests_on == ("compute",) and gain.unit == "us"
    compute = account.run_account(profile)["compute"].sum()
    assert finding.value == pytest.approx(attention["device_time_us"] / compute)


def test_no_error_on_the_real_traces_and_nothing_below_the_warning():
    assert not _findings(REAL / "tracelens_b200_vllm_eager.json.gz", with_args=True)  # 19.5 %: under 20 %
    (dlrm,) = _findings(REAL / "dlrm_8ranks", with_args=True)
    assert "aten::copy_" not in dlrm.where["operations"]
    # their share of the compute time is in the warning band, but the compute is 7.6 % of the DLRM step:
    # at the roofline they would save 2.7 % of the eight windows, so the finding is held to info
    assert dlrm.share >= 0.20 and dlrm.estimated_gain.fraction < 0.10 and dlrm.severity == "info"
    assert "so info (warning at >= 10 % of it, error at >= 30 %)" in dlrm.message and dlrm.threshold is None
    # the MI300X compiled run's attention would save 22.7 % of its window: its warning stays
    (mi300x,) = _findings(REAL / "tracelens_mi300x_torch_compile_triton.json.gz", with_args=True)
    assert mi300x.severity == "warning" and mi300x.estimated_gain.fraction > 0.10


def test_without_shapes_not_evaluated_with_the_reason():
    found = _findings(REAL / "tracelens_b200_vllm_eager.json.gz")
    (reason,) = [why for rule_id, why in found.not_evaluated if rule_id == RULE]
    assert "input shapes not read" in reason
