"""Trace rules per rank and device, host waits and bookkeeping, platform advice, stragglers; and the rules
on the real Kineto traces (fixtures/real/traces, HTA's test data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.metrics.ranks import rank_figures, step_times
from popprof.model.profile import Profile
from popprof.rules import RULES, check

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"


def gpu_trace(device_rows: list[tuple], host_rows: list[tuple] = ()) -> Profile:
    """device_rows: (rank, device, name, category, start, dur) on a stream track per device, each launched by
    a ``cudaLaunchKernel`` of no length at its start on a launch thread of its rank (so a gap's whole time is
    the host's, as the time account splits it); host_rows: (rank, name, category or None, start, dur[,
    bookkeeping]) on one host thread per rank."""
    rows = []
    for correlation, (rank, device, name, category, start, dur) in enumerate(device_rows, start=1):
        rows.append(
            {
                "pid": 100 + (rank or 0),
                "tid": 7,
                "name": name,
                "channel": "kernel",
                "device_category": category,
                "start_us": start,
                "dur_us": dur,
                "rank": rank,
                "device": device,
                "stream": 7,
                "correlation": correlation,
                "bookkeeping": False,
            }
        )
        rows.append(
            {
                "pid": 10 + (rank or 0),
                "tid": 2,
                "name": "cudaLaunchKernel",
                "channel": "cuda_runtime",
                "device_category": None,
                "start_us": start,
                "dur_us": 0.0,
                "rank": rank,
                "device": None,
                "stream": None,
                "correlation": correlation,
                "bookkeeping": False,
            }
        )
    for row in host_rows:
        rank, name, category, start, dur = row[:5]
        rows.append(
            {
                "pid": 10 + (rank or 0),
                "tid": 1,
                "name": name,
                "channel": "cpu_op",
                "device_category": category,
                "start_us": start,
                "dur_us": dur,
                "rank": rank,
                "device": None,
                "stream": None,
                "correlation": None,
                "bookkeeping": row[5] if len(row) > 5 else False,
            }
        )
    frame = pd.DataFrame(rows).sort_values(["pid", "tid", "start_us"]).reset_index(drop=True)
    frame.insert(0, "event_id", np.arange(len(frame)))
    frame["depth"] = 0
    frame["parent_id"] = None
    return Profile("gpu", {"events": frame, "target": {"source_format": ["chrome_trace"]}})


def test_each_device_is_checked_and_named_in_one_finding():
    # rank 0's GPU idles 40 % (one 400 us gap in 1 ms); rank 1's GPU is busy throughout
    device = [
        (0, "gpu:0", "gemm", "compute", 0.0, 300.0),
        (0, "gpu:0", "gemm", "compute", 700.0, 300.0),
        (1, "gpu:1", "gemm", "compute", 0.0, 1000.0),
    ]
    host = [(0, "DataLoader.__next__", None, 300.0, 400.0)]
    found = check(
        gpu_trace(device, host), rules=["host.device-gaps"], params={"host.device-gaps.min_gap_us": 100.0}
    )
    (f,) = found.items
    assert (
        f.message.startswith("1 of 2 devices idle >= 10 %")
        and "rank 0 gpu:0: idle 400.0 us = 40.0 %" in f.message
    )
    assert f.where["devices"] == ["rank 0 gpu:0"] and f.severity == "error" and f.value == pytest.approx(0.4)
    assert "'DataLoader.__next__' (400.0 us)" in f.message
    assert set(f.evidence["rank"]) == {0} and set(f.evidence["device"]) == {"gpu:0"}
    # merged into one device, rank 1's kernel would have hidden the gap
    merged = gpu_trace([(None, None, n, c, s, d) for _, _, n, c, s, d in device], host)
    assert (
        check(merged, rules=["host.device-gaps"], params={"host.device-gaps.min_gap_us": 100.0}).items == []
    )


def test_several_devices_in_one_finding_with_the_worst_deciding_the_severity():
    device = [
        (0, "gpu:0", "k", "compute", 0.0, 450.0),
        (0, "gpu:0", "k", "compute", 550.0, 450.0),  # 10 %
        (1, "gpu:1", "k", "compute", 0.0, 300.0),
        (1, "gpu:1", "k", "compute", 700.0, 300.0),
    ]  # 40 %
    host = [
        (0, "train_step", None, 0.0, 1000.0),
        (1, "train_step", None, 0.0, 1000.0),
    ]  # a trace with host events
    (f,) = check(
        gpu_trace(device, host), rules=["host.device-gaps"], params={"host.device-gaps.min_gap_us": 50.0}
    )
    assert f.where["devices"] == ["rank 1 gpu:1", "rank 0 gpu:0"]
    assert f.severity == "error" and f.value == pytest.approx(0.4) and f.threshold == 0.30
    assert f.message.startswith("2 of 2 devices idle >= 10 %")
    assert f.message.index("rank 1 gpu:1: idle") < f.message.index("rank 0 gpu:0: idle")


def test_host_waits_are_host_time_and_named_apart_as_their_own_cost():
    device = [(0, "gpu:0", "gemm", "compute", 0.0, 300.0), (0, "gpu:0", "gemm", "compute", 700.0, 300.0)]
    host = [
        (0, "cudaStreamSynchronize", "host_wait", 250.0, 500.0),  # would fill the gap if it were device time
        (0, "optimizer.step", None, 350.0, 100.0),
    ]
    (f,) = check(
        gpu_trace(device, host), rules=["host.device-gaps"], params={"host.device-gaps.min_gap_us": 100.0}
    ).items
    assert f.value == pytest.approx(0.4)
    message = " ".join(f.message.split())
    # never named as a cause of the gaps (what the host was in), only apart, with what called it
    assert "'optimizer.step' (100.0 us)" in message and "'cudaStreamSynchronize'" not in message
    assert (
        "the host spent 400.0 us of the gaps in calls that block on the device (cudaStreamSynchronize outside "
        "any operator 400.0 us), with the device idle and its next work not yet launched: the calls' own cost, "
        "not a wait for the device" in message
    )
    # a long host wait is not a long host event
    long_wait = [(0, "cudaDeviceSynchronize", "host_wait", 300.0, 20_000.0)]
    device = [(0, "gpu:0", "gemm", "compute", 0.0, 300.0), (0, "gpu:0", "gemm", "compute", 20_300.0, 300.0)]
    assert check(gpu_trace(device, long_wait), rules=["host.long-events"]).items == []


def test_bookkeeping_is_never_named():
    device = [(0, "gpu:0", "gemm", "compute", 0.0, 300.0), (0, "gpu:0", "gemm", "compute", 20_300.0, 300.0)]
    host = [(0, "PyTorch Profiler (0)", None, 0.0, 30_000.0, True), (0, "collate", None, 300.0, 20_000.0)]
    found = check(gpu_trace(device, host), rules=["host.device-gaps", "host.long-events"])
    assert len(found.items) == 2
    for f in found:
        assert "PyTorch Profiler" not in f.message and "collate" in f.message


def test_findings_on_a_gpu_trace_carry_gpu_advice_and_ipu_profiles_ipu_advice():
    device = [
        (0, "gpu:0", "ncclKernel_AllReduce", "exchange", 0.0, 600.0),
        (0, "gpu:0", "gemm", "compute", 600.0, 400.0),
    ]
    (f,) = check(gpu_trace(device), rules=["exchange.share"]).items
    assert f.severity == "error" and f.advice == RULES["exchange.share"].advice_for("gpu")
    assert "bucket" in f.advice and "tile" not in f.advice
    ipu = popprof.open(Path(__file__).resolve().parent.parent / "fixtures" / "mk2_training.popprof")
    for f in check(ipu, rules=["exchange.*"], params={"exchange.share.warning": 0.0}):
        assert f.advice == RULES[f.rule_id].advice_for("ipu")


def test_exchange_overlapped_by_compute_on_another_stream_is_not_exposed():
    # 600 us of all-reduce, 500 of them under a compute kernel on another stream: 100 us exposed of 1 ms busy
    device = [
        (0, "gpu:0", "ncclKernel_AllReduce", "exchange", 0.0, 600.0),
        (0, "gpu:0", "gemm", "compute", 100.0, 900.0),
    ]
    (f,) = check(gpu_trace(device), rules=["exchange.share"]).items
    assert f.value == pytest.approx(0.1) and f.severity == "info"
    assert (
        "communication not overlapped by compute (100.0 us) takes 10.0 % of 1.00 ms device busy time"
        in f.message
    )


def test_exchange_phases_of_two_devices_are_one_finding():
    device = []
    for rank in (0, 1):
        device += [(rank, f"gpu:{rank}", "gemm", "compute", float(t), 100.0) for t in range(0, 1000, 100)]
        device += [(rank, f"gpu:{rank}", "nccl_allreduce", "exchange", 1000.0, 100.0 if rank else 40.0)]
        if rank == 0:
            device += [(rank, "gpu:0", "gemm", "compute", 1040.0, 60.0)]
        device += [(rank, f"gpu:{rank}", "gemm", "compute", float(t), 100.0) for t in range(1100, 2000, 100)]
    found = check(gpu_trace(device), rules=["exchange.phases"], params={"exchange.phases.window_us": 100.0})
    (f,) = found.items
    assert f.where["devices"] == ["rank 0 gpu:0", "rank 1 gpu:1"] and len(f.where["phases"]) == 2
    # rank 1's window is all exchange (the error band), but its 100 us are 5 % of its 2 ms span: info
    assert f.severity == "info" and f.value == pytest.approx(1.0) and f.share == pytest.approx(0.05)
    assert "the phases hold 5.0 % of rank 1 gpu:1's window, so info" in f.message
    assert "rank 0 gpu:0" in f.message and "40.0 %" in f.message and "worst 100.0 %" in f.message


# -- distributed.stragglers ------------------------------------------------------------------------


def ranks_trace(step_us: dict[int, float], idle: dict[int, float] | None = None) -> Profile:
    """Three ProfilerSteps per rank of the given length; each rank's GPU idles the given share of each step."""
    device, host = [], []
    for rank, length in step_us.items():
        for k in range(3):
            start = k * length  # steps back to back
            host.append((rank, f"ProfilerStep#{k}", None, start, length))
            busy = length * (1 - (idle or {}).get(rank, 0.0))
            device.append((rank, f"gpu:{rank}", "gemm", "compute", start, busy))
    return gpu_trace(device, host)


def test_stragglers_need_two_ranks_and_collectives():
    found = check(ranks_trace({0: 1000.0}), rules=["distributed.stragglers"])
    assert "at least two ranks" in dict(found.not_evaluated)["distributed.stragglers"]
    # longer steps without collectives are no straggler by HTA's definition: nothing to wait in
    found = check(ranks_trace({0: 1000.0, 1: 1010.0, 2: 1300.0}), rules=["distributed.stragglers"])
    assert "long collectives" in dict(found.not_evaluated)["distributed.stragglers"]


# -- real traces --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> dict[str, Profile]:
    return {
        name: popprof.open(REAL / name)
        for name in (
            "nccl_data.json.gz",
            "amd_mi250_minitoy.json.gz",
            "cpu_only_rank-34.json.gz",
            "two_ranks",
            "tracelens_b200_vllm_eager.json.gz",
            "dlrm_8ranks",
        )
    }


def test_real_traces_one_finding_per_rule_gpu_advice_and_no_bookkeeping(real):
    for name, profile in real.items():
        found = check(profile, rules=["host.*", "exchange.*", "distributed.*"])
        ids = [f.rule_id for f in found]
        assert len(ids) == len(set(ids)), name  # one finding per problem, not one per window
        for f in found:
            assert f.advice == RULES[f.rule_id].advice_for("gpu"), (name, f.rule_id)
            for hidden in (
                "PyTorch Profiler",
                "cudaStreamWaitEvent",
                "cudaDeviceSynchronize",
                "hipDeviceSynchronize",
                "stream 7",
            ):
                assert hidden not in f.message, (name, f.rule_id, hidden)


def test_real_nccl_trace_figures(real):
    found = check(real["nccl_data.json.gz"], rules=["host.device-gaps", "exchange.share"])
    gaps = found.by_rule("host.device-gaps")[0]
    # gaps >= 1 ms inside the active span: 22.7 % (HTA's idle share over the whole trace is larger, 76 %, as
    # it also counts short gaps and the time before the first and after the last kernel)
    assert gaps.severity == "warning" and gaps.value == pytest.approx(0.227, abs=0.002)
    assert gaps.where["devices"] == ["rank 0 gpu:0"]
    # HTA's idle causes over the device's streams (hta_reference.json: streams 7 and 40)
    assert (
        "idle causes (HTA, over its streams): host wait (HTA) 99.7 %, kernel wait (HTA) 0.3 %" in gaps.message
    )
    share = found.by_rule("exchange.share")[0]
    # the time account's communication (not overlapped by compute) over its busy time: 39.56 of 157.50 ms
    assert share.severity == "info" and share.value == pytest.approx(0.251, abs=0.002)


def test_step_times_match_hta_iterations(real):
    """HolisticTraceAnalysis 0.5.0 on fixtures/real/traces/two_ranks: get_profiler_steps() == [551];
    hta.analyzers.straggler.extract_iteration_info: rank 0 dur 607312, rank 1 dur 607904 (us);
    get_potential_stragglers(num_candidates=1) == [1] (HTA always names its top candidates; step times
    0.1 % apart are no straggler for this rule)."""
    steps = step_times(real["two_ranks"])
    at_551 = steps[steps["step"] == 551].set_index("rank")["dur_us"]
    assert at_551.to_dict() == {0: 607_312.0, 1: 607_904.0}
    assert sorted(steps["step"].unique().tolist()) == [551, 552]


def test_real_two_ranks_have_no_straggler(real):
    figures = rank_figures(real["two_ranks"])
    assert list(figures["rank"]) == [0, 1] and list(figures["steps"]) == [2, 2]
    # ProfilerStep medians 615.1 ms and 619.3 ms: under 1 % apart
    assert figures["step_us"].tolist() == pytest.approx([615_120.0, 619_271.5])
    # idle shares as HTA 0.5.0's get_temporal_breakdown gives them (fixtures/real/traces/hta_reference.json)
    assert (figures["idle_share"] * 100).tolist() == pytest.approx([53.56, 54.72], abs=0.01)
    found = check(real["two_ranks"], rules=["distributed.stragglers"])
    assert found.evaluated == ["distributed.stragglers"] and found.items == []


def test_cpu_only_real_trace_is_not_evaluated_rather_than_flagged(real):
    found = check(real["cpu_only_rank-34.json.gz"], rules=["host.*", "exchange.*", "distributed.*"])
    assert found.items == []
    assert {r for r, _ in found.not_evaluated} >= {"host.device-gaps", "host.long-events", "exchange.phases"}


def test_a_healthy_two_rank_gpu_run_gives_no_finding_with_the_defaults():
    """Busy 90 % of the time with gaps of 0.5 ms, the all-reduce hidden under compute, ranks within 3 %
    (a synchronous run: every rank's steps start together, the collectives line them up)."""
    device, host = [], []
    for rank, (length, kernel) in ((0, (10_000.0, 4_500.0)), (1, (9_900.0, 4_400.0))):
        for k in range(20):  # 20 steps of kernels with 0.5-0.6 ms launch gaps
            start = k * 10_000.0
            host.append((rank, f"ProfilerStep#{k}", None, start, length))
            for j in range(2):
                device.append((rank, f"gpu:{rank}", "gemm", "compute", start + j * 5_000.0, kernel))
            device.append((rank, f"gpu:{rank}", "ncclKernel_AllReduce", "exchange", start + 6_000.0, 2_000.0))
    found = check(gpu_trace(device, host), rules=["host.*", "exchange.*", "distributed.*"])
    assert [(f.rule_id, f.severity) for f in found if f.severity != "info"] == []
    assert set(found.evaluated) >= {
        "host.device-gaps",
        "host.long-events",
        "exchange.phases",
        "distributed.stragglers",
    }


def test_real_traces_severities_documented_in_rules_md(real):
    def severities(name: str) -> dict[str, str]:
        return {
            f.rule_id: f.severity for f in check(real[name], rules=["host.*", "exchange.*", "distributed.*"])
        }

    # exchange.phases: all-reduce windows at 50-75 % exposed (the error band), but 5.7 % of the span: info
    assert severities("nccl_data.json.gz") == {
        "host.device-gaps": "warning",
        "exchange.share": "info",
        "host.long-events": "warning",
        "exchange.phases": "info",
        "host.launch-overhead": "warning",  # 25.3 % of its window in gaps under 1 ms before short kernels
    }
    two = severities("two_ranks")
    # the host's part of rank 1's long gaps, 23.7 % of its window: the rest waited on launched work
    # exchange.share: 61.5 % of rank 0's busy time, an error by that share; hiding it would save 23.4 % of
    # rank 1's window (the device with the most transfer), so a warning
    assert two["host.device-gaps"] == "warning" and two["exchange.share"] == "warning"
    # 99.9 % exposed windows holding 23.7 % of rank 1's window, 15.5 % without the waits for the last rank
    assert two["exchange.phases"] == "warning"
    # the B200 vLLM decode: phases of 86 % exposed all-reduce that hold 0.8 % of the span are no error
    b200 = severities("tracelens_b200_vllm_eager.json.gz")
    assert b200["exchange.phases"] == "info"
    assert b200["host.launch-overhead"] == "error"  # 58.2 %: the eager decode is launch-bound
    # the DLRM step's phases hold 39.5 % of rank 4's window, but all except 1.3 % is waiting for the last rank,
    # which hiding communication does not remove: info; the waits are the collective skew's warning
    dlrm = severities("dlrm_8ranks")
    assert dlrm["exchange.phases"] == "info" and dlrm["distributed.collective-skew"] == "warning"
    assert dlrm["exchange.share"] == "info"  # 89.7 % of rank 1's busy time, but hiding it buys 1.3 %
    assert "distributed.stragglers" not in two
    assert severities("amd_mi250_minitoy.json.gz")["host.device-gaps"] == "error"


def test_a_rank_whose_last_collective_starts_late_is_named_with_htas_metric():
    """HTA's late-start metric: the last long collective of each iteration starts 0.3 iteration later on rank 2.
    The kernels run an iteration behind their launch (GPU lag): the launch call's correlation decides the
    iteration, as in HTA."""
    rows = []
    correlation = 0
    for rank in (0, 1, 2):
        for k in range(4):
            start = k * 1_000.0
            rows.append(
                {
                    "pid": 10 + rank,
                    "tid": 1,
                    "name": f"ProfilerStep#{k}",
                    "channel": "cpu_op",
                    "device_category": None,
                    "start_us": start,
                    "dur_us": 1_000.0,
                    "rank": rank,
                }
            )
            correlation += 1
            rows.append(
                {
                    "pid": 10 + rank,
                    "tid": 1,
                    "name": "cudaLaunchKernel",
                    "channel": "cuda_runtime",
                    "device_category": None,
                    "start_us": start + 100.0,
                    "dur_us": 5.0,
                    "rank": rank,
                    "correlation": correlation,
                }
            )
            late = 300.0 if rank == 2 else 0.0
            rows.append(
                {
                    "pid": 100 + rank,
                    "tid": 7,
                    "name": "ncclKernel_AllReduce",
                    "channel": "kernel",
                    "device_category": "exchange",
                    "start_us": start + 1_200.0 + late,
                    "dur_us": 500.0 - late,  # a blocking collective: every rank's ends with rank 2's
                    "rank": rank,
                    "device": f"gpu:{rank}",
                    "stream": 7,
                    "correlation": correlation,
                }
            )
            rows.append(
                {
                    "pid": 100 + rank,
                    "tid": 7,
                    "name": "gemm",
                    "channel": "kernel",
                    "device_category": "compute",
                    "start_us": start + 1_000.0,
                    "dur_us": 150.0,
                    "rank": rank,
                    "device": f"gpu:{rank}",
                    "stream": 7,
                }
            )
    frame = pd.DataFrame(rows).sort_values(["pid", "tid", "start_us"]).reset_index(drop=True)
    frame.insert(0, "event_id", np.arange(len(frame)))
    frame["depth"], frame["parent_id"] = 0, None
    profile = Profile("late", {"events": frame, "target": {"source_format": ["chrome_trace"]}})
    (f,) = check(profile, rules=["distributed.stragglers"]).items
    # steps 1-3 (HTA leaves step 0 out) span 1,000 us to the last all-reduce end at 4,700 us: 1,233.3 us each
    mean_iteration = (4_700.0 - 1_000.0) / 3
    assert f.where["ranks"] == [2] and f.severity == "warning" and f.threshold == 0.10
    assert f.value == pytest.approx(300.0 / mean_iteration)
    assert "rank 2 300.0 us (0.24 of an iteration)" in f.message
    # against the median of the OTHER ranks: ranks 0 and 1 see (0 + 300) / 2 = 150 us as the others'
    assert f.evidence.set_index("rank")["late_us"].to_dict() == pytest.approx(
        {0: -150.0, 1: -150.0, 2: 300.0}
    )
    # the others' waits for rank 2 lie where they waited (ranks 0 and 1, 300 us in each of steps 1-3), all of
    # it inside the collective skew's waits: counted with both rules, the skew (ranked first: it also holds
    # step 0's) claims them, and the stragglers' gain is not paid out of the ranks' transfer instead
    spans = f.estimated_gain.spans
    assert set(spans) == {"rank 0 gpu:0", "rank 1 gpu:1"}
    assert sum(float((e - s).sum()) for s, e in spans.values()) == pytest.approx(2 * 3 * 300.0)
    both = check(profile, rules=["distributed.stragglers", "distributed.collective-skew"])
    (skew,) = both.by_rule("distributed.collective-skew")
    (straggler,) = both.by_rule("distributed.stragglers")
    assert skew.estimated_gain.value == pytest.approx(2 * 4 * 300.0)
    assert straggler.estimated_gain.value == 0.0 and "Counted once" in straggler.estimated_gain.basis


def test_real_two_ranks_start_their_collectives_together(real):
    from popprof.metrics.ranks import collective_late_start

    late = collective_late_start(real["two_ranks"])
    assert set(late["rank"]) == {0, 1} and late["late_iterations"].abs().max() < 0.05


def test_a_gpu_run_without_communication_has_no_communication_share(real):
    """A single GPU that ran no collective or peer copy (the MI250 toy run, the 2021 ResNet-50, the MI300X
    compiled run) gets no "communication 0.0 %" finding: the rule says it had nothing to evaluate. A run with
    communication keeps its info finding however small its share (the B200 decode's all-reduces, 2.5 %)."""
    for name in ("amd_mi250_minitoy.json.gz", "tracelens_mi300x_torch_compile_triton.json.gz"):
        found = check(popprof.open(REAL / name), rules=["exchange.share"])
        assert not found.items
        assert found.not_evaluated == [
            (
                "exchange.share",
                "no communication on the devices (collectives, peer copies) to share their time",
            )
        ]
    b200 = check(real["tracelens_b200_vllm_eager.json.gz"], rules=["exchange.share"])
    assert [f.severity for f in b200.items] == ["info"]
