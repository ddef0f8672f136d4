"""``popprof diff``'s "What changed in device memory" (``compare/device_memory_changed.py``): each side's GPU
allocator peak split exactly by the operator that allocated the bytes live at it (``metrics/device_memory.py``
``peak_parts``), and the parts' changes.

Inputs: the real traces with allocator events in ``fixtures/real/traces/`` (provenance in its README), and
pairs built from them in ``tmp_path`` (a block planted in one operator); no fixture files are added.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from test_diff_memory_changed import _paths, documented_fields
from test_text_figures_whole import split_figures

import popprof
from popprof.compare.device_memory_changed import MAX_DEVICES
from popprof.compare.document import to_dict
from popprof.metrics import compute
from popprof.metrics.device_memory import (
    ALLOCATOR,
    BEFORE_TRACE,
    NET,
    _groups,
    device_memory,
    freed_part,
    is_freed_part,
    peak_parts,
)
from popprof.report.diff import render_junit, render_markdown, render_text
from popprof.report.diff_blocks import markdown_device_memory_changed, render_device_memory_changed
from popprof.report.diff_explain import explain_diff
from popprof.report.diff_html import what_changed_html

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "real" / "traces"
BERT = TRACES / "tracelens_h100_bert_small.json.gz"
FALCON = TRACES / "tracelens_h100_falconsai_nsfw.json.gz"
NORMALIZATION = TRACES / "tracelens_mi300x_normalization.json.gz"
CAPTURE = TRACES / "tracelens_mi300x_vllm_graph_capture.json.gz"
RESNET_2021 = TRACES / "kineto2021_resnet50_worker0.pt.trace.json.gz"
WITH_ALLOCATIONS = [RESNET_2021, BERT, FALCON, NORMALIZATION, CAPTURE]
PLANTED = 8 << 20  # 8 MiB
PLANTED_OP = "aten::addmm"


# -- the partition ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", WITH_ALLOCATIONS, ids=lambda p: p.name)
def test_the_parts_sum_exactly_to_the_reported_peak(path: Path):
    """On every real trace with allocator events, both bases: each device's parts sum to its peak, the peak is
    the record's, and on the allocator's totals the largest accelerator's is ``trace.device_memory_peak_bytes``."""
    profile = popprof.open(path)
    records = {(r["rank"], r["device"]): r for r in device_memory(profile)}
    split = peak_parts(profile)
    assert split.keys() == records.keys()
    for key, r in split.items():
        assert sum(r["parts"].values()) == r["peak_bytes"] == records[key]["peak_allocated_bytes"]
        assert all(type(v) is int for v in r["parts"].values())
        assert list(r["parts"])[-1] == BEFORE_TRACE
        # no free after the peak pairs with none on the real traces: nothing from before the trace is named
        assert not any(is_freed_part(p) for p in r["parts"])
        if r["basis"] == ALLOCATOR:
            assert r["parts"][BEFORE_TRACE] == records[key]["start_bytes"]
    gpus = [r["peak_bytes"] for key, r in split.items() if key[1] != "cpu" and r["basis"] == ALLOCATOR]
    metric = compute(profile)["trace.device_memory_peak_bytes"]
    assert metric == (float(max(gpus)) if gpus else None)
    if path == RESNET_2021:
        assert {r["basis"] for r in split.values()} == {NET}


def test_a_2021_trace_splits_its_net_peak_among_its_operators():
    """Without totals or addresses (Kineto 2021) the net peak is 0 before the trace: its operators hold it all."""
    gpu = peak_parts(popprof.open(RESNET_2021))[(None, "gpu:0")]
    assert gpu["peak_bytes"] == 2_791_636_480
    assert gpu["parts"][BEFORE_TRACE] == 0
    assert next(iter(gpu["parts"])) == "aten::cudnn_convolution"


# -- a constructed pair -------------------------------------------------------------------------------------------


def _bert_planting() -> tuple[pd.DataFrame, int, dict]:
    """BERT's GPU allocator events as the reader orders them, the position of the first allocation in
    :data:`PLANTED_OP` before the peak (where a planted block goes), and the trace's JSON document."""
    group = _groups(popprof.open(BERT))[(-1, "gpu:0")].reset_index(drop=True)
    peak = int(group["total"].to_numpy().argmax())
    at = int(group.index[(group["op"] == PLANTED_OP) & (group["bytes"] > 0) & (group.index < peak)][0])
    with gzip.open(BERT, "rt") as handle:
        return group, at, json.load(handle)


def _planted(tmp_path: Path) -> Path:
    """BERT with one more block of :data:`PLANTED` bytes allocated in an ``aten::addmm`` before the peak and never
    freed: the allocator's totals (allocated, reserved) of every later GPU event grow by it."""
    group, at, doc = _bert_planting()
    gpu = [e for e in doc["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    gpu.sort(key=lambda e: float(e["ts"]))
    model = gpu[at]
    assert (model["args"]["Bytes"], model["args"]["Addr"]) == (group["bytes"][at], group["addr"][at])
    for e in gpu[at + 1 :]:
        e["args"]["Total Allocated"] += PLANTED
        e["args"]["Total Reserved"] += PLANTED
    block = json.loads(json.dumps(model))
    block["args"].update(
        {
            "Bytes": PLANTED,
            "Addr": 1 << 40,
            "Total Allocated": model["args"]["Total Allocated"] + PLANTED,
            "Total Reserved": model["args"]["Total Reserved"] + PLANTED,
        }
    )
    events = doc["traceEvents"]
    events.insert(next(i for i, e in enumerate(events) if e is model) + 1, block)
    out = tmp_path / "bert_planted.json.gz"
    with gzip.open(out, "wt") as handle:
        json.dump(doc, handle)
    return out


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    new = _planted(tmp_path_factory.mktemp("device_memory"))
    return popprof.diff(popprof.open(BERT), popprof.open(new)), new


def test_the_planted_block_is_the_largest_part_with_its_bytes(planted):
    result, new = planted
    doc = to_dict(result)["device_memory_changed"]
    assert doc["available"] and doc["material"] and doc["total_moved"]
    assert doc["total"]["change_bytes"] == PLANTED
    assert doc["new"]["peak_bytes"] == compute(popprof.open(new))["trace.device_memory_peak_bytes"]
    top = doc["parts"][0]
    assert (top["part"], top["kind"], top["change_bytes"], top["share_of_change"]) == (
        PLANTED_OP,
        "operator",
        PLANTED,
        1.0,
    )
    assert sum(p["change_bytes"] for p in doc["parts"]) + doc["rest_bytes"] == PLANTED
    assert doc["covers"] is None
    assert (doc["base"]["device"], doc["new"]["device"]) == ("gpu:0", "gpu:0")


def test_text_markdown_and_json_agree_within_80_columns(planted):
    result, _ = planted
    doc = to_dict(result)["device_memory_changed"]
    text = render_device_memory_changed(result, width=80)
    assert text[0] == "What changed in device memory (peak allocated on gpu:0)"
    assert all(len(line) <= 80 for line in text)
    row = next(line for line in text if line.strip().startswith(PLANTED_OP))
    assert re.search(r"\+8 MiB\s+100\.0 %", row)
    assert "  base peak at " in "\n".join(text) and " in aten::addmm" in text[-1]
    md = "\n".join(markdown_device_memory_changed(result))
    assert f"{PLANTED_OP}: +8,388,608 B (+8 MiB) (100.0 % of the change)" in md
    assert f"{doc['total']['base_bytes']:,} B" in md and f"{doc['total']['new_bytes']:,} B" in md
    whole = render_text(result, width=80)
    assert "What changed in device memory" in whole
    assert all(len(line) <= 80 for line in whole.splitlines())
    assert not split_figures(whole)
    assert "What changed in device memory" in render_markdown(result)
    page = what_changed_html(result)
    assert "What changed in device memory" in page and "8,388,608 B" in page
    explained = explain_diff(result)
    assert explained.doc["device_memory_changed"] == doc
    assert "What changed in device memory" in explained.text()


def test_a_failing_peak_budget_carries_the_block_in_junit(planted):
    result, _ = planted
    gated = popprof.gate(result, {"budgets": {"trace.device_memory_peak_bytes": "+1%"}})
    xml = render_junit(result, gated)
    assert "What changed in device memory" in xml


# -- blocks from before the trace freed after the peak -------------------------------------------------------------


def _gpu_events(doc: dict) -> list[dict]:
    """The GPU ``[memory]`` events of a trace document, in time order (stable, as ``_groups`` orders them)."""
    gpu = [e for e in doc["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    return sorted(gpu, key=lambda e: float(e["ts"]))


def _freed_after_peak(tmp_path: Path, size: int, consistent: bool = True, after: int = 1) -> Path:
    """BERT with one more block of ``size`` bytes allocated before the trace began and freed after the peak,
    beside the free ``after`` events after it (1: in the ``aten::addmm`` right after it): its free pairs with no
    allocation. ``consistent``: the allocator's totals count the block until its free (else they are left as
    they were, as no real allocator would)."""
    with gzip.open(BERT, "rt") as handle:
        doc = json.load(handle)
    gpu = _gpu_events(doc)
    peak = max(range(len(gpu)), key=lambda i: (gpu[i]["args"]["Total Allocated"], -i))
    at = peak + after
    model = gpu[at]
    assert model["args"]["Bytes"] < 0  # a free after the peak (after=1: the addmm's own)
    before = gpu[at - 1]["args"]  # the totals the new free follows
    if consistent:
        for e in gpu[:at]:
            e["args"]["Total Allocated"] += size
            e["args"]["Total Reserved"] += size
        for e in gpu[at:]:
            e["args"]["Total Reserved"] += size
    free = json.loads(json.dumps(model))
    free["ts"] = (
        float(model["ts"]) - 0.001
    )  # 1 ns before the free it copies: in its operator, not nested in it
    free["args"].update(
        {
            "Bytes": -size,
            "Addr": 1 << 41,
            "Total Allocated": before["Total Allocated"] - size,
            "Total Reserved": before["Total Reserved"],
        }
    )
    events = doc["traceEvents"]
    events.insert(next(i for i, e in enumerate(events) if e is model), free)
    out = tmp_path / f"bert_freed_{size}_{consistent}_{after}.json.gz"
    with gzip.open(out, "wt") as handle:
        json.dump(doc, handle)
    return out


def test_a_block_from_before_the_trace_freed_after_the_peak_is_named_by_its_operator(tmp_path):
    size = 3 << 20
    base = popprof.open(BERT)
    new = popprof.open(_freed_after_peak(tmp_path, size))
    b = peak_parts(base)[(None, "gpu:0")]
    n = peak_parts(new)[(None, "gpu:0")]
    assert n["peak_bytes"] == b["peak_bytes"] + size == sum(n["parts"].values())
    assert n["parts"][freed_part(PLANTED_OP)] == size
    assert n["parts"][BEFORE_TRACE] == b["parts"][BEFORE_TRACE]  # the rest: still live at the end
    assert list(n["parts"])[-2:] == [freed_part(PLANTED_OP), BEFORE_TRACE]
    # the summary's figures do not read the split
    assert device_memory(new)[0]["start_bytes"] == device_memory(base)[0]["start_bytes"] + size
    result = popprof.diff(base, new)
    doc = to_dict(result)["device_memory_changed"]
    top = doc["parts"][0]
    assert (top["part"], top["kind"], top["words"], top["change_bytes"]) == (
        "(before the trace, freed in aten::addmm)",
        "before the trace",
        "before the trace, freed in aten::addmm",
        size,
    )
    assert doc["total"]["change_bytes"] == size and doc["devices"] == [{k: doc[k] for k in doc["devices"][0]}]
    text = render_device_memory_changed(result, width=80)
    assert any(
        re.search(r"before the trace, freed in aten::addmm\s+\+3 MiB\s+100\.0 %", line) for line in text
    )
    assert all(len(line) <= 80 for line in text) and not split_figures("\n".join(text))


def test_a_long_freeing_name_is_shortened_to_the_line(tmp_path):
    """Freed in BERT's ``modeling_bert.py(786): forward`` (a Python function): the part's name is 82 columns."""
    new = popprof.open(_freed_after_peak(tmp_path, 3 << 20, after=2))
    (part,) = [p for p in peak_parts(new)[(None, "gpu:0")]["parts"] if is_freed_part(p)]
    assert part == freed_part("transformers/models/bert/modeling_bert.py(786): forward") and len(part) > 80
    result = popprof.diff(popprof.open(BERT), new)
    text = render_device_memory_changed(result, width=80)
    assert all(len(line) <= 80 for line in text) and not split_figures("\n".join(text))
    assert any(line.strip().startswith("before the trace, freed in ") for line in text)
    assert to_dict(result)["device_memory_changed"]["parts"][0]["part"] == part  # the JSON has it whole


def test_frees_that_the_peak_cannot_hold_are_not_split_off(tmp_path):
    """Totals that do not count the block (no real allocator's): its 1 GiB free exceeds what the peak holds from
    before the trace, so naming it would leave the rest negative; the peak keeps one part from before the trace."""
    path = _freed_after_peak(tmp_path, 1 << 30, consistent=False)
    n = peak_parts(popprof.open(path))[(None, "gpu:0")]
    assert not any(is_freed_part(p) for p in n["parts"])
    assert sum(n["parts"].values()) == n["peak_bytes"]


def test_redacted_names_merge_the_freed_parts_too():
    from popprof.compare.device_memory_parts import FREED_OPERATORS, OPERATORS, operators_merged

    record = {"parts": {"a": 5, "b": 3, freed_part("c"): 2, freed_part("d"): 1, BEFORE_TRACE: 7}}
    (base, _) = operators_merged(({(0, "gpu:0"): record}, {}))
    assert base[(0, "gpu:0")]["parts"] == {OPERATORS: 8, FREED_OPERATORS: 3, BEFORE_TRACE: 7}


# -- every device -------------------------------------------------------------------------------------------------


def _devices(tmp_path: Path, plants: dict[int, int], name: str) -> Path:
    """BERT with its GPU allocator events copied onto each device of ``plants`` (device id -> bytes; device 0
    is the trace's own), and on each one more block of those bytes allocated in an ``aten::addmm`` before the
    peak and never freed (none when 0): every later total of that device grows by it."""
    group, at, doc = _bert_planting()
    gpu = _gpu_events(doc)
    events = doc["traceEvents"]
    for device, size in plants.items():
        copies = [json.loads(json.dumps(e)) for e in gpu]
        for e in copies:
            e["args"]["Device Id"] = device
        for e in copies[at + 1 :]:
            e["args"]["Total Allocated"] += size
            e["args"]["Total Reserved"] += size
        if size:
            block = json.loads(json.dumps(copies[at]))
            block["args"].update(
                {
                    "Bytes": size,
                    "Addr": 1 << 40,
                    "Total Allocated": copies[at]["args"]["Total Allocated"] + size,
                    "Total Reserved": copies[at]["args"]["Total Reserved"] + size,
                }
            )
            copies.insert(at + 1, block)
        if device == 0:
            for e in gpu:
                events.remove(e)
        events += copies
    out = tmp_path / f"bert_{name}.json.gz"
    with gzip.open(out, "wt") as handle:
        json.dump(doc, handle)
    return out


@pytest.fixture(scope="module")
def six_devices(tmp_path_factory):
    """BERT's allocator events on six GPUs against the same with a block planted on each: gpu:k grows by
    k + 1 MiB, gpu:2 by nothing (no change)."""
    where = tmp_path_factory.mktemp("devices")
    plants = {k: (0 if k == 2 else (k + 1) << 20) for k in range(7)}
    base = _devices(where, dict.fromkeys(plants, 0), "base")
    new = _devices(where, plants, "new")
    return popprof.diff(popprof.open(base), popprof.open(new))


def test_every_device_whose_peak_moved_has_a_block_largest_first(six_devices):
    doc = to_dict(six_devices)["device_memory_changed"]
    order = [d["new"]["device"] for d in doc["devices"]]
    assert order == ["gpu:6", "gpu:5", "gpu:4", "gpu:3", "gpu:1", "gpu:0"]  # gpu:2 did not move
    assert [d["total"]["change_bytes"] for d in doc["devices"]] == [(k + 1) << 20 for k in (6, 5, 4, 3, 1, 0)]
    assert doc["new"]["device"] == "gpu:6" and doc["chosen"] == "the device whose peak changed most"
    assert {k: doc[k] for k in doc["devices"][0]} == doc["devices"][0]
    for d in doc["devices"]:
        assert d["parts"][0]["part"] == PLANTED_OP
        assert sum(p["change_bytes"] for p in d["parts"]) + d["rest_bytes"] == d["total"]["change_bytes"]
    text = render_device_memory_changed(six_devices, width=80)
    headings = [line for line in text if line.startswith("What changed in device memory")]
    assert headings == [f"What changed in device memory (peak allocated on gpu:{k})" for k in (6, 5, 4, 3)]
    assert len(headings) == MAX_DEVICES
    assert text[-1] == "2 more devices' peaks changed, largest gpu:1 +2 MiB"
    whole = render_text(six_devices, width=80)
    assert all(len(line) <= 80 for line in whole.splitlines()) and not split_figures(whole)
    md = "\n".join(markdown_device_memory_changed(six_devices))
    assert md.count("**What changed in device memory**") == MAX_DEVICES
    assert "2 more devices' peaks changed, largest gpu:1 +2,097,152 B (+2 MiB)" in md
    page = what_changed_html(six_devices)
    assert page.count("<h3>What changed in device memory") == MAX_DEVICES
    assert "2 more devices&#39; peaks changed" in page or "2 more devices' peaks changed" in page


def test_one_device_beyond_the_blocks_is_said_in_the_singular(six_devices):
    from popprof.report.diff_blocks import more_devices

    doc = to_dict(six_devices)["device_memory_changed"]
    one = {**doc, "devices": doc["devices"][: MAX_DEVICES + 1]}
    assert (
        more_devices(one, lambda b, signed=False: f"{b:+,}")
        == "1 more device's peak changed: gpu:1 +2,097,152"
    )
    assert more_devices({**doc, "devices": doc["devices"][:MAX_DEVICES]}, str) is None


def test_one_device_that_moved_among_several_is_one_block(tmp_path):
    base = _devices(tmp_path, {0: 0, 1: 0}, "two")
    new = _devices(tmp_path, {0: 0, 1: PLANTED}, "two_planted")
    result = popprof.diff(popprof.open(base), popprof.open(new))
    doc = to_dict(result)["device_memory_changed"]
    assert [d["new"]["device"] for d in doc["devices"]] == ["gpu:1"]
    text = render_device_memory_changed(result, width=80)
    assert text[0] == "What changed in device memory (peak allocated on gpu:1)"
    assert sum(line.startswith("What changed in device memory") for line in text) == 1


def test_a_directory_of_ranks_explains_each_rank_that_moved(tmp_path, planted):
    """Two ranks (one file each, as HTA reads a run): rank 0 grows by the planted 8 MiB, rank 1 by 1 MiB."""
    import shutil

    base, new = tmp_path / "base", tmp_path / "new"
    base.mkdir()
    new.mkdir()
    for rank in (0, 1):
        shutil.copy(BERT, base / f"rank-{rank}.json.gz")
    shutil.copy(planted[1], new / "rank-0.json.gz")
    shutil.copy(_devices(tmp_path, {0: 1 << 20}, "one_mib"), new / "rank-1.json.gz")
    result = popprof.diff(popprof.open(base), popprof.open(new))
    doc = to_dict(result)["device_memory_changed"]
    assert [(d["new"]["rank"], d["total"]["change_bytes"]) for d in doc["devices"]] == [
        (0, PLANTED),
        (1, 1 << 20),
    ]
    text = render_device_memory_changed(result, width=80)
    assert [line for line in text if line.startswith("What changed")] == [
        "What changed in device memory (peak allocated on rank 0 gpu:0)",
        "What changed in device memory (peak allocated on rank 1 gpu:0)",
    ]


# -- two different real traces ------------------------------------------------------------------------------------


def test_two_different_traces_pair_their_highest_peaks_when_no_device_is_shared():
    """BERT on an H100 (gpu:0) against an MI300X trace (gpu:2): each side's highest peak, said so."""
    result = popprof.diff(popprof.open(BERT), popprof.open(NORMALIZATION))
    doc = to_dict(result)["device_memory_changed"]
    assert (doc["base"]["device"], doc["new"]["device"]) == ("gpu:0", "gpu:2")
    assert doc["chosen"].startswith("each side's highest peak")
    assert sum(p["change_bytes"] for p in doc["parts"]) + doc["rest_bytes"] == doc["total"]["change_bytes"]
    assert doc["total"]["change_bytes"] == doc["new"]["peak_bytes"] - doc["base"]["peak_bytes"]
    text = render_text(result, width=80)
    assert all(len(line) <= 80 for line in text.splitlines()) and not split_figures(text)


def test_a_net_trace_says_what_its_sum_covers():
    result = popprof.diff(popprof.open(RESNET_2021), popprof.open(BERT))
    doc = to_dict(result)["device_memory_changed"]
    assert doc["base"]["basis"] == NET and doc["new"]["basis"] == ALLOCATOR
    assert doc["covers"].startswith("the base peak is the net of the blocks")
    text = render_text(result, width=80)
    assert "note: the base peak is the net" in text
    assert all(len(line) <= 80 for line in text.splitlines()) and not split_figures(text)


# -- absent, unavailable ------------------------------------------------------------------------------------------


def test_absent_on_ipu_and_on_traces_without_allocations():
    ipu = popprof.diff(
        popprof.open(ROOT / "fixtures" / "mk2_training.popprof"),
        popprof.open(ROOT / "fixtures" / "mk2_oom.popprof"),
    )
    hta = TRACES / "hta_trace_compare_base.json.gz"
    plain = popprof.diff(popprof.open(hta), popprof.open(TRACES / "hta_trace_compare_test.json.gz"))
    for result in (ipu, plain):
        assert "device_memory_changed" not in to_dict(result)
        assert render_device_memory_changed(result) == []
        assert "device memory" not in render_text(result)
        assert "device_memory_changed" not in explain_diff(result).doc


def test_one_side_without_allocations_is_said_in_one_line():
    result = popprof.diff(popprof.open(TRACES / "hta_trace_compare_base.json.gz"), popprof.open(BERT))
    doc = to_dict(result)["device_memory_changed"]
    assert doc == {
        "available": False,
        "reason": "the base side has no allocator events on a GPU (profile_memory=True)",
    }
    assert render_device_memory_changed(result) == [
        "What changed in device memory: not explained here: the base side has no allocator events on a GPU "
        "(profile_memory=True)"
    ]


# -- the JSON's fields are documented ------------------------------------------------------------------------------


def test_every_json_field_is_documented(planted, six_devices):
    documented = documented_fields("The JSON's `device_memory_changed`")
    every, leaves = set(), set()
    unavailable = {"available": False, "reason": "the base side has no allocator events"}
    docs = (to_dict(planted[0])["device_memory_changed"], to_dict(six_devices)["device_memory_changed"])
    for doc in (*docs, unavailable):
        more, ends = _paths(doc)
        every |= more
        leaves |= ends
    assert leaves <= documented, sorted(leaves - documented)
    assert documented <= every, sorted(documented - every)


def test_operators_of_different_redaction_keys_are_one_part_and_the_sum_stays_exact():
    from popprof.compare.device_memory_parts import OPERATORS, device_memory_parts, operators_merged

    base, new = operators_merged(device_memory_parts(popprof.open(BERT), popprof.open(FALCON)))
    for side in (base, new):
        for r in side.values():
            assert list(r["parts"]) == [OPERATORS, BEFORE_TRACE]
            assert sum(r["parts"].values()) == r["peak_bytes"]
    assert operators_merged(None) is None
