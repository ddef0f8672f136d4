"""The summary's fast paths equal their straightforward definitions, exactly, on the real traces.

Each reference below is the plain pandas / numpy form of a figure (the form the fast path replaced);
the fast path must give the same values bit for bit on every trace under ``fixtures/real/traces``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof import metrics
from popprof.metrics import devices
from popprof.metrics import trace as trace_metrics
from popprof.trace import activity
from popprof.trace.gpu_work import exact_times

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
PATHS = sorted(REAL.glob("*.json.gz")) + [REAL / "two_ranks", REAL / "dlrm_8ranks"]


@pytest.fixture(scope="module", params=PATHS, ids=lambda p: p.name)
def profile(request) -> popprof.Profile:
    return popprof.open(request.param)


def _launch_delays_by_merge(profile: popprof.Profile) -> pd.DataFrame:
    """Launch calls joined with their GPU work by ``DataFrame.merge``."""
    events, work = profile.events, devices.device_work(profile)
    rows = np.flatnonzero(
        (
            events["name"].isin(devices.LAUNCH_CALLS)
            & events["stream"].isna()
            & events["correlation"].notna()
        ).to_numpy()
    )
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    end = start + events["dur_us"].to_numpy(dtype=np.float64, na_value=0.0)[rows]
    if np.any(start % 1 != 0):
        start, end = np.ceil(start), np.floor(end)
    host = pd.DataFrame(
        {
            "rank": events["rank"].to_numpy(dtype=np.float64, na_value=-1.0)[rows].astype(np.int64),
            "correlation": events["correlation"].to_numpy(dtype=np.float64, na_value=np.nan)[rows],
            "launch": events["name"].array[rows],
            "call_end": end,
            # a call under a microsecond that crosses no whole one ends before it starts in HTA's rounding: 0 us
            "cpu_duration_us": np.maximum(end - start, 0.0),
        }
    )
    targets = work[["rank", "device", "correlation", "name", "start", "end", "launch_start"]]
    merged = host.merge(targets, on=["rank", "correlation"], how="inner")
    merged = merged[merged["launch_start"].notna()]
    merged["gpu_duration_us"] = (merged["end"] - merged["start"]).clip(lower=0.0)
    merged["launch_delay_us"] = (merged["start"] - merged["call_end"]).clip(lower=0)
    for col in ("name", "launch", "device"):
        merged[col] = merged[col].astype("category").cat.remove_unused_categories()
    merged["correlation"] = merged["correlation"].astype("int64")
    merged["rank"] = merged["rank"].where(merged["rank"] >= 0).astype("Int64")
    columns = ["rank", "device", "correlation", "launch", "name"]
    columns += ["cpu_duration_us", "gpu_duration_us", "launch_delay_us"]
    return merged[columns].reset_index(drop=True)


def test_launch_delays_equal_the_merge(profile) -> None:
    if devices.device_work(profile) is None:
        pytest.skip("no GPU work")
    expected = _launch_delays_by_merge(profile)
    got = devices.launch_delays(profile)
    if expected.empty:
        assert got.empty
        return
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_spans_equal_the_interval_union(profile) -> None:
    events = profile.events
    real = ~activity.is_bookkeeping(events)
    union = activity.interval_union(events["start_us"].to_numpy()[real], events["dur_us"].to_numpy()[real])
    everything = activity.interval_union(events["start_us"].to_numpy(), events["dur_us"].to_numpy())
    with metrics.shared(profile):
        assert trace_metrics.span_us(profile) == float(union.span)
        assert trace_metrics.time_origin(profile) == float(union.first_start)
        assert trace_metrics.recorded_span_us(profile) == float(everything.span)


def test_thread_count_equals_the_distinct_threads(profile) -> None:
    ids, _ = trace_metrics.thread_index(profile.events)
    expected = float(np.unique(ids[~activity.is_bookkeeping(profile.events)]).size)
    with metrics.shared(profile):
        assert trace_metrics.thread_count(profile) == expected


@pytest.mark.parametrize(
    "values",
    [[], [3, 3, 3], [2, -1, 2, 7], [1.5, np.nan, 1.5], [np.nan, np.nan], [0.0]],
)
def test_distinct_is_unique(values) -> None:
    array = np.asarray(values, dtype=np.float64)
    np.testing.assert_array_equal(activity.distinct(array), np.unique(array))
    assert activity.distinct(array).dtype == np.unique(array).dtype


@pytest.mark.parametrize(
    "values",
    [
        np.array([], dtype=np.int64),
        np.array([7, 20, 7, 7, 20], dtype=np.int64),
        np.array([-128, 127, 0, -1, 5], dtype=np.int8),
        np.array([3, 1, 2**40], dtype=np.int64),  # too wide to count: np.unique
        np.array([-(2**62), 2**62], dtype=np.int64),
        np.array([2**63, 1, 2**63], dtype=np.uint64),
        np.array([2**64 - 1, 2**64 - 3], dtype=np.uint64),
        np.array([2**63 - 1, 2**63 - 5], dtype=np.int64),
        np.array([4, 2, 9], dtype=np.uint8),
        np.array([-32768, 32767, -1, 300], dtype=np.int16),  # a range wider than the dtype holds
        np.array([-(2**31), 2**31 - 1, 0], dtype=np.int32),
    ],
)
def test_distinct_integers_is_unique(values: np.ndarray) -> None:
    got = activity.distinct(values)
    np.testing.assert_array_equal(got, np.unique(values))
    assert got.dtype == np.unique(values).dtype


def test_work_groups_are_the_groupby_groups(profile) -> None:
    work = devices.device_work(profile)
    if work is None:
        pytest.skip("no GPU work")
    expected = [
        (key, part.index.tolist()) for key, part in work.groupby(["rank", "device"], sort=True, observed=True)
    ]
    with metrics.shared(profile):
        got = [((r, d), list(range(len(work)))[rows]) for r, d, rows in devices._work_groups(profile, work)]
    assert got == expected


def test_top_kernels_equal_the_two_pass_statistics(profile) -> None:
    work = devices.device_work(profile)
    if work is None:
        pytest.skip("no GPU work")
    start, end = exact_times(work)  # the trace's own times
    dur = pd.Series(end - start, index=work.index)
    frame = pd.DataFrame({"name": work["name"], "dur": dur})
    out = frame.groupby("name", observed=True)["dur"].agg(count="size", total_us="sum")
    out = out.sort_values("total_us", ascending=False, kind="stable").head(5)
    shown = frame[frame["name"].isin(out.index)].groupby("name", observed=True)["dur"]
    out = out.join(shown.agg(mean_us="mean", min_us="min", max_us="max", std_us="std")).reset_index()
    got = devices.top_kernels(profile, 5)
    for column in ("count", "total_us", "mean_us", "min_us", "max_us", "std_us"):
        np.testing.assert_array_equal(got[column].to_numpy(), out[column].to_numpy())
    assert got["name"].tolist() == out["name"].astype("str").tolist()


def test_device_categories_by_count_equal_the_factorised(profile, monkeypatch) -> None:
    from popprof.trace import device

    events = profile.events
    rules = device.resolve_map(profile.source_format)
    dense = device.device_categories(events["channel"].array, events["name"].array, rules)
    monkeypatch.setattr(device, "DENSE_PAIRS", 0)
    hashed = device.device_categories(events["channel"].array, events["name"].array, rules)
    pd.testing.assert_extension_array_equal(dense, hashed)
    pd.testing.assert_extension_array_equal(dense, events["device_category"].array)


@pytest.mark.parametrize(
    "devices_", [[np.nan, 3.0, np.nan], [1.0, 0.0, 1.0, np.nan], [np.nan, np.nan, np.nan]]
)
def test_kineto_device_codes_equal_unique(devices_) -> None:
    from popprof.readers.chrome.tables import kineto_columns

    device = np.asarray(devices_, dtype=np.float64)
    stream = np.array([7.0] * (len(device) - 1) + [np.nan])
    pid = np.arange(len(device), dtype=np.int64) + 5
    codes, labels = kineto_columns(stream, np.full(len(device), np.nan), device, pid)["device"]
    on = ~np.isnan(stream)
    uniq, inverse = np.unique(
        np.where(np.isnan(device), pid.astype(np.float64), device)[on], return_inverse=True
    )
    assert labels == [f"gpu:{int(v)}" for v in uniq]
    assert codes.tolist() == [*inverse.tolist(), -1]


def _idle_breakdown_by_groupby(profile: popprof.Profile, delay: float) -> pd.DataFrame:
    """HTA's idle breakdown with pandas' groupby over (rank, device, stream, cause), a gap measured from the latest
    end of the stream's earlier items and never below zero (HTA sums overlapping items' negative gaps)."""
    work = devices.device_work(profile)
    work = work[work["channel"].isin(devices.KERNEL_CHANNELS).to_numpy()]
    codes = np.asarray(work["device"].array.codes)
    order = np.lexsort((work["start"].to_numpy(), work["stream"].to_numpy(), codes, work["rank"].to_numpy()))
    work = work.iloc[order]
    rank, stream, codes = work["rank"].to_numpy(), work["stream"].to_numpy(), codes[order]
    same = np.zeros(len(work), dtype=bool)
    same[1:] = (rank[1:] == rank[:-1]) & (stream[1:] == stream[:-1]) & (codes[1:] == codes[:-1])
    # the stream's latest end so far (overlapping items are no idle time): a cummax per stream
    frontier = work["end"].groupby(np.cumsum(~same)).cummax().to_numpy()
    prev_end = np.full(len(work), np.nan)
    prev_end[1:] = np.where(same[1:], frontier[:-1], np.nan)
    gap = np.maximum(work["start"].to_numpy() - prev_end, 0.0)
    host_wait = work["launch_start"].to_numpy() > prev_end
    cause = np.where(host_wait, 0, np.where(~host_wait & (gap < delay), 1, 2)).astype(np.int8)
    frame = work[["rank", "device", "stream"]].assign(
        idle_category=pd.Categorical.from_codes(cause, ["host_wait", "kernel_wait", "other"]),
        idle_us=np.nan_to_num(gap, nan=0.0),
    )
    keys = ["rank", "device", "stream", "idle_category"]
    out = frame.groupby(keys, sort=True, observed=True)["idle_us"].sum().reset_index()
    totals = out.groupby(keys[:3], observed=True)["idle_us"].transform("sum")
    out["idle_ratio"] = np.where(totals > 0, out["idle_us"] / totals.where(totals > 0, 1.0), np.nan)
    out["rank"] = out["rank"].where(out["rank"] >= 0).astype("Int64")
    out["device"] = out["device"].astype("str")
    out["idle_category"] = out["idle_category"].astype("str")
    return out[[*keys, "idle_us", "idle_ratio"]]


@pytest.mark.parametrize("delay", [devices.CONSECUTIVE_KERNEL_DELAY_US, 2.0])
def test_idle_breakdown_equals_the_groupby(profile, delay: float) -> None:
    if devices.device_work(profile) is None:
        pytest.skip("no GPU work")
    expected = _idle_breakdown_by_groupby(profile, delay)
    got = devices.idle_breakdown(profile, delay)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_state_durations_states_are_the_unique_ones() -> None:
    from popprof.trace import spans

    rng = np.random.default_rng(7)
    kinds = []
    for _ in range(3):
        start = np.round(rng.uniform(0, 1000, 400), 1)
        kinds.append((start, start + np.round(rng.exponential(5.0, 400), 1)))
    got = spans.state_durations(kinds)
    times, deltas = [], []
    for bit, (start, end) in enumerate(kinds):
        s, e = spans.merge_intervals(start, end)
        times += [s, e]
        deltas += [np.full(s.size, 1 << bit), np.full(e.size, -(1 << bit))]
    t, d = np.concatenate(times), np.concatenate(deltas)
    order = np.argsort(t, kind="stable")
    t, state = t[order], np.cumsum(d[order])[:-1]
    seg = np.diff(t)
    expected = {int(v): float(seg[state == v].sum()) for v in np.unique(state[state > 0]).tolist()}
    assert got == expected and len(got) == 7


def test_has_fraction_is_the_remainder_test() -> None:
    from popprof.trace.gpu_work import has_fraction

    values = np.array([0.0, -0.0, 1.0, 1.5, -2.25, 1e300, 2.0**53 + 2, np.nan, np.inf, -np.inf, 5e-324])
    with np.errstate(invalid="ignore"):
        expected = values % 1 != 0
    np.testing.assert_array_equal(has_fraction(values), expected)


def test_interval_window_is_the_union_window() -> None:
    start = np.array([5.0, np.nan, 1.5, 9.0, 3.0, 2.0])
    dur = np.array([1.0, 4.0, np.nan, -3.0, 10.0, 0.5])
    for mask in (None, np.array([True, True, False, True, False, True]), np.zeros(6, dtype=bool)):
        keep = np.ones(6, dtype=bool) if mask is None else mask
        union = activity.interval_union(start[keep], dur[keep])
        window = activity.interval_window(start, dur, mask)
        assert window == (None if union is None else (union.first_start, union.last_end))


def _launch_summary_by_groupby(delays: pd.DataFrame) -> pd.DataFrame:
    """Launch-delay statistics by pandas' groupby over the (rank, device) columns of the delays table."""
    grouped = delays.groupby(["rank", "device"], dropna=False, observed=True)
    delay = grouped["launch_delay_us"]
    out = delay.agg(launches="size", mean_us="mean", median_us="median", max_us="max")
    out["p95_us"] = delay.quantile(0.95)
    out["cpu_mean_us"] = grouped["cpu_duration_us"].mean()
    out = out.reset_index()
    out["device"] = out["device"].astype("str")
    return out[["rank", "device", "launches", "mean_us", "median_us", "p95_us", "max_us", "cpu_mean_us"]]


def test_launch_summary_equals_the_groupby(profile) -> None:
    delays = devices.launch_delays(profile)
    got = devices.launch_summary(profile)
    if delays.empty:
        assert got.empty
        return
    pd.testing.assert_frame_equal(got, _launch_summary_by_groupby(delays), check_exact=True)


@pytest.mark.parametrize(
    ("rank", "codes"),
    [
        ([0], [0]),
        ([-1, -1, -1], [1, 0, -1]),
        ([3, -1, 0, 3, 0, -1], [0, 1, 1, -1, 0, 0]),
        ([2, 2, 1, 1], [-1, -1, 1, 1]),
    ],
)
def test_rank_device_key_orders_as_groupby(rank: list[int], codes: list[int]) -> None:
    rank_, codes_ = np.asarray(rank, dtype=np.int64), np.asarray(codes, dtype=np.int64)
    key, group_rank, group_code = devices._rank_device_key(rank_, codes_, 2)
    frame = pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.where(rank_ >= 0, rank_, 0), rank_ < 0),
            "device": pd.Categorical.from_codes(codes_, ["a", "b"]),
            "row": np.arange(len(rank)),
        }
    )
    groups = frame.groupby(["rank", "device"], dropna=False, observed=True)["row"].apply(list)
    expected_rank = [-1 if pd.isna(r) else int(r) for r, _ in groups.index]
    expected_code = [-1 if pd.isna(d) else ["a", "b"].index(d) for _, d in groups.index]
    assert group_rank.tolist() == expected_rank and group_code.tolist() == expected_code
    by_key = pd.Series(np.arange(len(rank))).groupby(key, sort=True).apply(list)
    assert by_key.tolist() == groups.tolist()


@pytest.mark.parametrize("top", [1, 5, 100])
def test_top_kernels_equal_the_categorical_groupby(profile, top: int) -> None:
    work = devices.device_work(profile)
    if work is None:
        pytest.skip("no GPU work")
    start, end = exact_times(work)
    dur = pd.Series(end - start, index=work.index)
    grouped = dur.groupby(work["name"], observed=True)
    out = grouped.agg(count="size", total_us="sum", mean_us="mean", min_us="min", max_us="max", std_us="std")
    out = out.sort_values("total_us", ascending=False, kind="stable").head(top).reset_index()
    out["name"] = out["name"].astype("str")
    first = work.groupby(work["name"].astype("str"))["kernel_type"].first().astype("str")
    out["kernel_type"] = [first[n] for n in out["name"]]  # each name's type as the work frame has it
    expected = out[devices.KERNEL_STAT_COLUMNS]
    pd.testing.assert_frame_equal(devices.top_kernels(profile, top), expected, check_exact=True)


def _device_time_by_groupby(events: pd.DataFrame) -> pd.Series:
    """Device time per category by pandas' groupby over the category column (nested device time once)."""
    from popprof.trace.device import DEVICE_CATEGORIES
    from popprof.trace.nesting import parent_positions

    dur = events["dur_us"].fillna(0.0).to_numpy(dtype=np.float64)
    is_device = events["device_category"].isin(activity.BUSY_CATEGORIES).to_numpy()
    parent = parent_positions(events)
    child = is_device & (parent >= 0)
    child[child] = is_device[parent[child]]
    own = np.maximum(dur - np.bincount(parent[child], weights=dur[child], minlength=len(dur)), 0.0)
    category = events["device_category"][is_device]
    sums = pd.Series(own[is_device], index=category.index).groupby(category, observed=False).sum()
    return sums.reindex(list(DEVICE_CATEGORIES), fill_value=0.0).astype("float64")


def _as_plain_categories(events: pd.DataFrame) -> pd.DataFrame:
    """The events with ``device_category`` as an object column (not the readers' categorical)."""
    return events.assign(device_category=events["device_category"].astype(object))


def test_device_masks_equal_the_plain_comparisons(profile) -> None:
    events = profile.events
    column = events["device_category"]
    busy = column.isin(activity.BUSY_CATEGORIES).to_numpy()
    wait = (column == "host_wait").to_numpy(dtype=bool, na_value=False)
    for table in (events, _as_plain_categories(events)):
        np.testing.assert_array_equal(activity.is_device_activity(table), busy)
        np.testing.assert_array_equal(activity.is_host_wait(table), wait)


def test_device_time_by_category_equals_the_groupby(profile) -> None:
    events = profile.events
    expected = _device_time_by_groupby(events)
    for table in (events, _as_plain_categories(events)):
        got = activity.device_time_by_category(table)
        np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())
        assert got.index.tolist() == expected.index.tolist()


def _edge_events(rows: list[tuple[str | None, float, float, int]]) -> pd.DataFrame:
    """A small events table: (device category, start, duration, rank) per event, none nested."""
    n = len(rows)
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "parent_id": pd.array([None] * n, dtype="Int64"),
            "name": pd.Categorical([f"op{i % 2}" if i != 2 else None for i in range(n)]),
            "device_category": pd.Categorical([r[0] for r in rows]),
            "start_us": [r[1] for r in rows],
            "dur_us": [r[2] for r in rows],
            "rank": pd.array([r[3] for r in rows], dtype="Int64"),
        }
    )


EDGE_TABLES = [
    [],
    [("compute", 0.0, 5.0, 0)],
    [("host_wait", 0.0, np.nan, 0), ("compute", 1.0, 2.0, 0), (None, 3.0, 1.0, 0)],
    [("host_wait", 0.0, 4.0, 0), ("host_wait", 2.0, 4.0, 1), ("host_wait", 1.0, 0.5, 1), ("other", 0, 1, 1)],
]


@pytest.mark.parametrize("rows", EDGE_TABLES)
def test_device_time_by_category_edge_cases(rows) -> None:
    events = _edge_events(rows)
    expected = _device_time_by_groupby(events)
    got = activity.device_time_by_category(events)
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())


def _host_wait_top_by_groupby(events: pd.DataFrame, top: int) -> list[dict]:
    """The host-wait calls with the most time, by pandas' groupby over the waits' names."""
    waits = events[activity.is_host_wait(events) & ~activity.is_bookkeeping(events)]
    by_name = (
        pd.DataFrame({"name": waits["name"], "d": waits["dur_us"].fillna(0.0).to_numpy()})
        .groupby("name", observed=True)["d"]
        .agg(["size", "sum"])
        .sort_values("sum", ascending=False, kind="stable")
        .head(top)
    )
    return [
        {"name": str(n), "count": int(r["size"]), "total_us": float(r["sum"])} for n, r in by_name.iterrows()
    ]


@pytest.mark.parametrize("top", [1, 5])
def test_host_wait_top_equals_the_groupby(profile, top: int) -> None:
    from popprof.metrics.trace_summary import host_wait_summary

    got = host_wait_summary(profile.events, 1.0, top)["top"]
    assert got == _host_wait_top_by_groupby(profile.events, top)


@pytest.mark.parametrize("rows", EDGE_TABLES)
def test_host_wait_summary_edge_cases(rows) -> None:
    from popprof.metrics.trace_summary import host_wait_summary

    events = _edge_events(rows)
    summary = host_wait_summary(events, 10.0, 5)
    assert summary["top"] == _host_wait_top_by_groupby(events, 5)


def test_clipped_durations_are_the_clipped_nan_to_num() -> None:
    values = np.array([-0.0, 0.0, np.nan, -1.0, np.inf, -np.inf, 2.5, 5e-324, -5e-324, 1e308])
    for dur in (values, values[values != np.inf], np.array([]), np.array([np.inf])):
        expected = np.maximum(np.nan_to_num(dur, nan=0.0), 0.0)
        got = activity.clipped_durations(dur)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize(
    "start",
    [
        np.array([1.0, 2.0, 2.0, 5.0]),  # in order: no sort
        np.array([5.0, 1.0, 2.0, 2.0]),
        np.array([1.0, np.nan, 3.0]),
        np.array([-0.0, 0.0, -0.0]),
        np.array([3.0]),
    ],
)
def test_merge_intervals_in_order_equals_the_sorted(start: np.ndarray) -> None:
    from popprof.trace import spans

    end = start + np.array([1.0, 0.5, 3.0, 0.0])[: len(start)]
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.concatenate(([True], s[1:] > reach[:-1])))
    last = np.append(first[1:] - 1, len(s) - 1)
    got = spans.merge_intervals(start, end)
    np.testing.assert_array_equal(got[0], s[first])
    np.testing.assert_array_equal(got[1], reach[last])


def test_kind_unions_are_the_unions_of_each_kernel_type(profile) -> None:
    from popprof.trace import spans

    work = devices.device_work(profile)
    if work is None:
        pytest.skip("no GPU work")
    kinds = np.asarray(work["kernel_type"].array.codes)
    starts, ends = exact_times(work)  # popprof's kernel types in the trace's own times
    with metrics.shared(profile):
        groups = devices._work_groups(profile, work)
        unions = devices._kind_unions(profile, work)
    for (_, _, part), merged in zip(groups, unions, strict=True):
        raw = {}
        for k in (devices.COMPUTATION, devices.COMMUNICATION, devices.MEMORY):
            mine = kinds[part] == devices.KERNEL_TYPES.index(k)
            raw[k] = (starts[part][mine], ends[part][mine])
            assert devices._length(merged[k]) == spans.union_length(*raw[k])
        labels = list(raw)
        assert spans.state_durations([merged[k] for k in labels]) == spans.state_durations(
            [raw[k] for k in labels]
        )


@pytest.mark.parametrize(
    ("step_rank", "step_start"),
    [
        ([0, 0], [10.0, 20.0]),
        ([0, 1, 1, 2], [5.0, np.nan, 7.0, np.nan]),
        ([3], [0.0]),
        ([], []),
    ],
)
def test_before_last_step_equals_the_groupby_reindex(step_rank: list[int], step_start: list[float]) -> None:
    from popprof.trace.gpu_work import _before_last_step

    rank = np.array([0, 0, 1, 1, 2, 5, 0, 3, -1], dtype=np.int64)
    start = np.array([1.0, 25.0, 7.0, 6.0, 3.0, 9.0, 20.0, np.nan, 4.0])
    step_rank_, step_start_ = np.asarray(step_rank, dtype=np.int64), np.asarray(step_start, dtype=np.float64)
    limit = pd.Series(step_start_).groupby(step_rank_).max().reindex(rank).to_numpy(dtype=np.float64)
    np.testing.assert_array_equal(_before_last_step(rank, start, step_rank_, step_start_), ~(start >= limit))


@pytest.mark.parametrize(
    "values",
    [
        [],
        [3.0],
        [1.0, 5.0, 5.0, 2.0, 5.0],
        [0.0, -0.0, 0.0, 1.0],
        [np.nan, 2.0, np.nan, np.inf, -np.inf, 2.0],
    ],
)
@pytest.mark.parametrize("top", [1, 3, 10])
def test_top_positions_are_the_stable_descending_head(values: list[float], top: int) -> None:
    from popprof.metrics.trace_summary import top_positions

    series = pd.Series(values, dtype=np.float64)
    expected = series.sort_values(ascending=False, kind="stable").head(top).index.to_numpy()
    np.testing.assert_array_equal(top_positions(series.to_numpy(), top), expected)


def test_by_name_equals_the_selected_bincounts(profile) -> None:
    from popprof.metrics import trace_summary

    events = profile.events
    dur = events["dur_us"].fillna(0.0).to_numpy(dtype=np.float64)
    own = trace_summary.event_self_time(events)
    codes, names = trace_summary._name_codes(events)
    for mask in (~activity.is_bookkeeping(events), activity.is_device_activity(events)):
        keep = mask & (codes >= 0)
        count = np.bincount(codes[keep], minlength=len(names))
        got = trace_summary._by_name(codes, names, dur, own, mask)
        np.testing.assert_array_equal(got.count, count[count > 0])
        for column, weights in (("total_us", dur), ("self_us", own)):
            expected = np.bincount(codes[keep], weights=weights[keep], minlength=len(names))[count > 0]
            np.testing.assert_array_equal(getattr(got, column), expected)
        assert got.names.tolist() == names[count > 0].tolist()


def test_device_time_by_category_nested_equals_the_groupby() -> None:
    events = _edge_events(
        [
            ("compute", 0.0, 10.0, 0),
            ("exchange", 1.0, 3.0, 0),
            ("sync", 5.0, 20.0, 0),
            ("other", 6.0, -1.0, 0),
        ]
    )
    events["parent_id"] = pd.array([None, 0, 0, 2], dtype="Int64")  # the sync outlasts its parent: clipped
    expected = _device_time_by_groupby(events)
    np.testing.assert_array_equal(activity.device_time_by_category(events).to_numpy(), expected.to_numpy())


def test_rank_step_times_equal_the_sorted_frame(profile) -> None:
    from popprof.metrics import ranks
    from popprof.trace.masks import rank_codes

    events = profile.events
    marks = activity.is_step_marker(events)
    names = events["name"].astype("str").to_numpy()[marks]
    frame = pd.DataFrame(
        {
            "rank": rank_codes(events)[marks],
            "step": np.array([int(n.rsplit("#", 1)[1]) for n in names], dtype=np.int64),
            "start_us": events["start_us"].to_numpy(dtype=np.float64)[marks],
            "dur_us": events["dur_us"].to_numpy(dtype=np.float64)[marks],
        }
    )
    expected = frame[frame["dur_us"].notna()].sort_values(["rank", "step"]).reset_index(drop=True)
    got = ranks.step_times(profile)
    if expected.empty:
        assert got.empty
        return
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_labels_mask_of_some_rows_is_the_whole_mask_there(profile) -> None:
    """``labels_mask`` of chosen rows (the collectives test the rows on a stream only) is the whole
    column's mask at those rows, on the categorical column and on the same values as plain strings."""
    events = profile.events
    rows = np.flatnonzero(events["stream"].notna().to_numpy())[::3]
    for column, labels in (
        (events["device_category"], ("exchange",)),
        (events["channel"], ("kernel", "gpu")),
    ):
        whole = activity.labels_mask(column, labels)
        np.testing.assert_array_equal(activity.labels_mask(column, labels, rows), whole[rows])
        plain = column.astype("str")
        np.testing.assert_array_equal(activity.labels_mask(plain, labels, rows), whole[rows])


@pytest.mark.parametrize("hits", [0, 1, 3, 8, 9, None])
def test_codes_mask_equals_isin(profile, hits: int | None) -> None:
    # a few categories hit (compared code by code) and many (the lookup table): both are isin, and a
    # missing name (code -1) is never hit
    names = profile.events["name"].array
    categories = names.categories
    hit = np.zeros(len(categories), dtype=bool)
    hit[: len(categories) if hits is None else hits] = True
    expected = pd.Series(names).isin(categories[hit]).to_numpy()
    np.testing.assert_array_equal(activity.category_mask(names, hit), expected)
    rows = np.arange(0, len(names), 3)
    np.testing.assert_array_equal(activity.codes_mask(np.asarray(names.codes)[rows], hit), expected[rows])


@pytest.mark.parametrize("categories", [("exchange", "global_exchange", "sync"), ("compute",), ("host_io",)])
def test_exposed_equals_the_subtraction_of_every_other_event(profile, categories) -> None:
    # exposed() merges only the other events that touch A: the same intervals as subtracting the union of all
    from popprof.model.errors import NotEvaluated
    from popprof.trace.intervals import device_activities
    from popprof.trace.spans import merge_intervals, subtract_intervals

    try:
        activities = device_activities(profile)
    except NotEvaluated:
        pytest.skip("no device activity")
    for device in activities:
        mine = device.in_categories(categories)
        a = merge_intervals(device.start[mine], device.end[mine])
        b = merge_intervals(device.start[~mine], device.end[~mine])
        expected = subtract_intervals(*a, *b)
        got = device.exposed(categories)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
