"""The time account (metrics/account.py): one partition of each device's window, on real and hand-made data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from real_inputs import REAL, real_inputs

import popprof
from popprof import metrics
from popprof.cli import cli
from popprof.metrics import account

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "real"


def _real_inputs() -> list[Path]:
    return real_inputs(roots=(REAL, SHARED))


def _summary_json(path: Path) -> list[dict]:
    result = CliRunner().invoke(cli, ["-q", "summary", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output[-2000:]
    doc = json.loads(result.stdout)
    return doc if isinstance(doc, list) else [doc]


@pytest.mark.parametrize("path", _real_inputs(), ids=lambda p: p.name)
def test_every_real_input_gets_an_account_whose_parts_sum_to_its_window(path):
    for doc in _summary_json(path):
        for row in doc.get("time_account", []):
            assert set(row) == {"platform", "rank", "device", "step", "basis", "window_us", "parts"}
            assert row["basis"] in account.BASIS_TEXT
            parts = row["parts"]
            expected = account.GPU_PARTS if row["platform"] == "gpu" else account.IPU_PARTS
            assert tuple(parts) == expected
            assert all(v >= 0 for v in parts.values()), row
            assert sum(parts.values()) == pytest.approx(row["window_us"], rel=1e-3), row
            idle = [name for name in parts if "idle" in name]
            assert all(name.startswith("idle") for name in idle)


def test_the_real_inputs_with_device_time_all_have_an_account():
    with_time = {
        "nccl_data.json.gz",
        "two_ranks",
        "dlrm_8ranks",
        "amd_mi250_minitoy.json.gz",
        "tutorials_tut6_execution_ipumodel_sdk3.txt",
        "tutorials_tut6_execution_hw_sdk3.txt",
        "examples_tut7_execution_sdk1_mk1.txt",
    }
    seen = set()
    for path in _real_inputs():
        if path.name in with_time:
            docs = _summary_json(path)
            assert any(d.get("time_account") for d in docs), path
            seen.add(path.name)
    assert seen == with_time


def test_nccl_data_account_matches_the_figures_check_and_summary_state():
    """nccl_data (HTA's public test trace, one GPU): busy 157.50 ms of the 660.55 ms device span, as the
    summary's device-activity line and host.device-gaps's 'active span' state."""
    profile = popprof.open(REAL / "traces" / "nccl_data.json.gz")
    runs = account.run_account(profile)
    assert len(runs) == 1
    row = runs.iloc[0]
    assert row["basis"] == "device_span" and row["device"] == "gpu:0" and row["rank"] == 0
    assert row["window_us"] == pytest.approx(660551.0, abs=1.0)
    assert account.busy_us(row) == pytest.approx(157500.1, abs=0.5)
    values = metrics.compute(profile)
    assert values["trace.device_busy_us"] == pytest.approx(account.busy_us(row))
    assert values["trace.device_idle_share"] == pytest.approx(account.idle_us(row) / row["window_us"])
    assert values["trace.device_communication_share"] == pytest.approx(
        account.communication_us(row) / row["window_us"]
    )
    # most of the idle time the host had not yet submitted the next work (HTA: host wait 99.7 % per stream)
    assert row["idle_host"] / account.idle_us(row) > 0.9
    steps = account.time_account(profile)
    assert sorted(steps["step"].dropna().astype(int)) == [4, 5, 6]


def test_ipu_model_summary_is_host_bound_in_its_account():
    profile = popprof.open(REAL / "poplar" / "tutorials_tut6_execution_ipumodel_sdk3.txt")
    row = account.run_account(profile).iloc[0]
    assert row["basis"] == "summary_total"
    assert row["window_us"] == pytest.approx(5023.9)  # the summary's own "approx 5,023.9 microseconds"
    assert row["stream_copies"] / row["window_us"] == pytest.approx(6663550.8 / 6681766.0)


def test_ipu_steps_account_idles_the_less_busy_ipus(fixtures_dir):
    profile = popprof.open(fixtures_dir / "pod4_pipeline.popprof")
    runs = account.run_account(profile)
    assert len(runs) > 1 and (runs["basis"] == "ipu_run").all()
    assert runs["window_us"].nunique() == 1  # one run window: the busiest IPU's
    busiest = runs.loc[runs["idle"].idxmin()]
    assert busiest["idle"] == pytest.approx(0.0, abs=1e-6)


def _kineto(tmp_path: Path) -> Path:
    """A hand-made Kineto trace with a known split (times in us):

    - kernel A [100, 110) launched at 95; kernel B [120, 130) launched at 115 (gap [110, 120): 5 us before the
      launch is host-bound, 5 us after it launch latency);
    - an NCCL all-reduce on another stream [125, 140) launched at 105 (exposed after B ends: [130, 140));
    - a host-to-device copy [150, 155) launched at 138 (gap [140, 150): the launch came before it, so it is
      all launch/dependency); a memset [155, 157) with no launch recorded.
    """

    def kernel(name, ts, dur, corr, stream, cat="kernel"):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                "args": {"device": 0, "stream": stream, "correlation": corr}}  # fmt: skip

    def launch(ts, corr, name="cudaLaunchKernel"):
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 2,
                "args": {"correlation": corr}}  # fmt: skip

    events = [
        launch(95, 1),
        kernel("gemm_a", 100, 10, 1, 7),
        launch(105, 3),
        launch(115, 2),
        kernel("gemm_b", 120, 10, 2, 7),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 125, 15, 3, 20),
        launch(138, 4, "cudaMemcpyAsync"),
        kernel("Memcpy HtoD (Pageable -> Device)", 150, 5, 4, 7, cat="gpu_memcpy"),
        kernel("Memset (Device)", 155, 2, 5, 7, cat="gpu_memset"),
    ]
    doc = {"traceEvents": events, "deviceProperties": [{"id": 0, "name": "A100"}]}
    path = tmp_path / "known.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_known_timeline_splits_exactly(tmp_path):
    profile = popprof.open(_kineto(tmp_path))
    row = account.run_account(profile).iloc[0]
    assert row["window_us"] == pytest.approx(57.0)  # 100 .. 157
    assert row["compute"] == pytest.approx(20.0)
    assert row["communication"] == pytest.approx(10.0)  # [130, 140): the all-reduce not under gemm_b
    assert row["copies"] == pytest.approx(7.0)
    assert row["idle_host"] == pytest.approx(5.0)  # [110, 115)
    assert row["idle_launch"] == pytest.approx(15.0)  # [115, 120) and [140, 150)
    assert row["idle_other"] == pytest.approx(0.0)


def test_a_trace_whose_launch_calls_carry_no_correlation_gets_an_account(tmp_path):
    """Device events with correlation ids and no host event carrying one (the synthesiser's layout in the
    "why is it slow" notebook): no gap has a known launch, so its time is neither host- nor launch-bound but
    other idle (as before the lookup was shared), and the host rules run as on any trace (an empty lookup once
    raised IndexError)."""
    from popprof.testing.trace_synth import write_chrome_trace

    profile = popprof.open(write_chrome_trace(tmp_path / "loop.json.gz", 40, seed=0))
    events = profile.events
    on_device = events["stream"].notna()
    assert events.loc[on_device, "correlation"].notna().all()
    assert events.loc[~on_device, "correlation"].isna().all()
    runs = account.run_account(profile)
    assert list(runs["device"]) == ["gpu:0"]
    row = runs.iloc[0]
    assert sum(row[p] for p in account.GPU_PARTS) == pytest.approx(row["window_us"], rel=1e-9)
    assert row["idle_launch"] == 0.0 and row["idle_host"] == 0.0
    assert row["idle_other"] > 0.0
    assert popprof.check(profile, rules=["host"]).items


def test_segment_sums_are_each_labels_clipped_overlap():
    # whole-microsecond segments, so every sum is exact: each window's time per label is the labelled
    # segments clipped to it, windows before, between, across and after the segments, empty and reversed
    start = [0.0, 4.0, 5.0, 9.0, 15.0, 16.0]
    end = [3.0, 5.0, 8.0, 12.0, 16.0, 20.0]
    label = [0, 2, 0, 1, 2, 0]
    parts = ("a", "b", "c", "d")
    segments = account._Segments(np.array(start), np.array(end), np.array(label, dtype=np.int64), parts)
    lo = np.array([-5.0, 1.0, 3.0, 8.5, 13.0, 10.0, 25.0, 7.0, 2.0])
    hi = np.array([30.0, 2.0, 4.0, 8.7, 14.0, 17.0, 30.0, 7.0, 1.0])
    got = segments.sums(lo, hi)
    for w, (a, b) in enumerate(zip(lo, hi, strict=True)):
        expected = np.zeros(len(parts))
        for s, e, k in zip(start, end, label, strict=True):
            expected[k] += max(0.0, min(e, b) - max(s, a)) if b > a else 0.0
        np.testing.assert_array_equal(got[w], expected)


def _layered_by_sweep(start, end, layer, layers):
    """The layered segments by one sweep over every boundary (the account's way before 2026-12-06)."""
    from popprof.trace.spans import merge_intervals

    times, deltas = [], []
    for i in range(layers):
        s, e = merge_intervals(start[layer == i], end[layer == i])
        times += [s, e]
        deltas += [np.full(s.size, 1 << i, dtype=np.int64), np.full(e.size, -(1 << i), dtype=np.int64)]
    t, d = np.concatenate(times), np.concatenate(deltas)
    if t.size == 0:
        return np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    state = np.cumsum(d)[:-1]
    seg_start, seg_end = t[:-1], t[1:]
    keep = (state > 0) & (seg_end > seg_start)
    lowest = np.array([(k & -k).bit_length() - 1 for k in range(1 << layers)], dtype=np.int64)
    label = lowest[state[keep]]
    seg_start, seg_end = seg_start[keep], seg_end[keep]
    joined = np.zeros(label.size, dtype=bool)
    joined[1:] = (label[1:] == label[:-1]) & (seg_start[1:] == seg_end[:-1])
    first = np.flatnonzero(~joined)
    last = np.append(first[1:] - 1, label.size - 1)
    return seg_start[first], seg_end[last], label[first]


def _assert_same_layers(start, end, layer, layers):
    got = account._layered_segments(start, end, layer, layers)
    expected = _layered_by_sweep(start, end, layer, layers)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(6))
def test_layered_segments_equal_the_sweep_on_random_intervals(seed):
    # whole and half microseconds: many shared and touching boundaries, zero-length events, every layer
    rng = np.random.default_rng(seed)
    n = 400
    start = rng.integers(0, 300, n) / 2.0
    end = start + rng.integers(0, 12, n) / 2.0
    layer = rng.integers(0, 4 + seed % 2, n)
    _assert_same_layers(start, end, layer, 4 + seed % 2)


@pytest.mark.parametrize("path", _real_inputs(), ids=lambda p: p.name)
def test_layered_segments_equal_the_sweep_on_real_devices(path):
    from popprof.model.errors import NotEvaluated
    from popprof.trace import intervals as im

    for profile in popprof.open_all(path).values():
        if not profile.has("events"):
            continue
        try:
            activities = im.device_activities(profile, by="device")
        except NotEvaluated:
            continue
        for act in activities:
            layer = account._layer_of_codes(act.category, account._GPU_LAYERS)
            _assert_same_layers(act.start, act.end, layer, len(account._GPU_LAYERS))
