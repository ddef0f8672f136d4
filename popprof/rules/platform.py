"""Which platform a profile comes from (``ipu`` or ``gpu``), so findings carry advice written for it.

Decided from the tables only, in this order: the ``events.device`` column (``gpu:0``, ``ipu:1``) when a
reader filled it; an IPU execution profile (``steps``); device events on the channels GPU profilers
write (Kineto / CUPTI ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ...); otherwise the IPU, popprof's home
platform.
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


def _platform(profile: Profile) -> str:
    events = profile.get("events")
    if events is not None and "device" in events.columns:
        # count the distinct devices first (codes of a categorical column), then read the prefix of each:
        # splitting every event's device text cost 0.15 s on a 600k-event trace
        counts = events["device"].value_counts(dropna=True)
        counts = counts[counts > 0]
        if len(counts):
            prefixes = [str(device).split(":", 1)[0].lower() for device in counts.index]
            by_prefix = pd.Series(counts.to_numpy(), index=prefixes).groupby(level=0, sort=False).sum()
            prefix = by_prefix.sort_values(ascending=False, kind="stable").index[0]
            if prefix in ("gpu", "ipu"):
                return prefix
    if profile.has("steps"):
        return "ipu"
    if events is not None and len(events):
        device = events["device_category"].notna().to_numpy()
        channels = events["channel"].array
        gpu_codes = [i for i, c in enumerate(channels.categories) if c in GPU_CHANNELS]
        if gpu_codes and np.isin(np.asarray(channels.codes)[device], gpu_codes).any():
            return "gpu"
    return "ipu"
