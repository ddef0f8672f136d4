"""popprof's per-device figures against HolisticTraceAnalysis's on real Kineto traces.

The reference figures were computed with HTA itself (``fixtures/real/traces/make_hta_reference.py``,
HTA version recorded in the JSON); HTA is not needed here. Acceptance: within 0.5 percentage points
for every trace and rank.
"""

from __future__ import annotations

import json
from pathlib import Path

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


@pytest.mark.parametrize(("run", "rank"), CASES)
def test_idle_time_by_cause_matches_hta(profiles, run: str, rank: str) -> None:
    hta = REFERENCE["runs"][run]["ranks"][rank]["idle_by_stream"]
    frame = devices.idle_breakdown(profiles[run])
    frame = frame[frame["rank"].fillna(0).astype(int) == int(rank)]
    ours = {
        (int(s), c): t
        for s, c, t in zip(frame["stream"], frame["idle_category"], frame["idle_us"], strict=True)
    }
    theirs = {(r["stream"], r["idle_category"]): r["idle_time_us"] for r in hta}
    assert set(ours) == set(theirs)
    for stream in {s for s, _ in theirs}:
        total = sum(t for (s, _), t in theirs.items() if s == stream)
        for (s, cause), time in theirs.items():
            if s == stream and total > 0:
                assert abs(100 * (ours[(s, cause)] - time) / total) <= TOLERANCE_PP, (stream, cause)


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
