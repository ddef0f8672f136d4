"""Who made the host wait: each blocking call's caller, on real traces, checked by walking the parents by hand."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.cli import main
from popprof.metrics.trace_summary import trace_summary

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"


def _by_hand(profile: popprof.Profile) -> dict[tuple[str | None, str], tuple[int, float]]:
    """Per (caller, call): count and time, walking ``parent_id`` one event at a time: the outermost
    ``cpu_op`` / ``Operator`` that is not a ``ProfilerStep#N``, else the nearest enclosing event that is neither
    a step nor bookkeeping, else None."""
    ev = profile.events
    name = dict(zip(ev["event_id"], ev["name"].astype(str), strict=True))
    channel = dict(zip(ev["event_id"], ev["channel"].astype(str), strict=True))
    parent = dict(zip(ev["event_id"], ev["parent_id"], strict=True))
    kept = dict(zip(ev["event_id"], ~ev["bookkeeping"].fillna(False).astype(bool), strict=True))
    out: dict[tuple[str | None, str], list] = defaultdict(lambda: [0, 0.0])
    waits = ev[(ev["device_category"] == "host_wait") & ~ev["bookkeeping"].fillna(False).astype(bool)]
    for event_id, call, dur in zip(
        waits["event_id"], waits["name"].astype(str), waits["dur_us"], strict=True
    ):
        outermost = nearest = None
        up = parent[event_id]
        while not pd.isna(up):
            step = name[up].startswith("ProfilerStep#")
            if channel[up] in ("cpu_op", "Operator") and not step:
                outermost = name[up]
            if nearest is None and not step and kept[up]:
                nearest = name[up]
            up = parent[up]
        key = (outermost or nearest, call)
        out[key][0] += 1
        out[key][1] += dur
    return {k: (n, t) for k, (n, t) in out.items()}


@pytest.mark.parametrize(
    ("trace", "first"),
    [
        # DLRM's boolean-mask indexing: aten::index above aten::to above aten::copy_, which syncs the stream
        ("dlrm_8ranks", ("aten::index", "cudaStreamSynchronize", 16, 19930.0)),
        # 2021's ResNet-50: the step marker is an ``Operator`` there too, and never the caller
        ("kineto2021_resnet50_worker0.pt.trace.json.gz", (None, "cudaDeviceSynchronize", 1, 16194.0)),
        # a tensor used as a Python condition: aten::is_nonzero above aten::item above _local_scalar_dense
        (
            "tracelens_h100_bert_small.json.gz",
            ("<built-in function _cuda_synchronize>", "cudaDeviceSynchronize", 2, 11.91),
        ),
        # cuDNN's workspace freed inside the convolutions
        ("hta_alexnet_first_steps.json.gz", ("aten::conv2d", "cudaFree", 3, 6533728.0)),
        ("nccl_data.json.gz", ("DistributedDataParallel.forward", "cudaEventSynchronize", 24, 78.736)),
    ],
)
def test_callers_match_a_walk_by_hand(trace: str, first: tuple) -> None:
    profile = popprof.open(REAL / trace)
    callers = trace_summary(profile, top=5)["host_wait"]["callers"]
    expected = _by_hand(profile)
    assert len(callers) == min(5, len(expected))
    for c in callers:
        count, total = expected[(c["caller"], c["call"])]
        assert c["count"] == count and c["total_us"] == pytest.approx(total)
    totals = [c["total_us"] for c in callers]
    assert totals == sorted(totals, reverse=True)
    assert sorted((t for _, t in expected.values()), reverse=True)[: len(callers)] == pytest.approx(totals)
    caller, call, count, total = first
    assert (callers[0]["caller"], callers[0]["call"], callers[0]["count"]) == (caller, call, count)
    assert callers[0]["total_us"] == pytest.approx(total)


def test_the_other_callers_of_two_traces() -> None:
    resnet = trace_summary(popprof.open(REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz"))["host_wait"]
    assert resnet["callers"][1] == {
        "caller": "aten::to",
        "call": "cudaStreamSynchronize",
        "count": 12,
        "total_us": 551.0,
    }
    bert = trace_summary(popprof.open(REAL / "tracelens_h100_bert_small.json.gz"))["host_wait"]
    assert (bert["callers"][1]["caller"], bert["callers"][1]["call"]) == (
        "aten::is_nonzero",
        "cudaStreamSynchronize",
    )


def test_summary_text_and_json_name_the_callers(capsys) -> None:
    trace = str(REAL / "dlrm_8ranks")
    assert main(["summary", trace]) == 0
    text = capsys.readouterr().out
    block = text[text.index("Host blocked on device:") :].splitlines()
    assert block[2] == "    by caller (the outermost operator above each call)"
    assert block[3].split() == ["19.93", "ms", "16", "x", "cudaStreamSynchronize", "in", "aten::index"]
    assert block[4].split() == ["288.0", "us", "48", "x", "cudaStreamSynchronize", "in", "aten::to"]
    assert all(len(line) <= 80 for line in block[:6])
    assert main(["summary", trace, "--format", "json"]) == 0
    wait = json.loads(capsys.readouterr().out)["trace"]["host_wait"]
    assert [c["caller"] for c in wait["callers"]] == [
        "aten::index",
        "aten::to",
        "autograd::engine::evaluate_function: IndexBackward0",
        None,
    ]
    # the callers' times add up to the calls' (each call has one caller)
    assert sum(c["total_us"] for c in wait["callers"]) == pytest.approx(
        sum(t["total_us"] for t in wait["top"])
    )


def test_a_trace_without_waits_has_no_callers() -> None:
    wait = trace_summary(popprof.open(REAL / "two_ranks"))["host_wait"]
    assert wait["events"] == 0 and wait["callers"] == []
