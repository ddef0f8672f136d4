"""Trace metrics from the ``events`` table: span, event counts, device busy / idle, host stalls.

Device activity follows :mod:`popprof.trace.activity`: events with a device
category; host stalls are the idle gaps inside the
device-active span (first device event to last).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import activity
from ..trace.activity import device_union, interval_union
from ..trace.device import DEVICE_CATEGORIES
from . import metric, metric_family

#: The name PyTorch's profiler gives each step's annotation: ``ProfilerStep#12``.
STEP_PREFIX = "ProfilerStep#"


@metric(
    "trace.span_us", "us", "trace length: first event start to last event end", needs=("events",), better=None
)
def span_us(profile: Profile) -> float | None:
    events = profile.events
    union = interval_union(events["start_us"].to_numpy(), events["dur_us"].to_numpy())
    return None if union is None else union.span


@metric("trace.event_count", "events", "trace events", needs=("events",), better=None)
def event_count(profile: Profile) -> float | None:
    return float(len(profile.events))


@metric("trace.thread_count", "threads", "threads with events", needs=("events",), better=None)
def thread_count(profile: Profile) -> float | None:
    return float(profile.events[["pid", "tid"]].drop_duplicates().shape[0])


@metric(
    "trace.device_busy_us",
    "us",
    "time with at least one device event running",
    needs=("events",),
    better=None,
)
def device_busy_us(profile: Profile) -> float | None:
    union = device_union(profile.events)
    return None if union is None else union.busy


@metric(
    "trace.device_idle_share",
    "ratio",
    "share of the device-active span with no device event running",
    needs=("events",),
)
def device_idle_share(profile: Profile) -> float | None:
    union = device_union(profile.events)
    if union is None or union.span <= 0:
        return None
    return union.idle / union.span


@metric(
    "trace.device_idle_us",
    "us",
    "total device-idle gap time inside the device-active span",
    needs=("events",),
)
def host_stall_us(profile: Profile) -> float | None:
    union = device_union(profile.events)
    return None if union is None else union.idle


@metric_family(
    "trace.device_time_us.",
    "us",
    "device time by category (nested device events counted once, in their own category)",
    needs=("events",),
)
def device_time_by_category(profile: Profile) -> dict[str, float]:
    events = profile.events
    if not events["device_category"].notna().any():
        return {}
    sums = activity.device_time_by_category(events)
    return {c: float(sums[c]) for c in DEVICE_CATEGORIES}


@metric(
    "trace.profiler_step_count",
    "steps",
    "profiler steps in the trace (distinct ProfilerStep#N annotations)",
    needs=("events",),
    better=None,
)
def profiler_step_count(profile: Profile) -> float | None:
    """Distinct ``ProfilerStep#N`` names among the events; None when the trace marks no steps."""
    names = profile.events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):  # the reader's dtype: look at the used categories only
        used = names.cat.categories.take(
            np.unique(names.cat.codes.to_numpy()[names.cat.codes.to_numpy() >= 0])
        )
        labels = pd.Index(used.astype("str"))
    else:
        labels = pd.Index(names.dropna().astype("str").unique())
    count = int(labels.str.startswith(STEP_PREFIX).sum())
    return float(count) if count else None
