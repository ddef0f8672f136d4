"""Both sides of a diff's accelerator peaks, each split by the operators that allocated the bytes live at it.

The split of one trace's peaks is defined in :mod:`popprof.metrics.device_memory` (:func:`peak_parts`).
:func:`device_memory_parts` is called by :func:`popprof.compare.core.diff` while it has both profiles, and the
:class:`~popprof.compare.core.ProfileDiff` keeps the result; :mod:`popprof.compare.device_memory_changed`
reads it.
"""

from __future__ import annotations

from ..metrics.device_memory import peak_parts
from ..model.profile import Profile
from .baseline import is_baseline

Peaks = dict[tuple[int | None, str], dict]


def _accelerators(profile: Profile) -> Peaks:
    """The profile's split peaks of its accelerators (not ``cpu``); ``{}`` for a baseline or without any."""
    if is_baseline(profile):
        return {}
    return {key: r for key, r in peak_parts(profile).items() if key[1] != "cpu"}


def device_memory_parts(base: Profile, new: Profile) -> tuple[Peaks, Peaks] | None:
    """Both sides' split accelerator peaks; None when neither side has allocator events on an accelerator."""
    sides = _accelerators(base), _accelerators(new)
    return sides if any(sides) else None
