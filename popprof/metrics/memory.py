"""Memory metrics: totals, the fullest tile and its headroom, out-of-memory tiles, liveness, gaps.

Every figure says what it covers. Tile figures (totals, categories, always-live bytes,
tiles out of memory) cover the **whole target**: every tile of every replica, as pva's
``compilation.tiles`` does. pva's liveness (``livenessProgramSteps[].notAlwaysLiveMemory``)
is **per replica**; public code multiplies it by ``target.numReplicas`` for the whole
target. ``memory.peak_liveness_bytes`` is therefore whole-target (always-live bytes of
every tile + the per-replica peak x replicas) and ``memory.peak_liveness_per_replica_bytes``
is one replica's; the two are equal without replication.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from . import metric, metric_family


def _totals(profile: Profile, group: str, category: str) -> float | None:
    frame = profile.get("memory_totals")
    if frame is None or frame.empty:
        return None
    rows = frame[(frame["group"] == group) & (frame["category"] == category) & frame["tile"].isna()]
    return None if rows.empty else float(rows["bytes"].iloc[0])


def _tile_max(profile: Profile, column: str, totals_category: str) -> tuple[float | None, int | None]:
    tiles = profile.get("tiles")
    if tiles is not None and not tiles.empty and tiles[column].notna().any():
        pos = int(np.nanargmax(tiles[column].to_numpy(dtype="float64", na_value=np.nan)))  # by position
        return float(tiles[column].iloc[pos]), int(tiles["tile"].iloc[pos])
    frame = profile.get("memory_totals")
    if frame is not None and not frame.empty:
        rows = frame[(frame["group"] == "maximum") & (frame["category"] == totals_category)]
        if not rows.empty:
            tile = rows["tile"].iloc[0]
            return float(rows["bytes"].iloc[0]), None if pd.isna(tile) else int(tile)
        # per-tile blocks (``Tile # T memory usage:``, printed for the most subscribed tiles): the fullest
        rows = frame[
            (frame["group"] == "total") & (frame["category"] == totals_category) & frame["tile"].notna()
        ]
        if not rows.empty:
            pos = int(np.argmax(rows["bytes"].to_numpy(dtype="float64", na_value=-1.0)))
            return float(rows["bytes"].iloc[pos]), int(rows["tile"].iloc[pos])
    oom = profile.get("out_of_memory")
    if (
        totals_category == "including_gaps"
        and oom is not None
        and oom["bytes_used"].notna().any()
        and failed_compilations(profile) == 1  # several: each compilation has its own fullest tile
    ):
        pos = int(np.nanargmax(oom["bytes_used"].to_numpy(dtype="float64", na_value=np.nan)))
        tile = oom["tile"].iloc[pos]
        return float(oom["bytes_used"].iloc[pos]), None if pd.isna(tile) else int(tile)
    return None, None


def failed_compilations(profile: Profile) -> int:
    """Failed compilations that out-of-memory messages tell of (``out_of_memory.compilation``); 0 without."""
    oom = profile.get("out_of_memory")
    return 0 if oom is None or oom.empty else int(oom["compilation"].nunique())


def oom_tiles_per_compilation(profile: Profile) -> float | None:
    """Tiles over in the one failed compilation out-of-memory messages tell of: the tiles they name, at
    least 1 (an SDK 2.1+ message names none but says one or more are over). None without messages, and None
    for several compilations: they are different graphs (or attempts), each with its own figures (the
    ``out_of_memory`` table, listed per compilation by ``summary``), never one figure across them."""
    if failed_compilations(profile) != 1:
        return None
    oom = profile.out_of_memory
    return float(max(1, oom["tile"].nunique()))


def capacity_bytes(profile: Profile) -> float | None:
    """Bytes per tile of the target (else the capacity all out-of-memory messages print)."""
    value = profile.target_value("bytes_per_tile")
    if value is None and (oom := profile.get("out_of_memory")) is not None and not oom.empty:
        capacities = oom["capacity_bytes"].dropna().unique()
        value = capacities[0] if len(capacities) == 1 else None
    return None if value is None else float(value)


def num_replicas(profile: Profile) -> int:
    """Replicas of the graph (``target.num_replicas``; 1 when the source does not say)."""
    value = profile.target_value("num_replicas")
    try:
        return max(1, int(value)) if value is not None and not pd.isna(value) else 1
    except (TypeError, ValueError):
        return 1


def total_capacity(profile: Profile) -> tuple[float | None, int | None]:
    """Memory of the whole target (every tile of every replica x bytes per tile) and its tile count."""
    cap = capacity_bytes(profile)
    tiles = profile.target_value("num_tiles")
    if tiles is None and profile.has("tiles"):
        tiles = len(profile.tiles)
    if cap is None or tiles is None:
        return None, None
    return float(cap) * int(tiles), int(tiles)


@metric(
    "memory.total_incl_gaps_bytes",
    "bytes",
    "memory used on all tiles of the whole target (every replica), including gaps",
)
def total_incl_gaps(profile: Profile) -> float | None:
    tiles = profile.get("tiles")
    if tiles is not None and tiles["bytes_incl_gaps"].notna().any():
        return float(tiles["bytes_incl_gaps"].sum())
    return _totals(profile, "total", "including_gaps")


@metric(
    "memory.total_excl_gaps_bytes",
    "bytes",
    "memory used on all tiles of the whole target (every replica), excluding gaps",
)
def total_excl_gaps(profile: Profile) -> float | None:
    tiles = profile.get("tiles")
    if tiles is not None and tiles["bytes_excl_gaps"].notna().any():
        return float(tiles["bytes_excl_gaps"].sum())
    return _totals(profile, "total", "excluding_gaps")


@metric(
    "memory.gap_bytes", "bytes", "memory lost to gaps on the whole target (including minus excluding gaps)"
)
def gap_bytes(profile: Profile) -> float | None:
    """Including minus excluding gaps, over the tiles that know both (a tile missing one of them would count
    its whole size as gaps, or none of it)."""
    tiles = profile.get("tiles")
    if (
        tiles is not None
        and tiles["bytes_incl_gaps"].notna().any()
        and tiles["bytes_excl_gaps"].notna().any()
    ):
        both = tiles["bytes_incl_gaps"].notna() & tiles["bytes_excl_gaps"].notna()
        return float(tiles.loc[both, "bytes_incl_gaps"].sum()) - float(
            tiles.loc[both, "bytes_excl_gaps"].sum()
        )
    incl, excl = total_incl_gaps(profile), total_excl_gaps(profile)
    return None if incl is None or excl is None else incl - excl


@metric("memory.gap_share", "share", "share of used memory lost to gaps")
def gap_share(profile: Profile) -> float | None:
    incl, gaps = total_incl_gaps(profile), gap_bytes(profile)
    return None if not incl or gaps is None else gaps / incl


@metric("memory.max_tile_incl_gaps_bytes", "bytes", "memory on the fullest tile, including gaps")
def max_tile_bytes(profile: Profile) -> float | None:
    return _tile_max(profile, "bytes_incl_gaps", "including_gaps")[0]


@metric("memory.max_tile_index", "tile", "index of the fullest tile (including gaps)", better=None)
def max_tile_index(profile: Profile) -> float | None:
    return _tile_max(profile, "bytes_incl_gaps", "including_gaps")[1]


@metric(
    "memory.max_tile_headroom_bytes",
    "bytes",
    "capacity minus the fullest tile (negative: over)",
    better="higher",
)
def max_tile_headroom(profile: Profile) -> float | None:
    cap, used = capacity_bytes(profile), max_tile_bytes(profile)
    return None if cap is None or used is None else cap - used


@metric("memory.max_tile_utilisation", "share", "fullest tile (including gaps) over capacity")
def max_tile_utilisation(profile: Profile) -> float | None:
    cap, used = capacity_bytes(profile), max_tile_bytes(profile)
    return None if not cap or used is None else used / cap


@metric("memory.tiles_out_of_memory", "tiles", "tiles whose memory (including gaps) exceeds capacity")
def tiles_out_of_memory(profile: Profile) -> float | None:
    tiles = profile.get("tiles")
    cap = capacity_bytes(profile)
    if tiles is not None and not tiles.empty and tiles["bytes_incl_gaps"].notna().any():
        capacity = tiles["capacity_bytes"].astype("float64")
        if cap is not None:
            capacity = capacity.fillna(cap)
        if capacity.notna().any():  # without any capacity, "0 tiles over" would be a made-up zero
            return float((tiles["bytes_incl_gaps"].astype("float64") > capacity).sum())
    value = profile.meta.get("tiles_out_of_memory")
    if value not in (None, ""):
        return float(value)
    listed = overflowed_tiles(profile)
    if listed is not None:
        return float(len(listed))
    return oom_tiles_per_compilation(profile)


def overflowed_tiles(profile: Profile) -> list[int] | None:
    """Tiles of the per-tile blocks (``Tile # T memory usage:``) whose Overflowed region holds bytes: out of
    memory, whatever the capacity (a text summary lists only its most subscribed tiles, so this counts the
    listed ones). None without per-tile blocks."""
    frame = profile.get("memory_totals")
    if frame is None or frame.empty or not ((frame["group"] == "total") & frame["tile"].notna()).any():
        return None
    rows = frame[(frame["group"] == "region") & (frame["category"] == "Overflowed") & frame["tile"].notna()]
    return sorted(int(t) for t in rows.loc[rows["bytes"].fillna(0) > 0, "tile"].unique())


@metric(
    "memory.always_live_bytes",
    "bytes",
    "bytes of always-live variables on all tiles of the whole target (every replica)",
)
def always_live_bytes(profile: Profile) -> float | None:
    """Whole target: the tiles' always-live bytes, else the always-live variables (one replica's) x replicas."""
    tiles = profile.get("tiles")
    if tiles is not None and tiles["always_live_bytes"].notna().any():
        return float(tiles["always_live_bytes"].sum())
    variables = profile.get("variables")
    if variables is not None and variables["always_live"].fillna(False).any():
        per_replica = float(variables.loc[variables["always_live"].fillna(False), "bytes"].sum())
        return per_replica * num_replicas(profile)
    return None


def always_live_per_replica_bytes(profile: Profile) -> float | None:
    """Always-live bytes of one replica (whole-target bytes / replicas)."""
    value = always_live_bytes(profile)
    return None if value is None else value / num_replicas(profile)


@metric(
    "memory.peak_not_always_live_bytes",
    "bytes",
    "largest not-always-live bytes over liveness steps, per replica (as pva gives liveness)",
    needs=("liveness",),
)
def peak_not_always_live(profile: Profile) -> float | None:
    peak = profile.liveness["not_always_live_bytes"].max()
    return None if pd.isna(peak) else float(peak)


@metric(
    "memory.peak_liveness_bytes",
    "bytes",
    "whole target: always-live bytes of every tile plus the not-always-live peak x replicas",
    needs=("liveness",),
)
def peak_liveness(profile: Profile) -> float | None:
    base, peak = always_live_bytes(profile), peak_not_always_live(profile)
    return None if base is None or peak is None else base + peak * num_replicas(profile)


@metric(
    "memory.peak_liveness_per_replica_bytes",
    "bytes",
    "one replica: its always-live bytes plus the not-always-live peak",
    needs=("liveness",),
)
def peak_liveness_per_replica(profile: Profile) -> float | None:
    whole = peak_liveness(profile)
    return None if whole is None else whole / num_replicas(profile)


@metric(
    "memory.peak_liveness_step",
    "step",
    "liveness step where not-always-live memory peaks",
    needs=("liveness",),
    better=None,
)
def peak_liveness_step(profile: Profile) -> float | None:
    liveness = profile.liveness
    values = liveness["not_always_live_bytes"].to_numpy(dtype="float64", na_value=np.nan)
    if np.isnan(values).all():
        return None
    return float(liveness["step"].iloc[int(np.nanargmax(values))])  # by position, whatever the index


@metric_family("memory.category.", "bytes", "memory by category (all tiles of the whole target)")
def memory_by_category(profile: Profile) -> dict[str, float]:
    frame = profile.get("tile_memory")
    if frame is not None and not frame.empty:
        sums = frame.groupby("category", observed=True)["bytes"].sum()
        return {f"{cat}_bytes": float(v) for cat, v in sums.items()}
    totals = profile.get("memory_totals")
    if totals is None or totals.empty:
        return {}
    rows = totals[(totals["group"] == "data_type") & totals["tile"].isna()]
    return {
        f"{cat}_bytes": float(v)
        for cat, v in zip(rows["category"], rows["bytes"], strict=True)
        if pd.notna(v)
    }
