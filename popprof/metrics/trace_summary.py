"""A trace's summary: span, per-device figures, top kernels and CPU ops, busiest threads, host waits.

:func:`trace_summary` gives plain data (JSON-ready: times in microseconds, ``start_us``
absolute as in the trace); :func:`render_trace_text` the part of ``popprof summary`` a
person reads (times relative to the trace start, in ms / s; ids printed plainly).
Profiler bookkeeping (``events.bookkeeping``) is counted but never a busiest thread or a
top event.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.activity import (
    device_time_by_category,
    device_union,
    interval_union,
    is_bookkeeping,
    is_device_activity,
    is_host_wait,
)
from ..trace.device import DEVICE_CATEGORIES
from ..trace.nesting import parent_positions, self_time
from . import trace as trace_metrics


def event_self_time(events: pd.DataFrame) -> np.ndarray:
    """Self time of every event (its duration minus its direct children's), by row."""
    return self_time(parent_positions(events), events["dur_us"].to_numpy(dtype=np.float64))


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
    dur = events["dur_us"].fillna(0.0)
    bookkeeping = is_bookkeeping(events)
    real = events[~bookkeeping]
    ranks = sorted(int(r) for r in np.unique(_ranks(events)) if r >= 0)
    out: dict[str, object] = {
        "events": int(trace_metrics.event_count(profile)),
        "threads": int(trace_metrics.thread_count(profile)),
        "ranks": ranks,
        "span_us": trace_metrics.span_us(profile),
        "recorded_span_us": trace_metrics.recorded_span_us(profile),
        "start_us": trace_metrics.time_origin(profile),
        "bookkeeping_events": int(bookkeeping.sum()),
    }
    out["busiest_threads"] = _busiest_threads(profile, real, dur[~bookkeeping], out["span_us"], top)
    frame = pd.DataFrame({"name": events["name"], "total_us": dur, "self_us": event_self_time(events)})[
        ~bookkeeping
    ]
    by_name = _by_name(frame)
    out["top_by_total"] = _records(by_name.sort_values("total_us", ascending=False, kind="stable").head(top))
    out["top_by_self"] = _records(by_name.sort_values("self_us", ascending=False, kind="stable").head(top))
    cpu = ~is_device_activity(events) & ~bookkeeping & ~on_device_tracks(events)
    cpu_by_name = _by_name(
        pd.DataFrame({"name": events["name"], "total_us": dur, "self_us": event_self_time(events)})[cpu]
    )
    out["top_cpu_ops_by_self"] = _records(
        cpu_by_name.sort_values("self_us", ascending=False, kind="stable").head(top)
    )
    out["host_wait"] = host_wait_summary(events, out["span_us"], top)
    out.update(_device_part(profile, top))
    out["device_activity"] = device_activity(events)
    from .devices import launches_without_device

    missing = launches_without_device(profile)
    if missing:
        out["device_side_missing"] = {"launch_calls": missing, "launches": sum(missing.values())}
    return out


def on_device_tracks(events: pd.DataFrame) -> np.ndarray:
    """Events on a thread (rank, pid, tid) that holds device work: GPU streams and their annotations."""
    if "stream" not in events.columns or not events["stream"].notna().any():
        return np.zeros(len(events), dtype=bool)
    keys = pd.MultiIndex.from_arrays([_ranks(events), events["pid"].to_numpy(), events["tid"].to_numpy()])
    device_keys = keys[events["stream"].notna().to_numpy()].unique()
    return keys.isin(device_keys)


def _by_name(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.groupby("name", observed=True).agg(
        count=("total_us", "size"), total_us=("total_us", "sum"), self_us=("self_us", "sum")
    )


def _busiest_threads(
    profile: Profile, events: pd.DataFrame, dur: pd.Series, span: float | None, top: int
) -> list[dict]:
    """Threads by the time under their top-level events (bookkeeping already left out)."""
    frame = pd.DataFrame(
        {
            "rank": _ranks(events),
            "pid": events["pid"].to_numpy(),
            "tid": events["tid"].to_numpy(),
            "d": dur.to_numpy(),
            "top": (events["depth"] == 0).to_numpy(),
        }
    )
    busy = frame[frame["top"]].groupby(["rank", "pid", "tid"]).agg(busy_us=("d", "sum"))
    counts = frame.groupby(["rank", "pid", "tid"]).size().rename("events")
    busy = busy.join(counts).sort_values("busy_us", ascending=False, kind="stable").head(top)
    names = _thread_names(profile)
    rows = []
    for (r, p, t), row in busy.iterrows():
        process, thread = names.get((int(r), int(p), int(t)), (None, None))
        rows.append(
            {
                "rank": None if r < 0 else int(r),
                "pid": int(p),
                "tid": int(t),
                "process_name": process,
                "thread_name": thread,
                "busy_us": float(row.busy_us),
                "events": int(row.events),
                "busy_share": (float(row.busy_us) / span) if span else None,
            }
        )
    return rows


def host_wait_summary(events: pd.DataFrame, span: float | None, top: int = 5) -> dict:
    """Host calls blocking on the device: total (union per rank), share of the span, the top calls."""
    mask = is_host_wait(events) & ~is_bookkeeping(events)
    if not mask.any():
        return {"events": 0, "total_us": 0.0, "share": 0.0 if span else None, "top": []}
    waits = events[mask]
    rank = _ranks(waits)
    start = waits["start_us"].to_numpy(dtype=np.float64)
    dur = waits["dur_us"].fillna(0.0).to_numpy(dtype=np.float64)
    total = 0.0
    for r in np.unique(rank):
        u = interval_union(start[rank == r], dur[rank == r])
        total += 0.0 if u is None else u.busy
    by_name = (
        pd.DataFrame({"name": waits["name"], "d": dur})
        .groupby("name", observed=True)["d"]
        .agg(["size", "sum"])
        .sort_values("sum", ascending=False, kind="stable")
        .head(top)
    )
    share = total / (span * max(len(np.unique(rank)), 1)) if span else None
    return {
        "events": int(mask.sum()),
        "total_us": total,
        "share": share,
        "top": [
            {"name": str(n), "count": int(r["size"]), "total_us": float(r["sum"])}
            for n, r in by_name.iterrows()
        ],
    }


def _device_part(profile: Profile, top: int) -> dict:
    from . import devices

    breakdown = devices.device_breakdown(profile)
    if breakdown.empty:
        return {}
    out: dict[str, object] = {"devices": _frame_records(breakdown)}
    kernels = devices.top_kernels(profile, top)
    if not kernels.empty:
        out["top_kernels"] = _frame_records(kernels)
        out["kernel_types"] = _frame_records(devices.kernel_breakdown(profile))
        idle = devices.idle_breakdown(profile)
        if not idle.empty:
            causes = (
                idle.groupby(["rank", "device", "idle_category"], dropna=False)["idle_us"].sum().reset_index()
            )
            out["idle_causes"] = _frame_records(causes)
        launches = devices.launch_summary(profile)
        if not launches.empty:
            out["launch_delays"] = _frame_records(launches)
    return out


def _frame_records(frame: pd.DataFrame) -> list[dict]:
    """DataFrame rows as JSON-ready dicts (missing values as None, numpy scalars as Python)."""
    return json.loads(frame.to_json(orient="records"))


def device_activity(events: pd.DataFrame) -> dict:
    """Per device category: event count and device time (nested device events counted once); busy, idle."""
    dev = events[is_device_activity(events)]
    if dev.empty:
        return {}
    sizes = dev.groupby("device_category", observed=False)["dur_us"].size()
    sums = device_time_by_category(events)
    categories = {
        c: {"events": int(sizes.get(c, 0)), "total_us": float(sums.get(c, 0.0))}
        for c in DEVICE_CATEGORIES
        if sizes.get(c, 0)
    }
    union = device_union(events)
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


def _records(frame: pd.DataFrame) -> list[dict]:
    return [
        {
            "name": str(name),
            "count": int(r["count"]),
            "total_us": float(r["total_us"]),
            "self_us": float(r["self_us"]),
        }
        for name, r in frame.iterrows()
    ]
