"""Device memory from the PyTorch profiler's ``[memory]`` events (``profile_memory=True``): the ``allocations``
table and the summary's figures, checked against the raw files (each figure computed here from the JSON alone).

Inputs, real traces in ``fixtures/real/traces/`` (provenance in its README): TraceLens's BERT-small on an H100
(Kineto with the allocator's totals: 218 CUDA and 18 CPU events), its vLLM graph capture on an MI300X (1,184
HIP events, ``Device Type`` 6, rank 0) and Kineto's 2021 ResNet-50 sample (block sizes only, no totals).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.metrics import compute
from popprof.metrics.device_memory import ALLOCATION_PRIMITIVES, device_memory
from popprof.model.errors import InputError

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
BERT = TRACES / "tracelens_h100_bert_small.json.gz"
CAPTURE = TRACES / "tracelens_mi300x_vllm_graph_capture.json.gz"
RESNET_2021 = TRACES / "kineto2021_resnet50_worker0.pt.trace.json.gz"


def _raw(path: Path) -> dict[str, list[dict]]:
    """The file's ``[memory]`` events by device (c10's types 1 and 6 are GPUs), sorted by time (stable). In a
    roctracer trace whose kernels and copies run on one GPU and whose allocator names one GPU, the allocator's
    GPU is named as the work names it (roctracer numbers GPUs by HSA agent, the host's CPUs first)."""
    with gzip.open(path, "rt") as handle:
        doc = json.load(handle)
    out: dict[str, list[dict]] = {}
    for e in doc["traceEvents"]:
        if e.get("name") == "[memory]":
            kind = e["args"]["Device Type"]
            device = "cpu" if kind == 0 else f"gpu:{e['args']['Device Id']}" if kind in (1, 6) else str(kind)
            out.setdefault(device, []).append(e)
    work = {
        f"gpu:{e['args']['device']}"
        for e in doc["traceEvents"]
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "device" in e.get("args", {})
    }
    gpus = [d for d in out if d.startswith("gpu:")]
    if "roctracer_version" in doc and len(work) == 1 and len(gpus) == 1:
        out[next(iter(work))] = out.pop(gpus[0])
    return {d: sorted(v, key=lambda e: float(e["ts"])) for d, v in out.items()}


def _summary(path: Path) -> list[dict]:
    result = CliRunner().invoke(cli, ["summary", str(path), "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["trace"]["device_memory"]


@pytest.mark.parametrize("path", [BERT, CAPTURE], ids=lambda p: p.name)
def test_the_peaks_are_the_allocators_own_totals(path: Path):
    raw = _raw(path)
    memory = {m["device"]: m for m in _summary(path)}
    assert set(memory) == set(raw)
    for device, events in raw.items():
        m = memory[device]
        blocks = [e["args"]["Bytes"] for e in events]
        totals = [e["args"]["Total Allocated"] for e in events]
        assert m["basis"] == "allocator"
        assert m["peak_allocated_bytes"] == max(totals)
        assert m["peak_reserved_bytes"] == max(e["args"]["Total Reserved"] for e in events)
        assert m["allocations"] == sum(b > 0 for b in blocks)
        assert m["allocated_bytes"] == sum(b for b in blocks if b > 0)
        assert m["frees"] == sum(b < 0 for b in blocks)
        assert m["freed_bytes"] == -sum(b for b in blocks if b < 0)
        assert (m["start_bytes"], m["end_bytes"]) == (totals[0] - blocks[0], totals[-1])
    gpu = memory["gpu:0" if path == BERT else "gpu:2"]
    if path == BERT:  # 96.6 MiB at most, 87.1 MiB in use before the first event and after the last
        assert (gpu["peak_allocated_bytes"], gpu["start_bytes"]) == (101_305_344, 91_360_768)
        assert gpu["rank"] is None
        assert gpu["capacity_bytes"] == 85_018_279_936  # deviceProperties' totalGlobalMem: an H100 80GB
        assert memory["cpu"]["capacity_bytes"] is None
    else:  # a HIP device is a GPU; the trace's rank is kept; HIP's device 0 named as roctracer names it (agent 2)
        assert {e["args"]["Device Id"] for e in raw["gpu:2"]} == {0}
        assert (gpu["peak_allocated_bytes"], gpu["rank"]) == (191_628_704_768, 0)
        assert gpu["capacity_bytes"] == 206_141_652_992  # vLLM reserves most of the MI300X's 192 GiB
        text = CliRunner().invoke(cli, ["summary", str(path), "-q"]).stdout
        assert "180.3 GiB reserved (93.9 % of its 192 GiB)" in " ".join(text.split())


def test_a_2021_trace_without_totals_gives_the_net_of_its_blocks():
    raw = _raw(RESNET_2021)
    memory = {m["device"]: m for m in _summary(RESNET_2021)}
    for device, events in raw.items():
        net = np.cumsum([e["args"]["Bytes"] for e in events])
        m = memory[device]
        assert m["basis"] == "net" and m["peak_reserved_bytes"] is None
        assert m["peak_allocated_bytes"] == int(net.max())
        assert m["end_bytes"] == int(net[-1]) and m["start_bytes"] == 0
    assert memory["gpu:0"]["peak_allocated_bytes"] == 2_791_636_480  # 2.6 GiB in the backward convolutions
    assert memory["gpu:0"]["peak_op"] == "aten::cudnn_convolution_backward_weight"
    # the registry's figure is a peak of the allocator's totals only: none here
    assert compute(popprof.open(RESNET_2021))["trace.device_memory_peak_bytes"] is None


def test_a_block_belongs_to_the_operator_around_its_allocation_primitive():
    """aten::empty inside aten::addmm is aten::addmm's block; without any operator around it (vLLM's
    compiled code calls the allocator from Python), the innermost enclosing event names it."""
    bert = device_memory(popprof.open(BERT))
    gpu = next(m for m in bert if m["device"] == "gpu:0")
    assert gpu["peak_op"] == "aten::addmm"
    assert [t["op"] for t in gpu["top_ops"]] == ["aten::addmm", "aten::gelu", "aten::native_layer_norm"]
    assert (gpu["top_ops"][0]["allocations"], gpu["top_ops"][0]["allocated_bytes"]) == (52, 41_212_416)
    assert not {t["op"] for m in bert for t in m["top_ops"]} & ALLOCATION_PRIMITIVES
    capture = device_memory(popprof.open(CAPTURE))[0]
    assert capture["peak_op"] == "<built-in function _empty_strided_cuda>"
    assert "vllm::unified_attention_with_output" in [t["op"] for t in capture["top_ops"]]


def test_read_with_args_or_on_use_the_table_is_the_same():
    on_use = popprof.open(BERT).allocations
    with_args = popprof.open(BERT, with_args=True).allocations
    assert len(on_use) == 236
    assert on_use.equals(with_args)
    events = popprof.open(BERT).events
    assert (events.set_index("event_id").loc[on_use["event_id"], "name"] == "[memory]").all()


def test_the_metric_is_the_largest_accelerator_peak():
    assert compute(popprof.open(BERT))["trace.device_memory_peak_bytes"] == 101_305_344


def test_a_trace_without_memory_events_has_no_table_and_no_section():
    nccl = TRACES / "nccl_data.json.gz"
    profile = popprof.open(nccl)
    assert not profile.has("allocations")
    assert compute(profile)["trace.device_memory_peak_bytes"] is None
    result = CliRunner().invoke(cli, ["summary", str(nccl), "--format", "json", "-q"])
    assert "device_memory" not in json.loads(result.stdout)["trace"]
    assert "Device memory" not in CliRunner().invoke(cli, ["summary", str(nccl), "-q"]).stdout


def test_the_text_names_the_peak_its_operator_and_what_allocated_most():
    text = CliRunner().invoke(cli, ["summary", str(BERT), "-q"], env={"COLUMNS": "80"}).stdout
    block = " ".join(text[text.index("  Device memory") :].split("\n\n")[0].split())
    assert "gpu:0: peak 96.6 MiB allocated at +4.68 ms in aten::addmm; 116 MiB reserved" in block
    assert "109 blocks allocated (45.3 MiB), 109 freed; in use 87.1 MiB at the start" in block
    assert "most allocated by: aten::addmm 52 x 39.3 MiB" in block
    old = CliRunner().invoke(cli, ["summary", str(RESNET_2021), "-q"]).stdout
    assert "peak 2.6 GiB allocated since the trace began (its blocks less those freed)" in " ".join(
        old.split()
    )


def test_a_file_changed_before_the_table_is_read_is_refused(tmp_path: Path):
    copy = tmp_path / BERT.name
    shutil.copyfile(BERT, copy)
    profile = popprof.open(copy)
    stat = copy.stat()
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(InputError, match="changed while it was read"):
        profile.get("allocations")


def test_a_directory_of_ranks_keeps_each_ranks_blocks_with_its_events(tmp_path: Path):
    for rank in (0, 1):
        shutil.copyfile(BERT, tmp_path / f"rank-{rank}.json.gz")
    run = popprof.open(tmp_path)
    assert run.rows("allocations") == 2 * 236  # known before the table is built
    table = run.allocations
    assert len(table) == 2 * 236
    events = run.events.set_index("event_id")
    assert (events.loc[table["event_id"], "name"] == "[memory]").all()
    ranks = events.loc[table["event_id"], "rank"].to_numpy()
    assert sorted(set(ranks.tolist())) == [0, 1]
    memory = device_memory(run)
    assert [(m["rank"], m["device"]) for m in memory] == [(0, "gpu:0"), (1, "gpu:0"), (0, "cpu"), (1, "cpu")]
    assert memory[0]["peak_allocated_bytes"] == memory[1]["peak_allocated_bytes"] == 101_305_344


def test_a_layout_the_scan_cannot_match_is_read_again_with_args(tmp_path: Path):
    """A writer that puts the args before the name: the scan's object is not the event, so the table comes
    from a second read with args, equal to a read with args."""
    from popprof.io.files import snapshot
    from popprof.readers.chrome.allocations import scanned_args

    def memory(ts: float, size: int, total: int) -> dict:
        args = {
            "Total Reserved": 2 << 20,
            "Total Allocated": total,
            "Bytes": size,
            "Device Id": 0,
            "Device Type": 1,
        }
        return {"args": args, "ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 8, "ts": ts}

    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 8, "ts": 10.0, "dur": 5.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 7, "tid": 8, "ts": 11.0, "dur": 1.0},
        memory(11.5, 4096, 1 << 20),
        memory(14.0, -4096, (1 << 20) - 4096),
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    profile = popprof.open(path)
    mem = profile.events[profile.events["name"] == "[memory]"]
    assert (
        scanned_args(path, snapshot(path), *(mem[c].to_numpy() for c in ("pid", "tid", "start_us"))) is None
    )
    table = profile.allocations
    assert table.equals(popprof.open(path, with_args=True).allocations)
    assert table["bytes"].tolist() == [4096, -4096]
    (gpu,) = device_memory(profile)
    assert (gpu["peak_allocated_bytes"], gpu["peak_op"], gpu["start_bytes"]) == (
        1 << 20,
        "aten::mm",
        (1 << 20) - 4096,
    )


def test_the_pilot_shows_the_gpu_peak_and_says_what_to_capture_without_it():
    from popprof.pilot.figures import side

    bert = side(popprof.open(BERT), "gpu", role="baseline")["figures"]["peak_allocated_bytes"]
    assert (bert["value"], bert["missing"]) == (101_305_344, None)
    nccl = side(popprof.open(TRACES / "nccl_data.json.gz"), "gpu", role="baseline")["figures"]
    assert nccl["peak_allocated_bytes"]["value"] is None
    assert "profile_memory=True" in nccl["peak_allocated_bytes"]["missing"]


def test_the_html_report_shows_the_summarys_device_memory(tmp_path: Path):
    from popprof.io import units

    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["-q", "report", str(BERT), "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    table = html[html.index('<table class="device-memory">') :].split("</table>")[0]
    gpu = next(r for r in _summary(BERT) if r["device"] == "gpu:0")
    for figure in (gpu["peak_allocated_bytes"], gpu["peak_reserved_bytes"], gpu["start_bytes"]):
        assert units.nbytes(figure) in table
    assert f"+{units.duration(gpu['peak_at_us'])}" in table and "<code>aten::addmm</code>" in table


def test_the_store_keeps_the_allocations_and_the_peak(tmp_path: Path):
    store = tmp_path / "store"
    for args in (["store", "init", str(store)], ["store", "add", str(store), str(BERT)]):
        result = CliRunner().invoke(cli, ["-q", *args])
        assert result.exit_code == 0, result.output
    query = (
        "select a.device, count(*) as n, max(a.total_allocated) as peak, max(m.value) as metric "
        "from allocations a, metrics m where m.name = 'trace.device_memory_peak_bytes' group by 1 order by 1"
    )
    result = CliRunner().invoke(cli, ["-q", "store", "query", str(store), query, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["device"], r["n"], r["peak"]) for r in rows] == [("cpu", 18, 16), ("gpu:0", 218, 101_305_344)]
    assert rows[1]["metric"] == 101_305_344


@pytest.mark.parametrize(
    "name", ["tracelens_mi300x_vllm_graph_capture.json.gz", "tracelens_mi300x_normalization.json.gz"]
)
def test_a_roctracer_trace_names_its_gpu_once(name: str):
    """roctracer numbers the GPU by its HSA agent (2: the host's two CPUs come first), PyTorch's allocator by
    HIP's index (0): the memory is named as the GPU work names the device, so every figure names one device,
    and its capacity is the memory every GPU of ``deviceProperties`` has."""
    path = TRACES / name
    with gzip.open(path, "rt") as handle:
        doc = json.load(handle)
    assert "roctracer_version" in doc
    hip = {e["args"]["Device Id"] for e in doc["traceEvents"] if e.get("name") == "[memory]"}
    hip_gpu = {
        e["args"]["Device Id"]
        for e in doc["traceEvents"]
        if e.get("name") == "[memory]" and e["args"]["Device Type"] == 6
    }
    agents = {e["args"]["device"] for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")}
    assert hip_gpu == {0} and agents == {2} and hip >= {0}
    result = CliRunner().invoke(cli, ["summary", str(path), "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    doc_out = json.loads(result.stdout)
    gpus = {m["device"] for m in doc_out["trace"]["device_memory"] if m["device"] != "cpu"}
    assert gpus == {row["device"] for row in doc_out["trace"]["devices"]} == {"gpu:2"}
    sizes = {p["totalGlobalMem"] for p in doc["deviceProperties"]}
    (memory,) = [m for m in doc_out["trace"]["device_memory"] if m["device"] == "gpu:2"]
    assert len(sizes) == 1 and memory["capacity_bytes"] == sizes.pop()


def test_a_cuda_trace_keeps_the_allocators_numbering():
    """CUPTI numbers a GPU as CUDA does, as the allocator does: nothing is renamed (BERT-small: gpu:0 both)."""
    memory = {m["device"] for m in _summary(BERT)}
    assert memory == {"gpu:0", "cpu"}
