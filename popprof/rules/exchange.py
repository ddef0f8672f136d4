"""Exchange rules: exchange-heavy phases over the run, and the run-wide exchange share.

Both work from IPU execution steps (cycles per step category) or, for GPU and
other traces, from device events marked with ``events.device_category``
(durations per category stand in for step cycles; windows are built in time).
"""

from __future__ import annotations

import pandas as pd

from ..io import units
from ..io.names import kernel_words
from ..io.plural import plural
from ..metrics import execution as ex
from ..metrics.collectives import collective_calls, collective_skew_by_rank, skew_spans, world_size_unseen
from ..metrics.phases import (
    EXCHANGE,
    device_phases,
    exchange_share_per_ipu,
    exposed_exchange_per_device,
    phase_spans,
    step_phases,
    transfer_spans,
)
from ..metrics.trace import time_origin
from ..model.profile import Profile
from ..trace.intervals import device_activities
from . import execution_totals
from .base import (
    Finding,
    Gain,
    NotEvaluated,
    RuleContext,
    band,
    held_to_stake,
    held_words,
    ipu_run_gain,
    rule,
)
from .execution_totals import ADVICE_SYNC, sync_dominated

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
    "tpu": "In communication-heavy phases the TPU waits on XLA collectives (all-reduce, all-gather, "
    "reduce-scatter, collective-permute) rather than computing: let XLA overlap them with compute "
    "(asynchronous collectives, its latency-hiding scheduler), choose shardings that move less data "
    "between chips (jax.sharding, shard_map), use fewer and larger collectives, and look for a chip or "
    "host the others wait for (see distributed.stragglers).",
}


#: The time-account parts exchange time is taken from, per platform (GPU: communication not overlapped).
EXCHANGE_PARTS = {"ipu": ("exchange", "global_exchange", "sync"), "gpu": ("communication",)}

#: How each platform's account names the exchange categories' exposed time, for a gain's basis.
EXCHANGE_WORDS = {"ipu": "exchange + sync", "gpu": "communication not overlapped by compute"}


def _ipu_exchange_gain(profile: Profile, spent_us: float | None, where: str) -> Gain | None:
    """A gain of ``spent_us`` of exchange + sync time on the mean IPU, of the run's window."""
    basis = (
        f"the exchange + global exchange + sync time {where}, on the mean IPU, were all of it removed or "
        "hidden behind compute"
    )
    return ipu_run_gain(profile, spent_us, basis, EXCHANGE_PARTS["ipu"])


def _held_to_stake(
    severity: str, stake: float | None, params: dict, whose: str, held_share: float | None = None
) -> tuple[str, str]:
    """The phases' severity held to what they are worth, and the sentence that says so.

    The band of the worst window (``severity``) says how exchange-heavy the phases are; ``stake`` (their
    exchange time as a share of ``whose`` time) says what hiding all of it could buy, unless part of it is
    ranks waiting for the last one to arrive, which hiding does not remove: then ``held_share`` is the share
    without those waits, and it decides. Phases that hold little of the run are at most a warning from
    ``span_warning`` and an error from ``span_error`` of it, info below: a phase of 90 % exchange that is 1 %
    of the run is not an error."""
    if stake is None:
        return severity, ""
    text = f"; the phases hold {units.percent(stake)} of {whose}"
    if held_share is not None:
        text += f", {units.percent(held_share)} without the waits for the last rank (what hiding could buy)"
        stake = held_share
    held = held_to_stake(severity, stake, params["span_warning"], params["span_error"])
    if held != severity:
        text += held_words(held, params)
    return held, text


def _threshold(severity: str, params: dict) -> float | None:
    """The worst window's threshold for the severity given (``None`` for info: no band was met)."""
    return {"warning": params["moderate"], "error": params["high"]}.get(severity)


def _steps_phases(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    found = step_phases(
        profile,
        window=params["window"],
        moderate=params["moderate"],
        high=params["high"],
        max_phases=params["max_phases"],
        top=params["top"],
    )
    if found is None:
        return []
    chosen, phase_frame, windows, width = found.chosen, found.phases, found.windows, found.width
    top_programs, top_n = found.programs, int(params["top"])
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
        time = f", about {units.duration(found.time_us(p.cycles))}" if found.clock_hz else ""
        listed.append(
            f"steps {units.count(p.first_step)}-{units.count(p.last_step)} ({plural(p.windows, 'window')}): "
            f"{units.percent(p.share)} of "
            f"{units.count(p.cycles)} IPU-cycles{time}" + (f", dominated by {dom}" if dom else "")
        )
    worst = chosen.loc[chosen["share"].idxmax()]
    local, threshold = band(float(worst["share"]), params["moderate"], params["high"])
    stake = float(phase_frame["exchange_cycles"].sum()) / found.total_cycles if found.total_cycles else None
    severity, at_stake = _held_to_stake(local, stake, params, "all IPU-cycles")
    message = (
        f"{plural(len(phase_frame), 'exchange-heavy phase')} (windows of {width} steps where exchange + sync take "
        f">= {units.limit_percent(params['moderate'])}); worst {units.percent(worst['share'])} ({local} at >= "
        f"{units.limit_percent(threshold)}): " + "; ".join(listed)
    )
    if len(phase_frame) > len(chosen):
        message += f" ({plural(len(phase_frame) - len(chosen), 'smaller phase')} not listed)"
    message += at_stake
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
            threshold=_threshold(severity, params),
            where=where,
            evidence=windows,
            platform="ipu",
            figure="phases.exchange_cycles",
            share=stake,
            gain=_ipu_exchange_gain(
                profile, found.time_us(float(phase_frame["exchange_cycles"].sum())), "of every flagged phase"
            ),
        )
    ]


#: When at least this share of the ranks' collective time is synchronisation skew, a GPU communication finding
#: says so: the communication is mostly ranks waiting for the last one, which overlap will not fix.
SKEW_NOTE_SHARE = 0.5


def _less_skew(skew_us: float) -> str:
    """The words a gain adds when it leaves out the device's synchronisation skew (``""`` without any)."""
    if skew_us <= 0:
        return ""
    return (
        f", less the {units.duration(skew_us)} of it spent waiting for the last rank to arrive "
        "(distributed.collective-skew's)"
    )


def _unseen_ranks_note(profile: Profile, ctx: RuleContext) -> str:
    """ "; the trace holds 1 of the run's 8 ranks ..." for a GPU trace with collectives whose other ranks are
    not in it (:func:`popprof.metrics.collectives.world_size_unseen`): their waits cannot be measured."""
    if ctx.platform != "gpu":
        return ""
    world = world_size_unseen(profile)
    if world is None or collective_calls(profile).empty:
        return ""
    seen = max(int(collective_calls(profile)["rank"].nunique()), 1)
    return (
        f"; the trace holds {seen} of the run's {world} ranks (distributedInfo), so how much of its collective "
        "time is waiting for the others (synchronisation skew, which overlap does not remove) cannot be "
        "measured: open every rank's trace together (a directory of them)"
    )


def _skew_note(profile: Profile, ctx: RuleContext) -> str:
    """ "; ... is synchronisation skew ..." for a multi-rank GPU run whose collective time is mostly ranks
    waiting for the last one (:func:`popprof.metrics.collectives.collective_skew_by_rank`), else ""."""
    if ctx.platform != "gpu":
        return ""
    per_rank = collective_skew_by_rank(profile)
    if per_rank.empty:
        return ""
    total, skew = float(per_rank["time_us"].sum()), float(per_rank["skew_us"].sum())
    if total <= 0 or skew / total < SKEW_NOTE_SHARE:
        return ""
    return (
        f"; {units.percent(skew / total)} of the ranks' collective time is synchronisation skew (ranks waiting "
        "for the last to arrive, not moving data): first find the rank the others wait for and what delays it "
        "(distributed.collective-skew, distributed.stragglers)"
    )


def _trace_phases(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    phases, frames = [], []
    skew = skew_spans(profile) if ctx.platform == "gpu" else {}
    activities = {}
    for activity in device_activities(profile):  # one pass per device
        activities[(activity.rank, activity.device)] = activity
        found, windows = device_phases(
            activity,
            window_us=params["window_us"],
            moderate=params["moderate"],
            high=params["high"],
            top=params["top"],
            skew=skew.get(activity.label),
        )
        if ctx.platform == "gpu":  # device-side syncs alone (a Context Sync at the end) are no communication
            found = [ph for ph in found if ph["non_sync_us"] > 0]
        phases += found
        frames.append(windows)
    if not phases:
        return []
    windows = pd.concat(frames, ignore_index=True)
    chosen = sorted(phases, key=lambda ph: -ph["exchange_us"])[: int(params["max_phases"])]
    chosen.sort(key=lambda ph: (ph["rank"] if ph["rank"] is not None else -1, ph["device"] or "", ph["lo"]))
    worst = max(chosen, key=lambda ph: ph["share"])
    local, threshold = band(worst["share"], params["moderate"], params["high"])
    listed = []
    origin = time_origin(profile) or 0.0
    gpu = ctx.platform == "gpu"
    dominant = list(dict.fromkeys(n for ph in chosen for n, _ in ph["dominant"]))
    # a sentence names a kernel by its callable alone (io.names); an IPU program as the profile has it
    word = dict(zip(dominant, kernel_words(dominant) if gpu else dominant, strict=True))
    for ph in chosen:
        who = f"{ph['label']} " if ph["label"] else ""
        text = (
            f"{who}{units.offset(ph['lo'] - origin)} to {units.offset(ph['hi'] - origin)} from the trace start: "
            f"{units.percent(ph['share'])} of {units.duration(ph['total_us'])} busy"
        )
        if ph["dominant"]:
            text += " (" + ", ".join(f"{word[n]} {units.duration(v)}" for n, v in ph["dominant"]) + ")"
        listed.append(text)
    devices = list(dict.fromkeys(ph["label"] for ph in chosen if ph["label"]))
    heavy, moved = (
        ("communication", "communication + stream sync") if gpu else ("exchange", "exchange + sync")
    )
    message = (
        plural(len(phases), f"{heavy}-heavy phase")
        + (f" on {plural(len(devices), 'device')}" if devices else "")
        + f" (windows of {units.duration(worst['width'])} where {moved} not overlapped by other device "
        f"work take >= {units.limit_percent(params['moderate'])} of the busy time); "
        f"worst {units.percent(worst['share'])} ({local} at >= "
        f"{units.limit_percent(threshold)}): " + "; ".join(listed)
    )
    if len(phases) > len(chosen):
        message += f" ({plural(len(phases) - len(chosen), 'smaller phase')} not listed)"
    programs = dominant
    where = {
        "time_us": (float(worst["lo"]), float(worst["hi"])),
        "programs": programs,
        "phases": [(float(ph["lo"]), float(ph["hi"])) for ph in chosen],
    }
    if devices:
        where["devices"] = devices
    # The gain: the device with the most exposed exchange in its flagged phases that hiding could remove
    # (not the waits for the last rank of a collective: distributed.collective-skew's), of its window.
    per_device: dict[tuple, list[dict]] = {}
    for ph in phases:
        per_device.setdefault((ph["rank"], ph["device"]), []).append(ph)
    top = max(per_device.values(), key=lambda group: sum(ph["exchange_us"] - ph["skew_us"] for ph in group))
    exposed, span = sum(ph["exchange_us"] for ph in top), top[0]["t1"] - top[0]["t0"]
    waited = sum(ph["skew_us"] for ph in top)
    kind = EXCHANGE_WORDS.get(ctx.platform, EXCHANGE_WORDS["ipu"])
    on = f" on {top[0]['label']}" if top[0]["label"] else ""
    spans = None
    if gpu:  # where that time lies
        activity = activities[(top[0]["rank"], top[0]["device"])]
        spans = {top[0]["label"] or None: phase_spans(activity, top, skew.get(activity.label))}
    stake = min(exposed / span, 1.0) if span > 0 else None
    gain = Gain(
        min(exposed - waited, span),
        "us",
        f"the {kind} in the flagged phases{on} (the device with the most){_less_skew(waited)}, of its "
        "window, were it all hidden behind compute",
        whole=span,
        rests_on=EXCHANGE_PARTS.get(ctx.platform, EXCHANGE_PARTS["ipu"]),
        device=top[0]["label"] or None,  # unlabelled: the profile's one device, named by the pricing
        spans=spans,
    )
    whose = gain.whole_words if gain.device else "the device's window"
    hideable = min((exposed - waited) / span, 1.0) if span > 0 and waited > 0 else None
    severity, at_stake = _held_to_stake(local, stake, params, whose, hideable)
    message += at_stake + _skew_note(profile, ctx) + _unseen_ranks_note(profile, ctx)
    return [
        ctx.finding(
            severity,
            "Communication-heavy phases" if gpu else "Exchange-heavy phases",
            message,
            value=float(worst["share"]),
            threshold=_threshold(severity, params),
            where=where,
            evidence=windows,
            figure="phases.exchange_us",
            share=stake,
            gain=gain,
        )
    ]


@rule(
    "exchange.phases",
    "windows of the run where exchange + global exchange + sync take a large share, merged into phases",
    needs=[("steps",), ("events",)],
    params={
        "window": 100,
        "window_us": 0.0,
        "moderate": 0.30,
        "high": 0.50,
        "span_warning": 0.10,
        "span_error": 0.30,
        "top": 3,
        "max_phases": 5,
    },
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
    params={
        "warning": 0.30,
        "error": 0.50,
        "global_warning": 0.15,
        "global_error": 0.30,
        "span_warning": 0.10,
        "span_error": 0.30,
    },
    advice={
        "ipu": "A run dominated by exchange is limited by data movement, not compute: see exchange.phases "
        "for where; for multi-IPU runs a large global-exchange share points at pipeline stage "
        "boundaries or replica all-reduces worth overlapping or shrinking.",
        "gpu": "A run dominated by communication is limited by collectives, not compute: overlap "
        "communication with compute (DDP bucket sizes via bucket_cap_mb, gradient accumulation with "
        "no_sync, overlapping FSDP prefetch), use fewer and larger collectives, and check for a "
        "straggling rank that the others wait for (distributed.stragglers).",
        "tpu": "A run dominated by communication is limited by XLA collectives, not compute: let XLA "
        "overlap them with compute, choose shardings that move less data between chips, use fewer and "
        "larger collectives, and check for a straggling chip or host (distributed.stragglers).",
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
        per_ipu = exchange_share_per_ipu(profile)
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
            figure="execution.exchange_and_sync_share",
            share=ex.exchange_share(profile),
            gain=_ipu_exchange_gain(profile, ex.category_time_us(profile, EXCHANGE), "of the run"),
        )
    ]


def _trace_share(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    per_device = exposed_exchange_per_device(profile)
    if ctx.platform == "gpu" and not any(
        a.in_categories(("exchange",)).any() for a in device_activities(profile)
    ):
        # a share of 0.0 % of something the run never did is no figure worth a finding
        raise NotEvaluated("no communication on the devices (collectives, peer copies) to share their time")
    # The gain: the device with the most exposed exchange that hiding could remove (not the waits for the
    # last rank of a collective: distributed.collective-skew's), of its window (first to last activity).
    top = int(per_device["transfer_us"].to_numpy().argmax())
    hideable, span = float(per_device["transfer_us"].iloc[top]), float(per_device["span_us"].iloc[top])
    kind = EXCHANGE_WORDS.get(ctx.platform, EXCHANGE_WORDS["ipu"])
    label = per_device["label"].iloc[top]
    on = f" on {label}" if label else ""
    transfer = transfer_spans(profile) if ctx.platform == "gpu" else {}
    spans = {label or None: transfer[label]} if label in transfer else None  # where that time lies
    gain = Gain(
        min(hideable, span),
        "us",
        f"the {kind}{on} (the device with the most){_less_skew(float(per_device['skew_us'].iloc[top]))}, "
        "of its window, were it all hidden behind compute",
        whole=span,
        rests_on=EXCHANGE_PARTS.get(ctx.platform, EXCHANGE_PARTS["ipu"]),
        device=label or None,
        spans=spans,
    )
    per_device = per_device.sort_values("share", ascending=False, kind="stable").reset_index(drop=True)
    worst = per_device.iloc[0]
    value = float(worst["share"])
    severity, threshold = band(value, params["warning"], params["error"])
    level = (
        f" ({severity} at >= {units.limit_percent(threshold)})"
        if severity
        else f" (warning at >= {units.limit_percent(params['warning'])})"
    )
    what = "communication not overlapped by compute" if ctx.platform == "gpu" else "exchange + sync"
    if len(per_device) == 1:
        message = (
            f"{what} ({units.duration(worst['exchange_us'])}) takes {units.percent(value)} of "
            f"{units.duration(worst['busy_us'])} device busy time in the trace" + level
        )
        if worst["label"]:
            message = f"{worst['label']}: " + message
    else:
        shown = per_device.head(5)
        message = (
            f"{what} takes up to {units.percent(value)} of device "
            f"busy time, on {worst['label']}{level}; per device: "
            + ", ".join(
                f"{row.label} {units.percent(row.share)} of {units.duration(row.busy_us)}"
                for row in shown.itertuples()
            )
        )
        if len(per_device) > len(shown):
            message += f" ({len(per_device) - len(shown)} more in the evidence)"
    if severity is not None and span > 0:  # held to what hiding it would buy, as the phases are
        stake = min(hideable, span) / span
        held = held_to_stake(severity, stake, params["span_warning"], params["span_error"])
        if held != severity:
            whose = gain.whole_words if label else "the device's window"
            message += (
                f"; hiding it behind compute would save {units.percent(stake)} of {whose}"
                + held_words(held, params)
            )
            severity = None if held == "info" else held
            threshold = params["warning"] if severity == "warning" else None
    message += _skew_note(profile, ctx) + _unseen_ranks_note(profile, ctx)
    where = {"devices": [str(x) for x in per_device["label"] if x]} if per_device["label"].any() else {}
    return [
        ctx.finding(
            severity or "info",
            (
                ("Communication share" if not severity else "Communication-bound run")
                if ctx.platform == "gpu"
                else ("Exchange share" if not severity else "Exchange-bound run")
            ),
            message,
            value=value,
            threshold=threshold,
            where=where,
            evidence=per_device.drop(columns=["label", "span_us"]),
            figure="trace.exposed_exchange_share",
            share=value,
            gain=gain,
        )
    ]
