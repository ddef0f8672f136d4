"""Host-stall rules: stream-copy share, device-idle gaps with host attribution, long host events."""

from __future__ import annotations

import pandas as pd
import pytest

from popprof.model.profile import Profile
from popprof.rules import check
from popprof.testing.synth import make_profile


def stream_profile(host_io: int, compute: int) -> Profile:
    steps = pd.DataFrame(
        {
            "run": 0,
            "step": [0, 1, 2],
            "ipu": 0,
            "program": ["input/StreamCopy", "layer/MatMul", "output/StreamCopy"],
            "program_type": ["StreamCopyMid", "OnTileExecute", "StreamCopyEnd"],
            "category": ["host_io", "compute", "host_io"],
            "cycles": [host_io - host_io // 4, compute, host_io // 4],
        }
    )
    return Profile("io", {"steps": steps})


def test_stream_copy_bands_and_boundaries():
    found = check(stream_profile(5, 95), rules=["host.stream-copy"])  # exactly 5 %
    assert [f.severity for f in found] == ["warning"]
    assert found.items[0].value == pytest.approx(0.05)
    assert len(check(stream_profile(5, 96), rules=["host.stream-copy"])) == 0
    f = check(stream_profile(200, 800), rules=["host.stream-copy"]).items[0]
    assert f.severity == "error" and f.threshold == 0.20
    assert f.where["programs"] == ["input/StreamCopy", "output/StreamCopy"]
    assert "host stream copies take 20.0 % of all IPU-cycles (error at >= 20 %)" in f.message


def test_synthetic_host_stall_phase_raises_stream_copy_share():
    calm = make_profile(num_steps=3000, num_liveness_steps=50, host_stall=None, seed=2)
    stalled = make_profile(num_steps=3000, num_liveness_steps=50, host_stall=(0.2, 0.5), seed=2)
    calm_f = check(calm, rules=["host.stream-copy"], params={"host.stream-copy.warning": 0.0})
    stall_f = check(stalled, rules=["host.stream-copy"], params={"host.stream-copy.warning": 0.0})
    assert stall_f.items[0].value > 2 * calm_f.items[0].value
    assert stall_f.items[0].severity == "error"


# -- traces ----------------------------------------------------------------


def trace(device, host, threads=True) -> Profile:
    """device: (name, category, start, dur); host: (event_id, parent, depth, tid, name, start, dur)."""
    rows = [
        {
            "event_id": 100 + i,
            "pid": 0,
            "tid": 7,
            "parent_id": None,
            "depth": 0,
            "name": n,
            "device_category": c,
            "start_us": s,
            "dur_us": d,
        }
        for i, (n, c, s, d) in enumerate(device)
    ]
    rows += [
        {
            "event_id": eid,
            "pid": 1,
            "tid": tid,
            "parent_id": parent,
            "depth": depth,
            "name": n,
            "device_category": None,
            "start_us": s,
            "dur_us": d,
        }
        for eid, parent, depth, tid, n, s, d in host
    ]
    tables = {"events": pd.DataFrame(rows)}
    if threads:
        tables["threads"] = pd.DataFrame(
            {
                "pid": [1, 1],
                "tid": [1, 2],
                "process_name": ["python"] * 2,
                "thread_name": ["MainThread", "loader"],
            }
        )
    return Profile("trace", tables)


DEVICE = [("k0", "compute", 0.0, 100.0), ("k1", "compute", 200.0, 100.0), ("k2", "compute", 1300.0, 100.0)]
HOST = [
    (1, None, 0, 1, "train_step", 0.0, 1400.0),  # umbrella: named only for its own time in the gap
    (2, 1, 1, 1, "DataLoader.__next__", 300.0, 800.0),  # overlaps the big gap 300-1100 -> 800 us
    (3, None, 0, 2, "fetch_batch", 250.0, 550.0),  # other thread, overlaps 300-800 -> 500 us
    (4, None, 0, 2, "before_run", -5000.0, 4000.0),  # before the device starts
]


def gaps(profile: Profile, **params):
    return check(
        profile, rules=["host.device-gaps"], params={f"host.device-gaps.{k}": v for k, v in params.items()}
    )


def test_device_gap_at_min_length_is_counted_and_attributed():
    found = gaps(trace(DEVICE, HOST), min_gap_us=1000.0)
    f = found.items[0]
    # one gap of exactly 1,000 us (300-1300) in a span of 1,400 us; the 100 us gap is too short
    assert f.value == pytest.approx(1000 / 1400) and f.severity == "error"
    assert f.where["time_us"] == (300.0, 1300.0)
    assert f.where["threads"] == ["MainThread (1)", "loader (2)"]
    # each event for its own time in the gap: the umbrella train_step only for the 200 us no child ran in
    assert "'DataLoader.__next__' (800.0 us), 'fetch_batch' (500.0 us), 'train_step' (200.0 us)" in f.message
    ev = f.evidence
    assert list(ev["dur_us"]) == [1000.0]
    assert ev["top_label"].iloc[0] == "DataLoader.__next__" and ev["top_label_us"].iloc[0] == 800.0
    assert ev["host_thread_us"].iloc[0] == 1000.0 + 500.0  # train_step on main + fetch_batch on loader
    assert ev["top_thread"].iloc[0] == "MainThread (1)"


def test_device_gap_shorter_than_threshold_is_ignored():
    assert len(gaps(trace(DEVICE, HOST), min_gap_us=1000.001)) == 0


def test_device_gaps_share_exactly_at_warning():
    device = [("k", "compute", 0.0, 450.0), ("k", "compute", 550.0, 450.0)]  # one 100 us gap in 1,000 us
    setup = [(1, None, 0, 1, "setup", -5000.0, 1000.0)]  # host work, none of it in the gap
    f = gaps(trace(device, setup), min_gap_us=100.0).items[0]
    assert f.severity == "warning" and f.value == pytest.approx(0.10)
    assert "no host work was recorded during the gaps" in f.message


def test_no_gap_passes_even_with_a_zero_threshold():
    device = [("k", "compute", 0.0, 100.0), ("k", "compute", 100.0, 100.0)]  # back to back: no gap at all
    found = gaps(trace(device, [(1, None, 0, 1, "setup", -5000.0, 1000.0)]), warning=0.0, min_gap_us=0.0)
    assert found.items == [] and found.evaluated == ["host.device-gaps"]
    # a trace of device work alone says nothing of the host: not evaluated
    assert gaps(trace(device, []), warning=0.0, min_gap_us=0.0).evaluated == []


def test_leading_and_trailing_idle_are_excluded():
    device = [("k", "compute", 5000.0, 100.0), ("k", "compute", 5100.0, 100.0)]
    host = [(1, None, 0, 1, "startup", 0.0, 5000.0), (2, None, 0, 1, "shutdown", 5200.0, 9000.0)]
    assert len(gaps(trace(device, host), min_gap_us=1.0)) == 0


def test_nested_device_events_do_not_hide_gaps():
    device = [("step", "compute", 0.0, 100.0), ("k", "compute", 500.0, 100.0)]
    profile = trace(device, [(1, None, 0, 1, "train_step", 0.0, 600.0)])  # a trace with host events
    events = profile.events.copy()
    child = events.iloc[[0]].assign(event_id=999, parent_id=100, depth=1, start_us=10.0, dur_us=50.0)
    profile.set_table("events", pd.concat([events, child], ignore_index=True))
    f = gaps(profile, min_gap_us=400.0).items[0]
    assert f.value == pytest.approx(400 / 600)


# -- host.long-events ---------------------------------------------------------


def long_events(profile: Profile, **params):
    return check(
        profile, rules=["host.long-events"], params={f"host.long-events.{k}": v for k, v in params.items()}
    )


def test_long_host_event_while_device_idles_is_reported_innermost():
    host = HOST + [(5, 2, 2, 1, "collate", 400.0, 700.0)]  # inside DataLoader, also long and idle
    f = long_events(trace(DEVICE, host), min_us=500.0).items[0]
    names = list(f.evidence["name"])
    # collate (700 us, device idle throughout) is reported instead of its parent DataLoader.__next__;
    # fetch_batch idles 500 of 550 us in the span (>= 80 %); train_step and before_run do not qualify.
    assert names == ["collate", "fetch_batch"]
    # device idle 300-1100 during them = 800 / 1400 of the span: the figure shown decides the severity
    assert f.severity == "error" and f.value == pytest.approx(800 / 1400) and f.threshold == 0.30
    assert "= 57.1 % of the device's window (error at >= 30 %)" in f.message
    assert f.where["threads"] == ["MainThread (1)", "loader (2)"]


def test_long_event_boundaries():
    device = [("k", "compute", 0.0, 100.0), ("k", "compute", 10_100.0, 100.0)]
    host = [(1, None, 0, 1, "optimizer.step", 100.0, 10_000.0)]
    found = long_events(trace(device, host))  # exactly 10 ms, fully idle
    assert [f.severity for f in found] == ["error"]  # 10,000 / 10,200 of the span
    assert len(long_events(trace(device, host), min_us=10_000.001)) == 0
    # device busy for 30 % of the event: idle share 70 % < 80 %
    busy = device + [("k", "compute", 100.0, 3000.0)]
    assert len(long_events(trace(busy, host))) == 0
    assert len(long_events(trace(busy, host), idle_share=0.7)) == 1


def test_long_events_warning_level_can_be_raised():
    device = [("k", "compute", 0.0, 100.0), ("k", "compute", 10_100.0, 100.0)]
    host = [(1, None, 0, 1, "optimizer.step", 100.0, 10_000.0)]
    # device idle 10,000 of a 10,200 us span = 98 %: a warning from 0 % up to 98 %, then nothing
    assert [f.severity for f in long_events(trace(device, host), error=1.0, warning=0.98)] == ["warning"]
    assert long_events(trace(device, host), error=1.0, warning=0.99).items == []


def test_long_events_without_thread_table_name_threads_by_ids():
    device = [("k", "compute", 0.0, 100.0), ("k", "compute", 10_100.0, 100.0)]
    host = [(1, None, 0, 1, "optimizer.step", 100.0, 10_000.0)]
    f = long_events(trace(device, host, threads=False)).items[0]
    assert f.where["threads"] == ["1:1"]


def test_events_with_missing_times_are_ignored():
    profile = trace(
        DEVICE + [("bad", "compute", float("nan"), 50.0), ("bad2", "compute", 600.0, float("nan"))],
        HOST + [(9, None, 0, 1, "nan_host", float("nan"), 10.0)],
    )
    f = gaps(profile, min_gap_us=1000.0).items[0]
    assert f.value == pytest.approx(1000 / 1400)
    assert "nan_host" not in f.message


def test_a_long_event_below_the_error_level_is_a_warning_for_any_such_event() -> None:
    """The default warning level is 0 (any host event of 10 ms or more with the device idle through 80 % of it
    warns): said so, not "warning at >= 0 %". On TraceLens's vLLM eager decode (B200): one 10.24 ms forward,
    9.79 ms of device idle during it, 11.6 % of the window."""
    from pathlib import Path

    import popprof

    real = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
    (f,) = check(popprof.open(real / "tracelens_b200_vllm_eager.json.gz"), rules=["host.long-events"]).items
    assert f.severity == "warning" and f.threshold == 0.0
    assert (
        "1 host event >= 10.00 ms with the device idle for >= 80 % of each; device idle 9.79 ms during it"
        in (f.message)
    )
    assert "= 11.6 % of rank 0 gpu:0's window (a warning for any such event; error at >= 30 %)" in f.message
    device = [("k", "compute", 0.0, 100.0), ("k", "compute", 10_100.0, 100.0)]
    host = [(1, None, 0, 1, "optimizer.step", 100.0, 10_000.0)]
    (raised,) = long_events(trace(device, host), error=1.0, warning=0.5).items
    assert "(warning at >= 50 %)" in raised.message


def test_a_device_only_trace_does_not_say_the_device_waited_on_the_host() -> None:
    """A rocprofv3 kernel trace without its API records (the real MI350X file) holds no host work: the time
    account calls the device's idle "cause unknown", and host.device-gaps, which would call it waiting on the
    host, is not evaluated and says why."""
    from pathlib import Path

    import popprof
    from popprof.metrics.account import run_account

    real = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
    profile = popprof.open(real / "rocprofv3_mi350_train.json.gz")
    found = check(profile, rules=["host.device-gaps"])
    assert not found.items
    ((rule_id, why),) = found.not_evaluated
    assert rule_id == "host.device-gaps" and why.startswith(
        "needs host events: the trace records no host event"
    )
    account = run_account(profile).iloc[0]
    assert account["idle_host"] == 0 and account["idle_other"] / account["window_us"] == pytest.approx(
        0.72, abs=0.005
    )


@pytest.mark.parametrize(
    ("path", "gaps_seen"),
    [
        ("traces/hta_trace_compare_base.json.gz", 10),  # its long gaps end at work launched before the trace
        ("xplane/xprof_tpu_v6e_inference.xplane.pb", 13),  # a TPU's XLA ops: no launch calls at all
    ],
)
def test_gaps_without_a_recorded_launch_are_not_the_hosts(path: str, gaps_seen: int) -> None:
    """The account calls a gap whose next work has no recorded launch "idle, cause unknown"; the rule never
    sells it as the host's: with no gap of known launch it is not evaluated and says why."""
    from pathlib import Path

    import popprof
    from popprof.metrics.account import run_account

    profile = popprof.open(Path(__file__).resolve().parent.parent / "fixtures" / "real" / path)
    found = gaps(profile)
    assert found.items == [] and "host.device-gaps" not in found.evaluated
    (reason,) = [why for rule, why in found.not_evaluated if rule == "host.device-gaps"]
    assert reason.startswith(f"needs the launches of the device's work: none of the {gaps_seen} gaps ends at")
    runs = run_account(profile)
    assert (runs["idle_host"].fillna(0.0) < 0.01 * runs["window_us"]).all()  # the account: not the host's
    assert (runs["idle_other"] > 0.12 * runs["window_us"]).all()
