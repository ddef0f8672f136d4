"""Storage writer for the pva test double's ``profile.pop`` (the double's own format, NOT Poplar's).

:func:`write_pop` turns a popprof :class:`~popprof.model.profile.Profile` (normally one
made by :mod:`popprof.testing.synth`) into a NumPy ``.npz`` archive named ``profile.pop``
that ``pva.openReport`` of the double (``pva/report.py``) reads lazily.
:func:`write_debug` writes the double's ``debug.cbor`` (JSON, shared by the
engines of a run directory, keyed by engine name).

Neither file pretends to be the real format: the real ``profile.pop`` container
is not publicly documented. Variants are chosen by keyword:

- ``unknown_shape=True``: an *unknown-shape* variant (no public evidence that any SDK
  lacks these, but the reader must survive it): no ``activeCycles``,
  ``tileBalance``/``activeTileBalance`` on step IPUs, no ``memory.overflowed`` on tiles;
- a profile without ``steps``/``runs`` gives a report whose ``execution`` has no runs,
  no steps and ``totalCycles.total == 0`` (as real pva: popart saved_executable.py);
- debug information exists only when a ``debug.cbor`` is written and passed to
  ``openReport``; ``write_debug(..., var_bytes=True)`` is the unknown-shape variant
  whose ``op.vars`` entries carry ``bytes``.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

STORE_FORMAT = "pva-double-report"
STORE_VERSION = 1
DEBUG_FORMAT = "pva-double-debug"


def _version_parts(version: str) -> tuple[int, int, int, str]:
    match = re.match(r"\s*(\d+)\.(\d+)\.(\d+)\s*(?:\((\w+)\))?", version or "")
    if not match:
        return 0, 0, 0, ""
    return int(match[1]), int(match[2]), int(match[3]), match[4] or ""


def _int(frame: pd.DataFrame, column: str, default: int = 0) -> np.ndarray:
    return frame[column].fillna(default).to_numpy(dtype=np.int64)


def write_pop(
    profile,
    path: str | os.PathLike[str],
    *,
    unknown_shape: bool = False,
    compress: bool = True,
    format_version: tuple[int, int, int] = (1, 4, 0),
) -> Path:
    """Write ``profile`` as the double's ``profile.pop`` at ``path`` (atomically); return the path.

    Uses the profile's target, tiles, tile_memory, programs, variables,
    liveness, liveness_variables and (when present) runs and steps.
    """
    path = Path(path)
    target = profile["target"].iloc[0]
    tiles = profile["tiles"].sort_values("tile")
    programs = profile["programs"].sort_values("program_id").reset_index(drop=True)
    num_tiles = int(target["num_tiles"])
    if len(tiles) != num_tiles:
        raise ValueError(f"tiles table has {len(tiles)} rows but target says {num_tiles} tiles")
    major, minor, point, package_hash = _version_parts(str(target["poplar_version"]))
    arch = str(target["ipu_arch"])
    header = {
        "format": STORE_FORMAT,
        "store_version": STORE_VERSION,
        "engine": profile.name,
        "unknown_shape": bool(unknown_shape),
        "poplar_version": {
            "string": str(target["poplar_version"]),
            "major": major,
            "minor": minor,
            "point": point,
            "packageHash": package_hash,
        },
        "format_version": {
            "major": format_version[0],
            "minor": format_version[1],
            "point": format_version[2],
            "isUnstableFormat": False,
        },
        "target": {
            "numIPUs": int(target["num_ipus"]),
            "tilesPerIpu": int(target["tiles_per_ipu"]),
            "numTiles": num_tiles,
            "bytesPerTile": int(target["bytes_per_tile"]),
            "clockFrequency": float(target["clock_hz"]),
            "numReplicas": int(target["num_replicas"]),
            "ipusPerReplica": int(target["ipus_per_replica"]),
            "type": str(target["target_type"]),
            "architecture": arch,
        },
        "has_execution": profile.has("steps") and profile.has("runs"),
    }
    arrays: dict[str, np.ndarray] = {}
    # -- tiles ------------------------------------------------------------
    excl = _int(tiles, "bytes_excl_gaps")
    incl = _int(tiles, "bytes_incl_gaps")
    over_excl = _int(tiles, "overflowed_bytes")
    # The double's "overflowed including gaps" adds the tile's gap share to the overflow.
    over_incl = np.where(over_excl > 0, over_excl + (incl - excl), 0)
    arrays.update(
        tile_incl=incl,
        tile_excl=excl,
        tile_over_incl=over_incl,
        tile_over_excl=over_excl,
        tile_always_live=_int(tiles, "always_live_bytes"),
        tile_not_always_live=_int(tiles, "not_always_live_bytes"),
    )
    tm = profile.get("tile_memory")
    categories: list[str] = []
    if tm is not None and len(tm):
        categories = [str(c) for c in pd.unique(tm["category"].astype("str"))]
        code = pd.Categorical(tm["category"].astype("str"), categories=categories).codes
        matrix = np.zeros((num_tiles, len(categories)), dtype=np.int64)
        matrix[tm["tile"].to_numpy(), code] = tm["bytes"].to_numpy(dtype=np.int64)
        arrays["tile_category"] = matrix
    header["memory_categories"] = categories
    # Per-tile share of an IPU's step cycles: each IPU's busiest tile takes the full step.
    rng = np.random.default_rng(num_tiles)
    weight = rng.uniform(0.3, 1.0, num_tiles)
    ipu_of = np.arange(num_tiles) // int(target["tiles_per_ipu"])
    for i in range(int(target["num_ipus"])):
        weight[np.flatnonzero(ipu_of == i)[0] + int(rng.integers(0, int(target["tiles_per_ipu"])))] = 1.0
    arrays["tile_cycle_weight"] = weight
    # -- programs -----------------------------------------------------------
    name_to_id = {n: i for i, n in enumerate(programs["name"].astype("str"))}
    arrays["program_name"] = programs["name"].astype("str").to_numpy(dtype=str)
    arrays["program_type"] = programs["type"].astype("str").to_numpy(dtype=str)
    arrays["program_code_bytes"] = _int(programs, "code_bytes")
    # -- variables -------------------------------------------------------------
    variables = profile.get("variables")
    if variables is not None:
        variables = variables[variables["always_live"].fillna(True).astype(bool)]
        arrays["alv_name"] = variables["name"].astype("str").to_numpy(dtype=str)
        arrays["alv_size"] = _int(variables, "bytes")
    else:
        arrays["alv_name"] = np.array([], dtype=str)
        arrays["alv_size"] = np.array([], dtype=np.int64)
    # -- liveness ---------------------------------------------------------------
    liveness = profile.get("liveness")
    if liveness is not None:
        liveness = liveness.sort_values("step")
        arrays["live_program"] = (
            liveness["program"].astype("str").map(name_to_id).fillna(-1).to_numpy(np.int64)
        )
        arrays["live_bytes"] = _int(liveness, "not_always_live_bytes")
        lv = profile.get("liveness_variables")
        if lv is not None:
            arrays["livevar_step"] = lv["step"].to_numpy(dtype=np.int64)
            arrays["livevar_name"] = lv["name"].astype("str").to_numpy(dtype=str)
            arrays["livevar_size"] = _int(lv, "bytes")
    # -- execution ----------------------------------------------------------------
    if header["has_execution"]:
        _execution_arrays(profile, name_to_id, int(target["num_ipus"]), arrays, header)
    buffer_path = _atomic_npz(path, header, arrays, compress)
    return buffer_path


def _execution_arrays(
    profile, name_to_id: dict[str, int], num_ipus: int, arrays: dict[str, np.ndarray], header: dict
) -> None:
    steps = profile["steps"].sort_values(["step", "ipu"])
    runs = profile["runs"].sort_values("run")
    step_ids = steps["step"].to_numpy()
    n = int(len(np.unique(step_ids)))
    if len(steps) != n * num_ipus:
        raise ValueError("steps table must have one row per step and IPU")

    def grid(column: str, dtype=np.int64, fill=0) -> np.ndarray:
        return steps[column].fillna(fill).to_numpy(dtype=dtype).reshape(n, num_ipus)

    first = steps.groupby("step", sort=True).first()
    arrays["step_program"] = first["program"].astype("str").map(name_to_id).to_numpy(dtype=np.int64)
    arrays["step_cycles"] = grid("cycles")
    arrays["step_active_from"] = grid("active_from_cycles")
    arrays["step_active_to"] = grid("active_to_cycles")
    arrays["step_tile_balance"] = grid("tile_balance", np.float64, np.nan)
    # The double's activeTileBalance: tile balance over active cycles only.
    active = np.maximum(arrays["step_active_to"] - arrays["step_active_from"], 1)
    arrays["step_active_tile_balance"] = np.minimum(
        arrays["step_tile_balance"] * arrays["step_cycles"] / active, 1.0
    )
    arrays["step_data_in"] = grid("data_in_bytes")
    arrays["step_data_out"] = grid("data_out_bytes")
    per_run = first["run"].to_numpy()
    arrays["run_num_steps"] = np.array([(per_run == r).sum() for r in runs["run"].to_numpy()], dtype=np.int64)
    arrays["run_name"] = runs["name"].astype("str").to_numpy(dtype=str)
    arrays["run_start_us"] = runs["start_us"].to_numpy(dtype=np.float64)
    arrays["run_end_us"] = runs["end_us"].to_numpy(dtype=np.float64)
    header["total_cycles"] = int(steps.groupby("ipu")["cycles"].sum().max())


def _atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _atomic_npz(path: Path, header: dict, arrays: dict[str, np.ndarray], compress: bool) -> Path:
    arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **arrays}

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            (np.savez_compressed if compress else np.savez)(handle, **arrays)

    return _atomic_write(path, write)


def write_debug(
    profiles, path: str | os.PathLike[str], *, var_bytes: bool = False, replaced_every: int = 4
) -> Path:
    """Write the double's ``debug.cbor`` (JSON) holding the operations of each profile, keyed by engine.

    Each operation keeps its name, debug context (id, layer JSON, location) and
    liveness step range; its ``bytes`` are split over two variables (exposed as
    ``op.vars[].bytes`` only with ``var_bytes=True``, the unknown-shape variant).
    Every ``replaced_every``-th operation is stored as replaced by an outlined call
    (its framework context is then ``replacedDebugContext[0]``; 0 = none).
    """
    path = Path(path)
    engines: dict[str, list[dict]] = {}
    next_id = 1
    for profile in profiles:
        ops = profile.get("operations")
        records = []
        if ops is not None:
            for row in ops.itertuples(index=False):
                total = 0 if pd.isna(row.bytes) else int(row.bytes)
                half = total // 2
                records.append(
                    {
                        "id": next_id,
                        "name": str(row.name),
                        "layer": json.dumps({"layer": None if pd.isna(row.layer) else str(row.layer)}),
                        "fileName": None if pd.isna(row.file) else str(row.file),
                        "lineNumber": None if pd.isna(row.line) else int(row.line),
                        "firstStepIndex": None if pd.isna(row.first_step) else int(row.first_step),
                        "lastStepIndex": None if pd.isna(row.last_step) else int(row.last_step),
                        "vars": [[f"{row.name}/weights", half], [f"{row.name}/output", total - half]],
                        "replaced": bool(replaced_every)
                        and len(records) % replaced_every == replaced_every - 1,
                    }
                )
                next_id += 1
        engines[profile.name] = records
    text = json.dumps(
        {
            "format": DEBUG_FORMAT,
            "version": 1,
            "unknown_shape_var_bytes": bool(var_bytes),
            "engines": engines,
        },
        indent=1,
    )
    return _atomic_write(path, lambda tmp: tmp.write_text(text + "\n", "utf-8"))


def is_store(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a zip holding the double's header (cheap check used in tests)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return (
                json.load(io.BytesIO(np.load(archive.open("header.npy")).tobytes()))["format"] == STORE_FORMAT
            )
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return False
