"""Which platform a profile comes from (``ipu`` or ``gpu``), so findings carry advice written for it.

Decided from the tables only, in this order: the ``events.device`` column (``gpu:0``, ``ipu:1``) when a
reader filled it; an IPU execution profile (``steps``); device events on the channels GPU profilers
write (Kineto / CUPTI ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ...); otherwise the IPU, popprof's home
platform.

A TPU trace (an XPlane's ``tpu:N`` devices) is a ``gpu`` profile for every figure and rule: the same
kinds of work on devices fed by a host. Only the words a user acts on differ (JAX and XLA, not CUDA and
PyTorch), so :func:`advice_platform` names it ``tpu`` for the rules' advice alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.device import DEVICE_CHANNELS

#: Channels (Chrome ``cat``) of device work recorded by GPU profilers.
GPU_CHANNELS: frozenset[str] = (frozenset(DEVICE_CHANNELS) - {"mtia_ccp_events"}) | {"gpu_user_annotation"}


def platform_of(profile: Profile) -> str:
    """``"gpu"`` or ``"ipu"`` (see the module docstring); cached per profile."""
    return profile.cached("rules.platform", lambda: _platform(profile))


def advice_platform(profile: Profile) -> str:
    """The platform the rules' advice is written for: ``tpu`` when most device events are on TPUs, else
    :func:`platform_of`'s ``gpu`` or ``ipu``."""
    return "tpu" if _device_prefix(profile) == "tpu" else platform_of(profile)


def _device_prefix(profile: Profile) -> str | None:
    """The kind of device most events are on (``gpu`` of ``gpu:0``), ``None`` when no event names one."""
    return profile.cached("rules.device_prefix", lambda: _most_events_on(profile.get("events")))


def _most_events_on(events: pd.DataFrame | None) -> str | None:
    if events is None or "device" not in events.columns:
        return None
    # count the distinct devices first (codes of a categorical column), then read the prefix of each:
    # splitting every event's device text cost 0.15 s on a 600k-event trace
    counts = events["device"].value_counts(dropna=True)
    counts = counts[counts > 0]
    if not len(counts):
        return None
    prefixes = [str(device).split(":", 1)[0].lower() for device in counts.index]
    by_prefix = pd.Series(counts.to_numpy(), index=prefixes).groupby(level=0, sort=False).sum()
    return str(by_prefix.sort_values(ascending=False, kind="stable").index[0])


def _platform(profile: Profile) -> str:
    prefix = _device_prefix(profile)
    if prefix in ("gpu", "ipu"):
        return prefix
    events = profile.get("events")
    if profile.has("steps"):
        return "ipu"
    if events is not None and len(events):
        device = events["device_category"].notna().to_numpy()
        channels = events["channel"].array
        gpu_codes = [i for i, c in enumerate(channels.categories) if c in GPU_CHANNELS]
        if gpu_codes and np.isin(np.asarray(channels.codes)[device], gpu_codes).any():
            return "gpu"
    return "ipu"
