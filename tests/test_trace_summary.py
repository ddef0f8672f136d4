"""Trace summary, trace metrics, and SQL over events."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from popprof import metrics
from popprof.cli import main
from popprof.metrics.trace_summary import trace_summary
from popprof.model.profile import Profile
from popprof.readers import read_path


def _hand_profile() -> Profile:
    """Device events at [0,11), [5,12), [20,30), [40,41) and a sync inside [20,30); host events."""
    rows = [  # pid, tid, parent, depth, name, channel, start, dur, device_category
        (0, 7, None, 0, "k1", "kernel", 0.0, 11.0, "compute"),
        (0, 7, None, 0, "k2", "kernel", 5.0, 7.0, "compute"),
        (0, 8, None, 0, "nccl", "kernel", 20.0, 10.0, "exchange"),
        (0, 9, None, 0, "copy", "gpu_memcpy", 40.0, 1.0, "host_io"),
        (1, 1, None, 0, "step", "user_annotation", 0.0, 50.0, None),
        (1, 1, 4, 1, "forward", "cpu_op", 1.0, 9.0, None),
        (1, 1, 4, 1, "sync", "cuda_runtime", 21.0, 9.0, "sync"),
        (1, 2, None, 0, "loader", "user_annotation", 0.0, 45.0, None),
    ]
    frame = pd.DataFrame(
        rows,
        columns=[
            "pid",
            "tid",
            "parent_id",
            "depth",
            "name",
            "channel",
            "start_us",
            "dur_us",
            "device_category",
        ],
    )
    frame.insert(0, "event_id", range(len(rows)))
    frame["parent_id"] = frame["parent_id"].astype("Int64")
    threads = {
        "pid": [1, 1],
        "tid": [1, 2],
        "process_name": ["train", "train"],
        "thread_name": ["main", "loader"],
    }
    return Profile(
        "hand", {"target": {"source_format": ["chrome_trace"]}, "events": frame, "threads": threads}
    )


def test_trace_metrics_on_a_hand_made_trace() -> None:
    values = metrics.compute(_hand_profile())
    assert values["trace.span_us"] == 50.0
    assert values["trace.event_count"] == 8
    assert values["trace.thread_count"] == 5  # (0,7) (0,8) (0,9) (1,1) (1,2)
    # device busy: [0,12) + [20,30) + [40,41) = 23 of the active span [0,41)
    assert values["trace.device_busy_us"] == 23.0
    assert values["trace.device_idle_us"] == 18.0  # gaps [12,20) and [30,40)
    assert values["trace.device_idle_share"] == pytest.approx(18.0 / 41.0)
    assert values["trace.device_time_us.compute"] == 18.0
    assert values["trace.device_time_us.sync"] == 9.0


def test_trace_metrics_absent_without_events(fixtures_dir: Path) -> None:
    p = Profile("empty", {"target": {"source_format": ["pop"]}})
    values = metrics.compute(p, ["trace.span_us", "trace.device_idle_us"])
    assert values == {"trace.span_us": None, "trace.device_idle_us": None}


def test_summary_of_a_hand_made_trace() -> None:
    s = trace_summary(_hand_profile(), top=3)
    assert s["events"] == 8 and s["span_us"] == 50.0
    top_thread = s["busiest_threads"][0]
    assert (top_thread["pid"], top_thread["tid"], top_thread["thread_name"]) == (1, 1, "main")
    assert top_thread["busy_us"] == 50.0
    by_self = {r["name"]: r["self_us"] for r in s["top_by_self"]}
    assert by_self == {"loader": 45.0, "step": 32.0, "k1": 11.0}  # step: 50 - 9 - 9
    assert [r["name"] for r in s["top_by_total"]] == ["step", "loader", "k1"]
    dev = s["device_activity"]
    assert dev["busy_us"] == 23.0 and dev["idle_us"] == 18.0 and dev["idle_gaps"] == 2
    assert dev["by_category"]["compute"] == {"events": 2, "total_us": 18.0}


def test_summary_of_the_fixture_finds_the_stalls(fixtures_dir: Path) -> None:
    p = read_path(fixtures_dir / "traces" / "training_loop.json")
    s = trace_summary(p)
    assert s["busiest_threads"][0]["thread_name"] == "python main thread"
    assert s["top_by_self"][0]["name"] == "ampere_sgemm_128x64_tn"
    ev = p.events
    assert s["span_us"] == pytest.approx((ev["start_us"] + ev["dur_us"]).max() - ev["start_us"].min())
    assert s["device_activity"]["idle_us"] > 0


def test_pvti_summary_without_timestamps(tmp_path: Path, pva_double, fixtures_dir: Path) -> None:
    p = read_path(fixtures_dir / "traces" / "poptorch_4532.pvti")
    s = trace_summary(p)
    assert s["device_activity"]["by_category"]["host_io"]["events"] == 16


def test_query_sql_over_events(fixtures_dir: Path, capsys) -> None:
    path = fixtures_dir / "traces" / "training_loop.json"
    code = main(
        [
            "query",
            str(path),
            "SELECT device_category, count(*) AS n FROM events "
            "WHERE device_category IS NOT NULL GROUP BY 1 ORDER BY 1",
            "--format",
            "json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    ev = read_path(path).events
    expected = ev["device_category"].value_counts()
    expected = expected[expected > 0]
    for category, n in expected.items():
        assert f'"{category}"' in out and str(n) in out


def test_nested_device_events_are_not_counted_twice(pva_double, fixtures_dir: Path) -> None:
    p = read_path(fixtures_dir / "traces" / "poptorch_4532.pvti")
    values = metrics.compute(p)
    ev = p.events
    dev = ev[ev["device_category"].notna()]
    # Engine::run(main) (800 us, compute) holds copies, a compute run and a sync: device time per category
    # adds up to the time under the outermost device events, and compute keeps only run's own remainder
    outer = dev[~dev["parent_id"].isin(dev["event_id"])]
    total = sum(
        values[f"trace.device_time_us.{c}"] for c in ("compute", "exchange", "host_io", "sync", "other")
    )
    assert total == pytest.approx(outer["dur_us"].sum())
    assert values["trace.device_time_us.host_io"] == pytest.approx(8 * (60 + 50))
    assert values["trace.device_time_us.compute"] == pytest.approx(8 * (800 - 60 - 50 - 40))
    s = trace_summary(p)
    assert (
        s["device_activity"]["by_category"]["compute"]["total_us"] == values["trace.device_time_us.compute"]
    )


def test_self_time_of_a_filtered_events_table() -> None:
    # event_id no longer equals the row position once rows are dropped: parents are found by id
    from popprof.metrics.trace_summary import event_self_time
    from popprof.trace.activity import device_time_by_category

    rows = [  # event_id, parent_id, dur_us, device_category
        (10, None, 50.0, "compute"),
        (11, 10, 9.0, "sync"),
        (12, 10, 6.0, None),
        (13, 99, 4.0, "compute"),
    ]
    events = pd.DataFrame(rows, columns=["event_id", "parent_id", "dur_us", "device_category"])
    events["parent_id"] = events["parent_id"].astype("Int64")
    assert event_self_time(events).tolist() == [35.0, 9.0, 6.0, 4.0]  # 13's parent is not in the table
    device = device_time_by_category(events)
    assert device["compute"] == 41.0 + 4.0 and device["sync"] == 9.0  # only device children are subtracted
