"""Dependency-wait rule: the device idle in long gaps although the work that ended them had been launched.

:func:`popprof.metrics.gaps.split_gaps` splits each gap of 1 ms or more in a device's activity where the
launch call of the work that ended it returned. Before, the host had not yet submitted that work
(``host.device-gaps`` judges it); after, the work was submitted and the device still did not run it: it
waited on a dependency (an event another stream or the host records, a copy the driver stages, work on another
device). This rule judges that second part, which the time account holds in ``idle_launch``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import units
from ..io.plural import plural
from ..metrics.gaps import attribute_gaps, last_stream_wait, split_gaps
from ..metrics.gaps import device_gaps as gaps_of
from ..metrics.launches import SHORT_GAP_US
from ..metrics.trace import time_origin
from ..model.profile import Profile
from ..trace.intervals import device_activities, host_events, thread_labels
from .base import Finding, Gain, NotEvaluated, RuleContext, band, rule


@rule(
    "device.dependency-waits",
    "gaps in device activity, longer than a threshold, during which the work that ended them had already been "
    "launched (the device waiting on a dependency)",
    needs=["events"],
    params={"min_gap_us": SHORT_GAP_US, "warning": 0.10, "error": 0.30, "top": 3},
    advice={
        "ipu": "Not applicable to IPU programs (no kernel launches).",
        "gpu": "The GPU had the work but did not run it: it waited on a dependency. Find what the work waits "
        "for: an event another stream records late (cudaStreamWaitEvent: a communication stream, an overlap "
        "scheduler waiting on the previous batch), a copy from pageable memory that the driver stages "
        "(pin_memory=True), or work on another device or process; make it ready sooner, or give the device "
        "independent work meanwhile. A sampled trace that leaves device work out shows that time as such "
        "gaps too.",
    },
)
def dependency_waits(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    if ctx.platform != "gpu":
        raise NotEvaluated("needs kernel launches (a GPU trace): an IPU runs one program, launched once")
    per_device = []
    for activity in device_activities(profile):  # one pass per device
        t0, t1 = activity.span
        gs, ge = gaps_of(activity, params["min_gap_us"])
        if t1 <= t0 or len(gs) == 0:
            continue
        split = split_gaps(profile, activity, gs, ge)
        mine = ge > split.host_end
        share = float((ge - split.host_end)[mine].sum()) / (t1 - t0)
        if band(share, params["warning"], params["error"])[0] is not None:
            rows = (split.work_row[mine], split.call_row[mine])
            per_device.append((share, activity, split.host_end[mine], ge[mine], rows))
    if not per_device:
        return []
    per_device.sort(key=lambda item: -item[0])
    share, activity, ws, we, work = per_device[0]  # work: (work rows, launch call rows)
    severity, threshold = band(share, params["warning"], params["error"])
    found = attribute_gaps(
        activity,
        ws,
        we,
        host_events(profile).of_rank(activity.rank),
        thread_labels(profile),
        int(params["top"]),
    )
    origin = time_origin(profile) or 0.0
    message = (
        f"{activity.label + ': ' if activity.label else 'the device is '}idle {units.duration(found.idle_us)} "
        f"= {units.percent(share)} of its window {units.duration(found.span_us)} in {plural(len(ws), 'gap')} >= "
        f"{units.duration(params['min_gap_us'])} after the work that ended each had been launched ({severity} "
        f"at >= {units.limit_percent(threshold)})" + _longest(profile, ws, we, work, origin)
    )
    if len(found.by_label):
        message += "; meanwhile the host was in " + ", ".join(
            f"'{k}' ({units.duration(v)})" for k, v in found.by_label.head(int(params["top"])).items()
        )
    if found.waited_us > 0:
        message += f", blocked on the device for {units.duration(found.waited_us)} of it"
    if len(per_device) > 1:
        message += "; other devices: " + ", ".join(
            f"{a.label} {units.percent(s)}" for s, a, *_ in per_device[1 : 1 + int(params["top"])]
        )
    on = f" on {activity.label}" if activity.label else ""
    gain = Gain(
        min(found.idle_us, found.span_us),
        "us",
        f"the idle time of the gaps >= {units.duration(params['min_gap_us'])}{on} (the worst device) after the "
        "work that ended each had been launched, of its window, were what it waited on ready sooner",
        whole=found.span_us,
        rests_on=("idle_launch",),
        device=activity.label or None,
        spans={None: (ws, we)},
    )
    where: dict = {"time_us": (float(ws[np.argmax(we - ws)]), float(we[np.argmax(we - ws)]))}
    devices = [a.label for _, a, *_ in per_device if a.label]
    if devices:
        where["devices"] = devices
    return [
        ctx.finding(
            severity,
            "Device idle with its work launched: waiting on a dependency",
            message,
            value=share,
            threshold=threshold,
            where=where,
            evidence=found.gaps,
            figure="trace.device_gap_idle_us",
            share=share,
            gain=gain,
        )
    ]


def _longest(profile: Profile, ws: np.ndarray, we: np.ndarray, rows: tuple, origin: float) -> str:
    """ "; longest ... at ..., ended by '<work>' (stream S)[, after a '<stream wait>' at ...]": the longest wait,
    the work that ended it and the last stream-wait call before that work's launch on its thread."""
    i = int(np.argmax(we - ws))
    text = f"; longest {units.duration(we[i] - ws[i])} at {units.offset(ws[i] - origin)}"
    row, call = int(rows[0][i]), int(rows[1][i])
    if row < 0:
        return text
    events = profile.events
    name = str(events["name"].iloc[row])
    stream = events["stream"].iloc[row] if "stream" in events.columns else None
    text += f", ended by '{name[:60]}'" + (
        f" (stream {int(stream)})"
        if stream is not None and not pd.isna(stream)
        else ""  # NA: no stream (-1 read)
    )
    waits = last_stream_wait(profile, call)
    if waits is not None:
        text += f", after a '{waits[0]}' at {units.offset(waits[1] - origin)} (a stream waiting on an event)"
    return text
