"""Each tile's memory split into exclusive parts that sum to its bytes including gaps, on both sides of a diff.

The parts are the memory categories of the profile's ``tile_memory`` table (``vertexCode``, ``controlCode``,
...), then, when the ``tiles`` table gives them and they fit beside the categories on every tile of both sides,
the always-live and the not-always-live variables' bytes, then what the excluding-gaps bytes hold beyond those
(``other``, only when it is not zero), then the gaps (including minus excluding gaps). On every tile:

    bytes_incl_gaps = sum(categories) + always_live_bytes + not_always_live_bytes + other + gaps

``other`` and ``gaps`` are differences of integers, so the parts sum to ``bytes_incl_gaps`` exactly, on each tile
and over the tiles (``memory.total_incl_gaps_bytes``). On pva's and the synthesiser's profiles the categories are
the bytes that are not variables and ``other`` is 0; a source whose categories count the variables too (their
sum plus the liveness bytes exceeds the excluding-gaps bytes) is split without the liveness parts, ``other``
taking what the categories leave (``docs/diff.md``, "What changed: memory").

:func:`memory_parts` is called by :func:`popprof.compare.core.diff` while it has both profiles, and the
:class:`~popprof.compare.core.ProfileDiff` keeps the result; :mod:`popprof.compare.memory_changed` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model.profile import Profile
from .baseline import is_baseline

ALWAYS_LIVE = "always_live_variables"
NOT_ALWAYS_LIVE = "not_always_live_variables"
OTHER = "other"
GAPS = "gaps"
#: Each part that is not a category in words (a category keeps the name its source gives it).
WORDS = {
    ALWAYS_LIVE: "always-live variables",
    NOT_ALWAYS_LIVE: "not-always-live variables",
    OTHER: "other (beyond the categories)",
    GAPS: "gaps",
}


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
        return part if (self.kinds or {}).get(part) == "category" else WORDS[part]

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
        tiles = profile.tiles
        if tiles["bytes_incl_gaps"].isna().any() or tiles["bytes_excl_gaps"].isna().any():
            return MemoryParts(
                reason=f"the {side} profile's tiles do not all give their bytes with and without gaps"
            )
    categories = list(dict.fromkeys([*_categories(base), *_categories(new)]))
    grids = {side: _grid(p, categories) for side, p in (("base", base), ("new", new))}
    split = all(_liveness_fits(p, grids[side]) for side, p in (("base", base), ("new", new)))
    frames = {side: _frame(p, grids[side], categories, split) for side, p in (("base", base), ("new", new))}
    parts = [*categories, *([ALWAYS_LIVE, NOT_ALWAYS_LIVE] if split else [])]
    if any(frames[side][OTHER].any() for side in frames):
        parts.append(OTHER)
    parts.append(GAPS)
    kinds = {
        **dict.fromkeys(categories, "category"),
        ALWAYS_LIVE: "variables",
        NOT_ALWAYS_LIVE: "variables",
        OTHER: "other",
        GAPS: "gaps",
    }
    return MemoryParts(
        frames["base"][["ipu", *parts]],
        frames["new"][["ipu", *parts]],
        tuple(parts),
        {p: kinds[p] for p in parts},
        _variables(base),
        _variables(new),
    )


def _categories(profile: Profile) -> list[str]:
    """The categories that hold bytes, in the order of the column's categories."""
    column = profile.tile_memory["category"]
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = np.unique(column.cat.codes.to_numpy())
        return [str(column.cat.categories[c]) for c in codes if c >= 0]
    return sorted(str(c) for c in column.dropna().unique())


def _category_columns(column: pd.Series, categories: list[str]) -> np.ndarray:
    """Each row's position in ``categories`` (-1: none), through the codes of a categorical column."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        where = pd.Index(categories).get_indexer([str(c) for c in column.cat.categories])
        codes = column.cat.codes.to_numpy()
        return np.where(codes >= 0, where[codes], -1)
    return pd.Index(categories).get_indexer(column.astype("str").to_numpy())


def _grid(profile: Profile, categories: list[str]) -> pd.DataFrame:
    """Bytes per tile (the ``tiles`` table's, in its order) and category, 0 where a category holds none; rows of
    a tile the ``tiles`` table does not list are left out."""
    memory = profile.tile_memory
    tiles = profile.tiles["tile"].to_numpy(dtype=np.int64)
    row = pd.Index(tiles).get_indexer(memory["tile"].to_numpy(dtype=np.int64))
    column = _category_columns(memory["category"], categories)
    keep = (row >= 0) & (column >= 0)
    flat = np.bincount(
        row[keep] * len(categories) + column[keep],
        weights=memory["bytes"].to_numpy(dtype=np.int64)[keep],
        minlength=len(tiles) * len(categories),
    )
    # bincount sums in float64: exact for integers below 2**53 bytes per tile and category
    grid = flat.round().astype(np.int64).reshape(len(tiles), len(categories))
    return pd.DataFrame(grid, index=pd.Index(tiles, name="tile"), columns=categories)


def _liveness_fits(profile: Profile, grid: pd.DataFrame) -> bool:
    """Whether the side's tiles give always-live and not-always-live bytes on every tile and they fit beside the
    categories (categories + both <= bytes excluding gaps on every tile)."""
    tiles = profile.tiles
    always, never = tiles["always_live_bytes"], tiles["not_always_live_bytes"]
    if always.isna().any() or never.isna().any():
        return False
    used = grid.to_numpy().sum(axis=1) + always.to_numpy(dtype=np.int64) + never.to_numpy(dtype=np.int64)
    return bool((used <= tiles["bytes_excl_gaps"].to_numpy(dtype=np.int64)).all())


def _frame(profile: Profile, grid: pd.DataFrame, categories: list[str], split: bool) -> pd.DataFrame:
    """One side's parts per tile: the categories, the liveness parts when ``split``, ``other`` and ``gaps``."""
    tiles = profile.tiles
    incl = tiles["bytes_incl_gaps"].to_numpy(dtype=np.int64)
    excl = tiles["bytes_excl_gaps"].to_numpy(dtype=np.int64)
    frame = grid.copy()
    frame.index.name = "tile"
    frame.insert(0, "ipu", tiles["ipu"].to_numpy(dtype=np.int64))
    known = grid.to_numpy().sum(axis=1)
    if split:
        frame[ALWAYS_LIVE] = tiles["always_live_bytes"].to_numpy(dtype=np.int64)
        frame[NOT_ALWAYS_LIVE] = tiles["not_always_live_bytes"].to_numpy(dtype=np.int64)
        known = known + frame[ALWAYS_LIVE].to_numpy() + frame[NOT_ALWAYS_LIVE].to_numpy()
    frame[OTHER] = excl - known
    frame[GAPS] = incl - excl
    return frame


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
