"""Real Kineto traces of issue 44 (fixtures/real/traces; provenance and licences in the README there).

Expected values are read off the JSON by hand (counted with ``json``, not with popprof).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.metrics import account, devices
from popprof.metrics.summary import summarise
from popprof.report.summary import render_text
from popprof.trace.spans import union_length

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
TRITON = REAL / "tracelens_mi300x_torch_compile_triton.json.gz"
B200 = REAL / "tracelens_b200_vllm_eager.json.gz"
#: every real trace (a directory of ranks opens as one run)
TRACES = sorted(
    [p for p in REAL.glob("*.json.gz")] + [p for p in REAL.iterdir() if p.is_dir()], key=lambda p: p.name
)


@pytest.fixture(scope="module")
def b200():
    return popprof.open(B200)


def test_an_inductor_triton_launcher_on_the_host_is_host_work():
    """torch.compile on an MI300X: 4 ``cpu_op`` events on pid 3182306 (the host) carry ``args.stream`` 0 and
    ``kernel_backend: "triton"``; the 12 kernels are on pid 2 (``args.device`` 2). One GPU, gpu:2."""
    profile = popprof.open(TRITON)
    events = profile.events
    launchers = events[(events["channel"] == "cpu_op") & events["name"].astype(str).str.startswith("triton_")]
    assert len(launchers) == 4
    assert launchers["stream"].isna().all() and launchers["device"].isna().all()
    assert launchers["device_category"].isna().all()
    doc = summarise(profile)["trace"]
    assert [d["device"] for d in doc["devices"]] == ["gpu:2"]
    assert {k["device"] for k in doc["kernel_types"]} == {"gpu:2"}
    assert sum(k["count"] for k in doc["top_kernels"]) == 12
    assert "gpu:3182306" not in render_text(summarise(profile))


def test_a_b200_rank_has_one_gpu_not_a_second_keyed_by_its_host_pid(b200):
    """vLLM on a B200: one ``cpu_op`` on the host pid 6583 carries ``args.stream`` and ``kernel_backend``; every
    kernel and copy is on pid 0."""
    doc = summarise(b200)["trace"]
    assert [d["device"] for d in doc["devices"]] == ["gpu:0"]
    assert {k["device"] for k in doc["kernel_types"]} == {"gpu:0"}
    assert not any("6583" in str(d) for d in b200.events["device"].dropna().unique())


def test_symmetric_memory_all_reduce_is_communication_in_summary_and_check(b200):
    """73 ``multimem_all_reduce_kernel`` and 1 ``ncclDevKernel_AllGather`` kernels: all communication in the
    summary's table, its top kernels and the events the rules read (device category ``exchange``); HTA's own
    figures (NCCL kernels only) stay available under their HTA names."""
    doc = summarise(b200)["trace"]
    multimem = [k for k in doc["top_kernels"] if "multimem_all_reduce_kernel" in k["name"]]
    assert multimem and all(k["kernel_type"] == "COMMUNICATION" for k in multimem)
    events = b200.events
    exchange = events[events["device_category"] == "exchange"]
    assert len(exchange) == 74
    row = devices.device_breakdown(b200).iloc[0]
    hta = devices.device_breakdown(b200, hta=True).iloc[0]
    # the union of the 74 kernels in the trace's own times (HTA, rounding each to whole microseconds: 2068)
    assert row["communication_us"] == pytest.approx(2141.5, abs=0.01)
    assert hta["communication_us"] == pytest.approx(21.0)  # the one NCCL kernel, as HTA counts it
    assert (hta["span_us"], hta["busy_us"]) == (84486.0, 10744.0)  # HTA's rounded times
    run = account.run_account(b200).iloc[0]  # one step: the table's window is the account's, to the ns
    assert row["span_us"] == pytest.approx(run["window_us"])
    assert row["busy_us"] == pytest.approx(run["window_us"] - account.idle_us(run))
    kinds = {k["kernel_type"]: k["time_us"] for k in doc["kernel_types_hta"]}
    assert kinds["COMMUNICATION"] == pytest.approx(21.0)
    # check's exchange.share reads the same events: its finding names the multimem kernel as exchange
    findings = popprof.check(b200)
    share = [f for f in findings if f.rule_id == "exchange.phases"]
    assert share and "multimem_all_reduce_kernel" in share[0].message


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_summary_and_check_count_the_same_communication(path: Path):
    """On every real trace: the work the summary counts as communication is exactly the device events the rules
    read as exchange, and its communication time their union (HTA's rounding to whole microseconds aside)."""
    from popprof.trace.gpu_work import gpu_work

    profile = popprof.open(path)
    events = profile.events
    exchange = events[(events["device_category"] == "exchange") & events["stream"].notna()]
    if not events["stream"].notna().any():
        assert exchange.empty
        return
    work = gpu_work(events, include_last_step=True)  # every work item, as the rules read them
    comm = work[work["kernel_type"] == "COMMUNICATION"]
    assert sorted(comm["name"].astype(str)) == sorted(exchange["name"].astype(str))
    if len(devices.device_work(profile)) != len(work):  # HTA leaves the last profiler step out of the table
        return
    table = devices.device_breakdown(profile)
    for device, part in exchange.groupby("device", observed=True):
        mine = table[table["device"] == device]
        assert len(mine) == 1
        start = part["start_us"].to_numpy(dtype=np.float64)
        raw = union_length(start, start + part["dur_us"].to_numpy(dtype=np.float64))
        assert abs(float(mine["communication_us"].iloc[0]) - raw) <= len(part) + 1e-6


def test_a_trace_naming_gpus_without_device_activity_says_so():
    """HTA's trace without distributedInfo: deviceProperties names 8 A100s, the events are 2,424 cpu_op and 43
    user_annotation: no kernel, copy or launch."""
    path = REAL / "hta_a100_no_device_activity.json.gz"
    doc = summarise(popprof.open(path))
    assert doc["trace"]["no_device_activity"] == {"devices": 8, "names": ["NVIDIA A100-PG509-200"]}
    assert "devices" in doc["absent_tables"]
    text = render_text(doc)
    assert "No device activity recorded: the trace names 8 devices" in text
    assert "Not in this source: tiles, liveness, steps, devices" in text
    findings = popprof.check(path)
    (said,) = [f for f in findings if f.rule_id == "host.launches-without-device"]
    assert said.severity == "info" and "no device activity was recorded" in said.message
    # a trace with device work says nothing of the kind
    other = summarise(popprof.open(TRITON))
    assert "no_device_activity" not in other["trace"] and "devices" not in other["absent_tables"]
