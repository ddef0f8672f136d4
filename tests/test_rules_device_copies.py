"""host.device-copies on the real inputs: the TPU inference profile that waits on host offloading for 84 % of its
time, and the GPU traces, whose host-device copies overlap compute or are too short to matter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.rules import RULES, check
from popprof.trace.spans import merge_intervals, subtract_intervals

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "fixtures" / "real" / "xplane" / "xprof_tpu_v6e_inference.xplane.pb"
RULE = "host.device-copies"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_inputs import real_inputs  # noqa: E402


@pytest.fixture(scope="module")
def tpu() -> popprof.Profile:
    return popprof.open(TPU)


def _copies_alone(profile: popprof.Profile, device: str) -> tuple[float, float]:
    """A device's host-device copy time with no compute or communication running, and its window (first to
    last activity), from the events table by interval arithmetic: the figure the rule rests on, recomputed."""
    events = profile.events
    mine = events[events["device"].astype(str) == device]
    category = mine["device_category"].astype(str).to_numpy()
    start = mine["start_us"].to_numpy(dtype=np.float64)
    end = start + mine["dur_us"].to_numpy(dtype=np.float64)
    copies = merge_intervals(start[category == "host_io"], end[category == "host_io"])
    busy = np.isin(category, ("compute", "exchange"))
    alone = subtract_intervals(*copies, *merge_intervals(start[busy], end[busy]))
    return float((alone[1] - alone[0]).sum()), float(end.max() - start.min())


def test_the_tpu_waiting_on_host_offloading_is_an_error_priced_by_its_copies(tpu) -> None:
    """XLA's copy-start/copy-done between host memory (S(5)) and HBM: tpu:1 spends 76.019 s of its 90.428 s
    window in them with nothing else running (84.1 %), an error; the gain is every TPU's such time."""
    (finding,) = check(tpu, rules=[RULE])
    assert finding.severity == "error" and finding.title == "Device time in host-device copies"
    alone, window = _copies_alone(tpu, "tpu:1")
    assert alone == pytest.approx(76.019e6, rel=1e-4) and window == pytest.approx(90.428e6, rel=1e-4)
    assert finding.value == pytest.approx(alone / window)
    assert finding.message.startswith("tpu:1: host-device copies with no compute or communication running")
    assert "84.1 % of its window 90.428 s (error at >= 30 %)" in finding.message
    assert "by kind: HtoD 600 copies, 57.783 s on the device; DtoH 600 copies, 18.236 s" in finding.message
    every = sum(_copies_alone(tpu, f"tpu:{n}")[0] for n in range(4))
    assert finding.estimated_gain.value == pytest.approx(every, rel=1e-6)
    assert finding.where["devices"] == ["tpu:0", "tpu:1", "tpu:2", "tpu:3"]
    assert finding.advice == RULES[RULE].advice_for("tpu") and "copy-done" in finding.advice


def test_what_limits_the_tpu_run_names_it_first(tpu) -> None:
    """The time account says copies 84.1 %; the first priced opportunity is this finding, at its gain."""
    from popprof.report.explain import explained_summary

    doc = explained_summary(tpu)
    first = doc["what_limits"]["opportunities"][0]
    assert first["rule_id"] == RULE
    (finding,) = check(tpu, rules=[RULE])
    assert first["estimated_gain"]["value"] == pytest.approx(finding.estimated_gain.value)


@pytest.mark.parametrize(
    "path", [p for p in real_inputs() if p.suffix not in (".txt", ".pb") or p.name.endswith(".xplane.pb")]
)
def test_silent_on_every_other_real_input(path: Path) -> None:
    """No other real input spends 10 % of a device's window in host-device copies alone that are not pageable
    (the pipit export's copies are all pageable: host.pageable-copies judges them)."""
    if path == TPU:
        pytest.skip("the TPU profile: above")
    profile = popprof.open(path)
    assert [f for f in check(profile, rules=[RULE]) if f.rule_id == RULE] == []


def test_the_gpu_wording_and_an_ipu_profile(tmp_path) -> None:
    """A GPU trace's pinned copies (HTA's trace-compare pair: 1.2 ms on gpu:1, 0.4 % of its window) make a
    finding with the GPU's advice when the threshold is lowered; an IPU profile is not evaluated."""
    trace = popprof.open(ROOT / "fixtures" / "real" / "traces" / "hta_trace_compare_base.json.gz")
    (finding,) = check(trace, rules=[RULE], params={RULE: {"warning": 0.001}})
    assert finding.severity == "warning" and finding.message.startswith("rank 1 gpu:1: ")
    assert "HtoD pinned" in finding.message and finding.advice == RULES[RULE].advice_for("gpu")
    ipu = check(popprof.open(ROOT / "fixtures" / "mk2_training.popprof"), rules=[RULE])
    assert [f for f in ipu if f.rule_id == RULE] == []
    assert RULE in dict(ipu.not_evaluated)
