"""``memory.device-headroom`` on the real traces with PyTorch's allocator events (``fixtures/real/traces/``,
provenance in its README): every figure a finding carries is computed again here from the raw JSON alone.

vLLM capturing its decode graph on an MI300X holds 180.3 GiB reserved of 192 GiB (93.9 %), 178.5 GiB of it in
use before the trace began (the KV cache vLLM reserves up front): an info finding, never an error. The small
runs (TraceLens's BERT-small and ViT on an H100, its normalization test on an MI300X, Kineto's 2021 ResNet-50
on a V100, which gives block sizes only) stay far below the bands: no finding.

The near-full, fragmented case has no real trace: the tests below write a copy of BERT-small's trace to
``tmp_path`` with its ``deviceProperties``' ``totalGlobalMem`` lowered to 125,000,000 B (every event kept as
recorded), so its real 121,634,816 B reserved are 97.3 % of it, 16.7 % of them not allocated at the peak.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.metrics.device_memory import device_memory, reserved_peaks
from popprof.rules import RULES, check

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
VLLM = TRACES / "tracelens_mi300x_vllm_graph_capture.json.gz"
BERT = TRACES / "tracelens_h100_bert_small.json.gz"
VIT = TRACES / "tracelens_h100_falconsai_nsfw.json.gz"
NORM = TRACES / "tracelens_mi300x_normalization.json.gz"
RESNET_2021 = TRACES / "kineto2021_resnet50_worker0.pt.trace.json.gz"
RULE = "memory.device-headroom"
#: the capacity of the fragmented variant of BERT-small's trace (its real one: 85,018,279,936 B)
SMALL_CAPACITY = 125_000_000


def _doc(path: Path) -> dict:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


def _raw(doc: dict) -> dict:
    """The figures of the trace's GPU 0 from its ``[memory]`` events alone (c10 types 1 and 6 are GPUs):
    the peak reserved, the most allocated while it stood at that peak, the bytes in use before the first
    event, the net peak of the blocks, and the capacity of device 0."""
    events = sorted(
        (
            e
            for e in doc["traceEvents"]
            if e.get("name") == "[memory]"
            and e["args"]["Device Type"] in (1, 6)
            and e["args"]["Device Id"] == 0
        ),
        key=lambda e: float(e["ts"]),
    )
    out: dict = {"capacity": next(p["totalGlobalMem"] for p in doc["deviceProperties"] if p["id"] == 0)}
    running, net = 0, 0
    for e in events:
        running += e["args"]["Bytes"]
        net = max(net, running)
    out["net_peak"] = net
    if "Total Reserved" in events[0]["args"]:
        reserved = max(e["args"]["Total Reserved"] for e in events)
        at_peak = [e["args"]["Total Allocated"] for e in events if e["args"]["Total Reserved"] == reserved]
        out.update(
            reserved=reserved,
            allocated_at_peak=max(at_peak),
            start=events[0]["args"]["Total Allocated"] - events[0]["args"]["Bytes"],
        )
    return out


@pytest.fixture(scope="module")
def vllm() -> popprof.Profile:
    return popprof.open(VLLM)


def test_vllm_is_info_with_the_figures_of_its_raw_events(vllm):
    raw = _raw(_doc(VLLM))
    assert (raw["reserved"], raw["capacity"]) == (193_621_655_552, 206_141_652_992)  # 180.3 GiB of 192 GiB
    (f,) = check(vllm, rules=[RULE]).by_rule(RULE)
    assert f.severity == "info"  # 93.9 % is in the warning band; held before the trace: one step lower
    assert f.title == "GPU memory near capacity, held before the trace"
    assert f.value == pytest.approx(raw["reserved"] / raw["capacity"]) and f.threshold == 0.9
    assert round(f.value, 3) == 0.939 and f.share == f.value
    assert f.figure == "device_memory.peak_reserved_bytes"
    (row,) = f.evidence.to_dict("records")
    assert row["peak_bytes"] == raw["reserved"] and row["capacity_bytes"] == raw["capacity"]
    assert row["start_bytes"] == raw["start"] == 191_610_969_088  # 178.5 GiB in use before the trace
    assert row["held_share"] == pytest.approx(raw["start"] / raw["reserved"]) and row["held_share"] > 0.98
    assert row["unallocated_bytes"] == raw["reserved"] - raw["allocated_at_peak"] == 1_992_950_784
    assert row["unallocated_share"] < 0.1  # 1.0 %: not fragmented
    # the same figures as the metric's
    (memory,) = [m for m in device_memory(vllm) if m["device"] == "gpu:2"]  # roctracer's number of HIP's 0
    assert (memory["peak_reserved_bytes"], memory["capacity_bytes"], memory["start_bytes"]) == (
        raw["reserved"],
        raw["capacity"],
        raw["start"],
    )
    assert reserved_peaks(vllm)[(0, "gpu:2")]["unallocated_at_peak_bytes"] == row["unallocated_bytes"]
    # the gain: the reserved peak above what was in use when the trace began, of the GPU's memory
    gain = f.estimated_gain
    assert gain.unit == "bytes" and gain.value == raw["reserved"] - raw["start"] == 2_010_686_464
    assert gain.whole == raw["capacity"] and gain.whole_words == "rank 0 gpu:2's memory"
    assert f.where == {"devices": ["rank 0 gpu:2"], "ranks": [0], "operations": [memory["peak_op"]]}
    assert memory["peak_op"] == "<built-in function _empty_strided_cuda>"
    assert "99.0 % of it was in use before the trace began" in f.message and "vLLM's KV cache" in f.message


def test_vllm_without_the_held_step_is_a_warning_and_its_error_band_a_warning(vllm):
    # what lowered it is the memory held before the trace, not the band
    (f,) = check(vllm, rules=[RULE], params={f"{RULE}.held": 1.01}).by_rule(RULE)
    assert f.severity == "warning" and f.title == "GPU memory near capacity"
    # at an error band it meets, held before the trace: a warning, never an error
    (f,) = check(vllm, rules=[RULE], params={f"{RULE}.error": 0.93}).by_rule(RULE)
    assert f.severity == "warning" and f.threshold == 0.93


@pytest.mark.parametrize("path", [BERT, VIT, NORM, RESNET_2021], ids=lambda p: p.name)
def test_the_small_runs_are_evaluated_and_silent(path):
    profile = popprof.open(path)
    found = check(profile, rules=[RULE])
    assert found.evaluated == [RULE] and not found.items
    raw = _raw(_doc(path))
    peak = raw.get("reserved", raw["net_peak"])  # 2021's trace has no reserved: its net peak allocated
    assert peak / raw["capacity"] < 0.09  # the largest, ResNet-50's 2.79 GB of 34.1 GB, is 8.2 %
    # silent because the share is small: at a warning below it the rule speaks
    (f,) = check(profile, rules=[RULE], params={f"{RULE}.warning": 1e-6}).by_rule(RULE)
    assert f.value == pytest.approx(peak / raw["capacity"])
    # one step lower where 80 % of the peak was in use before the trace: the ViT's weights, 87.6 %
    held = raw.get("start", 0) / peak >= 0.8
    assert f.severity == ("info" if held else "warning") and held == (path == VIT)


def test_a_trace_without_reserved_is_judged_on_its_net_peak_allocated():
    profile = popprof.open(RESNET_2021)
    raw = _raw(_doc(RESNET_2021))
    (f,) = check(profile, rules=[RULE], params={f"{RULE}.warning": 0.05}).by_rule(RULE)
    assert f.figure == "device_memory.peak_allocated_bytes" and raw["net_peak"] == 2_791_636_480
    assert f.value == pytest.approx(raw["net_peak"] / raw["capacity"])
    assert "memory allocated before it is not in it" in f.message
    assert f.estimated_gain.value == raw["net_peak"]  # nothing known in use at the start


def _variant(tmp_path: Path, capacity: int | None = SMALL_CAPACITY, gpu_events: bool = True) -> Path:
    """BERT-small's real trace with its GPU's totalGlobalMem set to ``capacity`` (removed when None), or its
    GPU's allocator events left out; every other event as recorded."""
    doc = _doc(BERT)
    for props in doc["deviceProperties"]:
        if capacity is None:
            props.pop("totalGlobalMem")
        else:
            props["totalGlobalMem"] = capacity
    if not gpu_events:
        doc["traceEvents"] = [
            e
            for e in doc["traceEvents"]
            if not (e.get("name") == "[memory]" and e["args"]["Device Type"] == 1)
        ]
    path = tmp_path / "bert_variant.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump(doc, handle)
    return path


def test_a_near_full_fragmented_gpu_is_an_error_that_prices_the_unallocated_bytes(tmp_path):
    path = _variant(tmp_path)
    raw = _raw(_doc(path))
    (f,) = check(popprof.open(path), rules=[RULE]).by_rule(RULE)
    assert f.severity == "error" and f.title == "GPU memory near capacity, fragmented"
    assert f.value == pytest.approx(raw["reserved"] / SMALL_CAPACITY) and f.threshold == 0.97  # 97.3 %
    unallocated = raw["reserved"] - raw["allocated_at_peak"]
    assert unallocated == 121_634_816 - 101_305_344  # 19.4 MiB = 16.7 % of the reserved
    assert f.estimated_gain.value == unallocated and f.estimated_gain.whole == SMALL_CAPACITY
    assert "expandable segments can return it" in f.message
    assert "expandable_segments:True" in f.advice and "PYTORCH_HIP_ALLOC_CONF" in f.advice
    assert f.advice == RULES[RULE].advice_for("gpu")
    # below the fragmentation share the gain is the peak above the bytes in use at the start
    (f,) = check(popprof.open(path), rules=[RULE], params={f"{RULE}.fragmentation": 0.2}).by_rule(RULE)
    assert f.title == "GPU memory near capacity" and f.estimated_gain.value == raw["reserved"] - raw["start"]


def test_not_evaluated_without_capacity_or_gpu_allocator_events(tmp_path):
    (reason,) = [r for rid, r in check(popprof.open(_variant(tmp_path, None)), rules=[RULE]).not_evaluated]
    assert "totalGlobalMem" in reason
    (reason,) = [
        r for rid, r in check(popprof.open(_variant(tmp_path, gpu_events=False)), rules=[RULE]).not_evaluated
    ]
    assert "allocator events on a GPU" in reason


def test_check_text_fits_80_columns_and_json_carries_the_gain(tmp_path):
    path = _variant(tmp_path)
    for target in (VLLM, path):
        result = CliRunner().invoke(cli, ["check", str(target), "--rule", RULE, "--fail-on", "never"])
        assert result.exit_code == 0, result.output
        assert RULE in result.stdout and max(len(line) for line in result.stdout.splitlines()) <= 80
    result = CliRunner().invoke(
        cli, ["check", str(VLLM), "--rule", RULE, "--format", "json", "--fail-on", "never"]
    )
    (finding,) = json.loads(result.stdout)["profiles"][0]["findings"]
    assert finding["severity"] == "info" and finding["figure"] == "device_memory.peak_reserved_bytes"
    assert finding["estimated_gain"] == {
        "value": 2_010_686_464,
        "unit": "bytes",
        "basis": finding["estimated_gain"]["basis"],
        "whole": 206_141_652_992,
        "of": "rank 0 gpu:2's memory",
    }
    assert finding["where"]["devices"] == ["rank 0 gpu:2"]


def test_the_summary_lists_it_among_the_opportunities():
    result = CliRunner().invoke(cli, ["summary", str(VLLM), "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    ids = [o["rule_id"] for o in json.loads(result.stdout)["what_limits"]["opportunities"]]
    assert RULE in ids


def test_two_gpus_one_finding_the_worst_first(tmp_path):
    # BERT-small's real trace with its GPU's allocator events copied onto a second GPU (Device Id 1), whose
    # deviceProperties entry is a copy of the first's: capacities 125,000,000 B (97.3 %: an error) and
    # 130,000,000 B (93.6 %: a warning)
    doc = _doc(BERT)
    (props,) = doc["deviceProperties"]
    props["totalGlobalMem"] = SMALL_CAPACITY
    doc["deviceProperties"].append({**props, "id": 1, "totalGlobalMem": 130_000_000})
    copies = [
        {**e, "args": {**e["args"], "Device Id": 1}}
        for e in doc["traceEvents"]
        if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1
    ]
    doc["traceEvents"].extend(copies)
    path = tmp_path / "two_gpus.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump(doc, handle)
    (f,) = check(popprof.open(path), rules=[RULE]).by_rule(RULE)
    assert f.severity == "error" and f.where["devices"] == ["gpu:0", "gpu:1"]
    assert list(f.evidence["severity"]) == ["error", "warning"]
    assert f.value == pytest.approx(121_634_816 / SMALL_CAPACITY)
    assert f.message.endswith("; also gpu:1 93.6 %")
