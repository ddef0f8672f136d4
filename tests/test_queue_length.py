"""Queue length per GPU stream (popprof.metrics.queue_length) against HolisticTraceAnalysis 0.5.0's.

``fixtures/real/traces/hta_queue_length_reference.json`` (written by ``make_hta_queue_length.py`` there, HTA
0.5.0 in its own virtualenv) holds, per run, rank and stream, HTA's ``get_queue_length_summary`` (pandas'
``describe()`` of the series), its ``get_time_spent_blocked_on_full_queue`` at 1024 and at the stream's own
maximum, and the series' time integral and span. popprof builds the same series in its own code.

Equal: the points, min, quartiles, max, the time-weighted mean, the span and the blocked time. The mean and the
standard deviation depend on the order of a launch and a work start at the same microsecond, which HTA leaves
to its unstable sort and popprof fixes (the launch first): HTA's lie within the bounds that order allows, and
are equal where a stream has no such tie.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.metrics.queue_length import MAX_QUEUE_LENGTH, QUEUE_COLUMNS, queue_lengths, queue_series

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "hta_queue_length_reference.json").read_text("utf-8"))
FILES = {"two_ranks": "two_ranks", "dlrm_8ranks": "dlrm_8ranks"}
CASES = [
    (run, rank, stream)
    for run, ranks in REFERENCE["runs"].items()
    for rank, figures in ranks.items()
    for stream in figures["streams"]
]
EXACT = {"points": "count", "min": "min", "p25": "25%", "median": "50%", "p75": "75%", "max": "max"}
_OPENED: dict[str, popprof.Profile] = {}


def _profile(run: str) -> popprof.Profile:
    if run not in _OPENED:
        name = FILES.get(run) or next(p.name for p in REAL.glob(f"{run}*.json.gz"))
        _OPENED[run] = popprof.open(REAL / name)
    return _OPENED[run]


def _row(table, rank: str, stream: str):
    """The stream's row (a trace without a rank is rank 0, as HTA numbers it)."""
    ranks = table["rank"].fillna(0).to_numpy(dtype=np.int64)
    rows = table[(ranks == int(rank)) & (table["stream"].to_numpy() == int(stream))]
    assert len(rows) == 1
    return rows.iloc[0]


def _bounds(run: str, rank: str, stream: str) -> tuple[np.ndarray, np.ndarray]:
    """The stream's points with the launch first at every tie (popprof's series) and with the work start first."""
    streams, series = queue_series(_profile(run))
    group = _row(streams.assign(points=0), rank, stream).name
    mine = series.group == group
    time, launch_first = series.time[mine], series.length[mine]
    steps = np.diff(launch_first, prepend=0)
    work_first = np.cumsum(steps[np.lexsort((steps, time))])
    return launch_first, work_first


def test_reference_is_hta_050_on_the_required_traces() -> None:
    assert (REFERENCE["tool"], REFERENCE["version"]) == ("HolisticTraceAnalysis", "0.5.0")
    assert {"two_ranks", "dlrm_8ranks", "kineto2021_resnet50_worker0", "hta_simple_add"} <= set(
        REFERENCE["runs"]
    )
    assert REFERENCE["max_queue_length"] == MAX_QUEUE_LENGTH
    assert len(CASES) == 55


@pytest.mark.parametrize(("run", "rank", "stream"), CASES)
def test_figures_equal_htas(run: str, rank: str, stream: str) -> None:
    hta = REFERENCE["runs"][run][rank]["streams"][stream]
    mine = _row(queue_lengths(_profile(run)), rank, stream)
    assert {k: mine[k] for k in EXACT} == {k: hta["summary"][v] for k, v in EXACT.items()}
    assert mine["span_us"] == hta["span"]
    assert mine["time_mean"] == pytest.approx(hta["time_integral"] / hta["span"], rel=1e-12)
    assert mine["blocked_us"] == hta["blocked_at_1024"]["duration"]
    at_max = hta["blocked_at_max"]
    assert (
        _row(queue_lengths(_profile(run), at_max["limit"]), rank, stream)["blocked_us"] == at_max["duration"]
    )


@pytest.mark.parametrize(("run", "rank", "stream"), CASES)
def test_mean_and_std_within_the_bounds_of_the_order_at_ties(run: str, rank: str, stream: str) -> None:
    """At each tie HTA's order is its sort's: its sum of points lies between the work-first order's and
    popprof's (launch first: every point at least as high), and so does its sum of squares (all points >= 0)."""
    hta = REFERENCE["runs"][run][rank]["streams"][stream]["summary"]
    mine = _row(queue_lengths(_profile(run)), rank, stream)
    launch_first, work_first = _bounds(run, rank, stream)
    n = hta["count"]
    hta_sum = hta["mean"] * n
    hta_squares = (hta["std"] or 0.0) ** 2 * (n - 1) + n * hta["mean"] ** 2
    assert work_first.sum() - 1e-6 <= hta_sum <= launch_first.sum() + 1e-6
    if work_first.min() >= 0:
        assert (work_first**2).sum() - 1e-6 <= hta_squares <= (launch_first**2).sum() + 1e-6
    if np.array_equal(launch_first, work_first):  # no tie: the same points
        assert mine["mean"] == pytest.approx(hta["mean"], rel=1e-12)
        assert mine["std"] == pytest.approx(hta["std"], rel=1e-12, nan_ok=True)


def test_ties_occur_and_are_bounded() -> None:
    """The bounds above are exercised: streams with ties (dlrm rank 0's stream 7: 5 launch / work-start pairs
    at one microsecond) and without."""
    launch_first, work_first = _bounds("dlrm_8ranks", "0", "7")
    assert launch_first.sum() - work_first.sum() == 10
    hta = REFERENCE["runs"]["dlrm_8ranks"]["0"]["streams"]["7"]["summary"]
    assert _row(queue_lengths(_profile("dlrm_8ranks")), "0", "7")["mean"] != hta["mean"]
    tied = [case for case in CASES if not np.array_equal(*_bounds(*case))]
    assert 0 < len(tied) < len(CASES)


@pytest.mark.parametrize("run", sorted(REFERENCE["runs"]))
def test_the_table_is_describe_of_the_series(run: str) -> None:
    """The table's figures (computed per stream from its launches and starts) are pandas' ``describe()`` of
    :func:`queue_series`' points (HTA's summary of its series), and its time mean and blocked time read off it."""
    import pandas as pd

    streams, series = queue_series(_profile(run))
    table = queue_lengths(_profile(run), 3)
    assert len(table) == len(streams) and (table["stream"].to_numpy() == streams["stream"].to_numpy()).all()
    frame = pd.DataFrame({"group": series.group, "length": series.length})
    described = frame.groupby("group")["length"].describe()
    for column, stat in {**EXACT, "mean": "mean", "std": "std"}.items():
        assert np.allclose(
            table[column].to_numpy(float), described[stat].to_numpy(), rtol=1e-12, equal_nan=True
        )
    for g in range(len(streams)):
        time, length = series.time[series.group == g], series.length[series.group == g]
        step = np.diff(time)
        assert table["blocked_us"].iloc[g] == step[length[:-1] >= 3].sum()
        assert table["time_mean"].iloc[g] == pytest.approx((length[:-1] * step).sum() / (time[-1] - time[0]))


def test_a_series_worked_out_by_hand(tmp_path: Path) -> None:
    """Three launches at 0, 1 and 2 us, their kernels starting at 5, 6 and 7 (stream 7), one launch at 3 of a
    copy on stream 9 starting at 4: stream 7's series is 1, 2, 3, 2, 1, 0 at 0, 1, 2, 5, 6, 7."""
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t, "dur": 0.5,
         "args": {"correlation": t + 1}}
        for t in (0, 1, 2)
    ] + [
        {"ph": "X", "cat": "kernel", "name": f"k{t}", "pid": 0, "tid": 7, "ts": t + 5, "dur": 0.5,
         "args": {"stream": 7, "device": 0, "correlation": t + 1}}
        for t in (0, 1, 2)
    ] + [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 3, "dur": 0.5,
         "args": {"correlation": 9}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 9, "ts": 4, "dur": 0.5,
         "args": {"stream": 9, "device": 0, "correlation": 9}},
    ]  # fmt: skip
    path = tmp_path / "queue.json"
    path.write_text(json.dumps({"traceEvents": events}))
    profile = popprof.open(path)
    table = queue_lengths(profile)
    assert list(table.columns) == QUEUE_COLUMNS
    assert table["stream"].tolist() == [7, 9] and table["launches"].tolist() == [3, 1]
    seven = table.iloc[0]
    assert [seven[k] for k in ("points", "mean", "min", "median", "max")] == [6, 1.5, 0, 1.5, 3]
    assert seven["std"] == pytest.approx(np.std([1, 2, 3, 2, 1, 0], ddof=1))
    assert seven["span_us"] == 7 and seven["time_mean"] == pytest.approx((1 + 2 + 3 * 3 + 2 + 1) / 7)
    assert seven["blocked_us"] == 0
    assert queue_lengths(profile, 3).iloc[0]["blocked_us"] == 3  # at 3 from 2 us to 5 us
    assert queue_lengths(profile, 2)["blocked_us"].tolist() == [5, 0]  # 1-5 and 5-6 us


@pytest.mark.parametrize("name", ["cpu_only_rank-34.json.gz", "hta_a100_no_device_activity.json.gz"])
def test_no_gpu_work_gives_an_empty_table(name: str) -> None:
    table = queue_lengths(popprof.open(REAL / name))
    assert table.empty and list(table.columns) == QUEUE_COLUMNS
    assert queue_series(popprof.open(REAL / name)) is None


def test_summary_text_and_json() -> None:
    """The summary's JSON holds the table's rows; its text one line per device under the launch delays: the
    stream whose queue grew longest with HTA's mean and maximum, and the time blocked on a full queue."""
    from popprof.report.summary import render_text

    doc = popprof.summary(REAL / "two_ranks")
    section = doc["trace"]["queue_lengths"]
    assert section["max_queue_length"] == MAX_QUEUE_LENGTH
    table = queue_lengths(_profile("two_ranks"))
    assert [(s["rank"], s["stream"], s["launches"]) for s in section["streams"]] == list(
        zip(table["rank"].tolist(), table["stream"].tolist(), table["launches"].tolist(), strict=True)
    )
    text = " ".join(render_text(doc).split())
    assert text.index("Kernel launch delay") < text.index(
        "Queue length per stream (launched, not yet started"
    )
    for rank, figures in REFERENCE["runs"]["two_ranks"].items():
        stream, hta = max(figures["streams"].items(), key=lambda s: s[1]["summary"]["max"])
        line = (
            f"rank {rank} gpu:{rank}: mean {hta['summary']['mean']:.1f}, max {hta['summary']['max']:,.0f} on "
        )
        assert f"{line}stream {stream}; blocked on a full queue 0.0 us" in text
    no_gpu = popprof.summary(REAL / "cpu_only_rank-34.json.gz")
    assert "queue_lengths" not in no_gpu.get("trace", {})
    assert "Queue length" not in render_text(no_gpu)
