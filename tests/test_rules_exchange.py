"""Exchange rules: windows, bands and merged phases over steps and over a GPU-style trace."""

from __future__ import annotations

import pandas as pd
import pytest

from popprof.model.profile import Profile
from popprof.rules import check
from popprof.testing.synth import make_profile

TYPE_OF = {
    "compute": "OnTileExecute",
    "exchange": "DoExchange",
    "global_exchange": "GlobalExchange",
    "sync": "Sync",
    "host_io": "StreamCopyMid",
}


def steps_profile(rows: list[tuple[str, int]], ipus: int = 1, clock: float = 1e9) -> Profile:
    """One step per (category, cycles) row, repeated on each IPU with the same cycles."""
    data = []
    for step, (category, cycles) in enumerate(rows):
        for ipu in range(ipus):
            data.append(
                {
                    "run": 0,
                    "step": step,
                    "ipu": ipu,
                    "program": f"{category}/prog_{step % 3}",
                    "program_type": TYPE_OF[category],
                    "category": category,
                    "cycles": cycles,
                }
            )
    target = pd.DataFrame({"num_ipus": [ipus], "clock_hz": [clock]})
    return Profile("steps", {"steps": pd.DataFrame(data), "target": target})


def window(exchange_steps: int, size: int = 10, category: str = "exchange") -> list[tuple[str, int]]:
    return [(category, 100)] * exchange_steps + [("compute", 100)] * (size - exchange_steps)


def phases(profile: Profile, **params):
    params = {f"exchange.phases.{k}": v for k, v in {"window": 10, **params}.items()}
    return check(profile, rules=["exchange.phases"], params=params)


def test_a_phase_whose_share_is_moderate_is_a_warning_even_with_a_high_window():
    # windows of 60 % and 30 % make one phase of 45 %: a warning (the figure shown), not an error
    found = phases(steps_profile(window(6) + window(3)))
    assert [f.severity for f in found] == ["warning"] and found.items[0].value == pytest.approx(0.45)


def test_window_exactly_at_moderate_threshold_is_a_warning():
    found = phases(steps_profile(window(3) + window(0)))
    assert [f.severity for f in found] == ["warning"]
    f = found.items[0]
    assert f.where["steps"] == (0, 9)
    assert f.value == pytest.approx(0.30) and f.threshold == 0.30


def test_window_just_below_moderate_is_not_flagged():
    rows = [("exchange", 100)] * 3 + [("compute", 100)] * 6 + [("compute", 101)]  # 300 / 1001
    assert len(phases(steps_profile(rows))) == 0


def test_adjacent_windows_merge_into_phases_listed_in_one_finding():
    rows = (
        window(0) + window(5) + window(3, category="sync") + window(0) + window(6, category="global_exchange")
    )
    found = phases(steps_profile(rows))
    (f,) = found.items  # one finding for the problem, listing its phases
    assert f.where["phases"] == [(10, 29), (40, 49)]
    # phase shares: (500 + 300) / 2000 = 40 % and 60 %; the band comes from the worst figure shown (60 %), held
    # to what the phases hold of the run: (500 + 300 + 600) / 5000 = 28 % of the IPU-cycles, a warning (< 30 %)
    assert f.severity == "warning" and f.value == pytest.approx(0.60) and f.where["steps"] == (40, 49)
    assert f.threshold == 0.30 and f.share == pytest.approx(0.28)
    assert "steps 10-29 (2 windows): 40.0 %" in f.message and "steps 40-49 (1 window): 60.0 %" in f.message
    assert "worst 60.0 % (error at >= 50 %)" in f.message
    assert "the phases hold 28.0 % of all IPU-cycles, so warning (warning at >= 10 % of it" in f.message
    assert f.where["programs"][0].startswith(("exchange/", "sync/"))
    windows = f.evidence
    assert list(windows["band"]) == ["none", "high", "moderate", "none", "high"]
    assert list(windows["phase"]) == [-1, 0, 0, -1, 1]


def test_dominant_programs_rank_by_exchange_cycles():
    rows = [("exchange", 100), ("exchange", 500), ("compute", 100), ("exchange", 200)] + [("compute", 50)] * 6
    f = phases(steps_profile(rows)).items[0]
    # programs are named by step % 3: step 1 -> prog_1 (500), step 3 -> prog_0 (100+200), 2 is compute
    assert f.where["programs"] == ["exchange/prog_1", "exchange/prog_0"]


def test_window_parameter_changes_the_resolution():
    rows = window(0) * 4 + window(10)  # one fully exchange window at the end
    assert phases(steps_profile(rows), window=10).items[0].where["steps"] == (40, 49)
    assert len(phases(steps_profile(rows), window=50)) == 0  # 20 % over one window of 50 steps


def test_synthetic_exchange_heavy_phase_is_located():
    profile = make_profile(
        num_steps=4000, num_liveness_steps=50, exchange_heavy=(0.5, 0.6), seed=1, num_ipus=2
    )
    (f,) = phases(profile, window=100).items
    assert f.value >= 0.5  # the worst window's band is an error; what the phases hold of the run decides
    first, last = f.where["steps"]
    assert 1900 <= first <= 2100 and 2300 <= last <= 2500


def test_exchange_share_and_global_share_for_multi_ipu():
    rows = [("global_exchange", 150), ("exchange", 150)] + [("compute", 100)] * 7
    found = check(steps_profile(rows, ipus=2), rules=["exchange.share"])
    f = found.items[0]
    assert f.value == pytest.approx(0.30)
    assert f.severity == "warning"
    assert "global (inter-IPU) exchange 15.0 % over 2 IPUs (warning at >= 15 %)" in f.message
    assert "every IPU at 30.0 %" in f.message and f.where["ipus"] == [0, 1]


def test_exchange_share_names_the_ipu_that_exchanges_most_and_takes_the_deciding_figure():
    steps = steps_profile([("global_exchange", 300), ("compute", 700)], ipus=2)
    table = steps.steps.copy()
    table.loc[(table["ipu"] == 1) & (table["category"] == "compute"), "cycles"] = 2300  # IPU 1: 300 / 2600
    steps.set_table("steps", table)
    (f,) = check(steps, rules=["exchange.share"]).items
    # run-wide 600 / 3600 = 16.7 % (no band) but global exchange 16.7 % >= 15 %: a warning from that figure
    assert f.severity == "warning" and f.value == pytest.approx(600 / 3600) and f.threshold == 0.15
    assert "per IPU from 11.5 % (IPU 1) to 30.0 % (IPU 0)" in f.message and f.where["ipus"] == [0]


def test_exchange_share_single_ipu_below_threshold_is_info():
    found = check(steps_profile(window(2)), rules=["exchange.share"])
    assert [f.severity for f in found] == ["info"]
    assert "inter-IPU" not in found.items[0].message


def test_no_execution_profile_means_not_evaluated():
    profile = make_profile(execution=False, num_liveness_steps=50)
    found = check(profile)
    reasons = dict(found.not_evaluated)
    for rule_id in ("exchange.phases", "exchange.share", "host.stream-copy"):
        assert "execution profile" in reasons[rule_id]
    assert "memory.headroom" in found.evaluated


# -- traces ----------------------------------------------------------------


def trace_profile(device: list[tuple[str, str, float, float]], host: list[tuple] = ()) -> Profile:
    """Device events (name, category, start, dur) on pid 0; host events (name, start, dur) on pid 1."""
    rows = [
        {"pid": 0, "tid": 7, "depth": 0, "name": n, "device_category": c, "start_us": s, "dur_us": d}
        for n, c, s, d in device
    ]
    rows += [
        {"pid": 1, "tid": 1, "depth": 0, "name": n, "device_category": None, "start_us": s, "dur_us": d}
        for n, s, d in host
    ]
    frame = pd.DataFrame(rows)
    frame.insert(0, "event_id", range(len(frame)))
    return Profile("trace", {"events": frame})


def test_trace_phases_in_time():
    device = [("gemm", "compute", t, 100.0) for t in range(0, 1000, 100)]
    device += [("nccl_allreduce", "exchange", 1000.0, 60.0), ("gemm", "compute", 1060.0, 40.0)]
    device += [("gemm", "compute", t, 100.0) for t in range(1100, 2000, 100)]
    found = phases(trace_profile(device), window_us=100.0)
    assert len(found) == 1
    f = found.items[0]
    # 60 % of its window, but 60 us of a 2 ms span (3 %): info, with the figures
    assert f.severity == "info" and f.value == pytest.approx(0.6) and f.threshold is None
    assert f.share == pytest.approx(0.03)
    assert "worst 60.0 % (error at >= 50 %)" in f.message and "the phases hold 3.0 % of" in f.message
    assert ", so info (warning at >= 10 % of it, error at >= 30 %)" in f.message
    assert f.where["time_us"] == (1000.0, 1100.0)
    assert f.where["programs"] == ["nccl_allreduce"]


@pytest.mark.parametrize(
    ("exchange_us", "severity", "threshold"),
    [(100.0, "info", None), (300.0, "warning", 0.30), (700.0, "error", 0.50)],
)
def test_trace_phases_held_to_what_they_hold_of_the_span(exchange_us, severity, threshold):
    """Exchange-only windows (an error by their band) that hold 5 %, 15 % and 35 % of a 2 ms span: info,
    warning, error (``span_warning`` 10 %, ``span_error`` 30 %)."""
    start = 1000.0
    device = [("gemm", "compute", float(t), 100.0) for t in range(0, 1000, 100)]
    device += [("nccl_allreduce", "exchange", start, exchange_us)]
    device += [("gemm", "compute", float(t), 100.0) for t in range(int(start + exchange_us), 2000, 100)]
    (f,) = phases(trace_profile(device), window_us=100.0).items
    assert f.value == pytest.approx(1.0) and "worst 100.0 % (error at >= 50 %)" in f.message
    assert (
        f.share == pytest.approx(exchange_us / 2000) and f.severity == severity and f.threshold == threshold
    )
    assert ("so " + severity in f.message) == (severity != "error")


def test_trace_phases_stake_thresholds_are_parameters():
    device = [("gemm", "compute", float(t), 100.0) for t in range(0, 1000, 100)]
    device += [("nccl_allreduce", "exchange", 1000.0, 60.0), ("gemm", "compute", 1060.0, 40.0)]
    device += [("gemm", "compute", float(t), 100.0) for t in range(1100, 2000, 100)]
    (f,) = phases(trace_profile(device), window_us=100.0, span_warning=0.0, span_error=0.0).items
    assert f.severity == "error" and f.threshold == 0.50 and "so " not in f.message


def test_trace_exchange_share():
    device = [("k", "compute", 0.0, 70.0), ("copy", "exchange", 70.0, 20.0), ("barrier", "sync", 90.0, 10.0)]
    f = check(trace_profile(device), rules=["exchange.share"]).items[0]
    assert f.value == pytest.approx(0.30) and f.severity == "warning"


def test_trace_without_device_activity_is_not_evaluated():
    profile = trace_profile([], host=[("step", 0.0, 100.0), ("load", 100.0, 50.0)])
    found = check(profile)
    reasons = dict(found.not_evaluated)
    for rule_id in ("exchange.phases", "exchange.share", "host.device-gaps", "host.long-events"):
        assert "device activity" in reasons[rule_id], reasons
    assert found.items == []


def test_steps_without_cycles_are_not_evaluated_rather_than_passed():
    profile = steps_profile(window(8) + window(0))
    steps = profile.steps.copy()
    steps["cycles"] = pd.array([pd.NA] * len(steps), dtype="Int64")
    profile.set_table("steps", steps)
    found = check(
        profile,
        rules=["exchange.phases", "exchange.share", "host.stream-copy"],
        params={"exchange.phases.window": 10},
    )
    reasons = dict(found.not_evaluated)
    assert set(reasons) == {"exchange.phases", "exchange.share", "host.stream-copy"}
    assert all("cycles" in why for why in reasons.values()) and found.evaluated == []


def test_trace_is_used_when_the_steps_have_no_cycles():
    """A profile with cycle-less steps and a device trace: the exchange rules run on the trace."""
    device = [("k", "compute", 0.0, 70.0), ("copy", "exchange", 70.0, 20.0), ("barrier", "sync", 90.0, 10.0)]
    profile = trace_profile(device)
    blind = steps_profile(window(8))
    steps = blind.steps.copy()
    steps["cycles"] = pd.array([pd.NA] * len(steps), dtype="Int64")
    profile.set_table("steps", steps)
    found = check(
        profile, rules=["exchange.phases", "exchange.share"], params={"exchange.phases.window_us": 50.0}
    )
    assert found.not_evaluated == [] and set(found.evaluated) == {"exchange.phases", "exchange.share"}
    (share,) = found.by_rule("exchange.share")
    assert share.value == pytest.approx(0.30) and "device busy time in the trace" in share.message
    (phase,) = found.by_rule("exchange.phases")
    assert phase.where["time_us"] == (50.0, 100.0) and phase.value == pytest.approx(0.6)


def test_max_phases_below_one_is_not_evaluated():
    found = phases(steps_profile(window(8) + window(0) + window(9)), max_phases=0)
    assert (
        found.items == [] and "max_phases must be at least 1" in dict(found.not_evaluated)["exchange.phases"]
    )
    one = phases(steps_profile(window(8) + window(0) + window(9)), max_phases=1)
    assert len(one) == 1 and "1 smaller phase not listed" in one.items[0].message
    assert one.items[0].where["phases"] == [(20, 29)]  # the phase with the most exchange cycles


def test_gpu_communication_findings_say_when_it_is_mostly_skew():
    """On the real 8-rank DLRM step 96.5 % of the collective time is ranks waiting for the last one: both
    communication findings say so and point to the rank the others wait for; on HTA's two ranks (13 % skew)
    they do not."""
    from pathlib import Path

    import popprof
    from popprof.rules import check

    traces = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
    dlrm = check(popprof.open(traces / "dlrm_8ranks"), rules=["exchange.phases", "exchange.share"])
    for finding in dlrm.items:
        assert "96.5 % of the ranks' collective time is synchronisation skew" in finding.message
        assert "distributed.stragglers" in finding.message
    two = check(popprof.open(traces / "two_ranks"), rules=["exchange.phases", "exchange.share"])
    assert two.items and not any("synchronisation skew" in f.message for f in two.items)


def test_gpu_phases_name_their_kernels_by_the_callable_alone():
    """A sentence names a kernel by its callable (io.names.kernel_words, as host.launch-overhead does): on the
    real DLRM step the phases said "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long,
    ncclWork*)" five times; ``where`` keeps the full signatures for tools."""
    from pathlib import Path

    import popprof
    from popprof.rules import check

    traces = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
    (finding,) = check(popprof.open(traces / "dlrm_8ranks"), rules=["exchange.phases"]).items
    assert "(ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t 2.15 ms)" in finding.message
    assert "ncclDevComm*" not in finding.message
    full = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    assert full in finding.where["programs"]
