"""Host-CPU stall rules: stream copies in the execution profile, device-idle gaps and long host events in traces.

Trace rules use ``events.device_category`` to tell device activity (set) from
host events (missing). All interval work is vectorised (see
:mod:`popprof.trace.intervals`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..io import units
from ..io.plural import plural
from ..io.words import HOST_BLOCKED, HTA_IDLE_CAUSES, OFF_CPU
from ..metrics import execution as ex
from ..metrics.capture import capture_as_busy, graph_capture
from ..metrics.devices import launches_without_device, named_devices_without_activity
from ..metrics.gaps import (
    GapAttribution,
    attribute_gaps,
    host_gaps,
    idle_during,
    idle_spans_during,
    long_idle_events,
    unlaunched_reason,
    work_intervals,
)
from ..metrics.host_cpu import launchers_in_gaps, on_cpu_words
from ..metrics.launches import SHORT_GAP_US
from ..metrics.trace import parent_rows, time_origin
from ..metrics.trace_summary import wait_callers
from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import labels_mask
from ..trace.intervals import (
    DeviceActivity,
    device_activities,
    host_events,
    sum_by_code,
    thread_labels,
    thread_names,
)
from .base import Finding, Gain, NotEvaluated, RuleContext, band, ipu_run_gain, rule

#: The time-account parts of idle device time, per platform (a gain resting on idle time takes from these).
IDLE_PARTS = {"gpu": ("idle_host", "idle_launch", "idle_other"), "ipu": ("idle",)}


def _stream_copy_gain(profile: Profile, source: str) -> Gain | None:
    """The host stream copies' time (:func:`popprof.metrics.execution.category_time_us`) of the run's window."""
    basis = (
        f"the time of the host stream copies ({source}), were input prefetched and overlapped with compute "
        "so that the IPU never waits on the host"
    )
    return ipu_run_gain(profile, ex.category_time_us(profile, ("host_io",)), basis, ("stream_copies",))


def _summary_stream_copy(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """``host.stream-copy`` on a Poplar text summary: its host exchange cycles as a share of the total cycles."""
    params = ctx.params
    value = ex.host_io_share(profile)
    if value is None:
        totals = profile.execution_totals
        if (totals["category"].astype(str) == "host_io").any() and "host_io" in ex.summary_shares(profile):
            raise NotEvaluated(
                "needs the host exchange cycles as a share of the summary's total cycles (this summary prints "
                "them summed over all tiles, SDK 1.x: not comparable with its total cycles); or an execution "
                "profile"
            )
        raise NotEvaluated(
            "needs step cycles (an execution profile), or a text summary that prints its host exchange "
            "cycles and total cycles"
        )
    severity, threshold = band(value, params["warning"], params["error"])
    if severity is None:
        return []
    totals = profile.execution_totals
    basis = set(totals["basis"].astype(str)) - {"total"}
    of = "of the average tile's cycles" if "tile_average" in basis else "of the total cycles"
    window = ex.total_time_us(profile)
    clock = profile.target_value("clock_hz")
    message = f"host stream copies (host exchange) take {units.percent(value)} {of} in the summary"
    if window:
        message += f", about {units.duration(value * window)} of {units.duration(window)}"
        if not clock:
            message += " (the summary's approximate time)"
    message += f" ({severity} at >= {units.limit_percent(threshold)})"
    evidence = totals[["category", "basis", "cycles", "share", "time_us", "label"]].reset_index(drop=True)
    spent = "the summary's host exchange share of " + (
        "its total cycles over the clock" if clock else "its printed approximate time"
    )
    return [
        ctx.finding(
            severity,
            "Host stream copies",
            message,
            value=value,
            threshold=threshold,
            evidence=evidence,
            platform="ipu",
            figure="execution.summary_share.host_io",
            share=value,
            gain=_stream_copy_gain(profile, spent),
        )
    ]


@rule(
    "host.stream-copy",
    "share of IPU-cycles spent in host stream copies (the IPU waiting on the host)",
    needs=[("steps",), ("execution_totals",)],
    params={"warning": 0.05, "error": 0.20, "top": 3},
    advice="The IPU spends this time streaming data to or from the host: prefetch input "
    "(e.g. deviceIterations / a larger batches-per-step), use I/O tiles to overlap I/O and compute, "
    "keep weights and optimizer state on the IPU, and make the host data pipeline faster.",
)
def stream_copy(profile: Profile, ctx: RuleContext) -> list[Finding]:
    if not profile.has("steps"):  # a text summary's execution totals
        return _summary_stream_copy(profile, ctx)
    params = ctx.params
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
        ctx.finding(
            severity,
            "Host stream copies",
            message,
            value=value,
            threshold=threshold,
            where=where,
            evidence=evidence,
            platform="ipu",
            figure="execution.share.host_io",
            share=value,
            gain=_stream_copy_gain(profile, "their IPU-cycles on the mean IPU over the clock"),
        )
    ]


@rule(
    "host.device-gaps",
    "gaps in device activity inside the run, longer than a threshold, and what the host did meanwhile",
    needs=["events"],
    params={"min_gap_us": SHORT_GAP_US, "warning": 0.10, "error": 0.30, "top": 3},
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
def device_gaps(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    if masks.device_activity_mask(profile).all():  # the account calls such idle "cause unknown"
        raise NotEvaluated(
            "needs host events: the trace records no host event (a device-only trace, such as rocprofv3's "
            "kernel trace without its API records), so whether the host held the device cannot be told; the "
            "time account shows that idle as 'cause unknown'"
        )
    per_device = []
    unknown = gaps_seen = 0  # gaps whose next work has no recorded launch, of all the gaps looked at
    capture = graph_capture(profile)
    captured: dict[
        str | None, tuple[int, float]
    ] = {}  # per device: gaps left out as graph capture, their time
    for activity in device_activities(profile):  # one pass per device
        # the host's part of each gap: until the work that ended it had been launched (the rest, the work
        # launched and waiting on a dependency, is device.dependency-waits'); graph capture left out
        found = host_gaps(profile, activity, params["min_gap_us"], ctx.platform, capture)
        if found is None:  # no gap to point at (also with a warning threshold of 0)
            continue
        if found.captured is not None:
            captured[activity.label] = found.captured
        gaps_seen += found.seen
        unknown += found.unknown
        if band(found.share, params["warning"], params["error"])[0] is not None:
            per_device.append((found.share, activity, found.start, found.end, found.waited_us))
    reason = unlaunched_reason(gaps_seen, unknown)
    if reason is not None:
        raise NotEvaluated(reason)
    if not per_device:
        return []
    per_device.sort(key=lambda item: -item[0])
    host = host_events(profile)
    labels = thread_labels(profile)
    n = int(params["top"])
    origin = time_origin(profile) or 0.0
    frames, texts, threads, attributed = [], [], [], []
    causes = _idle_causes(profile)
    for share, activity, gs, ge, waited in per_device:
        found = attribute_gaps(activity, gs, ge, host.of_rank(activity.rank), labels, n)
        attributed.append(found)
        gaps, top_threads = found.gaps, found.top_threads
        text = _gaps_sentence(profile, activity, found, share, n, params, origin)
        if waited >= params["min_gap_us"]:  # worth a word: at least one gap's worth
            text += (
                f"; another {units.duration(waited)} in those gaps after the work that ended them had been "
                "launched (waiting on a dependency: device.dependency-waits)"
            )
        if activity.label in captured:
            count, time = captured[activity.label]
            text += (
                f"; {plural(count, 'gap')} of {units.duration(time)} left out: the host was capturing a graph "
                f"in {'it' if count == 1 else 'them'} (kernels recorded, not run: a one-off cost of CUDA/HIP "
                "graphs, not a host stall)"
            )
        cause = causes.get((activity.rank, activity.device))
        if cause:
            text += f"; idle causes (HTA, over its streams): {cause}"
        text += _on_cpu_sentence(profile, activity)
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
            f"windows in gaps >= {units.duration(params['min_gap_us'])} before the host had launched the work "
            f"that ended each ({severity} at >= "
            f"{units.limit_percent(threshold)} for the worst): " + "; ".join(texts[:n])
        )
        if len(texts) > n:
            message += f"; {plural(len(texts) - n, 'more device')} in the evidence"
    longest = frames[0].loc[frames[0]["dur_us"].idxmax()]
    where = {"time_us": (float(longest["start_us"]), float(longest["end_us"])), "threads": threads[:n]}
    devices = [a.label for _, a, _, _, _ in per_device if a.label]
    if devices:
        where["devices"] = devices
    worst, on = attributed[0], (f" on {per_device[0][1].label}" if per_device[0][1].label else "")
    gain = Gain(
        min(worst.idle_us, worst.span_us),
        "us",
        f"the idle time of the gaps >= {units.duration(params['min_gap_us'])}{on} (the worst device) before the "
        "host had launched the work that ended each, of its window, were the host to submit work ahead of the "
        "device",
        whole=worst.span_us,
        rests_on=IDLE_PARTS.get(ctx.platform, IDLE_PARTS["ipu"]),
        device=per_device[0][1].label or None,
        spans={None: (per_device[0][2], per_device[0][3])},  # its gaps: counted once with other gains on them
    )
    return [
        ctx.finding(
            severity,
            "Device idle waiting on the host",
            message,
            value=worst_share,
            threshold=threshold,
            where=where,
            evidence=evidence,
            figure="trace.device_gap_idle_us",
            share=worst_share,
            gain=gain,
            advice=_waiting_advice(profile, per_device[0][1], attributed[0], ctx),
        )
    ]


#: advice first when the worst device's launching thread mostly waited in its gaps, by how it waited
#: (``launchers_in_gaps``' ``verdict_key``); the rule's general advice follows
WAITING_ADVICE = {
    "communication": "In these gaps the launching thread mostly polled in communication calls: the device "
    "waited while its rank waited for messages or for other ranks. Post the transfers early and overlap them with "
    "device work (MPI_Isend/MPI_Irecv before the kernels, CUDA-aware MPI or NCCL on a stream), and look for load "
    "imbalance between ranks (the slowest rank sets the pace).",
    "host_wait": "In these gaps the launching thread mostly spun in calls blocking on the device: each "
    "synchronisation drains the device's queue before the next work is launched. Launch ahead and synchronise "
    "less (cudaMemcpyAsync from pinned memory, events instead of device-wide syncs).",
    "off_cpu": "In these gaps the launching thread was mostly off CPU: blocked on I/O, a lock or a sleeping "
    "call, or preempted. Trace what it blocks on (nsys --trace=osrt) and give the host work more CPUs or "
    "workers.",
}


#: advice first when most of the worst device's counted gap time began while the host was blocked waiting for
#: the device (``GapAttribution.drained_us``) and its launching thread's own verdict leads with nothing
DRAINED_ADVICE = (
    "Most of this idle time began while the host waited for the device (a synchronisation or a synchronous "
    "copy drained its queue), so the work after the wait could not be queued ahead of it: launch the next work "
    "before synchronising, read results back less often (.item(), .cpu() every N steps, not every step), and "
    "copy asynchronously (cudaMemcpyAsync, non_blocking=True from pinned memory) so that the host's work "
    "overlaps the device's."
)


def _waiting_advice(profile: Profile, activity, found: GapAttribution, ctx: RuleContext) -> str | None:
    """The rule's advice led by :data:`WAITING_ADVICE` when the worst device's launching thread mostly waited
    in its gaps, else by :data:`DRAINED_ADVICE` when at least half of its counted gap time (``found``) began
    while the host was blocked waiting for it; None (the rule's own advice) otherwise."""
    t = launchers_in_gaps(profile).get((activity.rank, activity.device))
    lead = None if t is None else WAITING_ADVICE.get(t["verdict_key"])
    if lead is None and found.idle_us > 0 and found.drained_us >= 0.5 * found.idle_us:
        lead = DRAINED_ADVICE
    return None if lead is None else f"{lead} {ctx.rule.advice_for(ctx.advice_platform or ctx.platform)}"


def _on_cpu_sentence(profile: Profile, activity) -> str:
    """``; in the device's gaps its launching thread T was on CPU 99.9 % (computing 78.0 %, ...) and off CPU
    0.1 %`` from the context switches and the CPU samples' calls (``metrics.host_cpu``: the thread that launched
    most of the device's work, over all the device's gaps); ``""`` without them."""
    t = launchers_in_gaps(profile).get((activity.rank, activity.device))
    if t is None:
        return ""
    on = t["on_cpu_share"]
    sampled = ", ".join(
        f"{f['function']} {units.percent(f['samples'] / t['gap_samples'])}" for f in t["gap_functions"]
    )
    source = "its context switches" + (" and CPU samples' call stacks" if t["on_cpu_parts"] else "")
    return (
        f"; in all the device's gaps its launching thread {t['thread']} was {on_cpu_words(on, t['on_cpu_parts'])}"
        f" and {OFF_CPU} {units.percent(1 - on)} ({source}): {t['verdict']}"
        + (f"; sampled in {sampled}" if sampled else "")
    )


def _idle_causes(profile: Profile) -> dict[tuple, str]:
    """``(rank, device) -> "host wait (HTA) 62 %, ..."`` from HTA's idle breakdown (GPU traces)."""
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
            f"{HTA_IDLE_CAUSES.get(cat, cat)} {units.percent(v / total)}"
            for (_, _, cat), v in group.sort_values(ascending=False).items()
            if v > 0
        ]
        out[(None if pd.isna(rank) else int(rank), None if pd.isna(device) else str(device))] = ", ".join(
            parts
        )
    return out


def _gaps_sentence(
    profile: Profile,
    activity: DeviceActivity,
    found: GapAttribution,
    share: float,
    n: int,
    params: Mapping,
    origin: float,
) -> str:
    """The sentence describing one device's gaps and the host work in them; times are offsets from ``origin``
    (the trace's)."""
    gaps, idle, span = found.gaps, found.idle_us, found.span_us
    by_label, by_thread, top_threads = found.by_label, found.by_thread, found.top_threads
    longest = gaps.loc[gaps["dur_us"].idxmax()]
    severity, threshold = band(share, params["warning"], params["error"])
    who = f"{activity.label}: " if activity.label else "the device is "
    message = (
        f"{who}idle {units.duration(idle)} = {units.percent(share)} of its window {units.duration(span)} in "
        f"{plural(len(gaps), 'gap')} >= {units.duration(params['min_gap_us'])} before the host had launched the work "
        f"that ended each ({severity} at >= {units.limit_percent(threshold)}); longest "
        f"{units.duration(longest['dur_us'])} at "
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
    waited = found.waited_us
    if waited > 0:  # the device idle, its next work not yet launched: those calls waited for none of it
        message += (
            f"; the host spent {units.duration(waited)} of the gaps in calls that block on the device"
            f"{_waits_by_caller(profile, found.waited_by)}, with the device idle and its next work not yet "
            "launched: the calls' own cost, not a wait for the device"
        )
    drained = gaps["after_wait"].notna().to_numpy()
    if drained.any():  # the device ran out of work while the host waited for it: nothing was queued ahead
        message += "; " + drained_words(
            int(drained.sum()), None, found.drained_us, idle, _waits_by_caller(profile, found.drained_by)
        )
    return message


def drained_words(count: int, of: int | None, drained_us: float, idle_us: float, calls: str) -> str:
    """``4 gaps (723.59 ms, 100.0 % of that idle) began with the host blocked on device (cudaMemcpy ...): nothing
    had been launched ahead of the wait``: the gaps a synchronisation drained (``GapAttribution.drained_us``), in
    ``host.device-gaps``' message and the summary's "What limits this run" alike; ``of``: the gaps counted
    (``4 of 4 gaps``), ``calls``: `` (call time, ...)`` or ``""``."""
    gaps = plural(count, "gap") if of is None else f"{count:,} of {plural(of, 'gap')}"
    return (
        f"{gaps} ({units.duration(drained_us)}, {units.percent(drained_us / idle_us)} of that idle) began with the "
        f"{HOST_BLOCKED}{calls}: nothing had been launched ahead of the wait"
    )


def _waits_by_caller(profile: Profile, waited_by: pd.Series, top: int = 2) -> str:
    """`` (cudaFree in aten::conv2d 6.534 s, ...)``: the blocking calls' time in the gaps (``waited_by``, per
    call's event id) by call and caller (:func:`popprof.metrics.trace_summary.wait_callers`), the ``top``
    largest; empty without any."""
    if waited_by.empty:
        return ""
    events = profile.events
    position = pd.Series(np.arange(len(events)), index=events["event_id"].to_numpy())
    rows = position.reindex(waited_by.index).to_numpy()
    known = ~np.isnan(rows)
    rows, spent = rows[known].astype(np.int64), waited_by.to_numpy()[known]
    if rows.size == 0:
        return ""
    caller = wait_callers(events, rows, parent_rows(profile))
    names = events["name"].array  # only the few rows named below are made text
    keys = [
        f"{names[r]} in {names[c]}" if c >= 0 else f"{names[r]} outside any operator"
        for r, c in zip(rows.tolist(), caller.tolist(), strict=True)
    ]
    by_key = pd.Series(spent).groupby(keys, sort=False).sum().sort_values(ascending=False, kind="stable")
    return " (" + ", ".join(f"{k} {units.duration(v)}" for k, v in by_key.head(top).items()) + ")"


def _whose_window(profile: Profile, rank: int | None, rank_label: str) -> tuple[dict[str, object], str]:
    """Whose time a gain on one rank's window (its devices' first to last activity) takes, as :class:`Gain`
    keywords, and that window in words. A rank with one device: that device (its window in the account); an
    unlabelled one is left for the pricing to name (the profile's one device). Several: the rank's window."""
    devices = [a.label for a in device_activities(profile) if a.rank == rank]
    if len(devices) == 1:
        return (
            ({"device": devices[0]}, f"{devices[0]}'s window") if devices[0] else ({}, "the device's window")
        )
    words = f"{rank_label}'s window" if rank_label else "the devices' first to last activity"
    return {"of": words}, words


def _band_words(severity: str, threshold: float, params: dict) -> str:
    """Where the finding's band starts: ``error at >= 30 %``; with a warning level of 0 (the default: any
    qualifying event warns) ``a warning for any such event; error at >= 30 %``."""
    if severity == "warning" and threshold <= 0:
        return f"a warning for any such event; error at >= {units.limit_percent(params['error'])}"
    return f"{severity} at >= {units.limit_percent(threshold)}"


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
        "tpu": "Long host work between TPU programs (input preparation, host-side transposes and transfers, "
        "checkpointing, logging) stalls the TPU. JAX dispatches asynchronously: keep the step free of calls "
        "that wait for a result (np.asarray or printing a jax.Array, jax.device_get, block_until_ready), start "
        "copies to the host early (jax.Array.copy_to_host_async), put the next batch on the devices ahead "
        "of the step (jax.device_put), checkpoint asynchronously, or do such work less often. Host time in "
        "MapDmaBuffer means transfers use host memory not pre-mapped for DMA (TPU_PREMAPPED_BUFFER_SIZE, "
        "Cloud TPU's performance guide).",
    },
)
def long_events(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    activities = device_activities(profile, by="rank")  # NotEvaluated without device activity
    host = host_events(profile, min_us=params["min_us"])
    host = host.subset(~host.waits)  # a host wait is device-bound time
    if not len(host):
        return []
    waits = host_events(
        profile, waits_only=True
    )  # inside an event, the time blocked on the device is not work
    frames = []
    spans = {}
    capture = graph_capture(profile)
    for activity in activities:  # one pass per rank (its devices together)
        activity = capture_as_busy(activity, capture)  # a graph being built is no idle here (metrics.capture)
        found = long_idle_events(
            activity,
            host.of_rank(activity.rank),
            params["idle_share"],
            waits.of_rank(activity.rank),
            params["min_us"],
        )
        if found is not None:
            found.insert(0, "rank", activity.rank)
            frames.append(found)
            spans[-1 if activity.rank is None else int(activity.rank)] = activity  # found's rank: -1 for none
    if not frames:
        return []
    labels = thread_labels(profile)
    found = pd.concat(frames, ignore_index=True)
    found["thread"] = thread_names(labels, found["pid"].to_numpy(), found["tid"].to_numpy())
    found = found.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)
    # Device idle time during the union of these events, per rank (threads overlapping in time count once).
    shares, intervals = {}, {}
    for rank, group in found.groupby(found["rank"].astype("Float64").fillna(-1), sort=False):
        activity = spans[int(rank)]
        t0, t1 = activity.span
        start = group["start_us"].to_numpy(dtype=np.float64)
        intervals[activity.label] = work_intervals(
            start,
            start + group["dur_us"].to_numpy(dtype=np.float64),
            group["pid"].to_numpy(),
            group["tid"].to_numpy(),
            waits.of_rank(activity.rank),
        )
        idle = idle_during(activity, *intervals[activity.label])
        shares[activity.label] = (min(idle / (t1 - t0), 1.0), idle, t1 - t0)
    worst_label, (total_share, merged_idle, span) = max(shares.items(), key=lambda kv: kv[1][0])
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
    worst = next(act for act in spans.values() if act.label == worst_label)
    whose, window_words = _whose_window(profile, worst.rank, worst_label)
    if "of" not in whose:  # one device: the idle during its events, to count once with other gains on them
        whose["spans"] = {None: idle_spans_during(worst, *intervals[worst_label])}
    gain = Gain(
        min(merged_idle, span),
        "us",
        f"the device idle time during these host events{where_idle}{' (the worst rank)' if len(spans) > 1 else ''}, "
        "of its window, were "
        "that host work overlapped with device work or moved off the critical path",
        whole=span,
        rests_on=IDLE_PARTS.get(ctx.platform, IDLE_PARTS["ipu"]),
        **whose,
    )
    message = (
        f"{plural(len(found), 'host event')} >= {units.duration(params['min_us'])} with the device idle for >= "
        f"{units.limit_percent(params['idle_share'])} of each; device idle {units.duration(merged_idle)} during "
        f"{'it' if len(found) == 1 else 'them'} "
        f"= {units.percent(total_share)} of {window_words} ({_band_words(severity, threshold, params)}); longest "
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
        ctx.finding(
            severity,
            "Long host events while the device idles",
            message,
            value=total_share,
            threshold=threshold,
            where=where,
            evidence=found,
            figure="trace.host_event_idle_us",
            share=total_share,
            gain=gain,
        )
    ]


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
def launches_without_device_rule(profile: Profile, ctx: RuleContext) -> list[Finding]:
    calls = launches_without_device(profile)
    if not calls:
        named = named_devices_without_activity(profile)
        if not named:
            return []
        return [  # GPUs named in deviceProperties, not one launch, kernel or copy: say so, no more
            ctx.finding(
                "info",
                "No device activity recorded",
                f"no device activity was recorded: the trace names {plural(len(named), 'device')} "
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
        ctx.finding(
            "warning",
            "Device side missing",
            message,
            value=float(total),
            threshold=1.0,
            evidence=pd.DataFrame({"name": list(calls), "count": list(calls.values())}),
            platform="gpu" if any(n.startswith(("cuda", "hip")) for n in calls) else None,
        )
    ]
