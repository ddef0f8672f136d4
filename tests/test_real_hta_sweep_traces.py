"""Defects found by sweeping HolisticTraceAnalysis's public test traces (fixtures/real/traces; provenance and
licence in the README there): Kineto's stream -1, and MTIA's device work.

Expected values are read off the JSON by hand (counted with ``json``, not with popprof); HTA 0.5.0's own figures
on the same traces are in ``hta_reference.json`` (``tests/test_trace_devices_hta.py`` compares them).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.metrics import account, devices
from popprof.metrics.summary import summarise
from popprof.report.summary import render_text

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
EVENT_SYNC = REAL / "hta_cuda_event_sync.json.gz"
MTIA = REAL / "hta_mtia_inference.json.gz"
ALEXNET = REAL / "hta_alexnet_first_steps.json.gz"


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)["traceEvents"]


def test_cuda_sync_events_on_stream_minus_one_are_not_gpu_work() -> None:
    """The trace's ``cuda_sync`` track holds two ``Event Sync`` and one ``Context Sync`` on stream -1 (Kineto's
    "no stream") and one ``Stream Sync`` on stream 7. HTA (``stream.ne(-1)``) counts the Stream Sync alone: its
    GPU work is the 4 kernels, the copy and the Stream Sync, from the first kernel (+2810 us) to the end of the
    spin kernel (+3037 + 36 us): 263 us. Before, the Context Sync at +3140 us stretched the window to 336 us."""
    raw = [e for e in _events(EVENT_SYNC) if e.get("cat") == "cuda_sync"]
    assert sorted((e["name"], e["args"]["stream"]) for e in raw) == [
        ("Context Sync", -1),
        ("Event Sync", -1),
        ("Event Sync", -1),
        ("Stream Sync", 7),
    ]
    profile = popprof.open(EVENT_SYNC)
    work = devices.device_work(profile)
    names = list(work["name"].astype(str))
    assert (
        len(names) == 6
        and names.count("Stream Sync") == 1
        and names.count("Memcpy DtoH (Device -> Pageable)") == 1
    )
    assert "Event Sync" not in names and "Context Sync" not in names
    assert (work["stream"] != -1).all()
    row = devices.device_breakdown(profile).iloc[0]
    assert row["span_us"] == 263.0
    assert row["work_items"] == 6
    # they stay device activity of the device (a device-side sync in the account), not GPU work
    assert (profile.events.loc[profile.events["channel"] == "cuda_sync", "device_category"] == "sync").all()


def test_mtia_device_work_is_device_activity_for_summary_and_check() -> None:
    """An MTIA inference trace: 1,313 ``mtia_ccp_events`` on pid 17 (``MTIA 17``), each with ``args.stream``:
    877 ``dma_request``, 291 ``event_record``, 48 ``event_wait``, 37 ``remote``, 36 ``merge``, 24 ``pe_exe``;
    74 launches (``runFunction - job_prep_and_submit_for_execution``) and 113 ``synchronizeStream`` on the host's
    ``mtia_runtime`` channel. Before, the summary's device table showed gpu:17 busy 95.7 % while the device map
    classified none of it: the summary also said "Device side missing: 74 kernel launches ... and no device
    events", the time account was empty and ``check`` warned that the device side was missing and left every
    device rule unevaluated."""
    raw = _events(MTIA)
    device_events = [e for e in raw if e.get("cat") == "mtia_ccp_events"]
    assert len(device_events) == 1313 and all("stream" in e["args"] for e in device_events)
    counts = {}
    for e in device_events:
        counts[e["name"]] = counts.get(e["name"], 0) + 1
    profile = popprof.open(MTIA)
    events = profile.events
    mtia = events[events["channel"] == "mtia_ccp_events"]
    by_category = mtia.groupby("device_category", observed=True).size().to_dict()
    assert by_category == {
        "host_io": counts["dma_request"],
        "sync": counts["event_wait"],
        "compute": counts["event_record"] + counts["remote"] + counts["merge"] + counts["pe_exe"],
    }
    waits = events[events["device_category"] == "host_wait"]
    assert set(waits["name"].astype(str)) == {"synchronizeStream", "synchronize"}
    assert devices.launches_without_device(profile) == {}
    rows = account.time_account(profile)
    assert list(rows["device"].astype(str)) == ["gpu:17"]
    assert rows["window_us"].iloc[0] == pytest.approx(devices.device_breakdown(profile)["span_us"].iloc[0])
    text = render_text(summarise(profile), 80)
    assert "Device side missing" not in text and "no device events" not in text
    findings = popprof.check(profile)
    assert findings.by_rule("host.launches-without-device") == []
    assert {"host.device-gaps", "host.long-events", "exchange.phases"} <= set(findings.evaluated)


def test_mtia_dma_requests_without_a_stream_are_work_of_their_device(tmp_path: Path) -> None:
    """HTA's ``mtia_trace_single_rank/mtia_rank_0.json.gz`` (2.9 MiB, not committed) holds 137 ``dma_request``
    events on pid 9's ``DMA_REQUEST`` track (tid 801) without ``args.stream``, beside 25,677 device events of
    pid 9 (``MTIA 9``) with one. Read as device activity of no device they made a second device of rank 0,
    idle over the whole 13.336 s window, and a ``host.device-gaps`` error on it. These events are copied from
    that file (two of its stream 1 operators, one stream-less DMA request between them)."""
    trace = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 0},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "mtia_ccp_events",
                "name": "fc-dtype_Float",
                "pid": 9,
                "tid": 4,
                "ts": 3605054880000.0,
                "dur": 56.5,
                "args": {"stream": 1, "correlation": 1},
            },
            {
                "ph": "X",
                "cat": "mtia_ccp_events",
                "name": "dma_request",
                "pid": 9,
                "tid": 801,
                "ts": 3605054881202.837,
                "dur": 8.136,
                "args": {
                    "direction": "DEVICE_TO_HOST",
                    "size": 16,
                    "k_work_ptr": 3221765576,
                    "packet_ptr": 225,
                    "sqid": 1,
                },
            },
            {
                "ph": "X",
                "cat": "mtia_ccp_events",
                "name": "add-dtype_Float",
                "pid": 9,
                "tid": 4,
                "ts": 3605054882000.0,
                "dur": 35.4,
                "args": {"stream": 1, "correlation": 2},
            },
        ],
    }
    path = tmp_path / "mtia_dma.json"
    path.write_text(json.dumps(trace), "utf-8")
    profile = popprof.open(path)
    events = profile.events
    assert list(events["device"].astype(str)) == ["gpu:9", "gpu:9", "gpu:9"]
    dma = events[events["name"] == "dma_request"]
    assert dma["stream"].isna().all()  # no stream: not HTA's GPU work, which reads streams
    assert (dma["device_category"] == "host_io").all()
    rows = account.time_account(profile)
    assert list(rows["device"].astype(str)) == ["gpu:9"]
    assert np.isclose(rows["window_us"].iloc[0], 2000.0 + 35.4, atol=1e-3)


def test_device_side_syncs_alone_are_no_communication_heavy_phase() -> None:
    """The event_sync trace holds no collective and no peer copy: its only ``sync`` device events are the
    ``Stream Sync`` (5 us at +2948 us), two ``Event Sync`` and the ``Context Sync`` (6 us at +3140 us) of its
    host's synchronising calls. ``exchange.phases`` listed them as three "Communication-heavy phases" (info,
    a gain of 0.0 us) of a run that communicates nothing; it now passes there. The sync events still count
    beside communication in a phase that holds some (the rule's docs)."""
    profile = popprof.open(EVENT_SYNC)
    events = profile.events
    assert not (events["device_category"] == "exchange").any()
    assert (events["device_category"] == "sync").sum() == 4
    findings = popprof.check(profile)
    assert "exchange.phases" in findings.evaluated
    assert findings.by_rule("exchange.phases") == []


def test_blocking_calls_in_host_gaps_are_their_own_cost_not_device_bound() -> None:
    """AlexNet's first iterations: the host sits in ``cudaFree`` for 6,008,692 us at +31.447 s and 525,034 us at
    +37.725 s while the device idles (its next work not yet launched). ``host.device-gaps`` called that time
    "host blocked on device ... (device-bound time, not host work)"; the device had nothing to run, so it now
    says that time was the calls' own cost. It never names such a call as a cause of the gaps (what the host was
    in), only apart, by call and the operator that called it: cuDNN's convolutions freeing memory."""
    frees = [e["dur"] for e in _events(ALEXNET) if e.get("name") == "cudaFree" and e.get("dur", 0) > 100_000]
    assert sorted(frees) == [525034, 6008692]
    (finding,) = popprof.check(popprof.open(ALEXNET)).by_rule("host.device-gaps")
    message = " ".join(finding.message.split())
    assert "device-bound" not in message
    assert (
        "the host spent 6.554 s of the gaps in calls that block on the device (cudaFree in aten::conv2d "
        "6.534 s, cudaFree in [param|cuda] 18.84 ms), with the device idle" in message
    )
    assert "'cudaFree'" not in message
    assert "the calls' own cost, not a wait for the device" in message


def test_a_trace_launched_through_the_driver_alone_says_why_launch_overhead_is_not_evaluated(
    tmp_path: Path,
) -> None:
    """HTA's ``triton_example/triton_example.json.gz`` (2.2 KiB, not committed): its one kernel, Inductor's
    ``triton_poi_fused_add_cos_sin_0``, was launched by ``cuLaunchKernel`` (``cuda_driver``, correlation 35),
    which HTA 0.5.0's launch statistics leave out. ``host.launch-overhead`` said it needed launch calls joined
    by correlation id, which this trace has; it now says which calls it reads. Events copied from that file."""
    trace = {
        "schemaVersion": 1,
        "traceEvents": [
            {
                "ph": "X",
                "cat": "kernel",
                "name": "triton_poi_fused_add_cos_sin_0",
                "pid": 0,
                "tid": 7,
                "ts": 2413669097444.592,
                "dur": 1.76,
                "args": {"External id": 3, "device": 0, "stream": 7, "correlation": 35},
            },
            {
                "ph": "X",
                "cat": "cuda_driver",
                "name": "cuLaunchKernel",
                "pid": 1670242,
                "tid": 1670242,
                "ts": 2413669097399.166,
                "dur": 47.768,
                "args": {"External id": 3, "cbid": 307, "correlation": 35},
            },
        ],
    }
    path = tmp_path / "triton.json"
    path.write_text(json.dumps(trace), "utf-8")
    findings = popprof.check(popprof.open(path))
    reason = dict(findings.not_evaluated)["host.launch-overhead"]
    assert (
        "cudaLaunchKernel" in reason
        and "driver launches (cuLaunchKernel: Triton's) are not among them" in reason
    )


def test_gaps_before_device_side_syncs_are_not_launch_overhead() -> None:
    """In the event_sync trace three gaps under 1 ms end at a device-side sync event: the ``Context Sync`` of the
    closing ``cudaDeviceSynchronize`` (54 us of idle before it), the ``Stream Sync`` of a ``cudaStreamSynchronize``
    and an ``Event Sync`` of a ``cudaEventQuery``, each shorter than its call, so they passed for short kernels.
    ``host.launch-overhead`` priced them (132 us, 39.3 % of the window) as gaps a CUDA graph removes; the host was
    synchronising. Left: the gaps before the copy (34 us) and the fill kernel (30 us)."""
    from popprof.metrics import launches

    profile = popprof.open(EVENT_SYNC)
    gaps = launches.launch_idle(profile)
    names = dict(zip(gaps["name"].astype(str), gaps["short"], strict=True))
    assert names["Context Sync"] == False and names["Stream Sync"] == False  # noqa: E712
    short = gaps[gaps["short_gap"].to_numpy(dtype=bool)]
    assert float((short["idle_host_us"] + short["idle_launch_us"]).sum()) == 64.0
    (finding,) = popprof.check(profile).by_rule("host.launch-overhead")
    assert finding.estimated_gain.value == 64.0
    assert "Context Sync" not in finding.message
