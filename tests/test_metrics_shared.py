"""Issue 28 (speed): inside ``metrics.shared`` the metrics and the summary's sections compute each
intermediate once (the GPU work of a trace was built twice per summary), and nothing outlives the block."""

from __future__ import annotations

import json
from pathlib import Path

import popprof
from popprof.metrics import compute, devices, shared
from popprof.metrics.summary import summarise

TRACE = Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "training_loop.json"


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = devices.gpu_work

    def counted(events, *args, **kwargs):
        calls.append(len(events))
        return real(events, *args, **kwargs)

    monkeypatch.setattr(devices, "gpu_work", counted)
    return calls


def test_summary_builds_the_gpu_work_once(monkeypatch):
    profile = popprof.open(TRACE)
    calls = _counting(monkeypatch)
    summary = summarise(profile)
    assert len(calls) == 1
    assert summary["trace"]["top_kernels"][0]["name"] == "ampere_sgemm_128x64_tn"
    assert profile._cache == {}  # cleared when the summary is done


def test_shared_keeps_intermediates_across_compute_calls_and_clears_after(monkeypatch):
    profile = popprof.open(TRACE)
    calls = _counting(monkeypatch)
    alone = compute(profile)
    assert len(calls) == 1 and profile._cache == {}
    with shared(profile):
        first = compute(profile)
        second = compute(profile)
        table = devices.device_breakdown(profile)
    assert len(calls) == 2  # once for the block, however many figures read it
    assert profile._cache == {}
    assert (
        json.dumps(first, sort_keys=True)
        == json.dumps(alone, sort_keys=True)
        == json.dumps(second, sort_keys=True)
    )
    assert table["device"].tolist() == ["gpu:0"]
