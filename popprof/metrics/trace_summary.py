"""A trace's summary: span, per-device figures, top kernels and CPU ops, busiest threads, host waits.

:func:`trace_summary` gives plain data (JSON-ready: times in microseconds, ``start_us``
absolute as in the trace); :func:`render_trace_text` the part of ``popprof summary`` a
person reads (times relative to the trace start, in ms / s; ids printed plainly).
Profiler bookkeeping (``events.bookkeeping``) is counted but never a busiest thread or a
top event.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..io import jsonout
from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import (
    OPERATOR_CHANNELS,
    device_time_by_category,
    device_union,
    distinct,
    interval_union,
    is_bookkeeping,
    is_device_activity,
    is_host_wait,
    is_step_marker,
    labels_mask,
)
from ..trace.device import DEVICE_CATEGORIES
from ..trace.nesting import parent_positions, self_time
from . import trace as trace_metrics


def event_self_time(events: pd.DataFrame, parent: np.ndarray | None = None) -> np.ndarray:
    """Self time of every event (its duration minus its direct children's), by row; ``parent``: the events'
    :func:`popprof.trace.nesting.parent_positions` when the caller has them."""
    parent = parent_positions(events) if parent is None else parent
    return self_time(parent, events["dur_us"].to_numpy(dtype=np.float64))


def _thread_names(profile: Profile) -> dict[tuple[int, int, int], tuple[str | None, str | None]]:
    threads = profile.get("threads")
    if threads is None:
        return {}
    rank = (
        threads["rank"].fillna(-1).astype("int64")
        if "rank" in threads.columns
        else pd.Series(-1, threads.index)
    )
    return {
        (int(r), int(p), int(t)): (None if pd.isna(pn) else pn, None if pd.isna(tn) else tn)
        for r, p, t, pn, tn in zip(
            rank, threads["pid"], threads["tid"], threads["process_name"], threads["thread_name"], strict=True
        )
    }


def _ranks(events: pd.DataFrame) -> np.ndarray:
    return (
        events["rank"].fillna(-1).to_numpy(dtype=np.int64)
        if "rank" in events.columns
        else np.full(len(events), -1, dtype=np.int64)
    )


def trace_summary(profile: Profile, top: int = 10) -> dict:
    """Summary of a profile's ``events`` as plain data (JSON-ready); ``{}`` when it has none."""
    events = profile.get("events")
    if events is None or events.empty:
        return {}
    dur = events["dur_us"].to_numpy(dtype=np.float64)
    dur = np.where(np.isnan(dur), 0.0, dur)  # fillna(0.0), without a new Series
    bookkeeping = masks.bookkeeping_mask(profile)
    real = ~bookkeeping
    ranks = sorted(int(r) for r in distinct(masks.rank_array(profile)) if r >= 0)
    out: dict[str, object] = {
        "events": int(trace_metrics.event_count(profile)),
        "threads": int(trace_metrics.thread_count(profile)),
        "ranks": ranks,
        "span_us": trace_metrics.span_us(profile),
        "recorded_span_us": trace_metrics.recorded_span_us(profile),
        "start_us": trace_metrics.time_origin(profile),
        "bookkeeping_events": int(bookkeeping.sum()),
    }
    threads = trace_metrics.thread_ids(profile)
    out["busiest_threads"] = _busiest_threads(profile, threads, real, dur, out["span_us"], top)
    own = event_self_time(events, trace_metrics.parent_rows(profile))
    codes, names = _name_codes(events)
    by_name = _by_name(codes, names, dur, own, real)
    out["top_by_total"] = _records(by_name, by_name.total_us, top)
    out["top_by_self"] = _records(by_name, by_name.self_us, top)
    # ProfilerStep#N spans a step: its self time is the step's time outside ops, not an op's work
    cpu = (
        ~trace_metrics.device_activity_mask(profile)
        & real
        & ~on_device_tracks(events, threads, masks.stream_mask(profile))
        & ~masks.step_marker_mask(profile)
    )
    cpu_by_name = _by_name(codes, names, dur, own, cpu)
    out["top_cpu_ops_by_self"] = _records(cpu_by_name, cpu_by_name.self_us, top)
    out["host_wait"] = host_wait_summary(events, out["span_us"], top, profile)
    out.update(_device_part(profile, top))
    from .copies import copy_records

    kinds = copy_records(profile)
    if kinds:  # host-device copies, memsets, on-device copies: per device and kind
        out["copies"] = kinds
    from .counters import counters_section

    counters = counters_section(profile, top)
    if counters is not None:  # a CUPTI range-profiler trace: each kernel's hardware counters
        out["counters"] = counters
    from .host_cpu import host_cpu

    host = host_cpu(profile)
    if host:  # Nsight Systems' context switches: each host thread on CPU or off CPU in the device's gaps
        out["host_cpu"] = host
    out["device_activity"] = device_activity(events, profile)
    from .device_memory import device_memory

    memory = device_memory(profile)
    if memory:  # the allocator's [memory] events (profile_memory=True)
        out["device_memory"] = memory
    if "gpu_user_annotation" in events["channel"].array.categories:  # imported only for a trace that has them
        from .annotations import annotation_records

        annotations = annotation_records(profile)  # record_function ranges on the GPU timeline, HTA's figures
        if annotations:
            out["gpu_annotations"] = annotations
    from .devices import launches_without_device, named_devices_without_activity

    missing = launches_without_device(profile)
    if missing:
        out["device_side_missing"] = {"launch_calls": missing, "launches": sum(missing.values())}
    named = named_devices_without_activity(profile)
    if named:  # deviceProperties names GPUs, the trace holds none of their work
        out["no_device_activity"] = {"devices": len(named), "names": sorted(set(named))}
    return out


def _name_codes(events: pd.DataFrame) -> tuple[np.ndarray, pd.Index]:
    """Each event's name as a code into the distinct names (-1 when missing)."""
    names = events["name"]
    cat = names.array if isinstance(names.dtype, pd.CategoricalDtype) else pd.Categorical(names)
    return np.asarray(cat.codes, dtype=np.int64), pd.Index(cat.categories)


def on_device_tracks(
    events: pd.DataFrame,
    threads: tuple[np.ndarray, pd.DataFrame] | None = None,
    stream: np.ndarray | None = None,
) -> np.ndarray:
    """Events on a thread (rank, pid, tid) that holds device work: GPU streams and their annotations.

    ``threads``: :func:`popprof.metrics.trace.thread_ids` of ``events`` and ``stream``: the events with a
    stream, when the caller has them.
    """
    if stream is None:
        if "stream" not in events.columns:
            return np.zeros(len(events), dtype=bool)
        stream = events["stream"].notna().to_numpy()
    if not stream.any():
        return np.zeros(len(events), dtype=bool)
    ids, keys = trace_metrics.thread_index(events) if threads is None else threads
    device = np.zeros(len(keys), dtype=bool)
    device[ids[stream]] = True
    return device[ids]


class _NameTotals(NamedTuple):
    """Count, total and self time per name (the names with events, in their category order)."""

    names: pd.Index
    count: np.ndarray
    total_us: np.ndarray
    self_us: np.ndarray


def _by_name(
    codes: np.ndarray, names: pd.Index, dur: np.ndarray, own: np.ndarray, mask: np.ndarray
) -> _NameTotals:
    """Count, total and self time per name of the events in ``mask`` (names in their category order)."""
    # rows left out count in one extra bin: each name's sum adds the same rows in the same order
    bins = np.where(mask & (codes >= 0), codes, len(names))
    count = np.bincount(bins, minlength=len(names) + 1)[:-1]
    used = count > 0
    return _NameTotals(
        names[used],
        count[used],
        np.bincount(bins, weights=dur, minlength=len(names) + 1)[:-1][used],
        np.bincount(bins, weights=own, minlength=len(names) + 1)[:-1][used],
    )


def top_positions(values: np.ndarray, top: int) -> np.ndarray:
    """Positions of the ``top`` largest values, largest first, ties in their order and NaN last: the rows
    ``sort_values(ascending=False, kind="stable").head(top)`` keeps."""
    values = np.asarray(values, dtype=np.float64)
    return np.argsort(-values, kind="stable")[:top]


def _union_lengths(group: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each interval's length not covered by the earlier intervals of its group (by start): summed per group,
    the length of the group's union. ``dur`` is missing-free and not negative; an interval without a start
    adds nothing."""
    start = np.where(np.isfinite(start), start, np.nan)
    order = np.lexsort((start, group))
    s, e, g = start[order], start[order] + dur[order], group[order]
    frontier = (
        pd.Series(e).groupby(g).cummax().to_numpy(dtype=np.float64)
    )  # latest end so far, this one's too
    before = np.full(len(s), -np.inf)
    same = np.zeros(len(s), dtype=bool)
    same[1:] = g[1:] == g[:-1]
    before[1:] = np.where(same[1:], frontier[:-1], -np.inf)
    before = np.where(np.isnan(before), -np.inf, before)
    length = np.nan_to_num(e - np.maximum(s, before), nan=0.0).clip(min=0.0)
    out = np.empty(len(s), dtype=np.float64)
    out[order] = length
    return out


def _busiest_threads(
    profile: Profile,
    threads: tuple[np.ndarray, pd.DataFrame],
    real: np.ndarray,
    dur: np.ndarray,
    span: float | None,
    top: int,
) -> list[dict]:
    """Threads by the time under their top-level events (bookkeeping, ``~real``, left out), counted once where
    top-level events of one thread overlap (an event starting inside another that ends after it: busy time
    beyond the trace's span otherwise)."""
    events = profile.events
    ids, keys = threads
    top_level = real & (events["depth"].to_numpy() == 0)
    top_ids = ids[top_level]
    busy = np.bincount(
        top_ids,
        weights=_union_lengths(
            top_ids, events["start_us"].to_numpy(dtype=np.float64)[top_level], dur[top_level]
        ),
        minlength=len(keys),
    )
    counts = trace_metrics.thread_event_counts(profile)
    shown = np.flatnonzero(np.bincount(top_ids, minlength=len(keys)) > 0)
    shown = shown[top_positions(busy[shown], top)]
    names = _thread_names(profile)
    rows = []
    for r, p, t, busy_us, count in zip(
        keys["rank"].to_numpy()[shown],
        keys["pid"].to_numpy()[shown],
        keys["tid"].to_numpy()[shown],
        busy[shown].tolist(),
        counts[shown].tolist(),
        strict=True,
    ):
        process, thread = names.get((int(r), int(p), int(t)), (None, None))
        rows.append(
            {
                "rank": None if r < 0 else int(r),
                "pid": int(p),
                "tid": int(t),
                "process_name": process,
                "thread_name": thread,
                "busy_us": float(busy_us),
                "events": int(count),
                "busy_share": (float(busy_us) / span) if span else None,
            }
        )
    return rows


def host_wait_summary(
    events: pd.DataFrame, span: float | None, top: int = 5, profile: Profile | None = None
) -> dict:
    """Host calls blocking on the device: total (union per rank), share of the span, the top calls.

    ``profile``: the profile of ``events``, to share its masks and rank codes (:mod:`popprof.trace.masks`).
    """
    if profile is None:
        waits, bookkeeping, ranks = is_host_wait(events), is_bookkeeping(events), _ranks(events)
    else:
        waits, bookkeeping = masks.host_wait_mask(profile), masks.bookkeeping_mask(profile)
        ranks = masks.rank_array(profile)
    rows = np.flatnonzero(waits & ~bookkeeping)
    if rows.size == 0:
        return {"events": 0, "total_us": 0.0, "share": 0.0 if span else None, "top": [], "callers": []}
    rank = ranks[rows]
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    dur = events["dur_us"].to_numpy(dtype=np.float64)[rows]
    dur = np.where(np.isnan(dur), 0.0, dur)  # fillna(0.0)
    total = 0.0
    for r in np.unique(rank):
        u = interval_union(start[rank == r], dur[rank == r])
        total += 0.0 if u is None else u.busy
    all_codes, names = _name_codes(events)
    codes = all_codes[rows]
    named = codes >= 0  # an event without a name is in no group, as in groupby
    # one groupby over the name codes: the category order and the sums of groupby("name", observed=True)
    grouped = pd.Series(dur[named]).groupby(codes[named], sort=True)
    sums = grouped.sum()
    shown = top_positions(sums.to_numpy(), top)
    shown_codes, sizes, sums = sums.index[shown], grouped.size().to_numpy()[shown], sums.to_numpy()[shown]
    share = total / (span * max(len(np.unique(rank)), 1)) if span else None
    parent = trace_metrics.parent_rows(profile) if profile is not None else parent_positions(events)
    return {
        "events": int(rows.size),
        "total_us": total,
        "share": share,
        "top": [
            {"name": str(names[c]), "count": int(n), "total_us": float(t)}
            for c, n, t in zip(shown_codes, sizes.tolist(), sums.tolist(), strict=True)
        ],
        "callers": _wait_callers(events, rows, dur, parent, all_codes, names, top),
    }


def wait_callers(events: pd.DataFrame, rows: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """For each host wait at ``rows`` of ``events``, the row of what called it (-1: nothing did).

    The caller is the outermost framework operator (:data:`OPERATOR_CHANNELS`: ``cpu_op``) above the call, the
    operator the user's code called (``aten::to`` above ``aten::_to_copy`` above ``aten::copy_``, whose
    ``cudaStreamSynchronize`` waits; ``aten::is_nonzero`` above ``aten::item``); without one, the nearest
    enclosing event that is not a ``ProfilerStep#N`` marker or profiler bookkeeping (a ``record_function``
    range, a Python function); -1 for a call at the top level of its thread (``torch.cuda.synchronize()``).
    ``parent``: :func:`popprof.trace.nesting.parent_positions` of ``events``."""
    skipped = is_step_marker(events) | is_bookkeeping(events)
    operator = np.zeros(len(events), dtype=bool)  # a table without channels names no operator
    if "channel" in events.columns:
        operator = (
            labels_mask(events["channel"], OPERATOR_CHANNELS) & ~skipped
        )  # 2021's steps are ``Operator``s
    outer_op = np.full(len(rows), -1, dtype=np.int64)
    nearest = np.full(len(rows), -1, dtype=np.int64)
    at = parent[rows]
    for _ in range(len(events)):  # one level up per round; a trace's nesting is a forest, so this ends
        live = at >= 0
        if not live.any():
            break
        up = at[live]
        outer_op[live] = np.where(operator[up], up, outer_op[live])
        first = live.copy()
        first[live] = (nearest[live] < 0) & ~skipped[up]
        nearest[first] = at[first]
        at[live] = parent[up]
    return np.where(outer_op >= 0, outer_op, nearest)


def _wait_callers(
    events: pd.DataFrame,
    rows: np.ndarray,
    dur: np.ndarray,
    parent: np.ndarray,
    codes: np.ndarray,
    names: pd.Index,
    top: int,
) -> list[dict]:
    """The ``top`` (caller, call) pairs of the host waits at ``rows`` by their summed time (``dur``: each
    wait's duration; ``codes``: every event's name code into ``names``): ``caller`` (:func:`wait_callers`, None
    for a call made outside any event), ``call``, ``count`` and ``total_us``."""
    caller = wait_callers(events, rows, parent)
    caller_codes = np.where(caller >= 0, codes[np.maximum(caller, 0)], -1)
    frame = pd.DataFrame({"caller": caller_codes, "call": codes[rows], "us": dur})
    frame = frame[frame["call"] >= 0]
    grouped = frame.groupby(["caller", "call"], sort=True)["us"].agg(["size", "sum"])
    shown = top_positions(grouped["sum"].to_numpy(), top)
    out = []
    for (who, call), n, t in zip(
        grouped.index[shown], grouped["size"].to_numpy()[shown], grouped["sum"].to_numpy()[shown], strict=True
    ):
        out.append(
            {
                "caller": str(names[who]) if who >= 0 else None,
                "call": str(names[call]),
                "count": int(n),
                "total_us": float(t),
            }
        )
    return out


def _device_part(profile: Profile, top: int) -> dict:
    from . import devices
    from .queue_length import queue_section

    breakdown = devices.device_breakdown(profile)
    if breakdown.empty:
        return {}
    out: dict[str, object] = {"devices": _frame_records(breakdown)}
    kernels = devices.top_kernels(profile, top)
    if not kernels.empty:
        out["top_kernels"] = _frame_records(kernels)
        types = devices.kernel_breakdown(profile)
        out["kernel_types"] = _frame_records(types)
        hta = devices.kernel_breakdown(profile, hta=True)
        if not hta.equals(types):  # collectives HTA does not count as communication
            out["kernel_types_hta"] = _frame_records(hta)
        idle = devices.idle_breakdown(profile)
        if not idle.empty:
            causes = (
                idle.groupby(["rank", "device", "idle_category"], dropna=False)["idle_us"].sum().reset_index()
            )
            out["idle_causes"] = _frame_records(causes)
        launches = devices.launch_summary(profile)
        if not launches.empty:
            out["launch_delays"] = _frame_records(launches)
        queues = queue_section(profile)
        if queues is not None:
            out["queue_lengths"] = queues
    spans = _whole_work_spans(profile, breakdown)
    if spans:
        out["work_spans"] = spans
    return out


def _whole_work_spans(profile: Profile, breakdown: pd.DataFrame) -> list[dict]:
    """Each GPU's first to last work item with the last profiler step included, where that is longer than
    HTA's window of the device table (which leaves the last step out): both windows, named."""
    events = profile.events
    gpu = np.flatnonzero(breakdown["platform"].to_numpy() == "gpu")
    if gpu.size == 0 or "stream" not in events.columns:
        return []
    rows = np.flatnonzero(masks.stream_mask(profile) & ~masks.bookkeeping_mask(profile))
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    dur = events["dur_us"].to_numpy(dtype=np.float64)[rows]
    end = start + np.where(np.isnan(dur), 0.0, dur)
    column = events["device"]
    device = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    labels = pd.Index(device.categories.astype("str"))
    # one number per (rank, device code) of each work item, as the device table's rows name them
    key = (masks.rank_array(profile)[rows] + 1) * (len(labels) + 1) + (np.asarray(device.codes)[rows] + 1)
    keys = distinct(key)
    out = []
    for rank, name, window in zip(
        breakdown["rank"].array[gpu].to_numpy(dtype=np.float64, na_value=-1.0).astype(np.int64).tolist(),
        breakdown["device"].to_numpy()[gpu].tolist(),
        breakdown["span_us"].to_numpy(dtype=np.float64, na_value=np.nan)[gpu].tolist(),
        strict=True,
    ):
        name = str(name)
        if name not in labels or np.isnan(window):
            continue
        wanted = (rank + 1) * (len(labels) + 1) + labels.get_loc(name) + 1
        if wanted not in keys:
            continue
        # the device's items by their key, not by a groupby on its name; min and max skip a missing time
        mine = slice(None) if keys.size == 1 else key == wanted
        span = float(np.fmax.reduce(end[mine]) - np.fmin.reduce(start[mine]))
        if span > window + 1.0:  # HTA's rounding moves the ends by under 1 us
            out.append({"rank": None if rank < 0 else rank, "device": name, "span_us": span})
    return out


def _frame_records(frame: pd.DataFrame) -> list[dict]:
    """DataFrame rows as JSON-ready dicts (missing values as None, numpy scalars as Python), every value as
    computed: ``DataFrame.to_json`` rounds floats to 10 decimals, which moved a p95 of 113.94999999999993 us to
    113.95 and its text to 114.0 us, beside the same figure's 113.9 us elsewhere in the summary."""
    return jsonout.plain(frame)


def device_activity(events: pd.DataFrame, profile: Profile | None = None) -> dict:
    """Per device category: event count and device time (nested device events counted once); busy, idle.

    ``profile``: the profile of ``events``, to share its intermediates (the device union, masks).
    """
    mask = is_device_activity(events) if profile is None else trace_metrics.device_activity_mask(profile)
    if not mask.any():
        return {}
    column = events["device_category"]
    category = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)
    sizes = pd.Series(
        np.bincount(np.asarray(category.codes)[mask], minlength=len(category.categories)),
        index=category.categories,
    )
    sums = device_time_by_category(events) if profile is None else trace_metrics.device_time_sums(profile)
    categories = {
        c: {"events": int(sizes.get(c, 0)), "total_us": float(sums.get(c, 0.0))}
        for c in DEVICE_CATEGORIES
        if sizes.get(c, 0)
    }
    union = device_union(events) if profile is None else trace_metrics.device_work_union(profile)
    out: dict[str, object] = {"by_category": categories}
    if union is not None:
        out.update(
            {
                "active_span_us": union.span,
                "busy_us": union.busy,
                "idle_us": union.idle,
                "idle_share": union.idle / union.span if union.span > 0 else 0.0,
                "idle_gaps": int(union.gaps.size),
            }
        )
    return out


def _records(totals: _NameTotals, by: np.ndarray, top: int) -> list[dict]:
    """The ``top`` names by ``by`` (one of ``totals``' columns), largest first."""
    shown = top_positions(by, top)
    return [
        {"name": str(totals.names[i]), "count": int(count), "total_us": float(total), "self_us": float(own)}
        for i, count, total, own in zip(
            shown.tolist(),
            totals.count[shown].tolist(),
            totals.total_us[shown].tolist(),
            totals.self_us[shown].tolist(),
            strict=True,
        )
    ]
