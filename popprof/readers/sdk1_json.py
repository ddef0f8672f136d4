"""Reader for SDK 1.x JSON profiles (``poplar::serializeToJSON`` before SDK 2.1).

Accepts the combined file ``{"graphProfile": ..., "executionProfile": ...}``,
either half wrapped alone, or a bare half (the object itself). Given one half,
a sibling file for the other half is picked up when its name is this file's
name with ``graph`` <-> ``execution`` swapped (or pass ``execution=`` /
``graph=``). Every key is optional (reference facts, section 5).

Files up to :data:`STREAM_THRESHOLD_BYTES` are parsed in one go with orjson;
larger ones are streamed with ijson, skipping per-tile arrays of execution
steps, so memory stays proportional to the graph half plus one step.

Tables: ``target``, ``tiles``, ``tile_memory``, ``memory_totals`` (regions),
``programs``, ``steps`` (IPU 0, run 0: SDK 1.x steps are not per IPU) and
``metadata`` (``profiler_mode``, graph counts, ``execution.total_cycles``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..io.files import GZIP_MAGIC, open_binary, open_json
from ..io.jsonwords import json_parse_problem
from ..io.progress import reading
from ..io.sources import source_metadata
from ..model.errors import InputError
from ..model.profile import Profile
from ..model.schema import category_of_program_type
from .arch import infer_arch

FORMAT = "sdk1_json"
#: Files larger than this are streamed with ijson instead of parsed whole with orjson.
STREAM_THRESHOLD_BYTES = 64 << 20
#: Assumed expansion of gzipped JSON when deciding whether to stream.
GZIP_EXPANSION = 8
WRAPPED_KEYS = ("graphProfile", "executionProfile")
#: (top-level key, second-level key) pairs that mark a bare graph or execution half.
GRAPH_MARKS = frozenset(
    {
        ("memory", "byTile"),
        ("memory", "byCategory"),
        ("memory", "liveness"),
        ("graph", "numVertices"),
        ("graph", "numComputeSets"),
        ("computeSets", "names"),
        ("vertexTypes", "names"),
    }
)
EXECUTION_MARKS = frozenset({("simulation", "steps"), ("simulation", "cycles")})
REGIONS = {"nonInterleaved": "Non-interleaved", "interleaved": "Interleaved", "overflowed": "Overflowed"}
GRAPH_COUNTS = {
    "numvertices": "graph.num_vertices",
    "numedges": "graph.num_edges",
    "numvariables": "graph.num_variables",
    "numcomputesets": "graph.num_compute_sets",
}
#: target column -> accepted key spellings (compared case-insensitively; pva spelling first).
TARGET_KEYS: dict[str, tuple[str, ...]] = {
    "num_ipus": ("numIPUs", "numIpus"),
    "tiles_per_ipu": ("tilesPerIpu", "tilesPerIPU"),
    "num_tiles": ("numTiles",),
    "bytes_per_tile": ("bytesPerTile",),
    "clock_hz": ("clockFrequency",),
    "num_replicas": ("numReplicas",),
    "ipus_per_replica": ("ipusPerReplica",),
    "target_type": ("type",),
    "ipu_arch": ("architecture",),
}


# -- detection ---------------------------------------------------------------------------------------

#: One JSON token of interest: a complete string, a structural character, or a lone (unterminated) quote.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|"')


def _layout_of_head(head: bytes) -> str | None:
    """``wrapped`` / ``graph`` / ``execution`` from the first bytes of a JSON file, or None.

    One linear pass over the tokens with a depth counter (no parser: ijson's
    prefixes cost memory quadratic in the nesting depth); only keys of the
    top-level object and of objects directly under its keys are looked at.
    """
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start.startswith(b"{"):
        return None
    marks: set[tuple[str, str]] = set()
    depth = 0
    last_string: bytes | None = None
    value_of: str | None = None  # the top-level key whose value comes next
    parent: str | None = None  # the top-level key owning the object at depth 2
    for match in _TOKEN.finditer(start):
        token = match.group()
        first = token[:1]
        if first == b'"':
            if len(token) < 2:
                break  # cut off inside a string
            last_string = token
            continue
        if first == b":":
            key = _key_text(last_string) if last_string is not None else None
            if key is not None and depth == 1:
                if key in WRAPPED_KEYS:
                    return "wrapped"
                if key == "traceEvents":  # a Chrome trace: no need to walk its events
                    return None
                value_of = key
            elif key is not None and depth == 2 and parent is not None:
                marks.add((parent, key))
                if marks & GRAPH_MARKS:
                    return "graph"
                if marks & EXECUTION_MARKS:
                    return "execution"
        elif first in b"{[":
            depth += 1
            if depth == 2:
                parent = value_of if first == b"{" else None
        elif first in b"}]":
            depth -= 1
            if depth <= 0:
                break
        elif depth == 1:  # ","
            value_of = None
        last_string = None
    return None


def _key_text(token: bytes) -> str | None:
    try:
        key = orjson.loads(token)
    except orjson.JSONDecodeError:
        return None
    return key if isinstance(key, str) else None


def sniff(path: Path, head: bytes) -> bool:
    """A JSON object whose top-level keys include graphProfile/executionProfile, or a bare half."""
    return path.is_file() and _layout_of_head(head) is not None


# -- loading -----------------------------------------------------------------------------------------


@dataclass
class _Halves:
    graph: dict | None = None
    execution: dict | None = None
    files: list[Path] = field(default_factory=list)
    layout: list[str] = field(default_factory=list)
    top: dict = field(default_factory=dict)  # other top-level scalars of a wrapped file
    notes: list[str] = field(default_factory=list)


def _malformed(path: Path, exc: Exception) -> InputError:
    """The parse error as one line: cut off only where the parser met the end (``io.jsonwords``)."""
    return InputError(path, *json_parse_problem(exc))


def _not_a_profile(path: Path, what: str) -> InputError:
    return InputError(
        path,
        f"not an SDK 1.x profile ({what})",
        "expected JSON with graphProfile / executionProfile (poplar::serializeToJSON output)",
    )


def _parse_whole(path: Path, data: bytes) -> object:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _malformed(path, exc) from None


def _split_document(path: Path, document: object) -> tuple[dict | None, dict | None, dict, str]:
    if not isinstance(document, dict):
        raise _not_a_profile(path, f"the JSON is a {type(document).__name__}, not an object")
    if any(k in document for k in WRAPPED_KEYS):
        graph, execution = document.get("graphProfile"), document.get("executionProfile")
        for key, half in (("graphProfile", graph), ("executionProfile", execution)):
            if half is not None and not isinstance(half, dict):
                raise InputError(path, f"{key} is a {type(half).__name__}, not an object")
        top = {k: v for k, v in document.items() if k not in WRAPPED_KEYS and not isinstance(v, dict | list)}
        return graph, execution, top, "combined" if graph and execution else "wrapped"
    keys = {(k, sub) for k, v in document.items() if isinstance(v, dict) for sub in v}
    if keys & EXECUTION_MARKS and not keys & GRAPH_MARKS:
        return None, document, {}, "execution"
    if keys & GRAPH_MARKS or keys & EXECUTION_MARKS:
        return document, None, {}, "graph"
    raise _not_a_profile(path, "no graphProfile, executionProfile, memory or simulation keys")


def _stream(path: Path) -> tuple[dict | None, dict | None, dict, str]:
    """Stream a large file: the graph half whole, the execution steps one at a time without per-tile arrays."""
    import ijson  # only for large files: other formats' detection does not pay for the import

    with open_json(path) as handle:
        layout = _layout_of_head(handle.read(1 << 16))
    if layout is None:
        raise _not_a_profile(
            path, "no graphProfile, executionProfile, memory or simulation keys near the start"
        )
    graph_prefix, exec_prefix = {
        "wrapped": ("graphProfile", "executionProfile"),
        "graph": ("", None),
        "execution": (None, ""),
    }[layout]
    try:
        graph = None
        if graph_prefix is not None:
            with open_json(path) as handle:
                graph = dict(ijson.kvitems(handle, graph_prefix, use_float=True)) or None
            if graph is not None and layout == "graph" and not any(k in graph for k, _ in GRAPH_MARKS):
                graph = None
        execution = None
        if exec_prefix is not None:
            execution = _stream_execution(path, exec_prefix)
    except (ijson.JSONError, ijson.IncompleteJSONError) as exc:
        raise _malformed(path, exc) from None
    kind = "combined" if graph and execution else ("wrapped" if layout == "wrapped" else layout)
    return graph, execution, {}, kind


def _stream_execution(path: Path, prefix: str) -> dict | None:
    import ijson

    base = f"{prefix}.simulation" if prefix else "simulation"
    steps = []
    with reading(path, f"streaming steps of {path.name}"), open_json(path) as handle:
        for step in ijson.items(handle, f"{base}.steps.item", use_float=True):
            steps.append(
                {k: step.get(k) for k in ("type", "name", "cycles")} if isinstance(step, dict) else {}
            )
    with open_json(path) as handle:
        cycles = next(ijson.items(handle, f"{base}.cycles", use_float=True), None)
    with open_json(path) as handle:
        mode = next(ijson.items(handle, f"{prefix}.profilerMode" if prefix else "profilerMode"), None)
    if not steps and cycles is None:
        return None
    half: dict = {"simulation": {"steps": steps}}
    if cycles is not None:
        half["simulation"]["cycles"] = cycles
    if mode is not None:
        half["profilerMode"] = mode
    return half


def _load(path: Path, stream_threshold_bytes: int) -> tuple[dict | None, dict | None, dict, str]:
    size = path.stat().st_size
    with open(path, "rb") as handle:
        if handle.read(2) == GZIP_MAGIC:
            size *= GZIP_EXPANSION  # JSON of numbers compresses about this much
    if size > stream_threshold_bytes:
        return _stream(path)
    with open_binary(path) as handle:
        data = handle.read(stream_threshold_bytes + 1)
    if len(data) > stream_threshold_bytes:  # gzip that expands more than assumed: stream it, bounded
        return _stream(path)
    return _split_document(path, _parse_whole(path, data))


def _sibling(path: Path, have: str) -> Path | None:
    """The file holding the other half: this name with graph <-> execution swapped, if it exists."""
    find, replace = ("graph", "execution") if have == "graph" else ("execution", "graph")
    name = path.name
    at = name.lower().rfind(find)
    if at < 0:
        return None
    candidate = path.with_name(
        name[:at] + (replace.capitalize() if name[at].isupper() else replace) + name[at + len(find) :]
    )
    return candidate if candidate.is_file() and candidate != path else None


def load_halves(
    path: Path,
    graph: Path | None = None,
    execution: Path | None = None,
    stream_threshold_bytes: int = STREAM_THRESHOLD_BYTES,
) -> _Halves:
    """Load the graph and execution halves starting from ``path`` (plus a sibling or explicit other half)."""
    halves = _Halves(files=[path])
    halves.graph, halves.execution, halves.top, kind = _load(path, stream_threshold_bytes)
    halves.layout.append(f"{path.name}: {kind}")
    others = [(graph, "graph", True), (execution, "execution", True)]
    if halves.graph is None and graph is None:
        others.append((_sibling(path, "execution"), "graph", False))
    if halves.execution is None and execution is None:
        others.append((_sibling(path, "graph"), "execution", False))
    for other, want, explicit in others:
        if other is None or getattr(halves, want) is not None:
            continue
        other = Path(other)
        if not other.is_file():
            raise InputError(other, "no such file", f"the {want} half of {path.name} was expected here")
        try:
            g, e, _, kind = _load(other, stream_threshold_bytes)
        except InputError as exc:
            if explicit:
                raise
            halves.notes.append(f"ignored {other.name} (looked like the {want} half): {exc.problem}")
            continue
        half = g if want == "graph" else e
        if half is not None:
            setattr(halves, want, half)
            halves.files.append(other)
            halves.layout.append(f"{other.name}: {kind}")
    return halves


# -- tables ------------------------------------------------------------------------------------------


def _get(obj: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _lookup(obj: dict, names: tuple[str, ...]) -> object:
    lowered = {k.lower(): v for k, v in obj.items()}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    return None


def _array(path: Path, value: object, where: str, n: int | None) -> np.ndarray | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InputError(path, f"{where} is a {type(value).__name__}, not a list of per-tile numbers")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(path, f"{where} holds values that are not numbers") from None
    if array.ndim != 1:
        raise InputError(path, f"{where} is not a flat list of per-tile numbers")
    if n is not None and len(array) != n:
        raise InputError(
            path,
            f"{where} has {len(array):,} entries but the profile has {n:,} tiles",
            "the file may be truncated or from a different target",
        )
    return np.rint(array).astype(np.int64)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).replace(",", ""))
    except ValueError:
        return None


def _target(graph: dict) -> dict[str, object]:
    raw = graph.get("target") if isinstance(graph.get("target"), dict) else {}
    found: dict[str, object] = {}
    for column, names in TARGET_KEYS.items():
        value = _lookup(raw, names)
        if value is None:
            continue
        if column in ("target_type", "ipu_arch"):
            found[column] = str(value)
        elif (number := _number(value)) is not None:
            found[column] = number if column == "clock_hz" else int(number)
    return found


def _tile_arrays(path: Path, graph: dict, target: dict[str, object]) -> dict[str, np.ndarray]:
    """Every per-tile array of the graph half, checked to have one entry per tile."""
    memory = graph.get("memory") if isinstance(graph.get("memory"), dict) else {}
    sources = {
        "bytes_excl_gaps": ("memory.byTile.total", _get(memory, "byTile", "total")),
        "bytes_incl_gaps": ("memory.byTile.totalIncludingGaps", _get(memory, "byTile", "totalIncludingGaps")),
        "always_live_bytes": (
            "memory.liveness.alwaysLive.bytesByTile",
            _get(memory, "liveness", "alwaysLive", "bytesByTile"),
        ),
        "not_always_live_bytes": (
            "memory.liveness.notAlwaysLive.maxBytesByTile",
            _get(memory, "liveness", "notAlwaysLive", "maxBytesByTile"),
        ),
    }
    n = target.get("num_tiles")
    arrays: dict[str, np.ndarray] = {}
    for column, (where, value) in sources.items():
        array = _array(path, value, "graphProfile." + where, n)
        if array is not None:
            arrays[column] = array
            n = len(array)
    categories = memory.get("byCategory") if isinstance(memory.get("byCategory"), dict) else {}
    for category, regions in categories.items():
        if not isinstance(regions, dict):
            continue
        for region in REGIONS:
            where = f"graphProfile.memory.byCategory.{category}.{region}.nonOverlapped"
            array = _array(path, _get(regions, region, "nonOverlapped"), where, n)
            if array is not None:
                arrays[f"{category}\x00{region}"] = array
                n = len(array)
    return arrays


def _tables_from_graph(path: Path, graph: dict, target: dict[str, object]) -> dict[str, pd.DataFrame]:
    tables: dict[str, pd.DataFrame] = {}
    arrays = _tile_arrays(path, graph, target)
    if arrays:
        n = len(next(iter(arrays.values())))
        tile = np.arange(n, dtype=np.int32)
        per_ipu = target.get("tiles_per_ipu")
        if not per_ipu and target.get("num_ipus") and n % int(target["num_ipus"]) == 0:
            per_ipu = n // int(target["num_ipus"])
        per_ipu = int(per_ipu) if per_ipu else n
        tiles = pd.DataFrame(
            {
                "tile": tile,
                "ipu": (tile // per_ipu).astype(np.int16),
                "tile_in_ipu": (tile % per_ipu).astype(np.int32),
            }
        )
        for column in ("bytes_incl_gaps", "bytes_excl_gaps", "always_live_bytes", "not_always_live_bytes"):
            if column in arrays:
                tiles[column] = arrays[column]
        region_keys = [k for k in arrays if "\x00" in k]
        overflow = [arrays[k] for k in region_keys if k.endswith("\x00overflowed")]
        if overflow:
            tiles["overflowed_bytes"] = np.sum(overflow, axis=0)
        if target.get("bytes_per_tile") is not None:
            tiles["capacity_bytes"] = np.full(n, int(target["bytes_per_tile"]), dtype=np.int64)
        tables["tiles"] = tiles
        if region_keys:
            tables["tile_memory"], tables["memory_totals"] = _category_tables(arrays, region_keys, tile)
    programs = graph.get("programs")
    if isinstance(programs, list) and programs:
        types = [str(p.get("type", "")) if isinstance(p, dict) else "" for p in programs]
        names = [str(p.get("name", "")) if isinstance(p, dict) else str(p) for p in programs]
        frame = pd.DataFrame(
            {"program_id": np.arange(len(programs), dtype=np.int32), "name": names, "type": types}
        )
        frame["category"] = category_of_program_type(frame["type"])
        tables["programs"] = frame
    return tables


def _category_tables(
    arrays: dict[str, np.ndarray], keys: list[str], tile: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame]:
    categories = list(dict.fromkeys(k.split("\x00")[0] for k in keys))
    matrix = np.zeros((len(tile), len(categories)), dtype=np.int64)
    region_sums = dict.fromkeys(REGIONS, 0)
    for key in keys:
        category, region = key.split("\x00")
        matrix[:, categories.index(category)] += arrays[key]
        region_sums[region] += int(arrays[key].sum())
    flat = matrix.ravel()
    keep = flat != 0
    tile_memory = pd.DataFrame(
        {
            "tile": np.repeat(tile, len(categories))[keep],
            "category": pd.Categorical.from_codes(
                np.tile(np.arange(len(categories)), len(tile))[keep], categories=categories
            ),
            "bytes": flat[keep],
        }
    )
    present = {k.split("\x00")[1] for k in keys}
    totals = pd.DataFrame(
        {
            "tile": pd.array([None] * len(present), dtype="Int32"),
            "group": "region",
            "category": [REGIONS[r] for r in REGIONS if r in present],
            "bytes": [region_sums[r] for r in REGIONS if r in present],
        }
    )
    return tile_memory, totals


def _steps(execution: dict) -> pd.DataFrame | None:
    steps = _get(execution, "simulation", "steps")
    if not isinstance(steps, list) or not steps:
        return None
    records = [s if isinstance(s, dict) else {} for s in steps]
    types = pd.Series([s.get("type") for s in records], dtype=object)
    names = pd.Series([s.get("name") for s in records], dtype=object)
    types = types.where(types.notna(), "").astype("str")
    program = names.where(names.notna(), types).astype("str")
    raw = pd.Series([s.get("cycles") for s in records], dtype=object)
    numeric = pd.to_numeric(raw.where(raw.map(type) != bool), errors="coerce")  # noqa: E721
    cycles = numeric.round().astype("Int64")
    n = len(records)
    return pd.DataFrame(
        {
            "run": np.zeros(n, dtype=np.int32),
            "step": np.arange(n, dtype=np.int32),
            "ipu": np.zeros(n, dtype=np.int16),
            "program": program.astype("category"),
            "program_type": types.astype("category"),
            "category": category_of_program_type(types),
            "cycles": cycles,
        }
    )


def _metadata(halves: _Halves) -> dict[str, object]:
    meta: dict[str, object] = source_metadata(FORMAT, list(halves.files))
    meta["sdk1_json.layout"] = "; ".join(halves.layout)
    if halves.notes:
        meta["sdk1_json.notes"] = "; ".join(halves.notes)
    graph, execution = halves.graph or {}, halves.execution or {}
    for source in (halves.top, graph, execution):
        if isinstance(source, dict) and source.get("profilerMode") is not None:
            meta.setdefault("profiler_mode", str(source["profilerMode"]))
    counts = graph.get("graph") if isinstance(graph.get("graph"), dict) else {}
    for key, value in counts.items():
        name = GRAPH_COUNTS.get(key.lower())
        if name and (number := _number(value)) is not None:
            meta[name] = int(number)
    for key in ("computeSets", "vertexTypes"):
        names = _get(graph, key, "names")
        if isinstance(names, list):
            meta[f"sdk1_json.{key}.count"] = len(names)
    if "graph.num_compute_sets" not in meta and "sdk1_json.computeSets.count" in meta:
        meta["graph.num_compute_sets"] = meta["sdk1_json.computeSets.count"]
    cycles = _number(_get(execution, "simulation", "cycles"))
    if cycles is not None:
        meta["execution.total_cycles"] = int(cycles)
    return meta


def read(
    path: Path,
    graph: str | Path | None = None,
    execution: str | Path | None = None,
    stream_threshold_bytes: int = STREAM_THRESHOLD_BYTES,
    **_options: object,
) -> Profile:
    """Read an SDK 1.x JSON profile (combined, or one half plus its sibling / the ``graph``/``execution`` file)."""
    path = Path(path)
    halves = load_halves(
        path,
        None if graph is None else Path(graph),
        None if execution is None else Path(execution),
        stream_threshold_bytes,
    )
    if not halves.graph and not halves.execution:
        raise _not_a_profile(path, "graphProfile and executionProfile are both empty")
    graph_half = halves.graph or {}
    found = _target(graph_half)
    tables = _tables_from_graph(path, graph_half, found)
    if "tiles" in tables:
        n = len(tables["tiles"])
        found.setdefault("num_tiles", n)
        if "tiles_per_ipu" not in found and found.get("num_ipus") and n % int(found["num_ipus"]) == 0:
            found["tiles_per_ipu"] = n // int(found["num_ipus"])
    if "num_tiles" not in found and found.get("num_ipus") and found.get("tiles_per_ipu"):
        found["num_tiles"] = int(found["num_ipus"]) * int(found["tiles_per_ipu"])
    if "ipu_arch" not in found:
        found["ipu_arch"] = infer_arch(
            found.get("tiles_per_ipu"), found.get("bytes_per_tile"), found.get("clock_hz")
        )
    target = pd.DataFrame([{"source_format": FORMAT, **found}])
    for column in ("num_ipus", "tiles_per_ipu", "num_tiles", "num_replicas", "ipus_per_replica"):
        if column in target:
            target[column] = target[column].astype("Int32")
    if "bytes_per_tile" in target:
        target["bytes_per_tile"] = target["bytes_per_tile"].astype("Int64")
    tables["target"] = target
    if halves.execution and (steps := _steps(halves.execution)) is not None:
        tables["steps"] = steps
    meta = _metadata(halves)
    figures = ("graph.", "sdk1_json.computeSets", "sdk1_json.vertexTypes", "execution.total_cycles")
    if len(tables) == 1 and len(found) <= 1 and not any(k.startswith(figures) for k in meta):
        raise _not_a_profile(path, "it holds no target, memory, programs, steps or graph counts")
    name = path.name.split(".")[0] or path.stem
    for suffix in ("_graph", "-graph", "_execution", "-execution"):
        name = name.removesuffix(suffix)
    return Profile(name, tables, source=str(path), metadata=meta)
