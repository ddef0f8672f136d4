"""Write a Profile as an SDK 1.x JSON profile (``{"graphProfile": ..., "executionProfile": ...}``).

Only the keys the reference facts list are written (section 5): target, graph
counts, per-tile memory (``byTile``, ``byCategory.<cat>.<region>.nonOverlapped``,
liveness), programs, and ``simulation.{cycles, steps[{type, name, cycles}]}``.
Choices the writer makes (see ``docs/readers.md``): target keys use the pva
spelling (``numIPUs``, ``tilesPerIpu``, ``bytesPerTile``, ``clockFrequency``...);
variables become a ``variables`` category (excluding-gaps bytes not in another
category); a tile's overflowed bytes are placed in the ``overflowed`` region of its
categories in order; a multi-IPU step is written once with the cycles of its
slowest IPU (SDK 1.x steps are not per IPU).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ...io.atomic import refuse_overwriting_inputs, write_bytes_atomic
from ...model.profile import Profile

GRAPH_COUNTS: dict[str, str] = {
    "numVertices": "graph.num_vertices",
    "numEdges": "graph.num_edges",
    "numVariables": "graph.num_variables",
    "numComputeSets": "graph.num_compute_sets",
}
TARGET_KEYS: dict[str, str] = {
    "numIPUs": "num_ipus",
    "tilesPerIpu": "tiles_per_ipu",
    "numTiles": "num_tiles",
    "bytesPerTile": "bytes_per_tile",
    "clockFrequency": "clock_hz",
    "numReplicas": "num_replicas",
    "ipusPerReplica": "ipus_per_replica",
}


def write_sdk1_json(
    profile: Profile, path: str | os.PathLike[str], split: bool = False, profiler_mode: str | None = None
) -> list[Path]:
    """Write ``profile`` as SDK 1.x JSON; returns the paths written (atomically).

    ``split=False`` writes one file ``{"graphProfile": ..., "executionProfile": ...}``
    (the execution half only when the profile has steps). ``split=True`` writes the
    two halves as separate files, each the bare half object, named after ``path``
    with ``graph`` and ``execution`` (``p.json`` -> ``p.graph.json``, ``p.execution.json``).
    ``profiler_mode`` is written as the ``profilerMode`` tag of each half when given.
    """
    path = Path(path)
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    suffix = path.suffix or ".json"
    targets = (
        [path]
        if not split
        else [path.with_name(f"{stem}.graph{suffix}"), path.with_name(f"{stem}.execution{suffix}")]
    )
    for target in targets:
        refuse_overwriting_inputs(target, [profile.source])  # inputs are never modified
    graph = graph_profile(profile, profiler_mode)
    execution = execution_profile(profile, profiler_mode)
    options = orjson.OPT_SERIALIZE_NUMPY
    if not split:
        document = {"graphProfile": graph}
        if execution is not None:
            document["executionProfile"] = execution
        write_bytes_atomic(path, orjson.dumps(document, option=options))
        return [path]
    written = [targets[0]]
    write_bytes_atomic(written[0], orjson.dumps(graph, option=options))
    if execution is not None:
        written.append(targets[1])
        write_bytes_atomic(written[1], orjson.dumps(execution, option=options))
    return written


def graph_profile(profile: Profile, profiler_mode: str | None = None) -> dict:
    """The ``graphProfile`` half as a dict (per-tile arrays as numpy arrays)."""
    graph: dict = {} if profiler_mode is None else {"profilerMode": profiler_mode}
    target = {
        key: _plain(profile.target_value(column))
        for key, column in TARGET_KEYS.items()
        if profile.target_value(column) is not None
    }
    if target:
        graph["target"] = target
    meta = profile.meta
    counts = {key: int(float(meta[m])) for key, m in GRAPH_COUNTS.items() if meta.get(m) not in (None, "")}
    if counts:
        graph["graph"] = counts
    memory = _memory(profile)
    if memory:
        graph["memory"] = memory
    programs = profile.get("programs")
    if programs is not None and not programs.empty:
        graph["programs"] = [
            {"type": t, "name": n}
            for t, n in zip(programs["type"].astype(str), programs["name"].astype(str), strict=True)
        ]
    return graph


def _plain(value: object) -> object:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _memory(profile: Profile) -> dict:
    tiles = profile.get("tiles")
    if tiles is None or tiles.empty:
        return {}
    tiles = tiles.sort_values("tile")
    ids = tiles["tile"].to_numpy(dtype=np.int64)
    if not np.array_equal(ids, np.arange(len(ids))):
        raise ValueError("SDK 1.x JSON needs every tile 0..N-1 in the tiles table")
    memory: dict = {"byTile": {}}
    for key, column in (("total", "bytes_excl_gaps"), ("totalIncludingGaps", "bytes_incl_gaps")):
        if tiles[column].notna().all():
            memory["byTile"][key] = tiles[column].to_numpy(dtype=np.int64)
    liveness = {}
    if tiles["always_live_bytes"].notna().all():
        liveness["alwaysLive"] = {"bytesByTile": tiles["always_live_bytes"].to_numpy(dtype=np.int64)}
    if tiles["not_always_live_bytes"].notna().all():
        liveness["notAlwaysLive"] = {
            "maxBytesByTile": tiles["not_always_live_bytes"].to_numpy(dtype=np.int64)
        }
    if liveness:
        memory["liveness"] = liveness
    by_category = _by_category(profile, tiles, ids)
    if by_category:
        memory["byCategory"] = by_category
    return memory


def _by_category(profile: Profile, tiles: pd.DataFrame, ids: np.ndarray) -> dict:
    frame = profile.get("tile_memory")
    if frame is not None and not frame.empty:
        wide = frame.pivot_table(
            index="tile", columns="category", values="bytes", aggfunc="sum", observed=True
        )
        wide.columns = wide.columns.astype(str)
        wide = wide.reindex(ids).fillna(0).astype("int64")
    else:
        wide = pd.DataFrame(index=ids)
    excl = tiles["bytes_excl_gaps"].fillna(0).to_numpy(dtype=np.int64)
    if "variables" not in wide.columns and tiles["bytes_excl_gaps"].notna().any():
        rest = excl - wide.to_numpy(dtype=np.int64).sum(axis=1) if wide.shape[1] else excl
        wide.insert(0, "variables", np.clip(rest, 0, None))
    if wide.shape[1] == 0:
        return {}
    matrix = wide.to_numpy(dtype=np.int64)
    over = tiles["overflowed_bytes"].fillna(0).to_numpy(dtype=np.int64)
    before = np.cumsum(matrix, axis=1) - matrix
    overflowed = np.clip(over[:, None] - before, 0, matrix)  # fill categories in order with the overflow
    zeros = np.zeros(len(ids), dtype=np.int64)
    return {
        name: {
            "nonInterleaved": {"nonOverlapped": matrix[:, i] - overflowed[:, i]},
            "interleaved": {"nonOverlapped": zeros},
            "overflowed": {"nonOverlapped": overflowed[:, i]},
        }
        for i, name in enumerate(wide.columns)
    }


def execution_profile(profile: Profile, profiler_mode: str | None = None) -> dict | None:
    """The ``executionProfile`` half (``None`` without steps): one step per global step, slowest IPU's cycles."""
    steps = profile.get("steps")
    if steps is None or steps.empty:
        return None
    ordered = steps.sort_values(["step", "ipu"], kind="stable")
    first = ordered.drop_duplicates("step")
    cycles = ordered.groupby("step", sort=True)["cycles"].max()
    cycle_values = cycles.reindex(first["step"]).to_numpy(dtype="float64")
    records = [
        {"type": t, "name": n, "cycles": None if np.isnan(c) else int(c)}
        for t, n, c in zip(
            first["program_type"].astype(str), first["program"].astype(str), cycle_values, strict=True
        )
    ]
    total = int(np.nansum(cycle_values))
    half: dict = {} if profiler_mode is None else {"profilerMode": profiler_mode}
    half["simulation"] = {"cycles": total, "steps": records}
    return half
