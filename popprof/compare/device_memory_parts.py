"""Both sides of a diff's accelerator peaks, each split by the operators that allocated the bytes live at it.

The split of one trace's peaks is defined in :mod:`popprof.metrics.device_memory` (:func:`peak_parts`).
:func:`device_memory_parts` is called by :func:`popprof.compare.core.diff` while it has both profiles, and the
:class:`~popprof.compare.core.ProfileDiff` keeps the result; :mod:`popprof.compare.device_memory_changed`
reads it.
"""

from __future__ import annotations

from ..metrics.device_memory import BEFORE_TRACE, freed_part, is_freed_part, peak_parts
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


#: The one part the operators become when their names cannot be paired (pseudonyms of different keys).
OPERATORS = "(operators, names not paired)"
#: The one part the blocks from before the trace that operators free after the peak become then.
FREED_OPERATORS = freed_part("operators")


def operators_merged(sides: tuple[Peaks, Peaks] | None) -> tuple[Peaks, Peaks] | None:
    """``sides`` with each peak's operator parts summed into :data:`OPERATORS`, and its parts freed after the
    peak into :data:`FREED_OPERATORS` (the sum stays exact): their names are pseudonyms of different keys, which
    do not correspond."""
    if sides is None:
        return None

    def merged(record: dict) -> dict:
        parts = record["parts"]
        freed = sum(b for p, b in parts.items() if is_freed_part(p))
        operators = sum(b for p, b in parts.items() if p != BEFORE_TRACE and not is_freed_part(p))
        merged = {OPERATORS: operators, **({FREED_OPERATORS: freed} if freed else {})}
        return {**record, "parts": {**merged, BEFORE_TRACE: parts.get(BEFORE_TRACE, 0)}}

    base, new = sides
    return {k: merged(r) for k, r in base.items()}, {k: merged(r) for k, r in new.items()}
