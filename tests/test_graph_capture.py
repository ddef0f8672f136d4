"""Graph capture (metrics/capture.py): a trace of vLLM capturing its decode graph on an MI300X (TraceLens's test
trace ``inference/vllm_decode_full/capture_traces``) holds 428 kernel launches of which 421 were recorded into
the graph, not run. The device idles 99.8 % of its 57.80 ms window while the host captures: a one-off cost of
CUDA/HIP graphs, not the host failing to submit work, so the idle rules leave those gaps out (they were two
errors, "Device idle waiting on the host" at 99.4 % and "Long host events" at 98.5 %) and "What limits this
run" says what the trace records."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import popprof
from popprof.metrics.capture import CAPTURE_CALLS, graph_capture
from popprof.report.explain import explained_summary, render_what_limits
from popprof.rules import check

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
CAPTURE = REAL / "tracelens_mi300x_vllm_graph_capture.json.gz"
IDLE_RULES = ["host.device-gaps", "host.long-events", "host.launch-overhead"]


@pytest.fixture(scope="module")
def capture() -> popprof.Profile:
    return popprof.open(CAPTURE)


def test_the_launches_recorded_into_the_graph_are_found(capture) -> None:
    found = graph_capture(capture)
    assert found is not None
    assert found.calls == {
        "hipStreamBeginCapture": 1,
        "hipStreamEndCapture": 1,
        "hipGraphInstantiateWithFlags": 1,
    }
    assert (found.captured, found.launches) == (421, 428)
    events = capture.events
    # every captured launch is a kernel launch call whose correlation id no device work carries
    ran = set(events.loc[events["stream"].notna(), "correlation"].dropna().astype(int))
    called = events.iloc[found.rows]
    assert set(called["name"].astype(str)) <= {
        "hipLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
    }
    assert not set(called["correlation"].astype(int)) & ran
    assert list(found.start) == sorted(found.start)


@pytest.mark.parametrize(
    "name",
    [
        "tracelens_h100_bert_small.json.gz",  # asks cudaStreamIsCapturing, and a memset runs nothing: no capture
        "tracelens_b200_vllm_eager.json.gz",
        "tracelens_mi300x_vllm_decode_graph.json.gz",  # replays a graph (hipGraphLaunch): no capture here
        "dlrm_8ranks",
    ],
)
def test_no_capture_is_seen_where_there_is_none(name: str) -> None:
    assert graph_capture(popprof.open(REAL / name)) is None


def test_the_idle_rules_leave_the_capture_out(capture) -> None:
    assert not check(capture, rules=IDLE_RULES).items


def test_without_the_capture_calls_the_idle_is_a_host_stall(tmp_path: Path) -> None:
    """The same trace with its capture calls renamed: the same idle is judged a host stall, as it was."""
    with gzip.open(CAPTURE, "rt") as handle:
        doc = json.load(handle)
    for event in doc["traceEvents"]:
        if event.get("name") in CAPTURE_CALLS:
            event["name"] = "hipStreamQuery"
    path = tmp_path / "no_capture_calls.json"
    path.write_text(json.dumps(doc))
    profile = popprof.open(path)
    assert graph_capture(profile) is None
    found = {f.rule_id: f for f in check(profile, rules=IDLE_RULES)}
    assert found["host.device-gaps"].severity == "error"
    assert found["host.device-gaps"].estimated_gain.value == pytest.approx(57_434.8, abs=0.1)
    assert found["host.long-events"].severity == "error"


def test_a_gap_left_out_is_said(capture) -> None:
    (f,) = check(
        capture,
        rules=["host.device-gaps"],
        params={"host.device-gaps.min_gap_us": 5.0, "host.device-gaps.warning": 0.0},
    ).items
    assert "in 6 gaps >= 5.0 us" in f.message
    assert (
        "1 gap of 56.14 ms left out: the host was capturing a graph in it (kernels recorded, not run: a one-off "
        "cost of CUDA/HIP graphs, not a host stall)" in f.message
    )
    assert f.estimated_gain.value == pytest.approx(1_590, abs=10)


def test_what_limits_this_run_says_the_trace_records_capture(capture) -> None:
    doc = explained_summary(capture)["what_limits"]
    assert doc["graph_capture"] == {
        "calls": {"hipStreamBeginCapture": 1, "hipStreamEndCapture": 1, "hipGraphInstantiateWithFlags": 1},
        "launches": 428,
        "captured_launches": 421,
    }
    # no time to win from the captured idle; the one opportunity is device memory (memory.device-headroom:
    # the reserved peak above what was in use when the trace began, 1.0 % of the GPU's memory)
    assert [o["estimated_gain"]["unit"] for o in doc["opportunities"]] == ["bytes"]
    assert [o["rule_id"] for o in doc["opportunities"]] == ["memory.device-headroom"]
    text = " ".join(line.strip() for line in render_what_limits(doc))
    assert (
        "Graph capture: 421 of 428 kernel launches were recorded into CUDA/HIP graphs, not run "
        "(hipStreamBeginCapture x1, hipStreamEndCapture x1, hipGraphInstantiateWithFlags x1)" in text
    )
    assert "profile the graphs' replay for the steady state" in text
    lines = render_what_limits(doc)
    note = next(i for i, line in enumerate(lines) if line.startswith("  Graph capture:"))
    assert all(len(line) <= 80 for line in lines[note : note + 5])


def test_the_report_and_a_notebook_say_it_too(capture) -> None:
    from popprof.report.explain import explain

    html = explain(capture)._repr_html_()
    assert (
        '<p class="note">Graph capture: 421 of 428 kernel launches were recorded into CUDA/HIP graphs' in html
    )
    assert "Graph capture: 421 of 428 kernel launches" in repr(explain(capture))
