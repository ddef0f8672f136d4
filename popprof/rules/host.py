"""Host-CPU stall rules: stream copies in the execution profile, device-idle gaps and long host events in traces.

Trace rules use ``events.device_category`` to tell device activity (set) from
host events (missing). All interval work is vectorised (see
:mod:`popprof.rules.intervals`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..metrics import execution as ex
from ..profile import Profile
from .base import RULES, Finding, NotEvaluated, band, rule
from .fmt import duration, pct, threshold_pct
from .intervals import (
    category_mask,
    device_activity,
    host_events,
    merge_intervals,
    overlap_pairs,
    sum_by_code,
    thread_label,
    thread_labels,
    thread_names,
)


@rule("host.stream-copy", "share of IPU-cycles spent in host stream copies (the IPU waiting on the host)",
      needs=["steps"], params={"warning": 0.05, "error": 0.20, "top": 3},
      advice="The IPU spends this time streaming data to or from the host: prefetch input "
             "(e.g. deviceIterations / a larger batches-per-step), use I/O tiles to overlap I/O and compute, "
             "keep weights and optimizer state on the IPU, and make the host data pipeline faster.")
def stream_copy(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["host.stream-copy"]
    value = ex.host_io_share(profile)
    if value is None:
        raise NotEvaluated("needs step cycles (steps.cycles are all missing or zero)")
    severity, threshold = band(value, params["warning"], params["error"])
    if severity is None:
        return []
    steps = profile.steps
    io = category_mask(steps["category"], ("host_io",))
    per_prog = sum_by_code(steps["program"], io, steps["cycles"].to_numpy(dtype=np.float64, na_value=0.0))
    io_total = float(per_prog.sum())
    top = per_prog.head(int(params["top"]))
    message = (f"host stream copies take {pct(value)} of all IPU-cycles ({severity} at >= "
               f"{threshold_pct(threshold)})")
    if len(top) and io_total:
        message += "; mostly in " + ", ".join(f"{p} ({pct(c / io_total)})" for p, c in top.items())
    evidence = pd.DataFrame({"program": per_prog.index.astype("str"), "cycles": per_prog.to_numpy(),
                             "share_of_host_io": per_prog.to_numpy() / io_total if io_total else np.nan})
    where: dict = {"programs": [str(p) for p in top.index]}
    if io.any():
        io_steps = steps["step"].to_numpy()[io]
        where["steps"] = (int(io_steps.min()), int(io_steps.max()))
    return [r.finding(severity, "Host stream copies", message, value=value, threshold=threshold, where=where,
                      evidence=evidence)]


@rule("host.device-gaps",
      "gaps in device activity inside the run, longer than a threshold, and what the host did meanwhile",
      needs=["events"], params={"min_gap_us": 1000.0, "warning": 0.10, "error": 0.30, "top": 3},
      advice="The device sat idle waiting for the host: see which host work fills the gaps. Typical fixes: "
             "more data-loader workers or prefetching, pinned memory and asynchronous copies, moving "
             "optimizer or metric work off the critical path, and fewer host-device synchronisations "
             "(e.g. .item() or printing losses every step).")
def device_gaps(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["host.device-gaps"]
    activity = device_activity(profile)
    t0, t1 = activity.span
    span = t1 - t0
    if span <= 0:
        return []
    gs, ge = activity.busy_end[:-1], activity.busy_start[1:]
    keep = (ge - gs) >= params["min_gap_us"]
    gs, ge = gs[keep], ge[keep]
    if len(gs) == 0:  # no gap to point at (also with a warning threshold of 0)
        return []
    idle = float((ge - gs).sum())
    share = idle / span
    severity, threshold = band(share, params["warning"], params["error"])
    if severity is None:
        return []
    host = host_events(profile)
    ev_idx, gap_idx, overlap = overlap_pairs(host.start, host.start + host.dur, gs, ge)
    pairs = pd.DataFrame({"gap": gap_idx, "event_id": host.event_id[ev_idx], "parent_id": host.parent_id[ev_idx],
                          "depth": host.depth[ev_idx], "pid": host.pid[ev_idx], "tid": host.tid[ev_idx],
                          "name": pd.Categorical.from_codes(np.asarray(host.name.codes)[ev_idx],
                                                            dtype=host.name.dtype),
                          "overlap_us": overlap})
    labels = thread_labels(profile)
    # Labels: the innermost events in each gap (an event whose child also overlaps the gap is dropped).
    stride = int(max(host.event_id.max(), 0)) + 1 if len(host) else 1
    key = pairs["gap"].to_numpy(np.int64) * stride + pairs["event_id"].to_numpy(np.int64)
    has_parent = pairs["parent_id"].notna().to_numpy()
    parent_key = (pairs["gap"].to_numpy(np.int64)[has_parent] * stride
                  + pairs["parent_id"].to_numpy()[has_parent].astype(np.int64))
    leaves = pairs[~np.isin(key, parent_key)]
    # Threads: top-level events only, so nested events do not count twice.
    top_level = pairs[pairs["depth"] == 0]
    by_label = leaves.groupby("name", observed=True)["overlap_us"].sum().sort_values(
        ascending=False, kind="stable")
    by_thread = top_level.groupby(["pid", "tid"])["overlap_us"].sum().sort_values(ascending=False, kind="stable")
    n = int(params["top"])
    top_threads = [thread_label(labels, p, t) for p, t in by_thread.index[:n]]

    gaps = pd.DataFrame({"gap": np.arange(len(gs)), "start_us": gs, "end_us": ge, "dur_us": ge - gs})
    host_busy = top_level.groupby("gap")["overlap_us"].sum()
    gaps["host_thread_us"] = host_busy.reindex(gaps["gap"], fill_value=0.0).to_numpy()
    gaps["top_thread"] = None
    if len(top_level):
        per_thread = (top_level.groupby(["gap", "pid", "tid"], sort=False)["overlap_us"].sum().reset_index()
                      .sort_values(["gap", "overlap_us"], ascending=[True, False], kind="stable")
                      .drop_duplicates("gap"))
        top = pd.Series(thread_names(labels, per_thread["pid"].to_numpy(), per_thread["tid"].to_numpy()),
                        index=per_thread["gap"].to_numpy())
        gaps["top_thread"] = top.reindex(gaps["gap"]).to_numpy()
    if len(leaves):
        best = (leaves.groupby(["gap", "name"], sort=False, observed=True)["overlap_us"].sum().reset_index()
                .sort_values(["gap", "overlap_us"], ascending=[True, False], kind="stable")
                .drop_duplicates("gap"))
        gaps["top_label"] = best.set_index("gap")["name"].reindex(gaps["gap"]).to_numpy()
        gaps["top_label_us"] = best.set_index("gap")["overlap_us"].reindex(gaps["gap"]).fillna(0.0).to_numpy()
    else:
        gaps["top_label"], gaps["top_label_us"] = None, 0.0
    longest = gaps.loc[gaps["dur_us"].idxmax()]

    message = (f"the device is idle {duration(idle)} = {pct(share)} of its active span {duration(span)} in "
               f"{len(gaps):,} gap(s) >= {duration(params['min_gap_us'])} ({severity} at >= "
               f"{threshold_pct(threshold)}); longest {duration(longest['dur_us'])} at "
               f"+{duration(longest['start_us'] - t0)}")
    if pd.notna(longest["top_label"]):
        message += f" (host in '{longest['top_label']}')"
    if len(by_label):
        message += "; meanwhile the host was in " + ", ".join(
            f"'{k}' ({duration(v)})" for k, v in by_label.head(n).items())
        message += " on " + ", ".join(f"{name} ({duration(v)})" for name, v in
                                      zip(top_threads, by_thread.to_numpy()[:n], strict=False))
    else:
        message += "; no host event was recorded during the gaps"
    where = {"time_us": (float(longest["start_us"]), float(longest["end_us"])), "threads": top_threads}
    return [r.finding(severity, "Device idle waiting on the host", message, value=share,
                      threshold=threshold, where=where, evidence=gaps)]


@rule("host.long-events", "long host events during which the device sat idle, between device runs",
      needs=["events"], params={"min_us": 10_000.0, "idle_share": 0.8, "error": 0.30, "top": 3},
      advice="Long host work between device runs (data loading, optimizer steps or checkpointing on the "
             "host, logging) stalls the device: overlap it with device work, move it to the device, or "
             "do it less often.")
def long_events(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["host.long-events"]
    activity = device_activity(profile)
    t0, t1 = activity.span
    span = t1 - t0
    host = host_events(profile)
    long = host.dur >= params["min_us"]
    if not long.any() or span <= 0:
        return []
    s, d = host.start[long], host.dur[long]
    e = s + d
    cand = pd.DataFrame({"event_id": host.event_id[long], "parent_id": host.parent_id[long],
                         "depth": host.depth[long], "pid": host.pid[long], "tid": host.tid[long],
                         "name": host.name[long]})
    in_span = np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None)
    busy = activity.busy_within(np.maximum(s, t0), np.minimum(e, t1))
    busy = np.where(in_span > 0, busy, 0.0)
    idle = in_span - busy
    qualifies = pd.Series(idle >= params["idle_share"] * d, index=cand["event_id"].to_numpy())
    # Report only the innermost qualifying events (the cause, e.g. the data-loader wait rather than the
    # training step around it): walk depth levels (not events), deepest first, marking parents of
    # qualifying events. Ancestors of a long event are long too, so they are all candidates.
    parent = pd.Series(cand["parent_id"].to_numpy(dtype="float64", na_value=np.nan), index=qualifies.index)
    depth = pd.Series(cand["depth"].to_numpy(), index=qualifies.index)
    covers = pd.Series(False, index=qualifies.index)  # has a qualifying descendant
    for level in sorted(depth.unique(), reverse=True):
        if level == 0:
            continue
        ids = depth.index[depth.to_numpy() == level]
        marks = qualifies.loc[ids].to_numpy() | covers.loc[ids].to_numpy()
        par = parent.loc[ids][marks]
        par = par[par.isin(qualifies.index)].astype(np.int64)
        covers.loc[par.unique()] = True
    chosen = (qualifies & ~covers).to_numpy()
    if not chosen.any():
        return []
    labels = thread_labels(profile)
    found = pd.DataFrame({"event_id": cand["event_id"].to_numpy()[chosen],
                          "name": np.asarray(cand["name"].astype("str"))[chosen],
                          "pid": cand["pid"].to_numpy()[chosen], "tid": cand["tid"].to_numpy()[chosen],
                          "start_us": s[chosen], "dur_us": d[chosen], "device_idle_us": idle[chosen]})
    found["thread"] = thread_names(labels, found["pid"].to_numpy(), found["tid"].to_numpy())
    found = found.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)
    # Device idle time during the union of these events (threads overlapping in time count once).
    us, ue = merge_intervals(np.maximum(found["start_us"].to_numpy(), t0),
                             np.minimum((found["start_us"] + found["dur_us"]).to_numpy(), t1))
    merged_idle = float((np.clip(ue - us, 0, None) - activity.busy_within(us, np.maximum(ue, us))).sum())
    total_share = min(merged_idle / span, 1.0)
    severity = "error" if total_share >= params["error"] else "warning"
    by_name = found.groupby("name")["dur_us"].agg(["count", "sum"]).sort_values("sum", ascending=False,
                                                                                  kind="stable")
    n = int(params["top"])
    top = found.iloc[0]
    message = (f"{len(found):,} host event(s) >= {duration(params['min_us'])} with the device idle for >= "
               f"{threshold_pct(params['idle_share'])} of each; device idle {duration(merged_idle)} during them "
               f"= {pct(total_share)} of the active span (warning for any such event; "
               f"error at >= {threshold_pct(params['error'])}); longest '{top['name']}' on {top['thread']}: "
               f"{duration(top['dur_us'])} at +{duration(top['start_us'] - t0)}; by label: "
               + ", ".join(f"'{k}' {int(c)}x {duration(v)}" for k, (c, v) in by_name.head(n).iterrows()))
    threads = list(dict.fromkeys(found["thread"].head(n * 3)))[:n]
    where = {"time_us": (float(top["start_us"]), float(top["start_us"] + top["dur_us"])), "threads": threads}
    return [r.finding(severity, "Long host events while the device idles", message, value=float(top["dur_us"]),
                      threshold=float(params["min_us"]), where=where, evidence=found)]
