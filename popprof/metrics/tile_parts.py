"""Each tile's memory split into exclusive parts that sum to its bytes including gaps: the one definition.

The parts are the memory categories of the profile's ``tile_memory`` table (``vertexCode``, ``controlCode``,
...), then, when the ``tiles`` table gives them and they fit beside the categories on every tile, the always-live
and the not-always-live variables' bytes, then what the excluding-gaps bytes hold beyond those (``other``), then
the gaps (including minus excluding gaps). On every tile:

    bytes_incl_gaps = sum(categories) + always_live_bytes + not_always_live_bytes + other + gaps

``other`` and ``gaps`` are differences of integers, so the parts sum to ``bytes_incl_gaps`` exactly, on each tile
and over the tiles (``memory.total_incl_gaps_bytes``). On pva's and the synthesiser's profiles the categories are
the bytes that are not variables and ``other`` is 0; a source whose categories count the variables too (SDK 1.x
JSON's ``variables`` category: their sum plus the liveness bytes exceeds the excluding-gaps bytes) is split
without the liveness parts, ``other`` taking what the categories leave. The parts are signed: ``other`` is
negative on a tile whose categories hold more than its bytes excluding gaps (categories that overlap), ``gaps``
where a source gives fewer bytes including gaps than excluding them; neither occurs on any fixture or real
profile popprof holds, and no part is clipped, so the sum stays the tile's bytes (``docs/figures.md``, "Tile
memory parts").

The tile memory plot (:mod:`popprof.plots.memory`) draws :func:`tile_parts`; ``popprof diff``'s "What changed
in memory" (:mod:`popprof.compare.memory_parts`) pairs two profiles' splits from the same functions, with the
categories of both sides and the liveness parts only when they fit on both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..model.profile import Profile

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
class TileParts:
    """One profile's tiles split into parts, or why they cannot be (``reason``, ``frame`` None).

    ``frame``: one row per tile of the ``tiles`` table, in its order (index ``tile``), an ``ipu`` column, then one
    int64 column per part in ``parts`` order, summing to the tile's ``bytes_incl_gaps``. ``parts`` leaves
    ``other`` out when it is 0 on every tile. ``kinds`` maps a part to ``category``, ``variables``, ``other`` or
    ``gaps``."""

    frame: pd.DataFrame | None = None
    parts: tuple[str, ...] = ()
    kinds: dict[str, str] = field(default_factory=dict)
    reason: str | None = None

    def words(self, part: str) -> str:
        """A part in words: a category by its source's name, the others by :data:`WORDS`."""
        return words(part, self.kinds)


def words(part: str, kinds: dict[str, str]) -> str:
    """``part`` in words: a category (by ``kinds``) by its source's name, the others by :data:`WORDS`."""
    return part if kinds.get(part) == "category" else WORDS[part]


def kinds_of(categories: list[str], parts: list[str]) -> dict[str, str]:
    """Each of ``parts`` (categories first) with its kind."""
    kinds = {ALWAYS_LIVE: "variables", NOT_ALWAYS_LIVE: "variables", OTHER: "other", GAPS: "gaps"}
    return {p: "category" if p in categories else kinds[p] for p in parts}


def bytes_unknown(profile: Profile) -> str | None:
    """Why ``profile``'s tiles cannot be split (no tiles, bytes with or without gaps not given on every tile);
    None when they can."""
    tiles = profile.get("tiles")
    if tiles is None or tiles.empty:
        return "the profile has no per-tile memory (tiles)"
    if tiles["bytes_incl_gaps"].isna().any() or tiles["bytes_excl_gaps"].isna().any():
        return "the profile's tiles do not all give their bytes with and without gaps"
    return None


def tile_gaps(tiles: pd.DataFrame) -> pd.Series:
    """Each tile's gap bytes (the ``gaps`` part): its bytes including minus excluding gaps, as ``Int64``, missing
    where either is unknown. ``memory.gaps`` (the rule) and the fullest tile read it too."""
    return tiles["bytes_incl_gaps"].astype("Int64") - tiles["bytes_excl_gaps"].astype("Int64")


def categories(profile: Profile) -> list[str]:
    """The ``tile_memory`` categories that hold rows, in the order of the column's categories (none without
    the table)."""
    memory = profile.get("tile_memory")
    if memory is None or memory.empty:
        return []
    column = memory["category"]
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = np.unique(column.cat.codes.to_numpy())
        return [str(column.cat.categories[c]) for c in codes if c >= 0]
    return sorted(str(c) for c in column.dropna().unique())


def _category_columns(column: pd.Series, names: list[str]) -> np.ndarray:
    """Each row's position in ``names`` (-1: none), through the codes of a categorical column."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        where = pd.Index(names).get_indexer([str(c) for c in column.cat.categories])
        codes = column.cat.codes.to_numpy()
        return np.append(where, -1)[codes]  # code -1 (missing) picks the -1 appended, also with no categories
    return pd.Index(names).get_indexer(column.astype("str").to_numpy())


def category_grid(profile: Profile, names: list[str]) -> pd.DataFrame:
    """Bytes per tile (the ``tiles`` table's, in its order) and category of ``names``, 0 where a category holds
    none; rows of a tile the ``tiles`` table does not list are left out."""
    tiles = profile.tiles["tile"].to_numpy(dtype=np.int64)
    memory = profile.get("tile_memory")
    if memory is None or memory.empty or not names:
        return pd.DataFrame(
            np.zeros((len(tiles), len(names)), dtype=np.int64),
            index=pd.Index(tiles, name="tile"),
            columns=names,
        )
    row = pd.Index(tiles).get_indexer(memory["tile"].to_numpy(dtype=np.int64))
    column = _category_columns(memory["category"], names)
    keep = (row >= 0) & (column >= 0)
    flat = np.bincount(
        row[keep] * len(names) + column[keep],
        weights=memory["bytes"].to_numpy(dtype=np.int64)[keep],
        minlength=len(tiles) * len(names),
    )
    # bincount sums in float64: exact for integers below 2**53 bytes per tile and category
    grid = flat.round().astype(np.int64).reshape(len(tiles), len(names))
    return pd.DataFrame(grid, index=pd.Index(tiles, name="tile"), columns=names)


def liveness_fits(profile: Profile, grid: pd.DataFrame) -> bool:
    """Whether the tiles give always-live and not-always-live bytes on every tile and they fit beside the
    categories of ``grid`` (categories + both <= bytes excluding gaps on every tile)."""
    tiles = profile.tiles
    always, never = tiles["always_live_bytes"], tiles["not_always_live_bytes"]
    if always.isna().any() or never.isna().any():
        return False
    used = grid.to_numpy().sum(axis=1) + always.to_numpy(dtype=np.int64) + never.to_numpy(dtype=np.int64)
    return bool((used <= tiles["bytes_excl_gaps"].to_numpy(dtype=np.int64)).all())


def parts_frame(profile: Profile, grid: pd.DataFrame, liveness: bool) -> pd.DataFrame:
    """The parts per tile: ``ipu``, the categories of ``grid``, the liveness parts when ``liveness``, then
    ``other`` and ``gaps`` (both always present, either may be 0). The tiles must give their bytes with and
    without gaps (:func:`bytes_unknown`)."""
    tiles = profile.tiles
    excl = tiles["bytes_excl_gaps"].to_numpy(dtype=np.int64)
    frame = grid.copy()
    frame.index.name = "tile"
    frame.insert(0, "ipu", tiles["ipu"].to_numpy(dtype=np.int64))
    known = grid.to_numpy().sum(axis=1)
    if liveness:
        frame[ALWAYS_LIVE] = tiles["always_live_bytes"].to_numpy(dtype=np.int64)
        frame[NOT_ALWAYS_LIVE] = tiles["not_always_live_bytes"].to_numpy(dtype=np.int64)
        known = known + frame[ALWAYS_LIVE].to_numpy() + frame[NOT_ALWAYS_LIVE].to_numpy()
    frame[OTHER] = excl - known
    frame[GAPS] = tile_gaps(tiles).to_numpy(dtype=np.int64)
    return frame


def part_names(names: list[str], liveness: bool, other: bool) -> list[str]:
    """The parts in order: the categories, the liveness parts, ``other`` (when ``other``), ``gaps``."""
    return [*names, *([ALWAYS_LIVE, NOT_ALWAYS_LIVE] if liveness else []), *([OTHER] if other else []), GAPS]


def tile_parts(profile: Profile) -> TileParts:
    """``profile``'s tiles split into parts (module docstring): its own ``tile_memory`` categories (none without
    the table), the liveness parts when they fit, ``other`` when it is not 0 on every tile, the gaps; a
    :class:`TileParts` with a ``reason`` when the tiles' bytes are not all known."""
    reason = bytes_unknown(profile)
    if reason is not None:
        return TileParts(reason=reason)
    names = categories(profile)
    grid = category_grid(profile, names)
    liveness = liveness_fits(profile, grid)
    frame = parts_frame(profile, grid, liveness)
    parts = part_names(names, liveness, bool(frame[OTHER].any()))
    return TileParts(frame[["ipu", *parts]], tuple(parts), kinds_of(names, parts))
