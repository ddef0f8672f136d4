"""Exchange rules: exchange-heavy phases over the run, and the run-wide exchange share.

Both work from IPU execution steps (cycles per step category) or, for GPU and
other traces, from device events marked with ``events.device_category``
(durations per category stand in for step cycles; windows are built in time).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import units
from ..metrics import execution as ex
from ..metrics.trace import time_origin
from ..model.profile import Profile
from ..trace.activity import labels_mask
from ..trace.intervals import DeviceActivity, device_activities, window_sums
from . import execution_totals
from .base import Finding, NotEvaluated, RuleContext, band, rule
from .execution_totals import ADVICE_SYNC, sync_dominated

#: Step / device categories that count as exchange (data movement and the barriers around it).
EXCHANGE = ("exchange", "global_exchange", "sync")

ADVICE_PHASES = {
    "ipu": "In exchange-heavy phases tiles wait on data movement rather than compute: look at the "
    "dominant programs, overlap I/O and compute, fuse small exchanges, keep tensors where they "
    "are consumed (tile mapping), and for multi-IPU runs reduce inter-IPU traffic (pipeline "
    "stage boundaries, replication, gradient accumulation).",
    "gpu": "In communication-heavy phases the GPU waits on collectives (NCCL/RCCL) rather than computing: "
    "overlap communication with compute (DDP overlaps the gradient all-reduce with the backward pass; "
    "tune bucket_cap_mb so buckets are ready early, and avoid find_unused_parameters), fewer and "
    "larger collectives (gradient accumulation with no_sync), and look for a straggling rank that "
    "makes the others wait in the collective (see distributed.stragglers).",
}


def _phases(share: np.ndarray, moderate: float, high: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Band per window (0 none, 1 moderate, 2 high), and first/last window of each merged phase."""
    bands = np.where(share >= high, 2, np.where(share >= moderate, 1, 0))
    bands[np.isnan(share)] = 0
    flagged = bands > 0
    edges = np.diff(np.concatenate([[0], flagged.astype(np.int8), [0]]))
    return bands, np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1


def _phase_of_window(bands: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Phase index of each window (-1 outside phases)."""
    marks = np.zeros(len(bands), dtype=np.int64)
    marks[starts] = 1
    return np.where(bands > 0, np.cumsum(marks) - 1, -1)


#: More windows than this would only produce noise (and memory use): the window is too small.
MAX_WINDOWS = 1_000_000


def _steps_phases(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    steps = profile.steps
    width = int(params["window"])
    if width < 1:
        raise NotEvaluated("parameter window must be at least 1 step")
    if not ex.has_cycles(profile):
        raise NotEvaluated("needs step cycles (steps.cycles are all missing)")
    step = steps["step"].to_numpy(dtype=np.int64)
    cycles = steps["cycles"].to_numpy(dtype=np.float64, na_value=0.0)
    is_x = labels_mask(steps["category"], EXCHANGE)
    first_step = int(step.min())
    win = (step - first_step) // width
    count = int(win.max()) + 1
    if count > MAX_WINDOWS:
        raise NotEvaluated(f"window = {width} would make {count:,} windows; use a larger window")
    total = np.bincount(win, weights=cycles, minlength=count)
    xcycles = np.bincount(win, weights=np.where(is_x, cycles, 0.0), minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, xcycles / total, np.nan)
    bands, starts, ends = _phases(share, params["moderate"], params["high"])
    last_step = int(step.max())
    win_first = first_step + np.arange(count) * width
    windows = pd.DataFrame(
        {
            "window": np.arange(count),
            "first_step": win_first,
            "last_step": np.minimum(win_first + width - 1, last_step),
            "cycles": total,
            "exchange_cycles": xcycles,
            "share": share,
            "band": pd.Categorical.from_codes(bands, ["none", "moderate", "high"]),
        }
    )
    phase_of_window = _phase_of_window(bands, starts)
    windows["phase"] = phase_of_window
    if len(starts) == 0:
        return []
    clock = profile.target_value("clock_hz")
    ipus = max(int(steps["ipu"].nunique()), 1)
    # Per-phase figures from the window sums, vectorised (prefix sums over windows).
    csum_total = np.concatenate([[0.0], np.cumsum(total)])
    csum_x = np.concatenate([[0.0], np.cumsum(xcycles)])
    phase_total = csum_total[ends + 1] - csum_total[starts]
    phase_x = csum_x[ends + 1] - csum_x[starts]
    phase_frame = pd.DataFrame(
        {
            "phase": np.arange(len(starts)),
            "first_step": win_first[starts],
            "last_step": np.minimum(win_first[ends] + width - 1, last_step),
            "windows": ends - starts + 1,
            "cycles": phase_total,
            "exchange_cycles": phase_x,
            "share": np.where(phase_total > 0, phase_x / np.where(phase_total > 0, phase_total, 1), np.nan),
            # windows between phases are unflagged (band 0), so a max up to the next phase start is exact
            "worst_band": np.maximum.reduceat(bands, starts),
        }
    )
    chosen = phase_frame.sort_values("exchange_cycles", ascending=False, kind="stable").head(
        int(params["max_phases"])
    )
    # Dominant programs of the reported phases: exchange cycles per (phase, program) on codes, not strings.
    slot = np.full(len(starts), -1)
    slot[chosen["phase"].to_numpy()] = np.arange(len(chosen))
    row_slot = np.where(phase_of_window[win] >= 0, slot[np.maximum(phase_of_window[win], 0)], -1)
    inside = (row_slot >= 0) & is_x
    programs = steps["program"].array
    n_prog = len(programs.categories) + 1
    key = row_slot[inside].astype(np.int64) * n_prog + (np.asarray(programs.codes)[inside] + 1)
    sums = np.bincount(key, weights=cycles[inside], minlength=len(chosen) * n_prog).reshape(
        len(chosen), n_prog
    )
    top_n = int(params["top"])
    names_of = np.asarray(programs.categories)
    top_programs = {}
    for k, phase in enumerate(chosen["phase"]):  # loop over reported phases, not steps
        best = np.argsort(-sums[k], kind="stable")[:top_n]
        best = best[sums[k][best] > 0]
        top_programs[int(phase)] = pd.DataFrame(
            {"program": [str(names_of[i - 1]) if i > 0 else "?" for i in best], "cycles": sums[k][best]}
        )
    listed = []
    programs: list[str] = []
    for p in chosen.sort_values("first_step").itertuples():  # loop over reported phases, not steps
        progs = top_programs.get(p.phase, pd.DataFrame(columns=["program", "cycles"]))
        names = [str(n) for n in progs["program"]]
        programs += [n for n in names if n not in programs]
        dom = ", ".join(
            f"{n} ({units.percent(c / p.exchange_cycles)})"
            for n, c in zip(names, progs["cycles"], strict=True)
            if p.exchange_cycles
        )
        time = f", about {units.duration(p.cycles / ipus / float(clock) * 1e6)}" if clock else ""
        listed.append(
            f"steps {units.count(p.first_step)}-{units.count(p.last_step)} ({p.windows} window(s)): "
            f"{units.percent(p.share)} of "
            f"{units.count(p.cycles)} IPU-cycles{time}" + (f", dominated by {dom}" if dom else "")
        )
    worst = chosen.loc[chosen["share"].idxmax()]
    severity, threshold = band(float(worst["share"]), params["moderate"], params["high"])
    message = (
        f"{len(phase_frame)} exchange-heavy phase(s) (windows of {width} steps where exchange + sync take "
        f">= {units.limit_percent(params['moderate'])}); worst {units.percent(worst['share'])} ({severity} at >= "
        f"{units.limit_percent(threshold)}): " + "; ".join(listed)
    )
    if len(phase_frame) > len(chosen):
        message += f" ({len(phase_frame) - len(chosen)} smaller phase(s) not listed)"
    where = {
        "steps": (int(worst["first_step"]), int(worst["last_step"])),
        "programs": programs[: 3 * top_n],
        "phases": [
            (int(a), int(b))
            for a, b in zip(
                chosen.sort_values("first_step")["first_step"],
                chosen.sort_values("first_step")["last_step"],
                strict=True,
            )
        ],
    }
    return [
        ctx.finding(
            severity,
            "Exchange-heavy phases",
            message,
            value=float(worst["share"]),
            threshold=float(threshold),
            where=where,
            evidence=windows,
            platform="ipu",
        )
    ]


def _auto_width(span: float, params: dict) -> float:
    width = float(params["window_us"])
    return width if width > 0 else max(span / 100.0, 1e-6)


def _trace_phases(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    phases, frames = [], []
    for activity in device_activities(profile):  # one pass per device
        found, windows = _device_phases(activity, params)
        phases += found
        frames.append(windows)
    if not phases:
        return []
    windows = pd.concat(frames, ignore_index=True)
    chosen = sorted(phases, key=lambda ph: -ph["exchange_us"])[: int(params["max_phases"])]
    chosen.sort(key=lambda ph: (ph["rank"] if ph["rank"] is not None else -1, ph["device"] or "", ph["lo"]))
    worst = max(chosen, key=lambda ph: ph["share"])
    severity, threshold = band(worst["share"], params["moderate"], params["high"])
    listed = []
    origin = time_origin(profile) or 0.0
    for ph in chosen:
        who = f"{ph['label']} " if ph["label"] else ""
        text = (
            f"{who}{units.offset(ph['lo'] - origin)} to {units.offset(ph['hi'] - origin)} from the trace start: "
            f"{units.percent(ph['share'])} of {units.duration(ph['total_us'])} busy"
        )
        if ph["dominant"]:
            text += " (" + ", ".join(f"{n} {units.duration(v)}" for n, v in ph["dominant"]) + ")"
        listed.append(text)
    devices = list(dict.fromkeys(ph["label"] for ph in chosen if ph["label"]))
    message = (
        f"{len(phases)} exchange-heavy phase(s)"
        + (f" on {len(devices)} device(s)" if devices else "")
        + f" (windows of {units.duration(worst['width'])} where exchange + sync not overlapped by other device "
        f"work take >= {units.limit_percent(params['moderate'])} of the busy time); "
        f"worst {units.percent(worst['share'])} ({severity} at >= "
        f"{units.limit_percent(threshold)}): " + "; ".join(listed)
    )
    if len(phases) > len(chosen):
        message += f" ({len(phases) - len(chosen)} smaller phase(s) not listed)"
    programs = list(dict.fromkeys(n for ph in chosen for n, _ in ph["dominant"]))
    where = {
        "time_us": (float(worst["lo"]), float(worst["hi"])),
        "programs": programs,
        "phases": [(float(ph["lo"]), float(ph["hi"])) for ph in chosen],
    }
    if devices:
        where["devices"] = devices
    return [
        ctx.finding(
            severity,
            "Exchange-heavy phases",
            message,
            value=float(worst["share"]),
            threshold=float(threshold),
            where=where,
            evidence=windows,
        )
    ]


def _device_phases(activity: DeviceActivity, params: dict) -> tuple[list[dict], pd.DataFrame]:
    """Exchange-heavy phases of one device (time windows over its own active span) and its window table."""
    t0, t1 = activity.span
    width = _auto_width(t1 - t0, params)
    count = max(int(np.ceil((t1 - t0) / width)), 1)
    if count > MAX_WINDOWS:
        raise NotEvaluated(
            f"window_us = {width:g} would make {count:,} windows over {units.duration(t1 - t0)}; "
            f"use at least {units.duration((t1 - t0) / MAX_WINDOWS)}"
        )
    s, e = activity.start, activity.end
    is_x = activity.in_categories(EXCHANGE)
    # busy time (streams running at once count once) and exposed exchange (not overlapped by compute)
    total = window_sums(activity.busy_start, activity.busy_end, t0, width, count)
    exposed_start, exposed_end = activity.exposed(EXCHANGE)
    xtime = window_sums(exposed_start, exposed_end, t0, width, count)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, xtime / total, np.nan)
    bands, starts, ends = _phases(share, params["moderate"], params["high"])
    windows = pd.DataFrame(
        {
            "rank": activity.rank,
            "device": activity.device,
            "window": np.arange(count),
            "start_us": t0 + np.arange(count) * width,
            "end_us": t0 + (np.arange(count) + 1) * width,
            "device_us": total,
            "exchange_us": xtime,
            "share": share,
            "band": pd.Categorical.from_codes(bands, ["none", "moderate", "high"]),
            "phase": _phase_of_window(bands, starts),
        }
    )
    top_n = int(params["top"])
    xs, xe, xcodes = s[is_x], e[is_x], np.asarray(activity.name.codes)[is_x]
    vocabulary = activity.name.categories
    found = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):  # loop over phases, not events
        lo, hi = t0 + a * width, min(t0 + (b + 1) * width, t1)
        ph_total, ph_x = float(total[a : b + 1].sum()), float(xtime[a : b + 1].sum())
        inside = (xs < hi) & (xe > lo)
        overlap = np.minimum(xe[inside], hi) - np.maximum(xs[inside], lo)
        sums = np.bincount(xcodes[inside], weights=overlap, minlength=len(vocabulary))
        best = np.argsort(-sums, kind="stable")[:top_n]
        found.append(
            {
                "rank": activity.rank,
                "device": activity.device,
                "label": activity.label,
                "t0": t0,
                "lo": lo,
                "hi": hi,
                "width": width,
                "total_us": ph_total,
                "exchange_us": ph_x,
                "share": ph_x / ph_total if ph_total else 0.0,
                "dominant": [(str(vocabulary[i]), float(sums[i])) for i in best if sums[i] > 0],
            }
        )
    return found, windows


@rule(
    "exchange.phases",
    "windows of the run where exchange + global exchange + sync take a large share, merged into phases",
    needs=[("steps",), ("events",)],
    params={"window": 100, "window_us": 0.0, "moderate": 0.30, "high": 0.50, "top": 3, "max_phases": 5},
    advice=ADVICE_PHASES,
)
def phases(profile: Profile, ctx: RuleContext) -> list[Finding]:
    if int(ctx.params["max_phases"]) < 1:
        raise NotEvaluated("parameter max_phases must be at least 1")
    return _from_each_source(profile, ctx, _steps_phases, _trace_phases)


def _from_each_source(profile: Profile, ctx: RuleContext, from_steps, from_events) -> list[Finding]:
    """Findings from the steps and from the events, whichever the profile has; NotEvaluated (with every
    reason) only when no source present could be evaluated."""
    findings: list[Finding] = []
    reasons: list[str] = []
    present = [(t, f) for t, f in (("steps", from_steps), ("events", from_events)) if profile.has(t)]
    for _, source in present:
        try:
            findings += source(profile, ctx)
        except NotEvaluated as exc:
            reasons.append(str(exc))
    if present and len(reasons) == len(present):
        raise NotEvaluated("; or ".join(reasons))
    return findings


@rule(
    "exchange.share",
    "run-wide share of exchange + global exchange + sync, and the global-exchange (inter-IPU) share",
    needs=[("steps",), ("events",), ("execution_totals",)],
    params={"warning": 0.30, "error": 0.50, "global_warning": 0.15, "global_error": 0.30},
    advice={
        "ipu": "A run dominated by exchange is limited by data movement, not compute: see exchange.phases "
        "for where; for multi-IPU runs a large global-exchange share points at pipeline stage "
        "boundaries or replica all-reduces worth overlapping or shrinking.",
        "gpu": "A run dominated by communication is limited by collectives, not compute: overlap "
        "communication with compute (DDP bucket sizes via bucket_cap_mb, gradient accumulation with "
        "no_sync, overlapping FSDP prefetch), use fewer and larger collectives, and check for a "
        "straggling rank that the others wait for (distributed.stragglers).",
    },
)
def share(profile: Profile, ctx: RuleContext) -> list[Finding]:
    if not profile.has("steps") and not profile.has("events"):  # a text summary's totals only
        return execution_totals.summary_share(profile, ctx)
    return _from_each_source(profile, ctx, _steps_share, _trace_share)


def _steps_share(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    value = ex.exchange_share(profile)
    if value is None:
        raise NotEvaluated("needs step cycles (steps.cycles are all missing or zero)")
    shares = ex.share_by_category(profile)
    ipus = ex.ipu_count(profile)
    multi = ipus > 1
    severity, threshold = band(value, params["warning"], params["error"])
    message = f"exchange + global exchange + sync take {units.percent(value)} of all IPU-cycles"
    message += (
        f" ({severity} at >= {units.limit_percent(threshold)})"
        if severity
        else f" (warning at >= {units.limit_percent(params['warning'])})"
    )
    gsev, gthr = None, None
    if multi:
        gshare = shares.get("global_exchange", 0.0)
        gsev, gthr = band(gshare, params["global_warning"], params["global_error"])
        message += f"; global (inter-IPU) exchange {units.percent(gshare)} over {ipus} IPUs"
        if gsev:
            message += f" ({gsev} at >= {units.limit_percent(gthr)})"
    where: dict = {}
    if multi and ipus > 1:  # each IPU's own share: the IPUs that exchange most
        per_ipu = _share_per_ipu(profile.steps)
        top, low = per_ipu.idxmax(), per_ipu.idxmin()
        message += (
            f"; every IPU at {units.percent(per_ipu[top])}"
            if units.percent(per_ipu[top]) == units.percent(per_ipu[low])
            else f"; per IPU from {units.percent(per_ipu[low])} (IPU {low})"
            f" to {units.percent(per_ipu[top])} (IPU {top})"
        )
        where["ipus"] = [
            int(i) for i in per_ipu[per_ipu >= params["warning"]].sort_values(ascending=False).index
        ]
    worst = max([s for s in (severity, gsev) if s], key=["warning", "error"].index, default="info")
    if gsev is not None and (severity is None or (gsev == "error" and severity == "warning")):
        value, threshold = shares.get("global_exchange", 0.0), gthr  # the figure that decided the severity
    evidence = pd.DataFrame(
        {
            "category": list(shares),
            "share": list(shares.values()),
            "cycles": list(ex.cycles_by_category(profile).values()),
        }
    )
    sync = worst != "info" and sync_dominated(shares)
    if sync:
        message += f"; sync {units.percent(shares.get('sync', 0.0))} of it (tiles waiting, not exchanging)"
    return [
        ctx.finding(
            worst,
            "Exchange share" if worst == "info" else ("Sync-bound run" if sync else "Exchange-bound run"),
            message,
            value=value,
            threshold=threshold,
            where=where,
            evidence=evidence,
            platform="ipu",
            advice=ADVICE_SYNC if sync else None,
        )
    ]


def _share_per_ipu(steps: pd.DataFrame) -> pd.Series:
    """Exchange + global exchange + sync cycles over all cycles, per IPU (vectorised)."""
    cycles = steps["cycles"].to_numpy(dtype=np.float64, na_value=0.0)
    is_x = labels_mask(steps["category"], EXCHANGE)
    frame = pd.DataFrame({"ipu": steps["ipu"].to_numpy(), "all": cycles, "x": np.where(is_x, cycles, 0.0)})
    sums = frame.groupby("ipu").sum()
    return (sums["x"] / sums["all"].where(sums["all"] > 0)).dropna()


def _trace_share(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    rows = []
    for activity in device_activities(profile):  # one pass per device
        total = float((activity.busy_end - activity.busy_start).sum())
        exposed_start, exposed_end = activity.exposed(EXCHANGE)
        if total > 0:
            rows.append(
                {
                    "rank": activity.rank,
                    "device": activity.device,
                    "label": activity.label,
                    "busy_us": total,
                    "exchange_us": float((exposed_end - exposed_start).sum()),
                }
            )
    if not rows:
        raise NotEvaluated("needs device activity with a duration in the trace")
    per_device = pd.DataFrame(rows)
    per_device["share"] = per_device["exchange_us"] / per_device["busy_us"]
    per_device = per_device.sort_values("share", ascending=False, kind="stable").reset_index(drop=True)
    worst = per_device.iloc[0]
    value = float(worst["share"])
    severity, threshold = band(value, params["warning"], params["error"])
    level = (
        f" ({severity} at >= {units.limit_percent(threshold)})"
        if severity
        else f" (warning at >= {units.limit_percent(params['warning'])})"
    )
    if len(per_device) == 1:
        message = (
            f"exchange + sync not overlapped by other device work take {units.percent(value)} of "
            f"{units.duration(worst['busy_us'])} device busy time in the trace" + level
        )
        if worst["label"]:
            message = f"{worst['label']}: " + message
    else:
        shown = per_device.head(5)
        message = (
            f"exchange + sync not overlapped by other device work take up to {units.percent(value)} of device "
            f"busy time, on {worst['label']}{level}; per device: "
            + ", ".join(
                f"{row.label} {units.percent(row.share)} of {units.duration(row.busy_us)}"
                for row in shown.itertuples()
            )
        )
        if len(per_device) > len(shown):
            message += f" ({len(per_device) - len(shown)} more in the evidence)"
    where = {"devices": [str(x) for x in per_device["label"] if x]} if per_device["label"].any() else {}
    return [
        ctx.finding(
            severity or "info",
            "Exchange share" if not severity else "Exchange-bound run",
            message,
            value=value,
            threshold=threshold,
            where=where,
            evidence=per_device.drop(columns="label"),
        )
    ]
