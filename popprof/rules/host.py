"""Host-CPU stall rules: stream copies in the execution profile, device-idle gaps and long host events in traces.

Trace rules use ``events.device_category`` to tell device activity (set) from
host events (missing). All interval work is vectorised (see
:mod:`popprof.trace.intervals`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import units
from ..metrics import execution as ex
from ..metrics.devices import launches_without_device, named_devices_without_activity
from ..metrics.trace import time_origin
from ..model.profile import Profile
from ..trace.activity import labels_mask
from ..trace.intervals import (
    DeviceActivity,
    HostEvents,
    device_activities,
    host_events,
    merge_intervals,
    overlap_pairs,
    sum_by_code,
    thread_label,
    thread_labels,
    thread_names,
)
from .base import RULES, Finding, NotEvaluated, band, rule
from .platform import platform_of


@rule(
    "host.stream-copy",
    "share of IPU-cycles spent in host stream copies (the IPU waiting on the host)",
    needs=["steps"],
    params={"warning": 0.05, "error": 0.20, "top": 3},
    advice="The IPU spends this time streaming data to or from the host: prefetch input "
    "(e.g. deviceIterations / a larger batches-per-step), use I/O tiles to overlap I/O and compute, "
    "keep weights and optimizer state on the IPU, and make the host data pipeline faster.",
)
def stream_copy(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["host.stream-copy"]
    value = ex.host_io_share(profile)
    if value is None:
        raise NotEvaluated("needs step cycles (steps.cycles are all missing or zero)")
    severity, threshold = band(value, params["warning"], params["error"])
    if severity is None:
        return []
    steps = profile.steps
    io = labels_mask(steps["category"], ("host_io",))
    per_prog = sum_by_code(steps["program"], io, steps["cycles"].to_numpy(dtype=np.float64, na_value=0.0))
    io_total = float(per_prog.sum())
    top = per_prog.head(int(params["top"]))
    message = (
        f"host stream copies take {units.percent(value)} of all IPU-cycles ({severity} at >= "
        f"{units.limit_percent(threshold)})"
    )
    if len(top) and io_total:
        message += "; mostly in " + ", ".join(f"{p} ({units.percent(c / io_total)})" for p, c in top.items())
    evidence = pd.DataFrame(
        {
            "program": per_prog.index.astype("str"),
            "cycles": per_prog.to_numpy(),
            "share_of_host_io": per_prog.to_numpy() / io_total if io_total else np.nan,
        }
    )
    where: dict = {"programs": [str(p) for p in top.index]}
    if io.any():
        io_steps = steps["step"].to_numpy()[io]
        where["steps"] = (int(io_steps.min()), int(io_steps.max()))
    return [
        r.finding(
            severity,
            "Host stream copies",
            message,
            value=value,
            threshold=threshold,
            where=where,
            evidence=evidence,
        )
    ]


@rule(
    "host.device-gaps",
    "gaps in device activity inside the run, longer than a threshold, and what the host did meanwhile",
    needs=["events"],
    params={"min_gap_us": 1000.0, "warning": 0.10, "error": 0.30, "top": 3},
    advice={
        "ipu": "The device sat idle waiting for the host: see which host work fills the gaps. Typical "
        "fixes: more data-loader workers or prefetching, pinned memory and asynchronous copies, "
        "moving optimizer or metric work off the critical path, and fewer host-device "
        "synchronisations (e.g. .item() or printing losses every step).",
        "gpu": "The GPU sat idle waiting for the host: see which host work fills the gaps. Typical fixes: "
        "more data-loader workers (num_workers) with prefetching, pinned memory "
        "(pin_memory=True) with non_blocking copies, CUDA graphs to cut kernel-launch overhead, "
        "fewer host-device synchronisations (.item(), .cpu(), printing losses every step), and "
        "moving optimizer or metric work off the critical path.",
    },
)
def device_gaps(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["host.device-gaps"]
    per_device = []
    for activity in device_activities(profile):  # one pass per device
        t0, t1 = activity.span
        gs, ge = activity.busy_end[:-1], activity.busy_start[1:]
        keep = (ge - gs) >= params["min_gap_us"]
        gs, ge = gs[keep], ge[keep]
        if t1 <= t0 or len(gs) == 0:  # no gap to point at (also with a warning threshold of 0)
            continue
        share = float((ge - gs).sum()) / (t1 - t0)
        if band(share, params["warning"], params["error"])[0] is not None:
            per_device.append((share, activity, gs, ge))
    if not per_device:
        return []
    per_device.sort(key=lambda item: -item[0])
    host = host_events(profile)
    labels = thread_labels(profile)
    n = int(params["top"])
    origin = time_origin(profile) or 0.0
    frames, texts, threads = [], [], []
    causes = _idle_causes(profile)
    for share, activity, gs, ge in per_device:
        gaps, text, top_threads = _attribute_gaps(
            activity, gs, ge, share, host.of_rank(activity.rank), labels, n, params, origin
        )
        cause = causes.get((activity.rank, activity.device))
        if cause:
            text += f"; idle causes (HTA, over its streams): {cause}"
        frames.append(gaps)
        texts.append(text)
        threads += [t for t in top_threads if t not in threads]
    worst_share = per_device[0][0]
    severity, threshold = band(worst_share, params["warning"], params["error"])
    evidence = pd.concat(frames, ignore_index=True)
    total = len(device_activities(profile))
    if total == 1:
        message = texts[0]
    else:
        message = (
            f"{len(per_device)} of {total} devices idle >= {units.limit_percent(params['warning'])} of their "
            f"active span in gaps >= {units.duration(params['min_gap_us'])} ({severity} at >= "
            f"{units.limit_percent(threshold)} for the worst): " + "; ".join(texts[:n])
        )
        if len(texts) > n:
            message += f"; {len(texts) - n} more device(s) in the evidence"
    longest = frames[0].loc[frames[0]["dur_us"].idxmax()]
    where = {"time_us": (float(longest["start_us"]), float(longest["end_us"])), "threads": threads[:n]}
    devices = [a.label for _, a, _, _ in per_device if a.label]
    if devices:
        where["devices"] = devices
    return [
        r.finding(
            severity,
            "Device idle waiting on the host",
            message,
            value=worst_share,
            threshold=threshold,
            where=where,
            evidence=evidence,
            platform=platform_of(profile),
        )
    ]


#: HTA's idle categories (``get_idle_time_breakdown``) in words.
IDLE_CAUSES = {
    "host_wait": "the host launching late",
    "kernel_wait": "launch gaps between kernels",
    "other": "other",
}


def _idle_causes(profile: Profile) -> dict[tuple, str]:
    """``(rank, device) -> "the host launching late 62 %, ..."`` from HTA's idle breakdown (GPU traces)."""
    from ..metrics.devices import idle_breakdown

    table = idle_breakdown(profile)
    if table.empty:
        return {}
    sums = table.groupby(["rank", "device", "idle_category"], dropna=False, observed=True)["idle_us"].sum()
    out = {}
    for (rank, device), group in sums.groupby(level=[0, 1], dropna=False):
        total = float(group.sum())
        if total <= 0:
            continue
        parts = [
            f"{IDLE_CAUSES.get(cat, cat)} {units.percent(v / total)}"
            for (_, _, cat), v in group.sort_values(ascending=False).items()
            if v > 0
        ]
        out[(None if pd.isna(rank) else int(rank), None if pd.isna(device) else str(device))] = ", ".join(
            parts
        )
    return out


def _attribute_gaps(
    activity: DeviceActivity,
    gs: np.ndarray,
    ge: np.ndarray,
    share: float,
    host: HostEvents,
    labels: dict,
    n: int,
    params: dict,
    origin: float,
) -> tuple[pd.DataFrame, str, list[str]]:
    """The gaps of one device with the host work in them (evidence rows), the sentence describing them, and
    the threads with the most host work in the gaps; times are offsets from ``origin`` (the trace's)."""
    t0, t1 = activity.span
    span = t1 - t0
    idle = float((ge - gs).sum())
    work = host.subset(~host.waits)
    ev_idx, gap_idx, overlap = overlap_pairs(work.start, work.start + work.dur, gs, ge)
    pairs = pd.DataFrame(
        {
            "gap": gap_idx,
            "event_id": work.event_id[ev_idx],
            "parent_id": work.parent_id[ev_idx],
            "depth": work.depth[ev_idx],
            "pid": work.pid[ev_idx],
            "tid": work.tid[ev_idx],
            "name": pd.Categorical.from_codes(np.asarray(work.name.codes)[ev_idx], dtype=work.name.dtype),
            "overlap_us": overlap,
        }
    )
    # Labels: each event's own time in the gap (its overlap minus its children's), so an enclosing event
    # counts only while no recorded child runs, and a long event with a few short children (a data loader's
    # __next__ around its copies) is named for the time it spent itself.
    stride = int(max(work.event_id.max(), 0)) + 1 if len(work) else 1
    key = pairs["gap"].to_numpy(np.int64) * stride + pairs["event_id"].to_numpy(np.int64)
    has_parent = pairs["parent_id"].notna().to_numpy()
    parent_key = pairs["gap"].to_numpy(np.int64)[has_parent] * stride + pairs["parent_id"].to_numpy()[
        has_parent
    ].astype(np.int64)
    in_children = pd.Series(overlap[has_parent]).groupby(parent_key).sum()
    own = overlap - in_children.reindex(key, fill_value=0.0).to_numpy()
    leaves = pairs.assign(overlap_us=own)[own > 0]
    # Threads: the outermost events in each gap only, so nested events do not count twice. Outermost among
    # the host work, not depth 0: under a ProfilerStep#N marker (left out of host work) every op has depth 1.
    parent_in_gap = np.zeros(len(pairs), dtype=bool)
    parent_in_gap[has_parent] = np.isin(parent_key, key)
    top_level = pairs[~parent_in_gap]
    by_label = (
        leaves.groupby("name", observed=True)["overlap_us"].sum().sort_values(ascending=False, kind="stable")
    )
    by_thread = (
        top_level.groupby(["pid", "tid"])["overlap_us"].sum().sort_values(ascending=False, kind="stable")
    )
    top_threads = [thread_label(labels, p, t) for p, t in by_thread.index[:n]]
    # Host calls blocking on the device during the gaps: device-bound time, not host work.
    waits = host.subset(host.waits)
    _, _, wait_overlap = overlap_pairs(waits.start, waits.start + waits.dur, gs, ge)

    gaps = pd.DataFrame(
        {
            "rank": activity.rank,
            "device": activity.device,
            "gap": np.arange(len(gs)),
            "start_us": gs,
            "end_us": ge,
            "dur_us": ge - gs,
        }
    )
    host_busy = top_level.groupby("gap")["overlap_us"].sum()
    gaps["host_thread_us"] = host_busy.reindex(gaps["gap"], fill_value=0.0).to_numpy()
    gaps["top_thread"] = None
    if len(top_level):
        per_thread = (
            top_level.groupby(["gap", "pid", "tid"], sort=False)["overlap_us"]
            .sum()
            .reset_index()
            .sort_values(["gap", "overlap_us"], ascending=[True, False], kind="stable")
            .drop_duplicates("gap")
        )
        top = pd.Series(
            thread_names(labels, per_thread["pid"].to_numpy(), per_thread["tid"].to_numpy()),
            index=per_thread["gap"].to_numpy(),
        )
        gaps["top_thread"] = top.reindex(gaps["gap"]).to_numpy()
    if len(leaves):
        best = (
            leaves.groupby(["gap", "name"], sort=False, observed=True)["overlap_us"]
            .sum()
            .reset_index()
            .sort_values(["gap", "overlap_us"], ascending=[True, False], kind="stable")
            .drop_duplicates("gap")
        )
        gaps["top_label"] = best.set_index("gap")["name"].reindex(gaps["gap"]).to_numpy()
        gaps["top_label_us"] = best.set_index("gap")["overlap_us"].reindex(gaps["gap"]).fillna(0.0).to_numpy()
    else:
        gaps["top_label"], gaps["top_label_us"] = None, 0.0
    longest = gaps.loc[gaps["dur_us"].idxmax()]
    severity, threshold = band(share, params["warning"], params["error"])
    who = f"{activity.label}: " if activity.label else "the device is "
    message = (
        f"{who}idle {units.duration(idle)} = {units.percent(share)} of its active span {units.duration(span)} in "
        f"{len(gaps):,} gap(s) >= {units.duration(params['min_gap_us'])} ({severity} at >= "
        f"{units.limit_percent(threshold)}); longest {units.duration(longest['dur_us'])} at "
        f"{units.offset(longest['start_us'] - origin)}"
    )
    if pd.notna(longest["top_label"]):
        message += f" (host in '{longest['top_label']}')"
    if len(by_label):
        message += "; meanwhile the host was in " + ", ".join(
            f"'{k}' ({units.duration(v)})" for k, v in by_label.head(n).items()
        )
        message += " on " + ", ".join(
            f"{name} ({units.duration(v)})"
            for name, v in zip(top_threads, by_thread.to_numpy()[:n], strict=False)
        )
    else:
        message += "; no host work was recorded during the gaps"
    waited = float(wait_overlap.sum())
    if waited > 0:
        message += (
            f"; the host was blocked in calls waiting for the device for {units.duration(waited)} of the gaps "
            "(device-bound time, not host work)"
        )
    return gaps, message, top_threads


@rule(
    "host.long-events",
    "long host events during which the device sat idle, between device runs",
    needs=["events"],
    params={"min_us": 10_000.0, "idle_share": 0.8, "warning": 0.0, "error": 0.30, "top": 3},
    advice={
        "ipu": "Long host work between device runs (data loading, optimizer steps or checkpointing on "
        "the host, logging) stalls the device: overlap it with device work, move it to the device, "
        "or do it less often.",
        "gpu": "Long host work between GPU runs (data loading, optimizer steps or checkpointing on the "
        "host, logging) stalls the GPU: more data-loader workers and pinned memory for input, "
        "overlap it with GPU work (asynchronous checkpointing, non_blocking copies), or do it "
        "less often.",
    },
)
def long_events(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["host.long-events"]
    activities = device_activities(profile, by="rank")  # NotEvaluated without device activity
    host = host_events(profile)
    host = host.subset(~host.waits & (host.dur >= params["min_us"]))  # a host wait is device-bound time
    if not len(host):
        return []
    frames = []
    spans = {}
    for activity in activities:  # one pass per rank (its devices together)
        found = _long_idle_events(activity, host.of_rank(activity.rank), params)
        if found is not None:
            found.insert(0, "rank", activity.rank)
            frames.append(found)
            spans[activity.rank] = activity
    if not frames:
        return []
    labels = thread_labels(profile)
    found = pd.concat(frames, ignore_index=True)
    found["thread"] = thread_names(labels, found["pid"].to_numpy(), found["tid"].to_numpy())
    found = found.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)
    # Device idle time during the union of these events, per rank (threads overlapping in time count once).
    shares = {}
    for rank, group in found.groupby(found["rank"].astype("Float64").fillna(-1), sort=False):
        activity = spans[None if rank < 0 else int(rank)]
        t0, t1 = activity.span
        us, ue = merge_intervals(
            np.maximum(group["start_us"].to_numpy(), t0),
            np.minimum((group["start_us"] + group["dur_us"]).to_numpy(), t1),
        )
        idle = float((np.clip(ue - us, 0, None) - activity.busy_within(us, np.maximum(ue, us))).sum())
        shares[activity.label] = (min(idle / (t1 - t0), 1.0), idle)
    worst_label, (total_share, merged_idle) = max(shares.items(), key=lambda kv: kv[1][0])
    severity, threshold = band(total_share, params["warning"], params["error"])
    if severity is None:  # below a warning level raised from its default 0 (any qualifying event)
        return []
    by_name = (
        found.groupby("name")["dur_us"]
        .agg(["count", "sum"])
        .sort_values("sum", ascending=False, kind="stable")
    )
    n = int(params["top"])
    top = found.iloc[0]
    origin = time_origin(profile) or 0.0
    where_idle = f" on {worst_label}" if worst_label else ""
    message = (
        f"{len(found):,} host event(s) >= {units.duration(params['min_us'])} with the device idle for >= "
        f"{units.limit_percent(params['idle_share'])} of each; device idle {units.duration(merged_idle)} during them "
        f"= {units.percent(total_share)} of the active span{where_idle} ({severity} at >= "
        f"{units.limit_percent(threshold)}); longest "
        f"'{top['name']}' on {top['thread']}: {units.duration(top['dur_us'])} at "
        f"{units.offset(top['start_us'] - origin)}"
        "; by label: "
        + ", ".join(f"'{k}' {int(c)}x {units.duration(v)}" for k, (c, v) in by_name.head(n).iterrows())
    )
    if len(shares) > 1:
        message += "; per rank: " + ", ".join(
            f"{label} {units.percent(v[0])}"
            for label, v in sorted(shares.items(), key=lambda kv: -kv[1][0])[:n]
        )
    threads = list(dict.fromkeys(found["thread"].head(n * 3)))[:n]
    where = {"time_us": (float(top["start_us"]), float(top["start_us"] + top["dur_us"])), "threads": threads}
    ranks = [int(x) for x in dict.fromkeys(found["rank"].dropna())]
    if ranks:
        where["ranks"] = ranks
    return [
        r.finding(
            severity,
            "Long host events while the device idles",
            message,
            value=total_share,
            threshold=threshold,
            where=where,
            evidence=found,
            platform=platform_of(profile),
        )
    ]


def _long_idle_events(activity: DeviceActivity, host: HostEvents, params: dict) -> pd.DataFrame | None:
    """The innermost long host events during which this device (or rank) sat idle, or None."""
    t0, t1 = activity.span
    if t1 <= t0 or not len(host):
        return None
    s, d = host.start, host.dur
    e = s + d
    in_span = np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None)
    busy = activity.busy_within(np.maximum(s, t0), np.minimum(e, t1))
    busy = np.where(in_span > 0, busy, 0.0)
    idle = in_span - busy
    qualifies = pd.Series(idle >= params["idle_share"] * d, index=host.event_id)
    # Report only the innermost qualifying events (the cause, e.g. the data-loader wait rather than the
    # training step around it): walk depth levels (not events), deepest first, marking parents of
    # qualifying events. Ancestors of a long event are long too, so they are all candidates.
    parent = pd.Series(host.parent_id, index=qualifies.index)
    depth = pd.Series(host.depth, index=qualifies.index)
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
        return None
    return pd.DataFrame(
        {
            "event_id": host.event_id[chosen],
            "name": np.asarray(host.name.astype("str"))[chosen],
            "pid": host.pid[chosen],
            "tid": host.tid[chosen],
            "start_us": s[chosen],
            "dur_us": d[chosen],
            "device_idle_us": idle[chosen],
        }
    )


@rule(
    "host.launches-without-device",
    "a trace with kernel launches on the host and no device activity at all (the device side is missing)",
    needs=["events"],
    params={},
    advice={
        "ipu": "The trace holds the host's launches but nothing of the device: record the device side too "
        "(PVTI_OPTIONS with the device channels, or the PopVision trace of the run), then analyse again.",
        "gpu": "The host launched kernels but the trace holds no GPU event, so every device figure is "
        "missing. This usually means the profiler did not record CUDA activity: ProfilerActivity.CUDA "
        "not in torch.profiler's activities, CUPTI missing or failing to start (look for CUPTI "
        "warnings or errors in the run's log; in containers CUPTI may need the profiling permission, "
        "NVreg_RestrictProfilingToAdminUsers=0), or the profiler stopped (or the process exited) "
        "before its GPU buffers were flushed. Record again with CUDA activity; mapping events with "
        "--device-map will not bring the kernels back.",
    },
)
def launches_without_device_rule(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["host.launches-without-device"]
    calls = launches_without_device(profile)
    if not calls:
        named = named_devices_without_activity(profile)
        if not named:
            return []
        return [  # GPUs named in deviceProperties, not one launch, kernel or copy: say so, no more
            r.finding(
                "info",
                "No device activity recorded",
                f"no device activity was recorded: the trace names {len(named):,} device(s) "
                f"({', '.join(sorted(set(named)))}) but holds no kernel, copy or launch; device rules are "
                "not evaluated",
                value=0.0,
                threshold=1.0,
                platform="gpu",
            )
        ]
    total = sum(calls.values())
    named = ", ".join(f"{name} {count:,} x" for name, count in calls.items())
    message = (
        f"{total:,} kernel launch(es) on the host ({named}) and no device event in the trace: its device "
        "side is missing, so device rules are not evaluated"
    )
    return [
        r.finding(
            "warning",
            "Device side missing",
            message,
            value=float(total),
            threshold=1.0,
            evidence=pd.DataFrame({"name": list(calls), "count": list(calls.values())}),
            platform="gpu" if any(n.startswith(("cuda", "hip")) for n in calls) else platform_of(profile),
        )
    ]
