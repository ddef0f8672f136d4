"""Collectives across ranks (issue 42): skew and transfer per call, bytes and NCCL's bus bandwidth.

The expected figures are computed here from the raw trace JSON (json + gzip, no popprof), on the real
traces of fixtures/real/traces (provenance in its README): dlrm_8ranks (8 ranks, NCCL kernels without
collective args), nccl_data (one rank, kernels with Kineto's ``Collective name`` / ``In msg nelems`` args)
and tracelens_b200_vllm_eager (one rank of 8, an all-gather with args).
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.metrics import collectives as co

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
#: PyTorch's dtype names in record_param_comms args -> element bytes (the ones these traces use).
ELEMENT = {"Float": 4, "BFloat16": 2, "Long": 8}


def _raw_kernels(path: Path) -> list[dict]:
    """The trace's NCCL / collective kernels (device events whose name starts nccl), in file order."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    return [e for e in events if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl")]


def test_bus_factors_are_nccl_tests_published_ones() -> None:
    assert co.bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for kind in ("all_gather", "reduce_scatter", "all_to_all"):
        assert co.bus_factor(kind, 4) == pytest.approx(3 / 4)
    for kind in ("broadcast", "reduce", "send_recv"):
        assert co.bus_factor(kind, 8) == 1.0
    assert np.isnan(co.bus_factor("all_reduce", np.nan))
    assert np.isnan(co.bus_factor("other", 8))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "all_reduce"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce_scatter"),
        ("void (anonymous namespace)::multimem_all_reduce_kernel<16, c10::BFloat16>(x)", "all_reduce"),
        ("_allgather_base", "all_gather"),
        ("alltoall_base", "all_to_all"),
        ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "other"),
    ],
)
def test_collective_kind_from_kernel_or_args_name(name: str, kind: str) -> None:
    assert co.collective_kind(name) == kind


@pytest.fixture(scope="module")
def dlrm() -> popprof.Profile:
    return popprof.open(REAL / "dlrm_8ranks")


def test_dlrm_skew_is_the_wait_for_the_last_rank(dlrm) -> None:
    """Per (name, k-th call): skew = max start over the 8 ranks - own start, clipped to the duration."""
    starts: dict[tuple[str, int], dict[int, tuple[float, float]]] = defaultdict(dict)
    for rank in range(8):
        seen: dict[str, int] = defaultdict(int)
        kernels = sorted(_raw_kernels(REAL / "dlrm_8ranks" / f"rank-{rank}.json.gz"), key=lambda e: e["ts"])
        for e in kernels:
            starts[(e["name"], seen[e["name"]])][rank] = (float(e["ts"]), float(e["dur"]))
            seen[e["name"]] += 1
    expected = {}
    for (name, k), per_rank in starts.items():
        last = max(ts for ts, _ in per_rank.values())
        for rank, (ts, dur) in per_rank.items():
            expected[(rank, name, k)] = min(max(last - ts, 0.0), dur)
    calls = co.collective_calls(dlrm)
    assert len(calls) == len(expected) == 64
    assert (calls["matched_ranks"] == 8).all() and (calls["group_size"] == 8).all()
    got = {(int(r.rank), r.name, int(r.seq)): r.skew_us for r in calls.itertuples()}
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-6), key
    assert np.allclose(calls["skew_us"] + calls["transfer_us"], calls["dur_us"])
    # the last rank to arrive at each collective waits for nobody
    assert (calls.groupby(["name", "seq"])["skew_us"].min() == 0).all()


def test_dlrm_table_sums_the_calls(dlrm) -> None:
    table = co.collective_table(dlrm)
    calls = co.collective_calls(dlrm)
    assert set(table["collective"]) == {"all_reduce", "send_recv"}
    assert table["count"].sum() == len(calls)
    assert table["time_us"].sum() == pytest.approx(calls["dur_us"].sum())
    assert table["skew_us"].sum() == pytest.approx(calls["skew_us"].sum())
    assert table["bytes"].isna().all() and table["algbw_gbps"].isna().all()  # no message sizes recorded
    assert table.attrs == {"ranks": 8, "matched": True}
    by_rank = co.collective_skew_by_rank(dlrm)
    assert list(by_rank["rank"]) == list(range(8))
    assert ((by_rank["skew_share"] >= 0) & (by_rank["skew_share"] <= 1)).all()


def test_single_rank_with_args_gives_bytes_and_bandwidth_without_skew() -> None:
    path = REAL / "nccl_data.json.gz"
    profile = popprof.open(path, with_args=True)
    sizes: dict[tuple[str, float], list[float]] = defaultdict(list)  # (collective, bytes) -> durations
    groups = set()
    for e in _raw_kernels(path):
        args = e["args"]
        size = max(args["In msg nelems"], args["Out msg nelems"]) * ELEMENT[args["dtype"]]
        sizes[(co.collective_kind(args["Collective name"]), float(size))].append(float(e["dur"]))
        groups.add(args["Group size"])
    assert groups == {2}
    table = co.collective_table(profile)
    assert table.attrs == {"ranks": 1, "matched": False}
    assert (table["skew_us"] == 0).all()
    assert len(table) == len(sizes)
    for row in table.itertuples():
        durations = sizes[(row.collective, row.bytes_per_call)]
        assert row.count == len(durations)
        assert row.transfer_us == pytest.approx(sum(durations))
        algbw = row.bytes_per_call * len(durations) / sum(durations) / 1e3
        assert row.algbw_gbps == pytest.approx(algbw)
        factor = 2 * (2 - 1) / 2 if row.collective == "all_reduce" else 1.0
        assert row.busbw_gbps == pytest.approx(algbw * factor)
    # read without args: the same time, no sizes
    plain = co.collective_table(popprof.open(path))
    assert plain["time_us"].sum() == pytest.approx(table["time_us"].sum())
    assert plain["bytes"].isna().all()


def test_all_gather_uses_the_output_size_and_group_of_eight() -> None:
    path = REAL / "tracelens_b200_vllm_eager.json.gz"
    (kernel,) = [e for e in _raw_kernels(path) if "AllGather" in e["name"]]
    args = kernel["args"]
    table = co.collective_table(popprof.open(path, with_args=True))
    row = table[table["collective"] == "all_gather"].iloc[0]
    assert row.bytes_per_call == args["Out msg nelems"] * 2  # BFloat16, the gathered buffer
    algbw = row.bytes_per_call / kernel["dur"] / 1e3
    assert row.algbw_gbps == pytest.approx(algbw)
    assert row.busbw_gbps == pytest.approx(algbw * 7 / 8)


def test_no_collectives_gives_an_empty_table() -> None:
    table = co.collective_table(popprof.open(REAL / "amd_mi250_minitoy.json.gz"))
    assert table.empty and list(table.columns) == co.TABLE_COLUMNS


def test_summary_json_has_collectives_per_type() -> None:
    """``popprof summary --format json``'s document (the facade's, same builder): per collective type the
    figures; with args the bytes and bandwidths, and a single rank says its skew is not measured."""
    doc = popprof.summary(popprof.open(REAL / "nccl_data.json.gz", with_args=True))
    section = doc["collectives"]
    assert section["ranks"] == 1 and section["skew"].startswith("not measured")
    table = co.collective_table(popprof.open(REAL / "nccl_data.json.gz", with_args=True))
    (row,) = [r for r in section["by_type"] if r["collective"] == "all_reduce"]
    mine = table[table["collective"] == "all_reduce"]
    assert row["count"] == mine["count"].sum() == 15
    assert row["bytes"] == pytest.approx(mine["bytes"].sum())
    assert row["algbw_gbps"] == pytest.approx(mine["bytes"].sum() / mine["transfer_us"].sum() / 1e3)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"])  # all_reduce on 2 ranks: 2(n-1)/n = 1
    assert set(row) == {"collective", "count", "time_us", "skew_us", "transfer_us", "bytes", "algbw_gbps",
                        "busbw_gbps"}  # fmt: skip
    multi = popprof.summary(popprof.open(REAL / "dlrm_8ranks"))["collectives"]
    assert multi["ranks"] == 8 and multi["skew"] == "measured across ranks"
    assert "bytes" in multi and all(r["bytes"] is None for r in multi["by_type"])
    assert "collectives" not in popprof.summary(popprof.open(REAL / "amd_mi250_minitoy.json.gz"))


#: C++ type names of ``Input type`` in these traces -> element bytes.
CPP = {"float": 4, "long int": 8, "int": 4}


def _host_op_bytes(path: Path) -> dict[int, tuple[str, float]]:
    """kernel correlation id -> (collective, bytes) read by hand: the kernel's launch call (same
    correlation) lies inside a ``nccl:<collective>`` op on its thread, whose Input Dims and Input type
    give the input tensor."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    ops = [e for e in events if str(e.get("name", "")).startswith("nccl:") and e.get("ph") == "X"]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    out = {}
    for kernel in _raw_kernels(path):
        call = launches[kernel["args"]["correlation"]]
        around = [
            o
            for o in ops
            if o["tid"] == call["tid"]
            and o["ts"] <= call["ts"]
            and call["ts"] + call["dur"] <= o["ts"] + o["dur"]
        ]
        op = max(around, key=lambda o: o["ts"])  # the innermost
        count = float(np.prod(op["args"]["Input Dims"][0]))
        out[kernel["args"]["correlation"]] = (
            op["name"][len("nccl:") :],
            count * CPP[op["args"]["Input type"][0]],
        )
    return out


def test_older_traces_take_sizes_from_the_nccl_host_op() -> None:
    """PyTorch before 2.2 writes no sizes on the kernel: the DLRM run's come from its nccl:* host ops."""
    profile = popprof.open(REAL / "dlrm_8ranks", with_args=True)
    calls = co.collective_calls(profile)
    events = profile.events
    kernels = events[events["device_category"] == "exchange"]
    assert len(calls) == len(kernels) == 64
    for rank in (0, 7):
        expected = _host_op_bytes(REAL / "dlrm_8ranks" / f"rank-{rank}.json.gz")
        mine = kernels[kernels["rank"] == rank].sort_values("start_us")
        got = calls[calls["rank"] == rank].sort_values("start_us")
        for correlation, size, kind in zip(mine["correlation"], got["bytes"], got["collective"], strict=True):
            op, expected_size = expected[int(correlation)]
            assert size == expected_size and kind == co.collective_kind(op)
    table = co.collective_table(profile)
    assert set(table["collective"]) == {"all_reduce", "all_to_all"}
    row = table[table["bytes_per_call"] == 394_241 * 4].iloc[0]  # the all_reduce of 394,241 floats
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 2 * 7 / 8)
    # the sizes change nothing of the skew
    assert calls["skew_us"].sum() == pytest.approx(
        co.collective_calls(popprof.open(REAL / "dlrm_8ranks"))["skew_us"].sum()
    )


def test_calls_paired_by_order_that_are_not_one_collective_are_not_compared() -> None:
    """HTA's two_ranks is a sample (trace_filter): kernels are left out, so the k-th SendRecv of one rank is
    not always the other's; with the host ops' types and sizes those pairs are seen and stand alone."""
    calls = co.collective_calls(popprof.open(REAL / "two_ranks", with_args=True))
    paired = calls[calls["matched_ranks"] > 1]
    assert 0 < len(paired) < len(calls)
    for _, group in paired.groupby(["name", "group", "seq"]):
        assert group["collective"].nunique() == 1
        if group["collective"].iloc[0] in co.EQUAL_SIZE:
            assert group["bytes"].nunique() == 1
    alone = calls[calls["matched_ranks"] == 1]
    assert (alone["skew_us"] == 0).all()


@pytest.mark.parametrize(("name", "with_args"), [("dlrm_8ranks", False), ("two_ranks", True)])
def test_the_account_communication_splits_into_skew_and_transfer_spans(name: str, with_args: bool) -> None:
    """Per device, the waits for the last rank with no compute beside them (``skew_spans``) and the rest of the
    exposed communication (``transfer_spans``) are disjoint and add up to the time account's communication
    part; ``exposed_exchange_per_device`` gives the same two figures, so the rules' gains read one definition."""
    from popprof.metrics.account import run_account
    from popprof.metrics.phases import exposed_exchange_per_device, transfer_spans
    from popprof.trace.spans import intersect_intervals

    profile = popprof.open(REAL / name, with_args=with_args)
    skew, transfer = co.skew_spans(profile), transfer_spans(profile)
    per_device = exposed_exchange_per_device(profile).set_index("label")
    accounted = run_account(profile)
    assert skew  # both runs wait for a last rank somewhere
    for row in accounted.itertuples():
        label = f"rank {row.rank} {row.device}"
        waited = float(np.subtract(*skew[label][::-1]).sum()) if label in skew else 0.0
        moved = float(np.subtract(*transfer[label][::-1]).sum())
        assert waited + moved == pytest.approx(row.communication, abs=1e-6)
        assert per_device.loc[label, "skew_us"] == pytest.approx(waited)
        assert per_device.loc[label, "transfer_us"] == pytest.approx(moved, abs=1e-6)
        if label in skew:
            both = intersect_intervals(*skew[label], *transfer[label])
            assert float(np.subtract(*both[::-1]).sum()) == 0.0
    # the skew the devices spent in nothing else is at most the calls' skew (the rest ran beside compute)
    total = sum(float(np.subtract(*spans[::-1]).sum()) for spans in skew.values())
    assert total <= co.collective_calls(profile)["skew_us"].sum() + 1e-6


def test_a_single_rank_has_no_skew_spans() -> None:
    """One rank's collectives are matched with nobody: no skew is measured, all its communication is transfer."""
    assert co.skew_spans(popprof.open(REAL / "nccl_data.json.gz")) == {}


def test_the_skew_is_tracelens_wait_time_on_the_real_8_rank_run() -> None:
    """AMD TraceLens's NcclAnalyser (commit in the JSON; ``make_tracelens_collectives.py``) gives, per collective
    of the DLRM step and per rank, the wait for the last rank to start it: popprof's ``skew_us`` of that call
    (clipped to the call's duration, which no wait here reaches), its largest per collective TraceLens's "skew
    in start time", and the sum over calls and ranks (46.843 ms) the collective skew's figure."""
    reference = json.loads((REAL / "tracelens_collectives_reference.json").read_text())
    assert reference["commit"] == "171dd74721ca1ec45709e5805b68ae1f65e27811"
    calls = co.collective_calls(popprof.open(REAL / reference["run"]))
    by_start = calls.set_index(["rank", "start_us"])
    total = 0.0
    for collective in reference["collectives"]:
        ours = []
        for rank, tl in collective["ranks"].items():
            row = by_start.loc[(int(rank), tl["ts"])]
            assert row["dur_us"] == tl["dur"]
            assert row["skew_us"] == pytest.approx(min(max(tl["wait_time"], 0.0), tl["dur"]))
            ours.append(row["skew_us"])
            total += tl["wait_time"]
        assert max(ours) == pytest.approx(collective["skew_in_start_time"])
        assert np.mean(ours) == pytest.approx(collective["avg_wait_time"])
    assert len(reference["collectives"]) == 8 and len(calls) == 64
    assert calls["skew_us"].sum() == pytest.approx(total) == pytest.approx(46_843.0)


def test_a_trace_of_one_rank_of_a_larger_run_says_its_waits_are_unmeasured() -> None:
    """Kineto's distributedInfo names the run's world size: nccl_data is rank 0 of 2, the B200 decode rank 0 of
    8. Their collectives' waits for the other ranks cannot be measured from one rank: the summary's skew line
    and the exchange rules say so, and ask for every rank's trace; a directory of all ranks does not."""
    from popprof.rules import check

    nccl = popprof.open(REAL / "nccl_data.json.gz")
    assert co.world_size_unseen(nccl) == 2
    assert co.world_size_unseen(popprof.open(REAL / "tracelens_b200_vllm_eager.json.gz")) == 8
    dlrm = popprof.open(REAL / "dlrm_8ranks")
    assert co.world_size_unseen(dlrm) is None
    assert co.collectives_section(nccl)["skew"].endswith(
        "; the run had 2 ranks (distributedInfo): open every rank's trace together"
    )
    (share,) = check(nccl, rules=["exchange.share"]).items
    assert "the trace holds 1 of the run's 2 ranks (distributedInfo)" in share.message
    (share,) = check(dlrm, rules=["exchange.share"]).items
    assert "distributedInfo" not in share.message
    # a single-GPU run (no collectives) says nothing of ranks
    assert co.world_size_unseen(popprof.open(REAL / "tracelens_mi300x_sglang_decode.json.gz")) is None
