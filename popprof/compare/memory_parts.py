"""Both sides of a diff split into the same tile memory parts, from the one definition of a tile's split.

The split of one profile's tiles (the ``tile_memory`` categories, the always-live and not-always-live
variables, ``other``, the gaps; an exact partition of each tile's bytes including gaps) is defined in
:mod:`popprof.metrics.tile_parts`, which the tile memory plot draws too. Here the two sides are paired: the
categories of both sides on each, the liveness parts only when they fit on every tile of both sides, ``other``
when it is not 0 on a tile of either (``docs/diff.md``, "What changed: memory").

:func:`memory_parts` is called by :func:`popprof.compare.core.diff` while it has both profiles, and the
:class:`~popprof.compare.core.ProfileDiff` keeps the result; :mod:`popprof.compare.memory_changed` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..metrics import tile_parts as tp
from ..metrics.tile_parts import ALWAYS_LIVE, GAPS, NOT_ALWAYS_LIVE, OTHER, WORDS
from ..model.profile import Profile
from .baseline import is_baseline

__all__ = ["ALWAYS_LIVE", "GAPS", "NOT_ALWAYS_LIVE", "OTHER", "WORDS", "MemoryParts", "memory_parts"]


@dataclass(frozen=True)
class MemoryParts:
    """Both sides' tiles split into the same parts, or why they cannot be (``reason``, the frames None).

    ``base`` / ``new``: one row per tile of the side's ``tiles`` table (index ``tile``), an ``ipu`` column, then
    one int64 column per part in ``parts`` order, summing to the tile's ``bytes_incl_gaps``. ``kinds`` maps a
    part to ``category``, ``variables``, ``other`` or ``gaps``. ``base_variables`` / ``new_variables``: each
    side's ``variables`` bytes by name (``name``, ``bytes``, ``always_live``), None when a side has none."""

    base: pd.DataFrame | None = None
    new: pd.DataFrame | None = None
    parts: tuple[str, ...] = ()
    kinds: dict[str, str] | None = None
    base_variables: pd.DataFrame | None = None
    new_variables: pd.DataFrame | None = None
    reason: str | None = None

    def words(self, part: str) -> str:
        """A part in words: a category by its source's name, the others by :data:`WORDS`."""
        return tp.words(part, self.kinds or {})

    def without_variables(self) -> MemoryParts:
        """The same split with no variables (their names cannot be paired: pseudonyms of different keys)."""
        return MemoryParts(self.base, self.new, self.parts, self.kinds, None, None, self.reason)


def _has_split(profile: Profile) -> bool:
    tiles, memory = profile.get("tiles"), profile.get("tile_memory")
    return tiles is not None and not tiles.empty and memory is not None and not memory.empty


def memory_parts(base: Profile, new: Profile) -> MemoryParts | None:
    """The tiles of ``base`` and ``new`` split into one set of parts (module docstring); None when neither side
    has per-tile memory by category (a GPU trace, a baseline), a :class:`MemoryParts` with a ``reason`` when one
    side lacks it or a side's tile bytes are not all known."""
    has = {"base": _has_split(base), "new": _has_split(new)}
    if not any(has.values()):
        return None
    if not all(has.values()):
        side, profile = ("base", base) if not has["base"] else ("new", new)
        if is_baseline(profile):
            return MemoryParts(
                reason=f"the {side} side is a baseline (metrics only), without per-tile memory"
            )
        return MemoryParts(reason=f"the {side} profile has no per-tile memory by category (tile_memory)")
    for side, profile in (("base", base), ("new", new)):
        if tp.bytes_unknown(profile) is not None:
            return MemoryParts(
                reason=f"the {side} profile's tiles do not all give their bytes with and without gaps"
            )
    names = list(dict.fromkeys([*tp.categories(base), *tp.categories(new)]))
    grids = {side: tp.category_grid(p, names) for side, p in (("base", base), ("new", new))}
    liveness = all(tp.liveness_fits(p, grids[side]) for side, p in (("base", base), ("new", new)))
    frames = {side: tp.parts_frame(p, grids[side], liveness) for side, p in (("base", base), ("new", new))}
    parts = tp.part_names(names, liveness, any(frames[side][OTHER].any() for side in frames))
    return MemoryParts(
        frames["base"][["ipu", *parts]],
        frames["new"][["ipu", *parts]],
        tuple(parts),
        tp.kinds_of(names, parts),
        _variables(base),
        _variables(new),
    )


def _variables(profile: Profile) -> pd.DataFrame | None:
    """The side's variables' bytes summed by name, with whether any of them is always live."""
    variables = profile.get("variables")
    if variables is None or variables.empty:
        return None
    codes, names = pd.factorize(variables["name"].astype("str"), sort=True)
    keep = codes >= 0
    size = len(names)
    bytes_ = np.bincount(
        codes[keep], weights=variables["bytes"].astype("float64").fillna(0.0).to_numpy()[keep], minlength=size
    )
    live = variables["always_live"].astype("boolean").fillna(False).to_numpy(dtype=bool)[keep]
    always = np.bincount(codes[keep], weights=live, minlength=size) > 0
    return pd.DataFrame({"bytes": bytes_, "always_live": always}, index=pd.Index(names, name="name"))
