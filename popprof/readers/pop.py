"""Reader for Graph Analyser profiles (``profile.pop`` + optional ``debug.cbor``) through the SDK's ``pva``.

The byte-level container of ``profile.pop`` is not publicly documented, so this
reader never parses the file itself: it sniffs (``.pop`` name, or the SQLite
magic some copies show) and reads everything through ``pva.openReport``, using
the attributes public code that uses the real ``pva`` reads (the evidence is in
``docs/readers.md``, "pva adapter: evidence"). Attributes without public evidence
are probed and tolerated when absent; what was missing is recorded in the
metadata key ``pop.missing_attributes``. ``pva`` is imported only inside
:func:`read`, so the rest of popprof works without the SDK.

Columns are built in preallocated NumPy arrays; the hot loop over execution
steps binds locals and touches each documented attribute once.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..io import parallel
from ..io import progress as _progress
from ..io.files import is_gzip
from ..io.plural import plural
from ..io.sources import source_metadata
from ..model.errors import InputError, PopprofError, SdkMissingError, UsageError
from ..model.profile import Profile
from ..model.schema import category_of_program_type
from .arch import infer_arch
from .values import check_measures

FORMAT = "pop"
SQLITE_MAGIC = b"SQLite format 3\x00"
DEBUG_NAME = "debug.cbor"
#: Variables kept per liveness step in ``liveness_variables`` (the largest).
LIVENESS_TOP = 5
#: Refuse per-tile step cycles above this many values (8 bytes each).
MAX_TILE_CYCLE_VALUES = 250_000_000
_CHUNK = 2048  # progress granularity
_MISSING_INT = -1  # sentinel for absent integer attributes (every real value is >= 0)
_APP_FILES = ("app.json", "framework.json", "frameworks.json")
#: Read execution steps in worker processes from this many steps on (each opens the report itself).
PARALLEL_MIN_STEPS = 50_000
MAX_WORKERS = 2
#: ``pva.IPU.Architecture`` names mapped to popprof's ``ipu_arch`` (``Ipu2`` is public: popart
#: report_test.py); any other name is kept verbatim, never guessed.
ARCHITECTURES = {"ipu1": "ipu1", "ipu2": "ipu2"}
#: Debug-context layers of a framework: operations are attributed to the first of these found
#: walking ``parents`` (graphcore/poptorch tests/precompilation_test.py walks to "poptorch").
FRAMEWORK_LAYERS = frozenset({"poptorch", "popart", "onnx", "tensorflow", "xla_op"})
#: Which liveness steps have their variable list read: only the peak step (default), every step, none.
LIVENESS_VARIABLES = ("peak", "all", "none")
#: Physical ranges a profile's figures must lie in (plausibility checks; public examples: 1,216- and
#: 1,472-tile IPUs, 638,976 B per tile, clockFrequency 1330000000.0 Hz, tile balance 0..1).
MAX_TILES_PER_IPU = 16_384
MAX_BYTES_PER_TILE = 64 << 20
CLOCK_RANGE_HZ = (1e8, 1e10)


def sniff(path: Path, head: bytes) -> bool:
    """A file named ``*.pop`` (or ``*.pop.gz``, to say it must be gunzipped), or one starting with the
    SQLite magic (except ``.pvti`` traces)."""
    if not path.is_file():
        return False
    if path.name.lower().endswith((".pop", ".pop.gz")):
        return True
    return head.startswith(SQLITE_MAGIC) and path.suffix.lower() != ".pvti"


def find_debug_cbor(path: Path) -> Path | None:
    """``debug.cbor`` next to the profile, or at the run-directory root (its parent)."""
    for candidate in (path.parent / DEBUG_NAME, path.parent.parent / DEBUG_NAME):
        if candidate.is_file():
            return candidate
    return None


def read(
    path: Path,
    debug_cbor: str | Path | bool | None = None,
    tile_cycles: bool = False,
    progress: bool = True,
    liveness_top: int = LIVENESS_TOP,
    workers: int | None = None,
    code_bytes: bool = False,
    liveness_variables: str = "peak",
    **_options: object,
) -> Profile:
    """Read ``profile.pop`` through ``pva`` into a Profile.

    ``debug_cbor``: a path, ``None`` (or ``True``) to look next to the profile and
    in its parent directory, or ``False`` to ignore debug information.
    ``tile_cycles``: also fill ``step_tile_cycles`` (steps x tiles rows).
    ``liveness_top``: variables kept per liveness step read (0 = none).
    ``liveness_variables``: whose variable lists are read: ``"peak"`` (the peak step
    only, the default), ``"all"`` (every step: slow on large models) or ``"none"``.
    ``code_bytes``: also read ``codeBytesByTile`` of every program (opt-in: slow on
    large models); otherwise ``programs.code_bytes`` is missing.
    ``workers``: processes reading execution steps (each opens the report itself);
    ``None`` = up to ``MAX_WORKERS`` for profiles of ``PARALLEL_MIN_STEPS`` steps or more.
    """
    if liveness_variables not in LIVENESS_VARIABLES:
        raise UsageError(
            f"liveness_variables must be one of {', '.join(LIVENESS_VARIABLES)}, not {liveness_variables!r}"
        )
    path = Path(path)
    if is_gzip(path):
        raise InputError(
            path,
            "is gzip-compressed; pva reads only an uncompressed profile.pop",
            "gunzip it first (e.g. `gunzip -k FILE`)",
        )
    try:
        import pva  # the Poplar SDK's module; absent outside the SDK
    except (ImportError, RuntimeError):  # RuntimeError: the SDK is there but not usable (libraries, env)
        raise SdkMissingError(path) from None
    if debug_cbor is None or debug_cbor is True:
        debug = find_debug_cbor(path)
    elif debug_cbor is False:
        debug = None
    else:
        debug = Path(debug_cbor)
        if not debug.is_file():
            raise InputError(debug, "no such debug information file", "pass the debug.cbor of the same run")
    notes: list[str] = []
    try:
        report, debug = _open_report(pva, path, debug, notes)
    except Exception as exc:  # pva raises its own (RuntimeError-like) errors for unreadable files
        raise InputError(
            path,
            f"pva cannot open the profile ({_one_line(exc)})",
            "the file may be truncated or corrupt, or written by a newer Poplar SDK",
        ) from None
    builder = _Builder(pva, report, path, debug, progress, workers)
    builder.notes.extend(notes)
    builder.options = {
        "tile_cycles": bool(tile_cycles),
        "code_bytes": bool(code_bytes),
        "liveness_variables": liveness_variables,
        "liveness_top": int(liveness_top),
    }
    try:
        return builder.build(tile_cycles, liveness_top, code_bytes, liveness_variables)
    except PopprofError:
        raise
    except (KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:
        raise InputError(
            path,
            f"pva failed while reading the profile ({type(exc).__name__}: {_one_line(exc)})",
            "the file may be truncated or corrupt",
        ) from None


def _open_report(pva: Any, path: Path, debug: Path | None, notes: list[str]) -> tuple[Any, Path | None]:
    """``pva.openReport`` with debug information when this pva can (SDK 3.0+), else without it.

    SDK 2.0's pva has only ``openReport(filename)`` (poplar-api 2.0.0 pva-python page); the
    two-argument overload appears with SDK 3.x (libpva 3.1.0 api-python page).
    """
    if debug is None:
        return pva.openReport(str(path)), None
    try:
        return pva.openReport(str(path), str(debug)), debug
    except TypeError:  # pybind11: no overload taking two arguments
        notes.append(
            f"this pva has no openReport(profile, debug) (needs SDK 3.0 or later): opened without "
            f"{debug.name}, so there is no operations table"
        )
        return pva.openReport(str(path)), None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _type_name(value: object) -> str:
    """An enum value (program type, target type, architecture) as its plain name.

    pva's enums are pybind11 enums: ``.name`` is the name; their ``str()`` differs between
    pybind11 versions (``Type.OnTileExecute`` or ``<Type.OnTileExecute: 3>``), so it is used
    only for values without ``.name`` (plain strings of unknown shapes: ``Type.X`` -> ``X``).
    """
    name = getattr(value, "name", None)
    if isinstance(name, str) and name:
        return name
    text = str(value)
    if text.startswith("<") and text.endswith(">") and ":" in text:  # <Type.Name: 3>
        text = text[1:].split(":", 1)[0]
    if "." in text and " " not in text:
        text = text.rsplit(".", 1)[-1]
    return text


def _architecture(value: object) -> str:
    """``pva.IPU.Architecture`` as popprof's ``ipu_arch``: known names mapped, others kept verbatim."""
    name = _type_name(value)
    return ARCHITECTURES.get(name.lower(), name)


class _TypeNames(dict):
    """``_type_name`` memoised per raw value: ``names(program.type)`` (pva hands out a few enum values)."""

    def __call__(self, raw: object) -> str:
        name = self.get(raw)
        if name is None:
            name = self[raw] = _type_name(raw)
        return name


class _Builder:
    """Builds the tables of one report, recording optional attributes that were absent."""

    def __init__(
        self, pva: Any, report: Any, path: Path, debug: Path | None, show: bool, workers: int | None = None
    ) -> None:
        self.workers = workers
        self.pva = pva
        self.report = report
        self.path = path
        self.debug = debug
        self.show = show
        self.missing: list[str] = []
        self.notes: list[str] = []
        self.pool: Any = None
        self.futures: list[Any] = []
        self.ranges: list[tuple[int, int]] = []
        self.spec: tuple[int, bool, bool] = (0, False, False)
        self.num_steps = 0
        self.options: dict[str, object] = {}

    # -- helpers --------------------------------------------------------------------------------
    def attr(self, obj: Any, dotted: str, label: str, default: Any = None) -> Any:
        """``obj.a.b.c``, or ``default`` (recording ``label`` as missing) when any part is absent."""
        for part in dotted.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                self.note_missing(label)
                return default
        return obj

    def note_missing(self, label: str) -> None:
        if label not in self.missing:
            self.missing.append(label)

    def bar(self, description: str, total: int):
        if not self.show:
            return contextlib.nullcontext(lambda n=1: None)
        return _progress.progress(description, total)

    # -- the whole profile ----------------------------------------------------------------------
    def build(
        self, tile_cycles: bool, liveness_top: int, code_bytes: bool = False, liveness_variables: str = "peak"
    ) -> Profile:
        report = self.report
        compilation = report.compilation
        tables: dict[str, pd.DataFrame] = {}
        target = self.target(compilation)
        tables["target"] = target
        row = target.iloc[0]
        execution = self.execution_section(report)
        try:
            if execution is not None:
                self.start_steps(execution, row, tile_cycles)  # workers start while tiles are read here
            tables["tiles"], tables["tile_memory"] = self.tiles(compilation, row)
            tables["programs"] = self.programs(compilation, code_bytes)
            tables["variables"] = self.variables(compilation)
            tables["liveness"], tables["liveness_variables"] = self.liveness(
                compilation, liveness_top, liveness_variables
            )
            steps_tables = self.execution(execution, row, tile_cycles) if execution is not None else None
        except BaseException:
            self.stop_workers(terminate=True)  # do not leave a worker reading after an error or Ctrl-C
            raise
        self.stop_workers()
        if steps_tables is not None and steps_tables[1] is not None:
            runs, steps, tile_frame = steps_tables
            _check_steps(self.path, steps)
            tables["runs"], tables["steps"] = runs, steps
            if tile_frame is not None:
                tables["step_tile_cycles"] = tile_frame
        if self.debug is not None:
            if hasattr(self.pva, "OperationAnalysis"):
                tables["operations"] = self.operations(report)
            else:
                self.notes.append(
                    "reading operations needs SDK 3.0 or later (this pva has no OperationAnalysis)"
                )
        name = (
            self.path.parent.name
            if self.path.name == "profile.pop" and self.path.parent.name
            else self.path.stem
        )
        check_measures(tables, self.path)  # what a damaged file gave pva: negative sizes, runs ending first
        profile = Profile(name or "profile", tables, source=str(self.path))
        profile.update_metadata(self.metadata(report, compilation))
        return profile

    def execution_section(self, report: Any) -> Any:
        """``report.execution`` when it holds an execution profile, else None (with a note).

        Real pva always has ``execution``; without an execution profile it has no steps and
        ``totalCycles.total == 0`` (graphcore/popart tests/integration/saved_executable.py).
        """
        execution = getattr(report, "execution", None)
        if execution is None:
            self.note_missing("execution")
            self.notes.append("pva gives no execution section: no runs / steps tables")
            return None
        steps = self.attr(execution, "steps", "execution.steps", [])
        total = self.attr(execution, "totalCycles.total", "execution.totalCycles")
        if len(steps):
            return execution
        if not total:
            self.notes.append(
                "no execution profile (execution.totalCycles.total is 0 and there are no steps): "
                "execution profiling was off"
            )
        else:
            self.notes.append(
                f"execution.totalCycles.total is {total} but there are no execution steps: "
                "no runs / steps tables"
            )
        return None

    # -- target ---------------------------------------------------------------------------------
    def target(self, compilation: Any) -> pd.DataFrame:
        t = compilation.target
        get = self.attr
        num_ipus = get(t, "numIPUs", "compilation.target.numIPUs")
        tiles_per_ipu = get(t, "tilesPerIpu", "compilation.target.tilesPerIpu")
        num_tiles = get(t, "numTiles", "compilation.target.numTiles")
        if num_tiles is None and num_ipus is not None and tiles_per_ipu is not None:
            num_tiles = int(num_ipus) * int(tiles_per_ipu)
        if tiles_per_ipu is None and num_tiles is not None and num_ipus:
            tiles_per_ipu = int(num_tiles) // int(num_ipus)
        if num_tiles is None or tiles_per_ipu is None:
            raise InputError(
                self.path, "pva gives no tile count for the target", "the profile may be corrupt"
            )
        bytes_per_tile = get(t, "bytesPerTile", "compilation.target.bytesPerTile")
        clock = get(t, "clockFrequency", "compilation.target.clockFrequency")
        arch = get(t, "architecture", "compilation.target.architecture")
        _check_target(self.path, num_ipus, tiles_per_ipu, num_tiles, bytes_per_tile, clock)
        if arch is not None:
            arch = _architecture(arch)
        else:  # the same inference as the text summary and SDK 1.x readers (reference facts, section 6)
            arch = infer_arch(
                int(tiles_per_ipu),
                None if bytes_per_tile is None else int(bytes_per_tile),
                None if clock is None else float(clock),
            )
        ttype = get(t, "type", "compilation.target.type")
        return pd.DataFrame(
            [
                {
                    "source_format": FORMAT,
                    "ipu_arch": arch,
                    "target_type": None if ttype is None else _type_name(ttype),
                    "num_ipus": num_ipus,
                    "tiles_per_ipu": tiles_per_ipu,
                    "num_tiles": num_tiles,
                    "bytes_per_tile": bytes_per_tile,
                    "clock_hz": np.nan if clock is None else float(clock),
                    "num_replicas": get(t, "numReplicas", "compilation.target.numReplicas"),
                    "ipus_per_replica": get(t, "ipusPerReplica", "compilation.target.ipusPerReplica"),
                    "poplar_version": self.attr(self.report, "poplarVersion.string", "poplarVersion.string"),
                }
            ]
        )

    # -- tiles ----------------------------------------------------------------------------------
    def tiles(self, compilation: Any, target: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
        tiles = compilation.tiles
        n = len(tiles)
        per_ipu = int(target["tiles_per_ipu"])
        values = np.full((n, 6), _MISSING_INT, dtype=np.int64)
        categories: list[str] = []
        by_category = np.zeros((n, 0), dtype=np.int64)
        if n:
            first = tiles[0].memory
            has_over = self._has(first, "overflowed", "tile.memory.overflowed")
            has_live = self._has(first, "alwaysLiveBytes", "tile.memory.alwaysLiveBytes") and self._has(
                first, "notAlwaysLiveBytes", "tile.memory.notAlwaysLiveBytes"
            )
            category_obj = getattr(first, "category", None)
            if category_obj is None:
                self.note_missing("tile.memory.category")
            else:
                categories = _memory_categories(category_obj)
            by_category = np.zeros((n, len(categories)), dtype=np.int64)
            with self.bar("Reading tile memory", n) as advance:
                for t, tile in enumerate(tiles):
                    memory = tile.memory
                    total = memory.total
                    row = [
                        total.includingGaps,
                        total.excludingGaps,
                        _MISSING_INT,
                        _MISSING_INT,
                        _MISSING_INT,
                        _MISSING_INT,
                    ]
                    if has_over:
                        row[2] = memory.overflowed.excludingGaps
                    if has_live:
                        row[3] = memory.alwaysLiveBytes
                        row[4] = memory.notAlwaysLiveBytes
                    values[t] = row
                    if categories:
                        category = memory.category
                        by_category[t] = [getattr(category, c).total for c in categories]
                    if t % _CHUNK == _CHUNK - 1:
                        advance(_CHUNK)
        tile = np.arange(n, dtype=np.int32)
        cap = target["bytes_per_tile"]
        frame = pd.DataFrame(
            {
                "tile": tile,
                "ipu": (tile // per_ipu).astype(np.int16),
                "tile_in_ipu": tile % per_ipu,
                "bytes_incl_gaps": _nullable(values[:, 0]),
                "bytes_excl_gaps": _nullable(values[:, 1]),
                "overflowed_bytes": _nullable(values[:, 2]),
                "always_live_bytes": _nullable(values[:, 3]),
                "not_always_live_bytes": _nullable(values[:, 4]),
                "capacity_bytes": pd.array([None if pd.isna(cap) else int(cap)] * n, dtype="Int64"),
            }
        )
        rows, cols = np.nonzero(by_category)
        tile_memory = pd.DataFrame(
            {
                "tile": rows.astype(np.int32),
                "category": pd.Categorical.from_codes(cols, categories=pd.Index(categories, dtype="str")),
                "bytes": by_category[rows, cols],
            }
        )
        return frame, tile_memory

    def _has(self, obj: Any, name: str, label: str) -> bool:
        if hasattr(obj, name):
            return True
        self.note_missing(label)
        return False

    # -- programs and variables -----------------------------------------------------------------
    def programs(self, compilation: Any, code_bytes: bool = False) -> pd.DataFrame:
        """Program names and types; ``code_bytes`` (opt-in) sums each program's ``codeBytesByTile``."""
        programs = compilation.programs
        n = len(programs)
        names: list[str] = [""] * n
        types: list[str] = [""] * n
        code = np.full(n, _MISSING_INT, dtype=np.int64)
        type_name = _TypeNames()
        has_code = None if code_bytes else False
        for i, program in enumerate(programs):
            names[i] = str(program.name)
            types[i] = type_name(program.type)
            if has_code is None:
                has_code = self._has(program, "codeBytesByTile", "program.codeBytesByTile")
            if has_code:
                code[i] = int(np.asarray(program.codeBytesByTile, dtype=np.int64).sum())
        type_series = pd.Series(types, dtype="str")
        return pd.DataFrame(
            {
                "program_id": np.arange(n, dtype=np.int32),
                "name": pd.Series(names, dtype="str"),
                "type": type_series.astype("category"),
                "category": category_of_program_type(type_series),
                "code_bytes": _nullable(code),
            }
        )

    def variables(self, compilation: Any) -> pd.DataFrame:
        variables = self.attr(compilation, "alwaysLiveVariables", "compilation.alwaysLiveVariables", [])
        n = len(variables)
        names: list[str] = [""] * n
        sizes = np.empty(n, dtype=np.int64)
        for i, variable in enumerate(variables):
            names[i] = str(variable.name)
            sizes[i] = variable.size
        return pd.DataFrame(
            {
                "name": pd.Series(names, dtype="str"),
                "bytes": sizes,
                "always_live": np.ones(n, dtype=bool),
                "tile": pd.array([None] * n, dtype="Int32"),
            }
        )

    # -- liveness -------------------------------------------------------------------------------
    def liveness(self, compilation: Any, top: int, which: str = "peak") -> tuple[pd.DataFrame, pd.DataFrame]:
        """Per-step not-always-live bytes (per replica, as pva gives them) and the ``top`` largest
        variables of the peak step (``which="peak"``), of every step (``"all"``) or of none."""
        steps = self.attr(compilation, "livenessProgramSteps", "compilation.livenessProgramSteps", [])
        n = len(steps)
        names: list[str | None] = [None] * n
        types: list[str | None] = [None] * n
        live_bytes = np.full(n, _MISSING_INT, dtype=np.int64)
        var_step: list[int] = []
        var_name: list[str] = []
        var_size: list[int] = []
        type_name = _TypeNames()
        every = bool(top) and which == "all"

        def keep(i: int, memory: Any) -> None:
            for size, name in heapq.nlargest(top, ((v.size, v.name) for v in memory.variables)):
                var_step.append(i)
                var_name.append(str(name))
                var_size.append(size)

        with self.bar("Reading liveness", n) as advance:
            for i, step in enumerate(steps):
                program = getattr(step, "program", None)
                if program is not None:
                    names[i] = str(program.name)
                    types[i] = type_name(program.type)
                memory = step.notAlwaysLiveMemory
                live_bytes[i] = memory.bytes
                if every:
                    keep(i, memory)
                if i % _CHUNK == _CHUNK - 1:
                    advance(_CHUNK)
        if (live_bytes < _MISSING_INT).any():
            raise InputError(
                self.path,
                "pva gives negative not-always-live bytes for a liveness step",
                "the profile is corrupt",
            )
        if top and which == "peak" and (live_bytes >= 0).any():
            peak = int(np.argmax(live_bytes))  # the first step holding the largest value
            keep(peak, steps[peak].notAlwaysLiveMemory)
        liveness = pd.DataFrame(
            {
                "step": np.arange(n, dtype=np.int32),
                "program": pd.Series(names, dtype="str"),
                "program_type": pd.Series(types, dtype="str").astype("category"),
                "not_always_live_bytes": _nullable(live_bytes),
            }
        )
        variables = pd.DataFrame(
            {
                "step": np.asarray(var_step, dtype=np.int32),
                "name": pd.Series(var_name, dtype="str"),
                "bytes": np.asarray(var_size, dtype=np.int64),
            }
        )
        return liveness, variables

    # -- execution ------------------------------------------------------------------------------
    def start_steps(self, execution: Any, target: pd.Series, tile_cycles: bool) -> None:
        """Check and probe the execution steps, and start worker processes for large profiles."""
        steps = execution.steps
        n = self.num_steps = len(steps)
        if n == 0:
            return
        if tile_cycles and n * int(target["num_tiles"]) > MAX_TILE_CYCLE_VALUES:
            raise UsageError(
                f"{self.path}: per-tile cycles would be {n:,} steps x {int(target['num_tiles']):,} "
                f"tiles ({n * int(target['num_tiles']):,} values); read without tile_cycles"
            )
        first_ipus = steps[0].ipus
        probe = first_ipus[0]
        self.spec = (
            len(first_ipus),
            self._has(probe, "activeCycles", "step.ipus.activeCycles"),
            self._has(probe, "tileBalance", "step.ipus.tileBalance"),
        )
        self.ranges = _split(n, self._worker_count(n))
        if len(self.ranges) > 1:
            # spawn, not fork: pva has this report open here, and a forked copy of its state mid-use is unsafe
            self.pool = parallel.process_pool(len(self.ranges) - 1, start="spawn")
            try:
                if self.pool is None:
                    raise RuntimeError("no worker processes")
                self.futures = [
                    self.pool.submit(_steps_worker, str(self.path), lo, hi, self.spec)
                    for lo, hi in self.ranges[1:]
                ]
            except Exception as exc:  # no processes available: read everything here
                self.notes.append(f"parallel step reading unavailable ({type(exc).__name__}); read serially")
                self.stop_workers(terminate=True)
                self.futures, self.ranges = [], [(0, n)]

    def stop_workers(self, terminate: bool = False) -> None:
        """Shut the worker pool down; with ``terminate``, stop workers still reading (and wait for them)."""
        if self.pool is None:
            return
        self.pool.close(terminate=terminate)
        self.pool = None

    def execution(
        self, execution: Any, target: pd.Series, tile_cycles: bool
    ) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
        steps = execution.steps
        n = self.num_steps
        if n == 0:
            return None, None, None
        k = self.spec[0]
        ints, balance, program_code, keys = self.all_steps(steps)
        ints = ints.reshape(n * k, 5)
        step_names = [name for name, _ in keys]
        runs, run_of_step = self.runs(execution, n, lambda i: step_names[program_code[i]])
        names = step_names
        types = [ptype for _, ptype in keys]
        unique_names = list(dict.fromkeys(names))
        name_index = {name: j for j, name in enumerate(unique_names)}
        unique_types = list(dict.fromkeys(types))
        type_index = {t: j for j, t in enumerate(unique_types)}
        code_name = np.array([name_index[x] for x in names], dtype=np.int32)
        code_type = np.array([type_index[x] for x in types], dtype=np.int32)
        step_code = np.repeat(program_code, k)
        type_codes = code_type[step_code]
        type_categories = pd.Index(unique_types, dtype="str")
        category_of_type = (
            category_of_program_type(pd.Series(unique_types, dtype="str")).astype("str").tolist()
        )
        unique_categories = list(dict.fromkeys(category_of_type))
        category_code = np.array([unique_categories.index(c) for c in category_of_type], dtype=np.int32)
        frame = pd.DataFrame(
            {
                "run": np.repeat(run_of_step, k),
                "step": np.repeat(np.arange(n, dtype=np.int32), k),
                "ipu": np.tile(np.arange(k, dtype=np.int16), n),
                "program": pd.Categorical.from_codes(
                    code_name[step_code], categories=pd.Index(unique_names, dtype="str")
                ),
                "program_type": pd.Categorical.from_codes(type_codes, categories=type_categories),
                "category": pd.Categorical.from_codes(
                    category_code[type_codes], categories=pd.Index(unique_categories, dtype="str")
                ),
                "cycles": _nullable(ints[:, 0]),
                "active_from_cycles": _nullable(ints[:, 1]),
                "active_to_cycles": _nullable(ints[:, 2]),
                "tile_balance": balance,
                "data_in_bytes": _nullable(ints[:, 3]),
                "data_out_bytes": _nullable(ints[:, 4]),
            }
        )
        tile_frame = self.tile_cycles(steps, n, target) if tile_cycles else None
        return runs, frame, tile_frame

    def all_steps(self, steps: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str]]]:
        """Read every step: the first range here, the others from the workers :meth:`start_steps` started.

        Returns the flat int values (cycles, from, to, dataIn, dataOut per step x IPU), the
        tile balances, each step's program code and the (name, type) of each code.
        """
        spec = self.spec
        lo, hi = self.ranges[0]
        with self.bar("Reading execution steps", hi - lo) as advance:
            parts = [self.step_range(steps, lo, hi, spec, advance)]
        for (lo, hi), future in zip(self.ranges[1:], self.futures, strict=True):
            part = None
            try:
                part = future.result()
            except Exception as exc:  # a worker that failed: read its range here (errors surface here)
                self.notes.append(f"a step-reading worker failed ({type(exc).__name__}); range read serially")
            if part is None:
                with self.bar("Reading execution steps", hi - lo) as advance:
                    part = self.step_range(steps, lo, hi, spec, advance)
            parts.append(part)
        return _merge_parts(parts, self.missing)

    def _worker_count(self, n: int) -> int:
        if not parallel.enabled():
            return 1
        if self.workers is not None:
            return max(1, int(self.workers))
        if n < PARALLEL_MIN_STEPS or not parallel.spawn_is_safe():
            return 1
        return _idle_workers()

    def step_range(
        self, steps: Any, lo: int, hi: int, spec: tuple[int, bool, bool], advance: Callable[[int], None]
    ) -> _StepPart:
        """Read steps ``lo`` to ``hi`` (the hot loop: locals bound, each attribute touched once)."""
        k, has_active, has_balance = spec
        m = hi - lo
        # Values are gathered into flat Python lists and copied into the preallocated arrays in
        # chunks: one numpy conversion per chunk is far cheaper than one per step.
        ints = np.full(m * k * 5, _MISSING_INT, dtype=np.int64)
        balance = np.full(m * k, np.nan)
        step_codes: list[int] = []
        code_append = step_codes.append
        codes: dict[tuple[object, object], int] = {}
        no_balance = [np.nan] * k
        ibuf: list[int] = []
        fbuf: list[float] = []
        ipos = fpos = 0
        flush_at = _CHUNK * k * 5
        missing = _MISSING_INT
        slow = self._slow_step
        for i in range(lo, hi):
            step = steps[i]
            program = step.program
            key = (program.name, program.type)
            code = codes.get(key)
            if code is None:
                code = codes[key] = len(codes)
            code_append(code)
            ipus = step.ipus
            if len(ipus) != k:
                raise InputError(self.path, f"execution step {i} has {len(ipus)} IPUs, step 0 has {k}")
            mark = len(ibuf)
            try:
                if has_active:
                    for u in ipus:
                        a = u.activeCycles
                        ibuf += (u.cycles, a.cyclesFrom.max, a.cyclesTo.max, u.dataIn, u.dataOut)
                else:
                    for u in ipus:
                        ibuf += (u.cycles, missing, missing, u.dataIn, u.dataOut)
                fbuf += [u.tileBalance for u in ipus] if has_balance else no_balance
            except AttributeError:
                del ibuf[mark:]
                del fbuf[mark // 5 :]
                slow(ipus, ibuf, fbuf)
            if len(ibuf) >= flush_at:
                ints[ipos : ipos + len(ibuf)] = ibuf
                balance[fpos : fpos + len(fbuf)] = fbuf
                ipos += len(ibuf)
                fpos += len(fbuf)
                ibuf, fbuf = [], []
                advance(_CHUNK)
        ints[ipos : ipos + len(ibuf)] = ibuf
        balance[fpos : fpos + len(fbuf)] = fbuf
        keys = [(str(name), _type_name(raw)) for name, raw in codes]
        return ints, balance, np.asarray(step_codes, dtype=np.int32), keys, list(self.missing)

    def _slow_step(self, ipus: Any, ibuf: list[int], fbuf: list[float]) -> None:
        """Per-attribute fallback for a step whose IPU objects lack an attribute the first step had."""
        get = self.attr
        for u in ipus:
            ibuf += (
                get(u, "cycles", "step.ipus.cycles", _MISSING_INT),
                get(u, "activeCycles.cyclesFrom.max", "step.ipus.activeCycles", _MISSING_INT),
                get(u, "activeCycles.cyclesTo.max", "step.ipus.activeCycles", _MISSING_INT),
                get(u, "dataIn", "step.ipus.dataIn", _MISSING_INT),
                get(u, "dataOut", "step.ipus.dataOut", _MISSING_INT),
            )
            value = get(u, "tileBalance", "step.ipus.tileBalance", None)
            fbuf.append(np.nan if value is None else value)

    def runs(
        self, execution: Any, num_steps: int, program_at: Callable[[int], object]
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """The runs table and each step's run.

        ``execution.steps`` holds the steps of every run in order, so run ``r`` owns the
        ``len(runs[r].steps)`` steps after those of the runs before it; the first and last
        step of each run are checked against that (by program name).
        """
        runs = execution.runs
        r = len(runs)
        names: list[str] = [""] * r
        start = np.full(r, np.nan)
        end = np.full(r, np.nan)
        counts = np.zeros(r, dtype=np.int64)
        mismatched = 0
        offset = 0
        for i, run in enumerate(runs):
            names[i] = str(self.attr(run, "name", "run.name", ""))
            run_steps = run.steps
            counts[i] = len(run_steps)
            if counts[i] and offset + counts[i] <= num_steps:
                first, last = offset, offset + int(counts[i]) - 1
                if str(run_steps[0].program.name) != program_at(first) or str(
                    run_steps[len(run_steps) - 1].program.name
                ) != program_at(last):
                    mismatched += 1
            offset += int(counts[i])
            us = self.attr(run, "microseconds", "run.microseconds")
            if us is not None:
                start[i] = self.attr(us, "start", "run.microseconds.start", np.nan)
                end[i] = self.attr(us, "end", "run.microseconds.end", np.nan)
        if mismatched:
            self.notes.append(
                f"{plural(mismatched, 'run')} {'does' if mismatched == 1 else 'do'} not start/end where their "
                "step counts put them in execution.steps; run indices may be off"
            )
        if r and counts.sum() == num_steps:
            run_of_step = np.repeat(np.arange(r, dtype=np.int32), counts)
        else:
            self.notes.append(
                f"runs hold {int(counts.sum())} steps but execution.steps has {num_steps}; "
                "steps are all assigned to run 0"
            )
            run_of_step = np.zeros(num_steps, dtype=np.int32)
            if not r:
                names, start, end = ["run 0"], np.array([np.nan]), np.array([np.nan])
        frame = pd.DataFrame(
            {
                "run": np.arange(len(names), dtype=np.int32),
                "name": pd.Series(names, dtype="str"),
                "start_us": start,
                "end_us": end,
            }
        )
        return frame, run_of_step

    def tile_cycles(self, steps: Any, n: int, target: pd.Series) -> pd.DataFrame | None:
        """Per-tile cycles of every step (opt-in); None, noted, when steps have no ``cyclesByTile``
        (only the reference facts list it: no public code reads it)."""
        if not self._has(steps[0], "cyclesByTile", "step.cyclesByTile"):
            return None
        num_tiles = int(target["num_tiles"])
        cycles = np.empty((n, num_tiles), dtype=np.int64)
        with self.bar("Reading per-tile cycles", n) as advance:
            for i, step in enumerate(steps):
                cycles[i] = np.asarray(step.cyclesByTile, dtype=np.int64)
                if i % _CHUNK == _CHUNK - 1:
                    advance(_CHUNK)
        return pd.DataFrame(
            {
                "step": np.repeat(np.arange(n, dtype=np.int32), num_tiles),
                "tile": np.tile(np.arange(num_tiles, dtype=np.int32), n),
                "cycles": cycles.ravel(),
            }
        )

    # -- operations (debug information) ---------------------------------------------------------
    def operations(self, report: Any) -> pd.DataFrame:
        """Framework operations: layer and source location of the framework's debug context.

        As graphcore/poptorch tests/precompilation_test.py does: start from
        ``replacedDebugContext[0]`` when the operation has one (an outlined call replaced it),
        else ``debugContext``, and walk ``parents`` to the first context whose layer is a
        framework's (:data:`FRAMEWORK_LAYERS`); without one the starting context is used.
        ``bytes`` sums ``op.vars`` sizes only when every entry carries one: public code reads
        op.vars entries by id only, so with real pva the bytes are missing, never 0.
        """
        operations = self.pva.OperationAnalysis(report).operations
        n = len(operations)
        names: list[str] = [""] * n
        layers: list[str | None] = [None] * n
        files: list[str | None] = [None] * n
        ints = np.full((n, 4), _MISSING_INT, dtype=np.int64)  # line, first, last, bytes
        get = self.attr
        for i, op in enumerate(operations):
            names[i] = str(op.name)
            context = self.framework_context(op)
            if context is not None:
                layers[i] = _layer(get(context, "layer", "debugContext.layer"))
                location = get(context, "location", "debugContext.location")
                if location is not None:
                    file = get(location, "fileName", "debugContext.location.fileName")
                    files[i] = str(file) if file else None
                    line = get(location, "lineNumber", "debugContext.location.lineNumber")
                    ints[i, 0] = line if line and line > 0 else _MISSING_INT
            first = get(op, "firstStepIndex", "operation.firstStepIndex")
            last = get(op, "lastStepIndex", "operation.lastStepIndex")
            ints[i, 1] = _MISSING_INT if first is None else first
            ints[i, 2] = _MISSING_INT if last is None else last
            ints[i, 3] = _variables_bytes(get(op, "vars", "operation.vars"))
        return pd.DataFrame(
            {
                "name": pd.Series(names, dtype="str"),
                "layer": pd.Series(layers, dtype="str").astype("category"),
                "file": pd.Series(files, dtype="str"),
                "line": _nullable(ints[:, 0], "Int32"),
                "first_step": _nullable(ints[:, 1], "Int32"),
                "last_step": _nullable(ints[:, 2], "Int32"),
                "bytes": _nullable(ints[:, 3]),
            }
        )

    def framework_context(self, op: Any) -> Any:
        """The debug context an operation is attributed to (see :meth:`operations`)."""
        replaced = getattr(op, "replacedDebugContext", None)
        if replaced is None:
            self.note_missing("operation.replacedDebugContext")
        start = (
            replaced[0]
            if replaced is not None and len(replaced)
            else self.attr(op, "debugContext", "operation.debugContext")
        )
        context, seen = start, 0
        while context is not None and seen < 64:  # parents chains are short; guard against cycles
            if _layer(getattr(context, "layer", None)) in FRAMEWORK_LAYERS:
                return context
            parents = getattr(context, "parents", None)
            context = parents[0] if parents is not None and len(parents) else None
            seen += 1
        return start

    # -- metadata -------------------------------------------------------------------------------
    def metadata(self, report: Any, compilation: Any) -> dict[str, str]:
        sources = [self.path] + ([self.debug] if self.debug else [])
        meta: dict[str, str] = dict(source_metadata(FORMAT, sources))
        version = self.attr(report, "poplarVersion", "poplarVersion")
        if version is not None:
            parts = {k: self.attr(version, k, f"poplarVersion.{k}") for k in ("major", "minor", "point")}
            meta["pop.poplar_version"] = json.dumps(parts)
            package_hash = self.attr(version, "packageHash", "poplarVersion.packageHash")
            if package_hash is not None:
                meta["pop.poplar_package_hash"] = str(package_hash)
        fmt = self.attr(report, "version", "version")
        if fmt is not None:
            parts = [self.attr(fmt, k, f"version.{k}") for k in ("major", "minor", "point")]
            meta["pop.format_version"] = ".".join("?" if p is None else str(p) for p in parts)
            unstable = self.attr(fmt, "isUnstableFormat", "version.isUnstableFormat")
            if unstable is not None:
                meta["pop.format_unstable"] = str(bool(unstable)).lower()
        graph = self.attr(compilation, "graph", "compilation.graph")
        if graph is not None:
            for key, name in (
                ("numVertices", "graph.num_vertices"),
                ("numComputeSets", "graph.num_compute_sets"),
            ):
                value = self.attr(graph, key, f"compilation.graph.{key}")
                if value is not None:
                    meta[name] = str(value)
        if self.debug is not None:
            meta["pop.debug_cbor"] = self.debug.name
        for file in _app_files(self.path):
            with contextlib.suppress(OSError, UnicodeDecodeError):
                meta[file.stem] = file.read_text("utf-8").strip()
        meta["pop.options"] = json.dumps(self.options)
        meta["pop.missing_attributes"] = json.dumps(self.missing)
        meta["pop.notes"] = json.dumps(self.notes)
        return meta


#: (flat ints, balances, program code per step, (name, type) per code, missing attributes)
_StepPart = tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str]], list[str]]


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges covering ``range(n)``."""
    bounds = np.linspace(0, n, max(1, parts) + 1).astype(int).tolist()
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if hi > lo] or [(0, n)]


def _idle_workers() -> int:
    """Processes worth using: a worker only pays off when a core is idle (it costs extra CPU)."""
    cores = os.cpu_count() or 1
    try:
        idle = cores - os.getloadavg()[0]
    except (OSError, AttributeError):  # no load average on this platform
        idle = cores - 1
    return max(1, min(MAX_WORKERS, cores, 1 + int(idle)))


def _steps_worker(path: str, lo: int, hi: int, spec: tuple[int, bool, bool]) -> _StepPart:
    """In a worker process: open the report with pva and read steps ``lo`` to ``hi``."""
    import pva

    report = pva.openReport(path)
    builder = _Builder(pva, report, Path(path), None, False)
    return builder.step_range(report.execution.steps, lo, hi, spec, lambda n=1: None)


def _merge_parts(
    parts: list[_StepPart], missing: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """Concatenate step ranges, renumbering each range's program codes into one table."""
    keys: dict[tuple[str, str], int] = {}
    codes = []
    for _, _, local, local_keys, part_missing in parts:
        remap = np.array([keys.setdefault(key, len(keys)) for key in local_keys], dtype=np.int32)
        codes.append(remap[local] if len(local) else local)
        for label in part_missing:
            if label not in missing:
                missing.append(label)
    if len(parts) == 1:
        return parts[0][0], parts[0][1], codes[0], list(keys)
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate(codes),
        list(keys),
    )


def _memory_categories(category: Any) -> list[str]:
    """The memory categories a ``tile.memory.category`` object exposes (each with ``.total``)."""
    names = []
    for name in dir(category):
        if name.startswith("_"):
            continue
        value = getattr(category, name, None)
        if value is not None and not callable(value) and hasattr(value, "total"):
            names.append(name)
    return names


def _variables_bytes(variables: Any) -> int:
    """Bytes of an operation's ``vars``: the sum of their ``bytes`` (or ``size``), or ``_MISSING_INT``
    when the list is absent or any entry carries no size (never a made-up 0)."""
    if variables is None:
        return _MISSING_INT
    total = 0
    for variable in variables:
        value = getattr(variable, "bytes", None)
        if value is None:
            value = getattr(variable, "size", None)
        if value is None:
            return _MISSING_INT
        total += int(value)
    return total


def _check_target(
    path: Path, num_ipus: Any, tiles_per_ipu: Any, num_tiles: Any, bytes_per_tile: Any, clock: Any
) -> None:
    """Refuse (one line) a target whose figures are outside physical ranges."""
    problems = []
    if not 1 <= int(tiles_per_ipu) <= MAX_TILES_PER_IPU:
        problems.append(f"{tiles_per_ipu} tiles per IPU")
    if num_ipus is not None and int(num_ipus) * int(tiles_per_ipu) != int(num_tiles):
        problems.append(f"{num_tiles} tiles for {num_ipus} IPUs of {tiles_per_ipu} tiles")
    if bytes_per_tile is not None and not 0 < int(bytes_per_tile) <= MAX_BYTES_PER_TILE:
        problems.append(f"{bytes_per_tile} bytes per tile")
    if clock is not None and not CLOCK_RANGE_HZ[0] <= float(clock) <= CLOCK_RANGE_HZ[1]:
        problems.append(f"a clock of {clock} Hz (pva gives Hz, e.g. 1330000000.0)")
    if problems:
        raise InputError(
            path,
            "the profile's target is outside physical ranges: " + "; ".join(problems),
            "the profile is corrupt or not from an IPU",
        )


def _check_steps(path: Path, steps: pd.DataFrame) -> None:
    """Refuse (one line) execution figures outside physical ranges (negative cycles or bytes,
    tile balance outside 0..1)."""
    balance = steps["tile_balance"].to_numpy(dtype=np.float64)
    bad_balance = int(((balance < 0) | (balance > 1)).sum())
    negative = sum(
        int((steps[c] < 0).sum())
        for c in ("cycles", "active_from_cycles", "active_to_cycles", "data_in_bytes", "data_out_bytes")
    )
    if bad_balance or negative:
        parts = ([f"{plural(bad_balance, 'tile balance')} outside 0..1"] if bad_balance else []) + (
            [f"{plural(negative, 'negative cycle or byte count')}"] if negative else []
        )
        raise InputError(
            path, "execution figures outside physical ranges: " + "; ".join(parts), "the profile is corrupt"
        )


def _layer(value: object) -> str | None:
    """The ``"layer"`` of a debug context's layer JSON string (the raw text when it is not JSON)."""
    if value is None:
        return None
    text = str(value)
    try:
        parsed = json.loads(text)
    except ValueError:
        return text or None
    if isinstance(parsed, dict):
        layer = parsed.get("layer")
        return None if layer is None else str(layer)
    return str(parsed)


def _nullable(values: np.ndarray, dtype: str = "Int64") -> pd.api.extensions.ExtensionArray:
    """An integer column with the ``_MISSING_INT`` sentinel turned into missing values."""
    return pd.arrays.IntegerArray(values.astype(dtype.lower(), copy=False), values == _MISSING_INT)


def _app_files(path: Path) -> list[Path]:
    found: list[Path] = []
    for directory in (path.parent, path.parent.parent):
        for name in _APP_FILES:
            file = directory / name
            if file.is_file() and not any(f.name == name for f in found):
                found.append(file)
    return found


__all__: list[str] = ["FORMAT", "find_debug_cbor", "read", "sniff"]
