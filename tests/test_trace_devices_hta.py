"""popprof's per-device figures against HolisticTraceAnalysis's on real Kineto traces.

The reference figures were computed with HTA itself (``fixtures/real/traces/make_hta_reference.py``,
HTA version recorded in the JSON); HTA is not needed here. Acceptance: within 0.5 percentage points
for every trace and rank.

One difference is HTA's quirk, not copied (docs/figures.md, "idle causes"): a kernel whose launch call
is not in the trace gets, in HTA, the start of the trace file's first event as its launch time; popprof
never counts its gap as the host not submitting. The idle test applies HTA's rule to those kernels from
the raw files and checks the rest match; another test checks the difference is exactly those gaps.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.metrics import devices

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "hta_reference.json").read_text("utf-8"))
TOLERANCE_PP = 0.5
#: run -> path opened as one profile (a directory of ranks opens with every rank)
PATHS = {
    "two_ranks": REAL / "two_ranks",
    "nccl_data": REAL / "nccl_data.json.gz",
    "amd_mi250_minitoy": REAL / "amd_mi250_minitoy.json.gz",
    "dlrm_8ranks": REAL / "dlrm_8ranks",
    "hta_cuda_event_sync": REAL / "hta_cuda_event_sync.json.gz",
    "hta_mtia_inference": REAL / "hta_mtia_inference.json.gz",
}
CASES = [(run, rank) for run, spec in REFERENCE["runs"].items() for rank in spec["ranks"]]


@pytest.fixture(scope="module")
def profiles() -> dict[str, popprof.Profile]:
    return {run: popprof.open(path) for run, path in PATHS.items()}


def _row(frame: pd.DataFrame, rank: str) -> pd.Series:
    ranks = frame["rank"].fillna(0).astype(int)  # HTA calls a trace without distributedInfo rank 0
    rows = frame[ranks == int(rank)]
    assert len(rows) == 1, f"expected one device for rank {rank}, got {len(rows)}"
    return rows.iloc[0]


def test_reference_records_the_tool_and_version() -> None:
    assert REFERENCE["tool"] == "HolisticTraceAnalysis"
    assert REFERENCE["version"] == "0.5.0"
    assert set(PATHS) == set(REFERENCE["runs"])


@pytest.mark.parametrize(("run", "rank"), CASES)
def test_temporal_breakdown_and_overlap_match_hta(profiles, run: str, rank: str) -> None:
    hta = REFERENCE["runs"][run]["ranks"][rank]
    row = _row(devices.device_breakdown(profiles[run], hta=True), rank)
    assert row["platform"] == "gpu"
    assert row["span_us"] == pytest.approx(hta["kernel_span_us"], rel=1e-3)
    for ours, theirs in (
        ("idle_pct", "idle_pct"),
        ("compute_pct", "compute_pct"),
        ("non_compute_pct", "non_compute_pct"),
    ):
        assert abs(row[ours] - hta[theirs]) <= TOLERANCE_PP, (ours, row[ours], hta[theirs])
    if hta["comm_comp_overlap_pct"] is None:  # no communication kernels: HTA divides 0 by 0
        assert row["comm_comp_overlap_pct"] is None or pd.isna(row["comm_comp_overlap_pct"])
    else:
        assert abs(row["comm_comp_overlap_pct"] - hta["comm_comp_overlap_pct"]) <= TOLERANCE_PP


@pytest.mark.parametrize(("run", "rank"), CASES)
def test_kernel_type_breakdown_matches_hta(profiles, run: str, rank: str) -> None:
    hta = REFERENCE["runs"][run]["ranks"][rank]["kernel_type_us"]
    frame = devices.kernel_breakdown(profiles[run], hta=True)
    ours = frame[frame["rank"].fillna(0).astype(int) == int(rank)].set_index("kernel_type")["time_us"]
    assert set(ours.index) == set(hta)
    total = sum(hta.values())
    for kind, time in hta.items():
        assert abs(100 * (ours[kind] - time) / total) <= TOLERANCE_PP, kind


@pytest.fixture(scope="module")
def first_event_us() -> dict[str, dict[int, float]]:
    """Per run and rank, the start of the trace file's first event (HTA's index 0)."""
    out: dict[str, dict[int, float]] = {}
    for run, spec in REFERENCE["runs"].items():
        out[run] = {}
        for name in spec["files"]:
            with gzip.open(REAL / name, "rt", encoding="utf-8") as handle:
                trace = json.load(handle)
            rank = int(trace.get("distributedInfo", {}).get("rank", 0))
            out[run][rank] = float(trace["traceEvents"][0]["ts"])
    return out


def _hta_idle(gaps: pd.DataFrame, first: float) -> pd.Series:
    """The idle time by (stream, cause) of one rank's gaps, with HTA's launch time for unlaunched kernels: a
    kernel whose correlation id links to no launch call (HTA's ``index_correlation`` 0, the file's first event);
    work without a correlation id (MTIA's ``event_wait``, ``dma_request``) links to nothing in HTA either."""
    unlaunched = gaps["launch_start_us"].isna() & gaps["correlation"].notna() & (first > gaps["prev_end_us"])
    cause = gaps["idle_category"].where(~unlaunched, "host_wait")
    return gaps["gap_us"].fillna(0.0).groupby([gaps["stream"], cause]).sum()


def _ours(frame: pd.DataFrame, rank: str) -> dict[tuple[int, str], float]:
    frame = frame[frame["rank"].fillna(0).astype(int) == int(rank)]
    return {
        (int(s), c): t
        for s, c, t in zip(frame["stream"], frame["idle_category"], frame["idle_us"], strict=True)
    }


@pytest.mark.parametrize(("run", "rank"), CASES)
def test_idle_time_by_cause_matches_hta(profiles, first_event_us, run: str, rank: str) -> None:
    hta = REFERENCE["runs"][run]["ranks"][rank]["idle_by_stream"]
    ours = _ours(devices.idle_breakdown(profiles[run]), rank)
    gaps = devices.idle_gaps(profiles[run])
    gaps = gaps[gaps["rank"].fillna(0).astype(int) == int(rank)]
    as_hta = _hta_idle(gaps, first_event_us[run][int(rank)])
    theirs = {(r["stream"], r["idle_category"]): r["idle_time_us"] for r in hta}
    assert set(ours) == set(theirs)
    for stream in {s for s, _ in theirs}:
        total = sum(t for (s, _), t in theirs.items() if s == stream)
        for (s, cause), time in theirs.items():
            if s == stream and total > 0:
                mine = as_hta.get((s, cause), 0.0)
                assert abs(100 * (mine - time) / total) <= TOLERANCE_PP, (stream, cause)


def test_idle_breakdown_sums_the_idle_gaps(profiles) -> None:
    for run, profile in profiles.items():
        gaps = devices.idle_gaps(profile)
        summed = (
            gaps["gap_us"]
            .fillna(0.0)
            .groupby([gaps["rank"].fillna(-1), gaps["stream"], gaps["idle_category"]])
            .sum()
        )
        frame = devices.idle_breakdown(profile)
        table = frame.assign(rank=frame["rank"].fillna(-1)).set_index(["rank", "stream", "idle_category"])[
            "idle_us"
        ]
        assert table.to_dict() == pytest.approx(summed.to_dict()), run


@pytest.mark.parametrize("rank", ["1", "3"])
def test_kernels_launched_before_the_trace_are_the_whole_difference(profiles, first_event_us, rank) -> None:
    """dlrm_8ranks ranks 1 and 3: 64 kernels on stream 7 were launched before the trace began.

    HTA takes the file's first event (14 ms after them) as their launch, so their gaps count as host
    wait; popprof counts them as kernel wait / other. The difference is exactly those gaps.
    """
    hta = REFERENCE["runs"]["dlrm_8ranks"]["ranks"][rank]["idle_by_stream"]
    theirs = {r["idle_category"]: r["idle_time_us"] for r in hta if r["stream"] == 7}
    ours = {
        c: t for (s, c), t in _ours(devices.idle_breakdown(profiles["dlrm_8ranks"]), rank).items() if s == 7
    }
    gaps = devices.idle_gaps(profiles["dlrm_8ranks"])
    gaps = gaps[(gaps["rank"] == int(rank)) & (gaps["stream"] == 7)]
    unlaunched = gaps[gaps["launch_start_us"].isna()]
    assert len(unlaunched) == 64
    assert (unlaunched["idle_category"] != "host_wait").all()
    assert (first_event_us["dlrm_8ranks"][int(rank)] > unlaunched["prev_end_us"].dropna()).all()
    moved = unlaunched["gap_us"].fillna(0.0).groupby(unlaunched["idle_category"]).sum()
    assert moved.sum() > 0
    assert theirs["host_wait"] - ours["host_wait"] == pytest.approx(moved.sum(), abs=1e-6)
    for cause in ("kernel_wait", "other"):
        assert ours[cause] - theirs[cause] == pytest.approx(moved.get(cause, 0.0), abs=1e-6)
    if rank == "1":  # the case that fails the 0.5-point acceptance without the rule
        total = sum(theirs.values())
        assert 100 * moved.sum() / total > TOLERANCE_PP


@pytest.mark.parametrize(("run", "rank"), [c for c in CASES if c[0] != "amd_mi250_minitoy"])
def test_launch_delays_match_hta(profiles, run: str, rank: str) -> None:
    hta = REFERENCE["runs"][run]["ranks"][rank]["launch"]
    frame = devices.launch_delays(profiles[run])
    frame = frame[frame["rank"].fillna(0).astype(int) == int(rank)]
    assert len(frame) == hta["count"]
    assert frame["launch_delay_us"].sum() == pytest.approx(hta["launch_delay_sum_us"], rel=1e-3)
    assert frame["cpu_duration_us"].sum() == pytest.approx(hta["cpu_duration_sum_us"], rel=1e-3)
    assert frame["gpu_duration_us"].sum() == pytest.approx(hta["gpu_duration_sum_us"], rel=1e-3)


def test_hip_launches_are_correlated_where_hta_has_no_names_for_them(profiles) -> None:
    """HTA knows only CUDA launch calls; popprof also pairs hipLaunchKernel & co with their kernels."""
    frame = devices.launch_delays(profiles["amd_mi250_minitoy"])
    assert REFERENCE["runs"]["amd_mi250_minitoy"]["ranks"]["0"]["launch"]["count"] == 0
    assert len(frame) > 0 and set(frame["launch"]) <= set(devices.LAUNCH_CALLS)
    assert (frame["launch_delay_us"] >= 0).all()


def test_host_sync_calls_are_host_waits_not_device_time(profiles) -> None:
    """cudaStreamWaitEvent / hipDeviceSynchronize are host events marked host_wait, never GPU work."""
    for run in ("nccl_data", "amd_mi250_minitoy"):
        events = profiles[run].events
        waits = events[events["device_category"] == "host_wait"]
        assert len(waits) > 0
        assert waits["stream"].isna().all() and waits["device"].isna().all()
        row = devices.device_breakdown(profiles[run]).iloc[0]
        assert row["host_wait_pct"] > 0


def test_cpu_only_trace_has_no_device_rows() -> None:
    profile = popprof.open(REAL / "cpu_only_rank-34.json.gz")
    assert devices.device_breakdown(profile).empty
    assert profile.events["rank"].unique().tolist() == [34]


def _host_ops_with_a_stream(path: Path) -> list[tuple[float, float]]:
    """HTA-rounded (ceil start, floor end) of the file's host events whose args name a stream."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        events = json.load(handle)["traceEvents"]
    gpu = {"kernel", "gpu_memcpy", "gpu_memset"}
    return [
        (math.ceil(e["ts"]), math.floor(e["ts"] + e["dur"]))
        for e in events
        if e.get("ph") == "X" and e.get("cat") not in gpu and "stream" in e.get("args", {})
    ]


def _negative_hta_gaps(profile) -> np.ndarray:
    """HTA's gaps below zero: each kernel, memcpy or memset's start minus the end of the one before it on its
    stream (by start), where it started first."""
    work = devices.device_work(profile)
    work = work[work["channel"].isin(devices.KERNEL_CHANNELS).to_numpy()]
    codes = np.asarray(work["device"].array.codes)
    order = np.lexsort((work["start"].to_numpy(), work["stream"].to_numpy(), codes, work["rank"].to_numpy()))
    stream, start, end = (work[c].to_numpy()[order] for c in ("stream", "start", "end"))
    gap = start[1:] - end[:-1]
    return gap[(stream[1:] == stream[:-1]) & (gap < 0)]


def test_a_host_op_with_a_stream_arg_is_gpu_work_to_hta() -> None:
    """tracelens_b200_vllm_eager: a Triton launcher ``cpu_op`` carries ``args.stream`` 0.

    HTA's temporal and kernel-type breakdowns take every event with a stream for GPU work, so that
    host op becomes a COMPUTATION kernel on stream 0; popprof keeps it on the host. HTA's compute time
    is larger, and its idle time smaller, by exactly the op's time outside the GPU work it overlaps;
    every other figure is equal (docs/figures.md, "what HTA counts as a kernel").
    """
    run = REFERENCE["quirk_runs"]["tracelens_b200_vllm_eager"]
    hta = run["ranks"]["0"]
    path = REAL / run["files"][0]
    profile = popprof.open(path)
    [(lo, hi)] = _host_ops_with_a_stream(path)
    work = profile.events[profile.events["stream"].notna()]
    starts = np.ceil(work["start_us"].to_numpy())
    ends = np.floor((work["start_us"] + work["dur_us"]).to_numpy())
    inside = (starts < hi) & (ends > lo)
    covered = np.zeros(hi - lo, dtype=bool)  # 1-us cells of the op covered by GPU work
    for start, end in zip(starts[inside], ends[inside], strict=True):
        covered[int(max(start, lo) - lo) : int(min(end, hi) - lo)] = True
    added = (hi - lo) - int(covered.sum())
    assert added > 0
    row = _row(devices.device_breakdown(profile, hta=True), "0")
    assert row["span_us"] == hta["kernel_span_us"]
    assert hta["compute_us"] - row["compute_us"] == added
    assert row["idle_us"] - hta["idle_us"] == added
    assert row["non_compute_us"] == hta["non_compute_us"]
    kinds = devices.kernel_breakdown(profile, hta=True).set_index("kernel_type")["time_us"]
    assert hta["kernel_type_us"]["COMPUTATION"] - kinds["COMPUTATION"] == added
    assert {k: v for k, v in kinds.items() if v and k != "COMPUTATION"} == {
        k: v for k, v in hta["kernel_type_us"].items() if k != "COMPUTATION"
    }
    # the idle breakdown (kernel, memcpy and memset categories only) and the launches are HTA's exactly, but
    # for the 7 kernels that start before the previous one on their stream ends (by 1 to 3 us): HTA sums
    # their negative gaps (-10 us of kernel wait), popprof counts no idle time there (docs/figures.md)
    ours = _ours(devices.idle_breakdown(profile), "0")
    theirs = {(r["stream"], r["idle_category"]): r["idle_time_us"] for r in hta["idle_by_stream"]}
    overlaps = _negative_hta_gaps(profile)
    assert len(overlaps) == 7
    assert ours == {**theirs, (7, "kernel_wait"): theirs[(7, "kernel_wait")] - overlaps.sum()}
    launches = devices.launch_delays(profile)
    assert len(launches) == hta["launch"]["count"]
    assert launches["launch_delay_us"].sum() == hta["launch"]["launch_delay_sum_us"]


@pytest.mark.parametrize("run", sorted(PATHS))
def test_gpu_work_times_are_hta_rounded_per_rank(run: str) -> None:
    """Every work item's start rounded up and end rounded down to whole microseconds on a rank whose
    events have fractional times (HTA's rounding, taken row by row from the events), unchanged elsewhere."""
    from popprof.trace.gpu_work import gpu_work

    events = popprof.open(PATHS[run]).events
    work = gpu_work(events, include_last_step=True)
    rank = events["rank"].fillna(-1).to_numpy(dtype=np.int64)
    start = events["start_us"].to_numpy(dtype=np.float64)
    end = start + events["dur_us"].fillna(0.0).to_numpy(dtype=np.float64)
    rounds = {int(r): bool((start[rank == r] % 1 != 0).any()) for r in np.unique(rank)}
    rows = events["stream"].notna().to_numpy() & ~events["bookkeeping"].to_numpy(dtype=bool, na_value=False)
    rows &= (events["stream"] != -1).to_numpy(dtype=bool, na_value=True)  # stream -1: no stream, as in HTA
    for r, fractional in rounds.items():
        mine = rows & (rank == r)
        expected_start = np.ceil(start[mine]) if fractional else start[mine]
        expected_end = np.floor(end[mine]) if fractional else end[mine]
        got = work[work["rank"] == r]
        np.testing.assert_array_equal(np.sort(got["start"].to_numpy()), np.sort(expected_start))
        np.testing.assert_array_equal(np.sort(got["end"].to_numpy()), np.sort(expected_end))
