"""One figure, one definition (docs/figures.md): every consumer shows the same value.

Consumers: ``summary`` (text and JSON), the baseline document, ``diff``, ``check`` messages, plot
titles, the HTML report and ``pilot``. Expected values are worked out by hand on a small trace
written here, taken from HolisticTraceAnalysis's reference figures (fixtures/real/traces/
hta_reference.json) or from the steps table directly; the real traces check that the consumers agree.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.compare.baseline import baseline_document
from popprof.io import jsonout, units
from popprof.metrics import account, compute, devices
from popprof.metrics.summary import summarise
from popprof.metrics.trace import time_origin
from popprof.report.html import summary_html
from popprof.report.summary import render_text

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real" / "traces"
REAL_TRACES = sorted(
    p.relative_to(REAL).as_posix() for p in REAL.rglob("*.json*") if not p.name.endswith("_reference.json")
)

#: A trace worked out by hand. Bookkeeping: the profiler's span 1,000,000-1,010,000 us. Real events:
#: a host wait 1,000,500-1,002,000 (before the GPU's window), aten::mm 1,002,000-1,002,500 holding the
#: launch, gemm 1,002,200-1,002,500 on the GPU, a host wait 1,003,000-1,003,600 (inside the window) and
#: an NCCL all-reduce 1,003,700-1,004,000. So: span 3,500 us (1,000,500 to 1,004,000), recording 10,000 us,
#: origin 1,000,500; 7 events, 2 threads (pid 1 tid 1, pid 0 tid 7); the GPU's window 1,800 us with
#: 600 us busy (idle 66.7 %); host wait inside the window 600 us = 33.3 % (all waits: 2,100 us, 116.7 %
#: of the window, which the share must never show); the one device gap 1,002,500-1,003,700 is at +2.00 ms.
TINY = {
    "schemaVersion": 1,
    "traceEvents": [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": 1000000, "dur": 10000},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 1000500,
         "dur": 1500},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1002000, "dur": 500},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1002100,
         "dur": 50, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 1002200, "dur": 300,
         "args": {"stream": 7, "device": 0, "correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 1003000,
         "dur": 600},
        {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 7,
         "ts": 1003700, "dur": 300, "args": {"stream": 7, "device": 0}},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> popprof.Profile:
    path = tmp_path_factory.mktemp("figures") / "tiny.json"
    path.write_text(json.dumps(TINY))
    return popprof.open(path)


def _metric(document: dict, name: str) -> float | None:
    entry = document["metrics"].get(name)
    return None if entry is None else entry["value"]


def test_trace_span_events_threads_and_origin_on_a_trace_worked_out_by_hand(tiny: popprof.Profile) -> None:
    summary = summarise(tiny)
    trace = summary["trace"]
    assert (trace["span_us"], trace["recorded_span_us"], trace["start_us"]) == (3500.0, 10000.0, 1000500.0)
    assert (trace["events"], trace["threads"]) == (7, 2)
    metrics = compute(tiny)
    assert metrics["trace.span_us"] == 3500.0 and metrics["trace.recorded_span_us"] == 10000.0
    assert (metrics["trace.event_count"], metrics["trace.thread_count"]) == (7, 2)
    base = baseline_document(tiny)
    assert (_metric(base, "trace.span_us"), _metric(base, "trace.event_count")) == (3500, 7)
    assert _metric(base, "trace.thread_count") == 2
    text = render_text(summary)
    assert "7 events on 2 threads; 3.50 ms from the first event to the last" in text
    assert "the recording spans 10.00 ms" in text
    assert "3.50 ms" in summary_html(tiny)  # the HTML report's key metrics
    rows = popprof.diff(tiny, tiny).metrics.set_index("name")
    assert rows.loc["trace.span_us", "base"] == 3500.0 and rows.loc["trace.thread_count", "new"] == 2


def test_the_device_table_and_the_metrics_share_the_idle_and_host_wait_definitions(
    tiny: popprof.Profile,
) -> None:
    [device] = summarise(tiny)["trace"]["devices"]
    assert device["span_us"] == 1800.0 and device["idle_pct"] == pytest.approx(200 / 3)
    assert device["host_wait_us"] == 600.0 and device["host_wait_pct"] == pytest.approx(100 / 3)
    metrics = compute(tiny)
    assert metrics["trace.device_window_idle_share"] == pytest.approx(2 / 3)
    assert metrics["trace.device_idle_share"] == pytest.approx(2 / 3)  # one device: both windows are 1.8 ms
    text = render_text(summarise(tiny))
    assert "idle 66.7 %" in text and "33.3 %" in text and "116.7 %" not in text
    from popprof.pilot.figures import side

    figures = side(tiny, "gpu", role="baseline")["figures"]
    assert figures["busy_pct"]["value"] == pytest.approx(100 / 3)
    # the pilot's host figure is the account's idle before the host submitted work, not the host's sync calls
    from popprof.metrics.account import run_account

    run = run_account(tiny).iloc[0]
    assert figures["idle_host_pct"]["value"] == pytest.approx(100 * run["idle_host"] / run["window_us"])


def test_check_messages_and_where_lines_are_offsets_from_the_trace_origin(tmp_path: Path) -> None:
    from popprof.report.findings import where_text
    from popprof.rules import check

    # TINY with the all-reduce's launch recorded, its call returning as the gap ends: the whole gap is the
    # host's (without a launch, the gap's cause is unknown and host.device-gaps does not claim it)
    launched = json.loads(json.dumps(TINY))
    launched["traceEvents"][-1]["args"]["correlation"] = 2
    launched["traceEvents"].append(
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1003690,
         "dur": 10, "args": {"correlation": 2}}
    )  # fmt: skip
    path = tmp_path / "tiny_launched.json"
    path.write_text(json.dumps(launched))
    found = check(popprof.open(path), rules=["host.device-gaps"])
    [gap] = found.items
    assert "longest 1.20 ms at +2.00 ms" in gap.message  # 1,002,500 - 1,000,500 us
    assert gap.where["origin_us"] == 1000500.0
    assert "; time +2.00 ms to +3.20 ms from the trace start;" in where_text(gap.where)
    assert "1,002,500" not in where_text(gap.where)
    from popprof.report.html import findings_html

    shown = findings_html(found)
    assert "+2.00 ms to +3.20 ms from the trace start" in shown and "1,002,500" not in shown


def test_the_timeline_plot_starts_at_the_trace_origin(tiny: popprof.Profile) -> None:
    pytest.importorskip("matplotlib")
    from popprof.plots.timeline import timeline

    ax = timeline(tiny).axes[0]
    assert ax.get_xlim()[0] == pytest.approx(0.0)  # ms since 1,000,500 us
    assert "µs" not in ax.get_xlabel() and "bookkeeping" in ax.get_xlabel()


def test_device_time_categories_use_one_vocabulary(tiny: popprof.Profile) -> None:
    metrics = compute(tiny)
    assert (
        metrics["trace.device_time_us.compute"] == 300.0 and metrics["trace.device_time_us.exchange"] == 300.0
    )
    text = render_text(summarise(tiny))
    assert "compute 300.0 us, communication 300.0 us" in text  # a GPU trace speaks of communication
    # the device table's headers (in 80 columns it is split into two tables, tests/test_summary_width.py)
    header = " ".join(line for line in text.splitlines() if line.strip().startswith("rank  device"))
    assert (
        "host blocked" in header
        and "communication" in header
        and "exchange" not in header
        and "comm " not in header
    )


@pytest.fixture(scope="module")
def pod4() -> popprof.Profile:
    return popprof.open(FIXTURES / "pod4_pipeline.popprof")


def test_ipu_run_length_is_the_busiest_ipu_in_every_consumer(pod4: popprof.Profile) -> None:
    steps = pod4.steps
    busiest = float(steps.groupby("ipu")["cycles"].sum().max())  # cycles of the busiest IPU
    run_us = busiest / float(pod4.target_value("clock_hz")) * 1e6
    assert compute(pod4)["execution.total_time_us"] == pytest.approx(run_us)
    summary = summarise(pod4)
    assert summary["execution"]["total_time_us"] == pytest.approx(run_us)
    assert f"busiest IPU {units.count(busiest)} cycles = {units.duration(run_us)}" in render_text(summary)
    assert _metric(baseline_document(pod4), "execution.total_time_us") == pytest.approx(run_us)
    assert units.duration(run_us) in summary_html(pod4)
    pytest.importorskip("matplotlib")
    from popprof.plots.execution import execution

    title = execution(pod4).axes[0].get_title()
    assert f"run {units.duration(run_us)} on the busiest IPU" in title
    per_step_max = float(steps.groupby(["run", "step"])["cycles"].max().sum())
    assert units.duration(per_step_max / 1.33e9 * 1e6) not in title  # the sum of per-step maxima: 14.14 ms


def test_counts_are_integers_in_json(pod4: popprof.Profile) -> None:
    text = jsonout.dumps(summarise(pod4))
    assert '"total_incl_gaps_bytes": 2073274576,' in text and "2073274576.0" not in text
    assert '"total_cycles": 17788798,' in text
    frame = popprof.query(pod4, "SELECT category, sum(bytes) AS b FROM tile_memory GROUP BY 1 ORDER BY 1")
    assert frame["b"].dtype == "Int64" and int(frame["b"].sum()) == int(pod4.tile_memory["bytes"].sum())


def test_cross_format_diff_of_one_profile_reports_no_execution_or_memory_regression(
    pod4: popprof.Profile,
) -> None:
    result = popprof.diff(FIXTURES / "sdk1_json" / "pod4_pipeline.json", pod4)
    rows = result.metrics
    compared = rows[rows["name"].str.match(r"^(execution|memory)\.")]
    assert not compared["worse"].fillna(False).astype(bool).any(), compared[compared["worse"].fillna(False)]
    assert not compared["status"].isin(["added", "removed"]).any()
    by_name = rows.set_index("name")
    # SDK 1.x JSON records the busiest IPU of each step; the bundle's steps on that basis agree exactly
    assert by_name.loc["execution.cycles.compute", "status"] == "unchanged"
    assert by_name.loc["execution.total_cycles", "base"] == 18_811_382  # sum of per-step maxima, both sides
    assert by_name.loc["memory.category.variables_bytes", "status"] == "missing_new"  # not 0, not "removed"
    assert any("across formats" in n for n in result.notes)
    assert any("busiest IPU of each" in n for n in result.notes)
    verdict = popprof.gate(result)
    assert verdict.passed and verdict.violations.empty
    shown = result._repr_html_()
    assert verdict.verdict in shown and "across formats" in shown


def test_the_diff_in_jupyter_shows_the_gate_verdict_and_formatted_numbers() -> None:
    result = popprof.diff(FIXTURES / "mk2_training.popprof", FIXTURES / "mk2_training_v2.popprof")
    assert "gate" not in result._repr_html_()
    verdict = popprof.gate(result)
    shown = result._repr_html_()
    assert verdict.verdict in shown
    row = result.metrics.set_index("name").loc["execution.cycles.exchange"]
    assert units.count(row["base"]) in shown and "e+06" not in shown


# -- the real traces ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=REAL_TRACES)
def real(request: pytest.FixtureRequest) -> tuple[str, popprof.Profile, dict, dict]:
    profile = popprof.open(REAL / request.param)
    return request.param, profile, summarise(profile), compute(profile)


def _walk(value: object, key: str = ""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)
    else:
        yield key, value


def test_real_traces_summary_and_baseline_agree(real) -> None:
    name, profile, summary, metrics = real
    trace = summary["trace"]
    assert trace["span_us"] == metrics["trace.span_us"], name
    assert trace["recorded_span_us"] == metrics["trace.recorded_span_us"] >= trace["span_us"], name
    assert (
        trace["events"] == metrics["trace.event_count"] and trace["threads"] == metrics["trace.thread_count"]
    )
    assert trace["start_us"] == time_origin(profile)
    base = baseline_document(profile)
    for metric in (
        "trace.span_us",
        "trace.event_count",
        "trace.thread_count",
        "trace.device_window_idle_share",
    ):
        if metrics.get(metric) is not None:
            assert _metric(base, metric) == pytest.approx(metrics[metric]), (name, metric)
    assert units.duration(trace["span_us"]) in render_text(summary)


def test_real_traces_shares_never_exceed_100_percent_and_counts_are_whole(real) -> None:
    name, _profile, summary, metrics = real
    document = jsonout.plain(summary)
    for key, value in _walk(document):
        if isinstance(value, float) and key.endswith("_pct"):
            assert -1e-9 <= value <= 100 + 1e-9, (name, key, value)
        if isinstance(value, float) and key.endswith("share"):
            assert -1e-9 <= value <= 1 + 1e-9, (name, key, value)
        if jsonout.COUNT_KEY.search(key) and isinstance(value, float):
            assert not value.is_integer(), (name, key, value)  # a whole count is an int
    for metric, value in metrics.items():
        if value is not None and metric.endswith("share"):
            assert 0 <= value <= 1, (name, metric, value)


def test_real_traces_device_table_idle_is_htas() -> None:
    """The device table's idle is HTA's on HTA's window; on a trace with ns-resolution times HTA rounds each
    work item to whole microseconds (start up, end down) and popprof's table does not, so there HTA's own
    figure is ``device_breakdown(hta=True)`` and the table's is the time account's (same window, every step:
    one idle share per GPU in one summary)."""
    reference = json.loads((REAL / "hta_reference.json").read_text())["runs"]
    checked = rounded = same_window = 0
    for run, figures in reference.items():
        if len(figures["files"]) != 1 or len(figures["ranks"]) != 1:
            continue
        [hta] = figures["ranks"].values()
        profile = popprof.open(REAL / figures["files"][0])
        shown = compute(profile)["trace.device_window_idle_share"]
        table = pd.DataFrame(summarise(profile)["trace"]["devices"])
        assert float(table["idle_us"].sum()) / float(table["span_us"].sum()) == pytest.approx(shown)
        htas = devices.device_breakdown(profile, hta=True)
        assert float(htas["idle_pct"].iloc[0]) == pytest.approx(hta["idle_pct"], abs=0.01), run
        if "start_exact" in devices.device_work(profile):  # HTA rounded some times
            rounded += 1
            runs = account.run_account(profile)
            idle = sum(float(runs[p].sum()) for p in account.PARTS if p.startswith("idle") and p in runs)
            if float(runs["window_us"].sum()) == pytest.approx(float(table["span_us"].sum())):
                # the account counts a device-side sync (MTIA's event_wait, a Stream Sync) as idle, launch or
                # dependency; the table (HTA's GPU work) as busy: its idle_launch less the launch gaps' is that
                gaps = account.launch_gaps(profile)
                sync = float(runs["idle_launch"].sum()) - float(gaps["idle_launch_us"].sum())
                assert shown == pytest.approx((idle - sync) / float(runs["window_us"].sum())), run
                same_window += 1  # one step: the account's window is the table's
        else:
            assert shown * 100 == pytest.approx(hta["idle_pct"], abs=0.01), run
        checked += 1
    assert checked >= 2 and rounded >= 1 and same_window >= 1


def test_facade_functions_work_twice(tmp_path: Path) -> None:
    source = FIXTURES / "mk2_training.popprof"
    for attempt in range(2):
        profile = popprof.open(source)
        assert popprof.open_all(source)
        assert popprof.summary(profile)["profile"] == profile.name
        assert popprof.check(profile).profile_name == profile.name
        result = popprof.diff(profile, source)
        assert popprof.gate(result).passed
        assert len(popprof.query(profile, "SELECT count(*) AS n FROM tiles")) == 1
        out = popprof.export(profile, tmp_path / f"copy{attempt}.popprof")
        assert popprof.open(out).name
        report = popprof.redact(
            source, tmp_path / f"red{attempt}.popprof", key="3f9a2c1b07de5d84e6b1a09c7f2e4d3b"
        )
        assert report is not None


def test_profile_dir_and_hasattr(pod4: popprof.Profile) -> None:
    names = dir(pod4)
    assert {"tiles", "steps", "liveness"} <= set(names)
    assert hasattr(pod4, "steps") and not hasattr(pod4, "events")
    with pytest.raises(AttributeError, match="did you mean"):
        pod4.stepz  # noqa: B018
    assert math.isfinite(float(pod4.steps["cycles"].sum()))
