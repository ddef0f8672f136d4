"""Host timeline: lanes, the device lane, stalls shaded from host.device-gaps, top host events labelled."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import popprof  # noqa: E402
from popprof.model.profile import Profile  # noqa: E402
from popprof.plots import timeline  # noqa: E402
from popprof.plots.timeline import top_host_events  # noqa: E402
from popprof.trace.spans import merge_intervals  # noqa: E402

STEP_US = 10_000.0
STALL_STEP = 3
T0 = 1_000_000.0


def trace_profile(steps: int = 6) -> Profile:
    """A training loop: main thread steps (forward, data wait, backward), a loader thread, device kernels.

    In step STALL_STEP the host waits 5 ms on the data loader and the device sits idle until the next step.
    """
    rows = []

    def add(pid, tid, name, start, dur, depth=0, parent=None, device=None):
        rows.append(
            {
                "event_id": len(rows),
                "pid": pid,
                "tid": tid,
                "parent_id": parent,
                "depth": depth,
                "name": name,
                "channel": "device" if device else "host",
                "start_us": T0 + start,
                "dur_us": dur,
                "device_category": device,
            }
        )
        return len(rows) - 1

    for k in range(steps):
        t = k * STEP_US
        stall = k == STALL_STEP
        step = add(1, 10, "train_step", t, STEP_US)
        add(1, 10, "forward", t, 3000, 1, step)
        add(1, 10, "DataLoader.next", t + 3000, 5000 if stall else 300, 1, step)
        add(1, 10, "backward", t + (8000 if stall else 3300), 1500, 1, step)
        add(1, 11, "read_shard", t + 2500, 4000 if stall else 800)
        add(2, 0, "matmul_kernel", t + 200, 2800 if stall else 6000, device="compute")
        if not stall:
            add(2, 0, "all_reduce", t + 6200, 3600, device="exchange")
    events = pd.DataFrame(rows)
    threads = pd.DataFrame(
        {
            "pid": [1, 1, 2],
            "tid": [10, 11, 0],
            "process_name": ["python", "python", "device"],
            "thread_name": ["main", "loader", "stream 7"],
        }
    )
    return Profile("loop", {"events": events, "threads": threads})


@pytest.fixture(scope="module")
def profile():
    return trace_profile()


def rects(ax, gid):
    (coll,) = [c for c in ax.collections if c.get_gid() == gid]
    verts = np.array([p.vertices for p in coll.get_paths()])
    return verts[:, :, 0].min(axis=1), verts[:, :, 0].max(axis=1)


def span_x(patch):
    xy = patch.get_transform().transform(patch.get_path().vertices)
    xs = patch.axes.transData.inverted().transform(xy)[:, 0]
    return float(xs.min()), float(xs.max())


def test_lanes_hold_the_events(profile):
    ax = timeline(profile, resolution=10**9).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["device", "python: main", "python: loader"]
    events = profile.events
    for cat in ("compute", "exchange"):
        sel = events[events["device_category"] == cat]
        start, end = rects(ax, f"lane:device:{cat}")
        np.testing.assert_allclose(start, (sel["start_us"] - T0) / 1e3)
        np.testing.assert_allclose(end, (sel["start_us"] + sel["dur_us"] - T0) / 1e3)
    start, end = rects(ax, "lane:python: main")  # depth-0 steps touch each other: merged into one bar
    assert (start.min(), end.max()) == (0.0, pytest.approx(6 * STEP_US / 1e3))
    start, end = rects(ax, "lane:python: main:nested")
    # forward, DataLoader.next and backward touch: one bar per step, longer in the stalled step
    np.testing.assert_allclose(start, np.arange(6) * STEP_US / 1e3)
    np.testing.assert_allclose(end - start, [4.8 if k != STALL_STEP else 9.5 for k in range(6)])
    assert "ms" in ax.get_xlabel()


def test_stall_from_plain_window_lists_top_host_events(profile):
    stall = (T0 + STALL_STEP * STEP_US + 3000, T0 + (STALL_STEP + 1) * STEP_US + 200)
    ax = timeline(profile, stalls=[stall]).axes[0]
    (span,) = [p for p in ax.patches if p.get_gid() == "stall"]
    assert span_x(span) == pytest.approx(((stall[0] - T0) / 1e3, (stall[1] - T0) / 1e3))
    (label,) = [t for t in ax.texts if t.get_gid() == "stall-label"]
    text = label.get_text()
    assert text.startswith(
        "1. at +33.00 ms, device idle 7.20 ms: DataLoader.next (5.00 ms) · read_shard (3.50 ms)"
    )
    assert "train_step" not in text  # enclosing events are not "what the host did"
    (number,) = [t for t in ax.texts if t.get_gid() == "stall-number"]
    assert number.get_text() == "1" and number.get_position()[0] == pytest.approx(36.6)
    # a zoom that leaves the stall out does not label it
    ax = timeline(profile, stalls=[stall], window_us=(T0, T0 + 20_000)).axes[0]
    assert not [t for t in ax.texts if t.get_gid() in ("stall-label", "stall-number")]


def test_top_host_events_are_innermost_and_summed(profile):
    window = (T0 + STALL_STEP * STEP_US + 3000, T0 + STALL_STEP * STEP_US + 8000)
    top = top_host_events(profile, window, top=5)
    assert top["name"].tolist()[0] == "DataLoader.next"
    assert top.set_index("name")["overlap_us"].to_dict() == {"DataLoader.next": 5000.0, "read_shard": 3500.0}


def test_stalls_from_device_gaps_rule(profile):
    findings = popprof.check(profile, rules=["host.device-gaps"])
    (finding,) = findings.items
    gaps = finding.evidence
    ax = timeline(profile, findings).axes[0]
    spans = sorted(span_x(p) for p in ax.patches if p.get_gid() == "stall")
    expected = sorted(
        ((s - T0) / 1e3, (e - T0) / 1e3) for s, e in zip(gaps["start_us"], gaps["end_us"], strict=True)
    )
    assert spans == [pytest.approx(x) for x in expected]
    assert finding.where["time_us"][0] in set(gaps["start_us"])
    assert any("DataLoader.next" in t.get_text() for t in ax.texts if t.get_gid() == "stall-label")


def test_merge_intervals_matches_a_sweep():
    rng = np.random.default_rng(0)
    start = rng.uniform(0, 1000, 300)
    end = start + rng.exponential(3, 300)
    s, e = merge_intervals(start, end, 0.0)
    expected = []
    for a, b in sorted(zip(start, end, strict=True)):
        if expected and a <= expected[-1][1]:
            expected[-1][1] = max(expected[-1][1], b)
        else:
            expected.append([a, b])
    np.testing.assert_allclose(np.column_stack([s, e]), np.array(expected))
    assert np.all(s[1:] > e[:-1])


def test_many_events_are_merged_to_the_resolution():
    n = 200_000
    start = np.sort(np.random.default_rng(1).uniform(0, 1e6, n))
    events = pd.DataFrame(
        {
            "event_id": np.arange(n),
            "pid": 1,
            "tid": 1,
            "depth": 0,
            "name": "op",
            "channel": "host",
            "start_us": start,
            "dur_us": 1.0,
        }
    )
    ax = timeline(Profile("many", {"events": events}), resolution=2000).axes[0]
    s, e = rects(ax, "lane:pid 1 tid 1")
    assert len(s) <= 2001
    assert s.min() == 0.0 and e.max() == pytest.approx((start.max() + 1 - start.min()) / 1e3)


def test_runs_lane_without_a_trace():
    runs = pd.DataFrame(
        {"run": [0, 1], "name": ["a", "b"], "start_us": [1000.0, 9000.0], "end_us": [5000.0, 12000.0]}
    )
    ax = timeline(Profile("runs", {"runs": runs})).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["device (runs)"]
    start, end = rects(ax, "lane:device (runs):compute")
    np.testing.assert_allclose(start, [0.0, 8.0])
    np.testing.assert_allclose(end, [4.0, 11.0])
    with pytest.raises(popprof.MissingTableError):
        timeline(Profile("empty", {}))
