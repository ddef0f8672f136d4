"""The fullest tile explained: what fills it, and what FP16 storage, recomputation or offloading could free.

:func:`fullest_tile` reads whichever the profile holds of the fullest tile (the tile of
``memory.max_tile_index``):

- per-tile tables (pva, SDK 1.x JSON): its bytes by the source's memory categories (``tile_memory``), its
  always-live and not-always-live (peak) bytes and gaps (``tiles``); pva places no variable on a tile, so the
  variables listed are the graph's largest always-live ones, marked ``variables_scope: "graph"``;
- a Poplar text summary's ``Tile # T memory usage:`` block: its bytes by data type (Variables, Vertex
  Instances, ...), by region, and its vertex state by vertex type (``memory_totals`` rows of that tile);
- only the fullest tile's bytes (a histogram's maximum, an out-of-memory message): no breakdown.

Each saving is an upper bound with the one sentence that derives it, or ``bytes: None`` with the reason it
is unknown (``docs/figures.md``, "The fullest tile"):

- ``fp16``: half the bytes of float32 variables on the tile, where their data type is known. No source
  records a variable's data type; a text summary's tile block names the vertex types that run on the tile,
  whose template arguments name the data types they compute on: when they name ``float`` and never
  ``half``, the tile's variables are taken to be float32 and FP16 storage would halve them.
- ``recomputation``: the tile's not-always-live bytes at its peak (activations and temporaries), the most
  that recomputing activations instead of storing them could free there.
- ``offloading``: the always-live bytes named as optimizer state or gradient accumulators (PopART's reserved
  prefixes ``Accl___``, ``Accl1___``..., ``Accum___``, ``Step___``; ``momentum``, ``velocity``, ``adam``,
  ``lamb``, ``optimizer`` in other frameworks' names), which can live in remote (streaming) memory; on the
  tile, or, where variables have no tile, the tile's always-live bytes times their share of the graph's
  always-live bytes (as if spread like the rest).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..model.profile import Profile
from . import memory as mm
from . import tile_parts as tp

#: Names of optimizer state and gradient accumulators (candidates for remote memory).
OPTIMIZER_STATE = re.compile(
    r"(?:^|/)(?:Accl[123]?___|Accum___|Step___)|momentum|velocity|adam|lamb|optimi[sz]er", re.IGNORECASE
)
#: A vertex type's template argument naming a data type.
_FLOAT_ARG = re.compile(r"[<,]\s*float\s*[,>]")
_HALF_ARG = re.compile(r"[<,]\s*half\s*[,>]")
#: Entries of each list kept (the largest first).
TOP = 5
SAVINGS = ("fp16", "recomputation", "offloading")


def _saving(value: float | None, basis: str, used: float) -> dict:
    if value is None:
        return {"bytes": None, "basis": basis}
    return {"bytes": float(min(max(value, 0.0), used)), "basis": basis}


def _rows(names: pd.Series, values: pd.Series, key: str, top: int = TOP) -> list[dict]:
    frame = pd.DataFrame({key: names.astype("str").to_numpy(), "bytes": values.astype("float64").to_numpy()})
    frame = frame[frame["bytes"] > 0].sort_values("bytes", ascending=False, kind="stable").head(top)
    return [{key: n, "bytes": float(b)} for n, b in zip(frame[key], frame["bytes"], strict=True)]


def _block(profile: Profile, tile: int | None) -> pd.DataFrame | None:
    """The text summary's ``memory_totals`` rows of ``tile`` (its ``Tile # T memory usage:`` block)."""
    totals = profile.get("memory_totals")
    if totals is None or totals.empty or tile is None:
        return None
    rows = totals[totals["tile"].astype("float64") == tile]
    rows = rows[rows["group"].astype("str") != "maximum"]
    return None if rows.empty else rows


def _group(rows: pd.DataFrame, group: str) -> pd.DataFrame:
    return rows[rows["group"].astype("str") == group]


def _optimizer_mask(names: pd.Series) -> np.ndarray:
    return names.astype("str").str.contains(OPTIMIZER_STATE).to_numpy(dtype=bool)


def _from_tiles(profile: Profile, tile: int, used: float, doc: dict) -> None:
    tiles = profile.tiles
    row = tiles[tiles["tile"] == tile].iloc[0]
    doc["ipu"] = int(row["ipu"])
    names = tp.categories(profile)
    if names:
        # the tile's bytes by category as the tile memory parts define them (metrics/tile_parts.py)
        mine = tp.category_grid(profile, names).loc[tile]
        doc["categories"] = _rows(pd.Series(names), mine, "category", top=len(names))

    def value(column: str) -> float | None:
        v = row[column]
        return None if pd.isna(v) else float(v)

    always, not_always = value("always_live_bytes"), value("not_always_live_bytes")
    doc["liveness"] = {"always_live_bytes": always, "not_always_live_bytes": not_always}
    gaps = tp.tile_gaps(tiles[tiles["tile"] == tile]).iloc[0]
    doc["gap_bytes"] = None if pd.isna(gaps) else float(gaps)
    doc["savings"]["recomputation"] = (
        _saving(
            not_always,
            "the tile's not-always-live bytes at its peak (activations and temporaries): the most "
            "recomputing activations instead of storing them could free there",
            used,
        )
        if not_always is not None
        else _saving(None, "unknown: the profile does not split the tile's bytes by liveness", used)
    )
    variables = profile.get("variables")
    if variables is None or variables.empty:
        doc["savings"]["offloading"] = _saving(None, "unknown: the profile holds no variables", used)
        return
    on_tile = variables[variables["tile"].astype("float64") == tile]
    scope = "tile" if not on_tile.empty else "graph"
    listed = on_tile if scope == "tile" else variables[variables["always_live"].fillna(False).astype(bool)]
    doc["variables"] = _rows(listed["name"], listed["bytes"], "name")
    doc["variables_scope"] = scope
    named = _optimizer_mask(listed["name"])
    state = float(listed.loc[named, "bytes"].astype("float64").sum())
    if not named.any():
        doc["savings"]["offloading"] = _saving(
            None,
            "unknown: no variable is named as optimizer state or a gradient accumulator",
            used,
        )
    elif scope == "tile":
        doc["savings"]["offloading"] = _saving(
            state,
            "the bytes of the tile's variables named as optimizer state or gradient accumulators: what "
            "keeping them in remote (streaming) memory would free there",
            used,
        )
    elif always is not None:
        whole = float(listed["bytes"].astype("float64").sum())
        doc["savings"]["offloading"] = _saving(
            always * state / whole if whole else None,
            "the tile's always-live bytes times the share of the graph's always-live bytes named as "
            "optimizer state or gradient accumulators (the profile places no variable on a tile: taken as "
            "spread like the rest): what keeping them in remote (streaming) memory would free there",
            used,
        )


def _from_block(rows: pd.DataFrame, used: float, doc: dict) -> None:
    data_types = _group(rows, "data_type")
    doc["categories"] = _rows(data_types["category"], data_types["bytes"], "category", top=len(data_types))
    regions = _group(rows, "region")
    doc["regions"] = _rows(regions["category"], regions["bytes"], "region", top=len(regions))
    vertices = _group(rows, "vertex_type")
    doc["vertices"] = _rows(vertices["category"], vertices["bytes"], "type")
    totals = _group(rows, "total").set_index(_group(rows, "total")["category"].astype("str"))["bytes"]
    if {"including_gaps", "excluding_gaps"} <= set(totals.index):
        doc["gap_bytes"] = float(totals["including_gaps"]) - float(totals["excluding_gaps"])
    var_rows = data_types[data_types["category"].astype("str") == "Variables"]
    variables = (
        None if var_rows.empty or pd.isna(var_rows["bytes"].iloc[0]) else float(var_rows["bytes"].iloc[0])
    )
    types = vertices["category"].astype("str")
    floats = bool(types.str.contains(_FLOAT_ARG).any())
    halves = bool(types.str.contains(_HALF_ARG).any())
    if variables is not None and floats and not halves:
        doc["savings"]["fp16"] = _saving(
            variables / 2,
            "half the tile's Variables bytes: the vertex types on the tile compute in float and never in "
            "half, so its variables are taken to be float32, which FP16 storage would halve",
            used,
        )
    elif variables is not None and halves:
        doc["savings"]["fp16"] = _saving(
            None, "unknown: the tile's vertex types already compute in half for some data", used
        )
    doc["savings"]["recomputation"] = _saving(
        None, "unknown: a text summary does not split the tile's variables by liveness", used
    )
    doc["savings"]["offloading"] = _saving(None, "unknown: a text summary names no variables", used)


def fullest_tile(profile: Profile) -> dict | None:
    """The fullest tile explained, JSON-ready; None when the profile does not give the fullest tile.

    ``{tile, ipu, bytes_incl_gaps, capacity_bytes, utilisation, categories: [{category, bytes}],
    regions, liveness: {always_live_bytes, not_always_live_bytes}, gap_bytes, variables: [{name, bytes}],
    variables_scope ("tile" | "graph"), vertices: [{type, bytes}], savings: {fp16, recomputation,
    offloading: {bytes, basis}}, largest_saving}``; what the profile does not hold is None or empty.
    """
    used, tile = mm.max_tile_bytes(profile), mm.max_tile_index(profile)
    if used is None or used <= 0:
        return None
    cap = mm.capacity_bytes(profile)
    tile = None if tile is None else int(tile)
    doc: dict = {
        "tile": tile,
        "ipu": None,
        "bytes_incl_gaps": float(used),
        "capacity_bytes": cap,
        "utilisation": None if not cap else float(used) / cap,
        "categories": [],
        "regions": [],
        "liveness": None,
        "gap_bytes": None,
        "variables": [],
        "variables_scope": None,
        "vertices": [],
        "savings": {
            "fp16": _saving(None, "unknown: the profile records no data type of the tile's variables", used),
            "recomputation": _saving(None, "unknown: the profile gives no breakdown of the tile", used),
            "offloading": _saving(None, "unknown: the profile gives no breakdown of the tile", used),
        },
    }
    tiles = profile.get("tiles")
    block = _block(profile, tile)
    if tile is not None and tiles is not None and (tiles["tile"] == tile).any():
        _from_tiles(profile, tile, float(used), doc)
    elif block is not None:
        _from_block(block, float(used), doc)
        if (tpi := profile.target_value("tiles_per_ipu")) and tile is not None:
            doc["ipu"] = int(tile) // int(tpi)
    known = {k: v["bytes"] for k, v in doc["savings"].items() if v["bytes"] is not None}
    doc["largest_saving"] = max(known, key=known.__getitem__) if known else None
    return doc


def overflowed(doc: dict) -> bool:
    """Whether the explained tile's Overflowed region holds bytes (out of memory, whatever the capacity)."""
    return any(r["region"] == "Overflowed" and r["bytes"] > 0 for r in doc.get("regions") or [])
