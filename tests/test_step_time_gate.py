"""``trace.step_time_us``, the mean profiler step time, and the default budget that gates it (+5 %) on real traces
(``fixtures/real/traces``; docs/diff.md). Before it the default gate of two GPU traces watched device idle time
only: HTA's ``trace_diff`` pair, whose steps take 60 % longer with 64 % less idle, passed it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import popprof
from popprof.cli import main
from popprof.compare import gate

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
HTA = json.loads((REAL / "hta_reference.json").read_text("utf-8"))["trace_diffs"]["hta_trace_compare"]


def _value(path: Path) -> float | None:
    return popprof.metrics.METRICS["trace.step_time_us"].func(popprof.open(path))


def test_the_mean_of_htas_iterations_on_its_pair() -> None:
    steps = {n: f for n, f in HTA["every_iteration"].items() if n.startswith("ProfilerStep#")}
    hta_mean = sum(f["control_total_duration"] for f in steps.values()) / len(steps)
    assert len(steps) == 2 and _value(REAL / "hta_trace_compare_base.json.gz") == hta_mean == 111223.5
    result = popprof.diff(REAL / "hta_trace_compare_base.json.gz", REAL / "hta_trace_compare_test.json.gz")
    row = result.metrics.set_index("name").loc["trace.step_time_us"]
    assert (row["status"], row["better"]) == ("unchanged", "lower")
    checks = gate(result).checks
    assert checks.set_index("metric").loc["trace.step_time_us", "result"] == "pass"


def test_a_step_is_its_host_span_and_its_slowest_rank() -> None:
    # the ROCm trace writes ProfilerStep#1 twice: its host span (9,288.291 us) and a 1,031.368 us annotation on
    # the GPU's pid; the step is the host's
    assert _value(REAL / "amd_mi250_minitoy.json.gz") == pytest.approx((9288.291 + 49.073) / 2, abs=1e-9)
    # two ranks: each step as long as its slowest rank (rank 1 in both)
    assert _value(REAL / "two_ranks") == (607904.0 + 630639.0) / 2
    assert _value(REAL / "cupti_range_profiler.json.gz") is None  # no ProfilerStep: no figure, not 0


def test_longer_steps_fail_the_default_gate(capsys) -> None:
    """nccl_data's steps (222.37 ms on average) against two_ranks' rank 0 (615.12 ms): the default budget fails
    the slower run (exit 1) and passes the faster one."""
    slow, fast = REAL / "two_ranks" / "rank-0.json.gz", REAL / "nccl_data.json.gz"
    assert main(["diff", str(fast), str(slow)]) == 1
    out = " ".join(capsys.readouterr().out.split())  # the gate's line wraps at 80 columns
    assert "FAIL trace.step_time_us changed +176.62 % (222.37 ms -> 615.12 ms); budget: growth <= 5 %" in out
    assert main(["diff", str(slow), str(fast)]) == 0
    assert "gate PASS: 0 budgets exceeded, 2 within budget" in capsys.readouterr().out
