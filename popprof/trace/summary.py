"""A trace's summary: span, busiest threads, top event names by total and self time, device activity."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..profile import Profile
from .activity import device_time_by_category, device_union, interval_union
from .device import DEVICE_CATEGORIES
from .nesting import parent_positions, self_time


def event_self_time(events: pd.DataFrame) -> np.ndarray:
    """Self time of every event (its duration minus its direct children's), by row."""
    return self_time(parent_positions(events), events["dur_us"].to_numpy(dtype=np.float64))


def _thread_names(profile: Profile) -> dict[tuple[int, int], tuple[str | None, str | None]]:
    threads = profile.get("threads")
    if threads is None:
        return {}
    return {(int(p), int(t)): (None if pd.isna(pn) else pn, None if pd.isna(tn) else tn)
            for p, t, pn, tn in zip(threads["pid"], threads["tid"], threads["process_name"],
                                    threads["thread_name"], strict=True)}


def trace_summary(profile: Profile, top: int = 10) -> dict:
    """Summary of a profile's ``events`` as plain data (JSON-ready); ``{}`` when it has none."""
    events = profile.get("events")
    if events is None or events.empty:
        return {}
    dur = events["dur_us"].fillna(0.0)
    union = interval_union(events["start_us"].to_numpy(), dur.to_numpy())
    out: dict[str, object] = {
        "events": int(len(events)),
        "threads": int(events[["pid", "tid"]].drop_duplicates().shape[0]),
        "span_us": None if union is None else union.span,
        "start_us": None if union is None else union.first_start,
    }
    # busiest threads: time covered by their top-level events
    top_level = events[events["depth"] == 0]
    busy = (top_level.assign(d=dur[top_level.index]).groupby(["pid", "tid"], observed=True)
            .agg(busy_us=("d", "sum"), top_level_events=("d", "size")))
    counts = events.groupby(["pid", "tid"], observed=True).size()
    busy = busy.join(counts.rename("events")).sort_values("busy_us", ascending=False, kind="stable").head(top)
    names = _thread_names(profile)
    out["busiest_threads"] = [
        {"pid": int(p), "tid": int(t), "process_name": names.get((int(p), int(t)), (None, None))[0],
         "thread_name": names.get((int(p), int(t)), (None, None))[1], "busy_us": float(row.busy_us),
         "events": int(row.events),
         "busy_share": (float(row.busy_us) / out["span_us"]) if out["span_us"] else None}
        for (p, t), row in busy.iterrows()]
    frame = pd.DataFrame({"name": events["name"], "total_us": dur, "self_us": event_self_time(events)})
    by_name = frame.groupby("name", observed=True).agg(count=("total_us", "size"), total_us=("total_us", "sum"),
                                                        self_us=("self_us", "sum"))
    out["top_by_total"] = _records(by_name.sort_values("total_us", ascending=False, kind="stable").head(top))
    out["top_by_self"] = _records(by_name.sort_values("self_us", ascending=False, kind="stable").head(top))
    out["device_activity"] = device_activity(events)
    return out


def device_activity(events: pd.DataFrame) -> dict:
    """Per device category: event count and device time (nested device events counted once); busy, idle."""
    dev = events[events["device_category"].notna()]
    if dev.empty:
        return {}
    sizes = dev.groupby("device_category", observed=False)["dur_us"].size()
    sums = device_time_by_category(events)
    categories = {c: {"events": int(sizes.get(c, 0)), "total_us": float(sums.get(c, 0.0))}
                  for c in DEVICE_CATEGORIES if sizes.get(c, 0)}
    union = device_union(events)
    out: dict[str, object] = {"by_category": categories}
    if union is not None:
        out.update({"active_span_us": union.span, "busy_us": union.busy, "idle_us": union.idle,
                    "idle_share": union.idle / union.span if union.span > 0 else 0.0,
                    "idle_gaps": int(union.gaps.size)})
    return out


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{"name": str(name), "count": int(r["count"]), "total_us": float(r["total_us"]),
             "self_us": float(r["self_us"])} for name, r in frame.iterrows()]
