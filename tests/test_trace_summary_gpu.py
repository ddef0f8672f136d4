"""The GPU-baseline trace measured right: host waits, bookkeeping, flows, a summary a person reads."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.cli import main
from popprof.io.units import duration as fmt_time
from popprof.metrics import compute, devices
from popprof.metrics.trace_summary import trace_summary

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def nccl() -> popprof.Profile:
    return popprof.open(REAL / "nccl_data.json.gz")


def test_host_sync_calls_are_not_device_busy_time(nccl) -> None:
    """cudaDeviceSynchronize & co on the Python thread: host_wait, left out of the device-busy union."""
    ev = nccl.events
    waits = ev[ev["device_category"] == "host_wait"]
    assert set(waits["name"].astype(str)) == {"cudaEventSynchronize", "cudaDeviceSynchronize"}
    assert (waits["channel"].astype(str) == "cuda_runtime").all()
    values = compute(nccl)
    assert "trace.device_time_us.host_wait" not in values
    # device busy time is GPU stream work only
    on_stream = ev[ev["stream"].notna()]
    assert on_stream["device_category"].notna().all()
    device_rows = ev[ev["device_category"].isin(["compute", "exchange", "host_io", "sync", "other"])]
    assert device_rows["stream"].notna().all()
    assert values["trace.device_idle_share"] == pytest.approx(
        1 - values["trace.device_busy_us"] / trace_summary(nccl)["device_activity"]["active_span_us"]
    )


def test_profiler_bookkeeping_is_kept_but_never_a_busiest_thread_or_top_event(nccl) -> None:
    ev = nccl.events
    marked = ev[ev["bookkeeping"].fillna(False).astype(bool)]
    assert set(marked["name"].astype(str)) == {
        "PyTorch Profiler (0)",
        "Iteration Start: PyTorch Profiler",
        "Record Window End",
    }
    s = trace_summary(nccl)
    names = {r["name"] for key in ("top_by_total", "top_by_self", "top_cpu_ops_by_self") for r in s[key]}
    assert not any(n.startswith(("PyTorch Profiler", "Iteration Start", "Record Window")) for n in names)
    threads = nccl.threads.set_index(["pid", "tid"])
    for row in s["busiest_threads"]:
        assert threads.loc[(row["pid"], row["tid"]), "process_name"] not in ("Spans", "Traces")
    assert s["bookkeeping_events"] == len(marked)


def test_stream_device_and_correlation_columns(nccl) -> None:
    ev = nccl.events
    kernels = ev[ev["channel"].astype(str) == "kernel"]
    assert kernels["stream"].notna().all() and set(kernels["device"].astype(str)) == {"gpu:0"}
    launches = ev[ev["name"].astype(str) == "cudaLaunchKernel"]
    assert launches["stream"].isna().all() and launches["correlation"].notna().all()
    # every kernel's correlation id is the id of one host launch call
    host_ids = set(ev.loc[ev["stream"].isna() & ev["correlation"].notna(), "correlation"])
    assert set(kernels["correlation"]) <= host_ids


def test_flows_and_top_level_metadata_are_kept(nccl) -> None:
    flows = nccl.flows
    assert len(flows) == int(nccl.meta["chrome.flows"]) == 13600
    ac2g = flows[flows["channel"].astype(str) == "ac2g"]
    assert set(ac2g["phase"].astype(str)) == {"s", "f"}
    # an ac2g flow id is the correlation id of the launch it starts from
    corr = set(nccl.events["correlation"].dropna().astype(str))
    assert set(ac2g["id"]) <= corr
    props = json.loads(nccl.meta["chrome.top.deviceProperties"])
    assert props[0]["name"].startswith("NVIDIA A100")
    assert "chrome.skipped_phases" not in nccl.meta


def test_summary_text_reads_like_a_report(capsys) -> None:
    assert main(["summary", str(REAL / "two_ranks")]) == 0
    text = capsys.readouterr().out
    # no epoch microseconds, no thousands separators in ids, no dict dumps
    assert not re.search(r"\d{1,3}(,\d{3}){4,}", text)
    assert "busy_us=" not in text and "pid=" not in text and "{" not in text.split("Top kernels")[0]
    assert "pid 4037 tid 4037" in text
    assert "PyTorch Profiler (0)" not in text
    for heading in (
        "Devices",
        "Top kernels (GPU time)",
        "Top CPU ops by self time",
        "Busiest threads",
        "Why the device idled",
    ):
        assert heading in text
    assert "53.6 %" in text and "54.7 %" in text  # HTA's idle shares of ranks 0 and 1


def test_summary_json_has_trace_devices_and_csv_the_device_table(capsys) -> None:
    assert main(["summary", str(REAL / "nccl_data.json.gz"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["trace"]["devices"]
    for key in (
        "rank",
        "idle_pct",
        "compute_pct",
        "non_compute_pct",
        "comm_comp_overlap_pct",
        "host_wait_pct",
    ):
        assert key in row
    assert row["idle_pct"] == pytest.approx(77.23, abs=0.01)  # HTA, rounding ns times to whole us: 77.78
    # 24 cudaEventSynchronize and 1 cudaDeviceSynchronize (its 84 cudaStreamWaitEvent calls block no host)
    assert data["trace"]["host_wait"]["events"] == 25
    assert main(["summary", str(REAL / "nccl_data.json.gz"), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 1 and rows[0]["device"] == "gpu:0" and rows[0]["platform"] == "gpu"
    assert float(rows[0]["compute_pct"]) == pytest.approx(17.66, abs=0.01)  # HTA's rounded times: 17.26


def test_ipu_profiles_get_the_same_device_table() -> None:
    p = popprof.open(FIXTURES / "pod4_pipeline.popprof")
    table = devices.device_breakdown(p)
    assert table["device"].tolist() == ["ipu:0", "ipu:1", "ipu:2", "ipu:3"]
    assert (table["platform"] == "ipu").all()
    steps = p.steps
    ipu0 = steps[steps["ipu"] == 0]
    cycles = ipu0.groupby(ipu0["category"].astype(str))["cycles"].sum()
    total = cycles.sum()
    row = table.iloc[0]
    assert row["compute_pct"] == pytest.approx(100 * cycles["compute"] / total)
    assert row["communication_pct"] == pytest.approx(
        100 * (cycles.get("exchange", 0) + cycles.get("global_exchange", 0)) / total
    )
    assert row["memory_pct"] == pytest.approx(100 * cycles.get("host_io", 0) / total)
    assert row["span_us"] == pytest.approx(total / p.target_value("clock_hz") * 1e6)
    assert list(table.columns) == devices.BREAKDOWN_COLUMNS


def test_ipu_summary_shows_the_device_table(capsys) -> None:
    assert main(["summary", str(FIXTURES / "pod4_pipeline.popprof")]) == 0
    text = capsys.readouterr().out
    assert (
        "Devices (shares of each IPU's step time: its step cycles over the clock)" in text and "ipu:3" in text
    )
    assert main(["summary", str(FIXTURES / "pod4_pipeline.popprof"), "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 5


def test_pvti_device_events_give_one_ipu_row(pva_double) -> None:
    p = popprof.open(FIXTURES / "traces" / "poptorch_4532.pvti")
    table = devices.device_breakdown(p)
    if p.events["start_us"].isna().all():
        pytest.skip("this stored trace has no timestamps")
    assert table["device"].tolist() == ["ipu"] and table["platform"].tolist() == ["ipu"]
    assert 0 <= table["idle_pct"].iloc[0] <= 100


def test_fmt_time_units() -> None:
    assert fmt_time(12.0) == "12.0 us"
    assert fmt_time(12_345.0) == "12.35 ms"
    assert fmt_time(3_367_344.0) == "3.367 s"
    assert fmt_time(None) == "n/a" and fmt_time(np.nan) == "n/a"


def test_kernel_types_follow_hta_names() -> None:
    from popprof.trace.gpu_work import hta_kernel_type as kernel_type

    assert (
        kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)")
        == "COMMUNICATION"
    )
    assert kernel_type("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "COMMUNICATION"
    assert kernel_type("Memcpy HtoD (Pageable -> Device)") == "MEMORY"
    assert kernel_type("Memset (Device)") == "MEMORY"
    assert kernel_type("void at::native::vectorized_elementwise_kernel<4>") == "COMPUTATION"
    assert kernel_type("Context Sync") == "OTHER"
    assert kernel_type("foo Memcpy bar") == "OTHER"


def test_last_profiler_step_is_left_out_like_hta(tmp_path: Path) -> None:
    """Kernels launched in the last (incomplete) ProfilerStep do not count; with one step, all do."""

    def trace(steps: int) -> dict:
        events = []
        for i in range(steps):
            t = 1000 * i
            events += [
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{i}",
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 900,
                },
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 10,
                    "dur": 5,
                    "args": {"correlation": i + 1},
                },
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "gemm",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 20,
                    "dur": 100 * (i + 1),
                    "args": {"stream": 7, "device": 0, "correlation": i + 1},
                },
            ]
        return {"traceEvents": events}

    (tmp_path / "three.json").write_text(json.dumps(trace(3)))
    (tmp_path / "one.json").write_text(json.dumps(trace(1)))
    three = devices.device_breakdown(popprof.open(tmp_path / "three.json")).iloc[0]
    assert three["busy_us"] == 100 + 200  # step 2's 300 us kernel is left out
    assert three["span_us"] == (1020 + 200) - 20
    one = devices.device_breakdown(popprof.open(tmp_path / "one.json")).iloc[0]
    assert one["busy_us"] == 100 and one["idle_pct"] == 0


def test_idle_causes_on_a_hand_made_stream(tmp_path: Path) -> None:
    """Gap before k2: launched after k1 ended -> host wait; k3: launched early, gap 10 us -> kernel wait;
    k4: launched early, gap 50 us -> other."""
    ev = [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": 1,
            "args": {"correlation": c},
        }
        for c, ts in ((1, 0), (2, 150), (3, 160), (4, 170))
    ]
    ev += [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{c}",
            "pid": 0,
            "tid": 7,
            "ts": ts,
            "dur": dur,
            "args": {"stream": 7, "device": 0, "correlation": c},
        }
        for c, ts, dur in ((1, 10, 100), (2, 200, 50), (3, 260, 10), (4, 320, 10))
    ]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev}))
    p = popprof.open(tmp_path / "t.json")
    idle = devices.idle_breakdown(p).set_index("idle_category")["idle_us"]
    assert idle.to_dict() == {"host_wait": 90.0, "kernel_wait": 10.0, "other": 50.0}
    delays = devices.launch_delays(p).set_index("name")["launch_delay_us"]
    assert delays.to_dict() == {"k1": 9.0, "k2": 49.0, "k3": 99.0, "k4": 149.0}
    assert pd.isna(devices.device_breakdown(p).iloc[0]["comm_comp_overlap_pct"])


def test_a_bundle_keeps_the_columns_flows_and_figures(nccl, tmp_path: Path) -> None:
    from popprof.cli import main as cli

    out = tmp_path / "nccl.popprof"
    assert cli(["export", str(REAL / "nccl_data.json.gz"), "-o", str(out)]) == 0
    back = popprof.open(out)
    assert len(back.flows) == len(nccl.flows)
    for column in ("rank", "device", "stream", "correlation", "bookkeeping"):
        assert back.events[column].dtype == nccl.events[column].dtype, column
    pd.testing.assert_frame_equal(devices.device_breakdown(back), devices.device_breakdown(nccl))


def test_stream_waits_and_memsets_never_block_the_host() -> None:
    """CUDA's "API synchronization behavior": cudaStreamWaitEvent makes a stream wait (the host goes on) and a
    synchronous memset is asynchronous with respect to the host; the synchronisations and synchronous copies
    block. On the real 8-rank DLRM trace each rank's host blocked share is the union of its
    cudaStreamSynchronize and cudaDeviceSynchronize calls alone, inside the device's window."""
    profile = popprof.open(REAL / "dlrm_8ranks")
    ev = profile.events
    category = ev["device_category"].astype(object)
    names = ev["name"].astype(str)
    assert (names == "cudaStreamWaitEvent").sum() == 8 * 44
    assert category[names == "cudaStreamWaitEvent"].isna().all()
    assert set(names[category == "host_wait"]) == {"cudaStreamSynchronize", "cudaDeviceSynchronize"}
    table = devices.device_breakdown(profile).set_index("rank")
    for rank, row in table.iterrows():
        mine = ev[(ev["rank"] == rank) & names.isin(["cudaStreamSynchronize", "cudaDeviceSynchronize"])]
        work = ev[(ev["rank"] == rank) & ev["stream"].notna()]  # the window: its first to last GPU work
        lo, hi = work["start_us"].min(), (work["start_us"] + work["dur_us"]).max()
        assert hi - lo == pytest.approx(row["span_us"])
        start = mine["start_us"].clip(lo, hi).to_numpy()
        end = (mine["start_us"] + mine["dur_us"]).clip(lo, hi).to_numpy()
        order = np.argsort(start)
        union, reach = 0.0, -np.inf
        for a, b in zip(start[order], end[order], strict=True):
            a = max(a, reach)
            if b > a:
                union += b - a
                reach = b
        assert row["host_wait_pct"] == pytest.approx(100 * union / row["span_us"])
    # rank 1 waits longest on its streams (its collectives wait for the late ranks): a third of its window
    assert table.loc[1, "host_wait_pct"] == pytest.approx(35.32, abs=0.01)
    for kind in ("cudaMemset", "hipMemset", "cudaStreamWaitEvent", "hipStreamWaitEvent", "cuMemcpyDtoD"):
        assert not re.search(devices_map_host_wait(), f"cuda_runtime:{kind}")
    for kind in (
        "cudaMemcpy",
        "cudaFree",
        "hipStreamSynchronize",
        "cuCtxSynchronize",
        "cudaEventSynchronize",
    ):
        assert re.search(devices_map_host_wait(), f"cuda_runtime:{kind}")


def devices_map_host_wait() -> str:
    from popprof.trace.device import CHROME_DEVICE_MAP

    return CHROME_DEVICE_MAP["host_wait"]


@pytest.mark.parametrize("trace", ["nccl_data.json.gz", "two_ranks"])
def test_rules_attribute_no_time_to_bookkeeping_or_host_waits_as_device_time(trace: str, capsys) -> None:
    """The issue's symptoms: 'meanwhile the host was in PyTorch Profiler (0)' and a phase
    'dominated by cudaDeviceSynchronize' (a host call counted as device time)."""
    assert main(["check", str(REAL / trace), "--fail-on", "never", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "PyTorch Profiler" not in out
    for call in ("cudaDeviceSynchronize", "cudaStreamWaitEvent", "cudaEventSynchronize"):
        assert f"dominated by {call}" not in out


def test_without_launch_correlation_the_step_filter_keeps_the_work(tmp_path: Path) -> None:
    """Host events without correlation ids cannot say which step launched a kernel: nothing is dropped."""
    events = []
    for i in range(3):
        events += [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": 1000 * i,
                "dur": 900,
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "pid": 0,
                "tid": 7,
                "ts": 1000 * i + 20,
                "dur": 100,
                "args": {"stream": 7, "device": 0},
            },
        ]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    row = devices.device_breakdown(popprof.open(tmp_path / "t.json")).iloc[0]
    assert row["platform"] == "gpu" and row["busy_us"] == 300 and row["work_items"] == 3
