"""The report side of the pva test double: ``openReport``, ``ProgramVisitor``, ``OperationAnalysis``.

Built strictly to section 2 of the reference facts: only documented attribute
names and nesting; lists are indexable, iterable and have ``len()``; methods
where the facts say methods (``accept``, ``programs()``,
``notAlwaysLiveMemoryForTile(t)``, ``notAlwaysLiveMemoryForIpu(i)``).

It reads the double's own storage (an ``.npz`` written by
``tests/pva_double/report_store.py``), NOT Poplar's ``profile.pop``. Objects are
lazy: a tile, step or liveness step is materialised from NumPy arrays only when
it is accessed, so a 16-IPU, 200,000-step report fits in memory as with libpva.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np

STORE_FORMAT = "pva-double-report"
DEBUG_FORMAT = "pva-double-debug"


class _List:
    """A lazy list: indexable (with negative indices), iterable, with ``len()``."""

    __slots__ = ("_n", "_make")

    def __init__(self, n: int, make: Callable[[int], Any]) -> None:
        self._n = n
        self._make = make

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> Any:
        if isinstance(index, slice):
            return [self._make(i) for i in range(*index.indices(self._n))]
        index = int(index)
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("list index out of range")
        return self._make(index)

    def __iter__(self) -> Iterator[Any]:
        return map(self._make, range(self._n))


class _Obj:
    """A plain attribute holder (documented attributes only are set)."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class _EnumValue:
    """One member of a pybind11-style enum: ``.name``, ``.value``, ``str()`` = ``"Type.OnTileExecute"``.

    pybind11 enums compare by identity with their class attributes (``pva.Program.Type.Sync``);
    ``repr()`` is ``<Type.Sync: 6>`` as on the libpva 3.x API pages.
    """

    __slots__ = ("name", "value", "_enum")

    def __init__(self, enum: str, name: str, value: int) -> None:
        self._enum = enum
        self.name = name
        self.value = value

    def __str__(self) -> str:
        return f"{self._enum}.{self.name}"

    def __repr__(self) -> str:
        return f"<{self._enum}.{self.name}: {self.value}>"

    def __int__(self) -> int:
        return self.value


class _Enum:
    """A pybind11-style enum class: members as attributes; ``member(name)`` for a stored name."""

    def __init__(self, enum: str, names: list[str]) -> None:
        self._enum = enum
        self._members: dict[str, _EnumValue] = {}
        for name in names:
            self.member(name)

    def member(self, name: str) -> _EnumValue:
        """The member called ``name`` (created for names the double's list lacks: an assumption)."""
        value = self._members.get(name)
        if value is None:
            value = self._members[name] = _EnumValue(self._enum, name, len(self._members))
            setattr(self, name, value)
        return value


class Program:  # noqa: F811 - the namespace pva exposes as pva.Program (Program.Type); see _Program
    """``pva.Program.Type``: program types seen in public code (popliner, pva_utils, profile.py)."""

    Type = _Enum(
        "Type",
        [
            "OnTileExecute",
            "DoExchange",
            "GlobalExchange",
            "StreamCopyBegin",
            "StreamCopyMid",
            "StreamCopyEnd",
            "Sync",
            "SyncAns",
            "Sans",
            "Repeat",
            "Sequence",
            "OnEveryTileSwitch",
        ],
    )


class Target:
    """``pva.Target.Type`` (ipu_tensorflow_addons profile.py maps exactly these four)."""

    Type = _Enum("Type", ["Ipu", "IpuModel", "Cpu", "Unknown"])


class IPU:
    """``pva.IPU.Architecture``: ``Ipu2`` is public (popart report_test.py); ``Ipu1``/``Ipu21`` are assumed."""

    Architecture = _Enum("Architecture", ["Ipu1", "Ipu2", "Ipu21"])


#: popprof's ipu_arch -> the double's architecture enum name (Ipu1 and Ipu21 are assumptions)
ARCH_ENUM = {"ipu1": "Ipu1", "ipu2": "Ipu2", "bow": "Ipu21"}


def _arch_name(stored: str) -> str:
    """The enum name for a stored architecture (popprof names are mapped; others kept as stored)."""
    return ARCH_ENUM.get(stored, stored)


def _unknown_shape(header: dict) -> bool:
    """Whether the stored report is the unknown-shape variant (``older_sdk`` in stores written before)."""
    return bool(header.get("unknown_shape", header.get("older_sdk", False)))


class _Store:
    """The arrays of one stored report, loaded on first use."""

    def __init__(self, path: str) -> None:
        try:
            self._npz = np.load(path, allow_pickle=False)
            self.header = json.loads(self._npz["header"].tobytes())
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
            raise RuntimeError(f"Unable to open report '{path}': {exc}") from None
        if not isinstance(self.header, dict) or self.header.get("format") != STORE_FORMAT:
            raise RuntimeError(f"Unable to open report '{path}': not a profile database")
        self._cache: dict[str, Any] = {}

    def array(self, key: str) -> np.ndarray | None:
        if key not in self._cache:
            self._cache[key] = self._npz[key] if key in self._npz.files else None
        return self._cache[key]

    def values(self, key: str) -> list:
        """The array as a Python list (cached), for cheap per-object access."""
        cache_key = key + ":list"
        if cache_key not in self._cache:
            array = self.array(key)
            self._cache[cache_key] = [] if array is None else array.tolist()
        return self._cache[cache_key]


# -- compilation ---------------------------------------------------------------------------------


class _Program:
    """A program: ``name``, ``type`` (a ``pva.Program.Type`` member), ``children``, ``vars``,
    ``codeBytesByTile``, ``accept(visitor)``."""

    def __init__(self, report: _Report, index: int) -> None:
        store = report._store
        self._report = report
        self._index = index
        self.name = store.values("program_name")[index]
        self.type = Program.Type.member(store.values("program_type")[index])

    @property
    def children(self) -> list[_Program]:
        # The double gives control programs (Sequence, Repeat) the next few programs as children.
        if self.type not in (Program.Type.Sequence, Program.Type.Repeat):
            return []
        programs = self._report.compilation.programs
        return [programs[i] for i in range(self._index + 1, min(self._index + 4, len(programs)))]

    @property
    def vars(self) -> list:
        return []

    @property
    def codeBytesByTile(self) -> np.ndarray:
        store = self._report._store
        num_tiles = store.header["target"]["numTiles"]
        total = store.values("program_code_bytes")[self._index]
        out = np.zeros(num_tiles, dtype=np.int64)
        spread = min(8, num_tiles)
        first = (self._index * 37) % (num_tiles - spread + 1)
        out[first : first + spread] = total // spread
        out[first] += total - (total // spread) * spread
        return out

    def accept(self, visitor: ProgramVisitor) -> None:
        """Call ``visitor.visit<Type>(self)`` when the visitor defines it."""
        method = getattr(visitor, "visit" + self.type.name, None)
        if method is not None:
            method(self)


class ProgramVisitor:
    """Base class for program visitors: override ``visitOnTileExecute(p)`` and friends."""

    def __init__(self) -> None:
        pass

    def visitOnTileExecute(self, program: _Program) -> None:  # noqa: N802 - pva's names
        pass

    def visitDoExchange(self, program: _Program) -> None:  # noqa: N802
        pass

    def visitGlobalExchange(self, program: _Program) -> None:  # noqa: N802
        pass

    def visitStreamCopyBegin(self, program: _Program) -> None:  # noqa: N802
        pass

    def visitStreamCopyMid(self, program: _Program) -> None:  # noqa: N802
        pass

    def visitStreamCopyEnd(self, program: _Program) -> None:  # noqa: N802
        pass


class _Tiles:
    """Per-tile memory: builds ``tile.memory`` objects from the stored arrays."""

    def __init__(self, store: _Store) -> None:
        self.store = store
        self.unknown_shape = _unknown_shape(store.header)
        self.categories = store.header["memory_categories"]

    def tile(self, t: int) -> _Obj:
        v = self.store.values
        total = _Obj(includingGaps=v("tile_incl")[t], excludingGaps=v("tile_excl")[t])
        row = v("tile_category")[t] if self.categories else []
        category = _Obj(**{name: _Obj(total=value) for name, value in zip(self.categories, row, strict=True)})
        memory = _Obj(
            total=total,
            alwaysLiveBytes=v("tile_always_live")[t],
            notAlwaysLiveBytes=v("tile_not_always_live")[t],
            category=category,
        )
        if not self.unknown_shape:
            memory.overflowed = _Obj(
                includingGaps=v("tile_over_incl")[t], excludingGaps=v("tile_over_excl")[t]
            )
        return _Obj(memory=memory)


class _LivenessStep:
    """One liveness program step."""

    def __init__(self, report: _Report, index: int) -> None:
        self._report = report
        self._index = index

    @property
    def program(self) -> _Program | None:
        pid = self._report._store.values("live_program")[self._index]
        return self._report.compilation.programs[pid] if pid >= 0 else None

    @property
    def notAlwaysLiveMemory(self) -> _Obj:  # noqa: N802
        store = self._report._store
        steps = store.array("livevar_step")
        variables: list[_Obj] = []
        if steps is not None:
            lo, hi = np.searchsorted(steps, [self._index, self._index + 1])
            names, sizes = store.values("livevar_name"), store.values("livevar_size")
            variables = [_Obj(name=names[k], size=sizes[k]) for k in range(lo, hi)]
        return _Obj(bytes=store.values("live_bytes")[self._index], variables=variables)

    def _tile_bytes(self) -> np.ndarray:
        store = self._report._store
        share = store.array("tile_not_always_live").astype(np.float64)
        share /= max(share.sum(), 1.0)
        return np.floor(share * store.values("live_bytes")[self._index]).astype(np.int64)

    def notAlwaysLiveMemoryForTile(self, tile: int) -> _Obj:  # noqa: N802
        """Not-always-live memory of this step on one tile (the double spreads it by tile share)."""
        return _Obj(bytes=int(self._tile_bytes()[tile]), variables=[])

    def notAlwaysLiveMemoryForIpu(self, ipu: int) -> _Obj:  # noqa: N802
        """Not-always-live memory of this step on one IPU."""
        per_ipu = self._report._store.header["target"]["tilesPerIpu"]
        return _Obj(bytes=int(self._tile_bytes()[ipu * per_ipu : (ipu + 1) * per_ipu].sum()), variables=[])


class _Compilation:
    def __init__(self, report: _Report) -> None:
        store = report._store
        header = store.header
        t = header["target"]
        self.target = _Obj(
            numIPUs=t["numIPUs"],
            numTiles=t["numTiles"],
            tilesPerIpu=t["tilesPerIpu"],
            bytesPerTile=t["bytesPerTile"],
            bytesPerIPU=t["bytesPerTile"] * t["tilesPerIpu"],
            totalMemory=t["bytesPerTile"] * t["numTiles"],
            clockFrequency=t["clockFrequency"],
            numReplicas=t["numReplicas"],
            ipusPerReplica=t["ipusPerReplica"],
            tilesPerReplica=t["ipusPerReplica"] * t["tilesPerIpu"],
            memoryPerReplica=t["ipusPerReplica"] * t["tilesPerIpu"] * t["bytesPerTile"],
            type=Target.Type.member(t["type"]),
            architecture=IPU.Architecture.member(_arch_name(t["architecture"])),
        )
        num_programs = len(store.values("program_name"))
        self.graph = _Obj(numComputeSets=num_programs // 2, numVertices=num_programs * 40)
        tiles = _Tiles(store)
        self.tiles = _List(t["numTiles"], tiles.tile)
        per_ipu = t["tilesPerIpu"]
        self.ipus = _List(
            t["numIPUs"], lambda i: _Obj(tiles=_List(per_ipu, lambda k, i=i: tiles.tile(i * per_ipu + k)))
        )
        program_cache: dict[int, _Program] = {}

        def program(i: int) -> _Program:
            if i not in program_cache:
                program_cache[i] = _Program(report, i)
            return program_cache[i]

        self.programs = _List(num_programs, program)
        names, sizes = store.values("alv_name"), store.values("alv_size")
        self.alwaysLiveVariables = _List(len(names), lambda i: _Obj(name=names[i], size=sizes[i]))
        live = store.array("live_bytes")
        self.livenessProgramSteps = _List(
            0 if live is None else len(live), lambda i: _LivenessStep(report, i)
        )


# -- execution -------------------------------------------------------------------------------------


def _step_ipu_old(cycles: int, data_in: int, data_out: int) -> SimpleNamespace:
    """A step on one IPU in the unknown-shape variant (no activeCycles, no tile balance)."""
    return SimpleNamespace(cycles=cycles, dataIn=data_in, dataOut=data_out)


def _step_ipu(
    cycles: int,
    data_in: int,
    data_out: int,
    cycles_from: int,
    cycles_to: int,
    balance: float,
    active_balance: float,
) -> SimpleNamespace:
    """A step on one IPU: cycles, activeCycles.cyclesFrom/To.max, tileBalance, activeTileBalance, dataIn/Out."""
    return SimpleNamespace(
        cycles=cycles,
        dataIn=data_in,
        dataOut=data_out,
        tileBalance=balance,
        activeTileBalance=active_balance,
        activeCycles=SimpleNamespace(
            cyclesFrom=SimpleNamespace(max=cycles_from), cyclesTo=SimpleNamespace(max=cycles_to)
        ),
    )


class _Steps:
    """Materialises execution steps from the stored per-step x IPU arrays."""

    def __init__(self, report: _Report) -> None:
        store = report._store
        self.report = report
        self.store = store
        self.older = _unknown_shape(store.header)
        self.program_of = store.values("step_program")
        if not self.program_of:  # execution profiling was off: no steps (execution itself still exists)
            return
        self.cycles = store.array("step_cycles")
        # One int block and one float block per step, so materialising a step is two tolist() calls.
        self.ints = np.stack(
            [
                self.cycles,
                store.array("step_data_in"),
                store.array("step_data_out"),
                store.array("step_active_from"),
                store.array("step_active_to"),
            ],
            axis=1,
        )
        self.floats = np.stack(
            [store.array("step_tile_balance"), store.array("step_active_tile_balance")], axis=1
        )
        self.programs = report.compilation.programs

    def step(self, i: int) -> _Step:
        return _Step(self, i)

    def ipus(self, i: int) -> list:
        cycles, din, dout, cfrom, cto = self.ints[i].tolist()
        if self.older:
            return list(map(_step_ipu_old, cycles, din, dout))
        balance, active_balance = self.floats[i].tolist()
        return list(map(_step_ipu, cycles, din, dout, cfrom, cto, balance, active_balance))

    def cycles_by_tile(self, i: int) -> np.ndarray:
        store = self.store
        per_ipu = store.header["target"]["tilesPerIpu"]
        weight = store.array("tile_cycle_weight")
        return np.floor(np.repeat(self.cycles[i], per_ipu) * weight).astype(np.int64)


class _Step:
    """One execution step: ``program``, ``cyclesByTile``, ``computeSets``, ``ipus``."""

    __slots__ = ("_steps", "_index")

    def __init__(self, steps: _Steps, index: int) -> None:
        self._steps = steps
        self._index = index

    @property
    def program(self) -> _Program:
        return self._steps.programs[self._steps.program_of[self._index]]

    @property
    def ipus(self) -> list:
        return self._steps.ipus(self._index)

    @property
    def cyclesByTile(self) -> np.ndarray:  # noqa: N802
        return self._steps.cycles_by_tile(self._index)

    @property
    def computeSets(self) -> list:  # noqa: N802
        program = self.program
        if program.type is not Program.Type.OnTileExecute:
            return []
        return [_Obj(name=program.name, cyclesByTile=self.cyclesByTile)]


class _Execution:
    def __init__(self, report: _Report) -> None:
        store = report._store
        # popart tests/integration/saved_executable.py: totalCycles.total == 0 without an execution profile
        self.totalCycles = _Obj(total=store.header.get("total_cycles", 0))
        steps = _Steps(report)
        self.steps = _List(len(steps.program_of), steps.step)
        counts = store.values("run_num_steps")
        starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
        names, start_us, end_us = (
            store.values("run_name"),
            store.values("run_start_us"),
            store.values("run_end_us"),
        )

        def run(r: int) -> _Obj:
            first = starts[r]
            return _Obj(
                name=names[r],
                steps=_List(counts[r], lambda k: steps.step(first + k)),
                microseconds=_Obj(start=start_us[r], end=end_us[r]),
            )

        self.runs = _List(len(counts), run)


# -- the report ------------------------------------------------------------------------------------


class _Report:
    """What ``openReport`` returns."""

    def __init__(self, path: str, debug_path: str | None) -> None:
        self._store = _Store(path)
        header = self._store.header
        # packageHash is documented from SDK 2.0 on (poplar-api 2.0.0 pva-python page): always present.
        self.poplarVersion = _Obj(**header["poplar_version"])
        self.version = _Obj(**header["format_version"])
        self.compilation = _Compilation(self)
        # Real pva always has `execution`; without an execution profile it has no steps and
        # totalCycles.total == 0 (popart tests/integration/saved_executable.py).
        self.execution = _Execution(self)
        self._operations, self._var_bytes = (
            _load_debug(debug_path, header["engine"]) if debug_path else ([], False)
        )


def _load_debug(path: str, engine: str) -> tuple[list[dict], bool]:
    """The stored operations of ``engine`` and whether the unknown-shape ``bytes`` on op.vars is on."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RuntimeError(f"Unable to read debug information '{path}': {exc}") from None
    if not isinstance(data, dict) or data.get("format") != DEBUG_FORMAT:
        raise RuntimeError(f"Unable to read debug information '{path}': unknown format")
    return data.get("engines", {}).get(engine, []), bool(data.get("unknown_shape_var_bytes", False))


def openReport(*args: str) -> _Report:  # noqa: N802 - pva's name
    """``openReport(filename)`` or ``openReport(profileFilename, debugInfoFilename)`` (libpva 3.x overloads).

    Like pybind11, any other argument count raises TypeError.
    """
    if len(args) not in (1, 2):
        raise TypeError("openReport(): incompatible function arguments")
    return _Report(str(args[0]), None if len(args) == 1 else str(args[1]))


#: Layers the double treats as a framework's (the layer public code walks ``parents`` to find).
FRAMEWORK_LAYERS = ("poptorch", "popart", "onnx", "tensorflow")


def _context(
    cid: int, layer: str | None, name: str, file: str | None, line: int | None, parents: list
) -> _Obj:
    """A debug context: ``id``, ``layer`` and ``json`` (JSON strings), ``parents``, ``location``."""
    return _Obj(
        id=cid,
        layer=json.dumps({"layer": layer}),
        parents=parents,
        json=json.dumps({"name": name, "layer": layer}),
        location=_Obj(fileName=file or "", lineNumber=line or 0),
    )


class _Operation:
    """One operation of ``OperationAnalysis``.

    As in graphcore/poptorch tests/precompilation_test.py, the framework's context (layer
    ``poptorch``/``popart``/...) holding the source location is reached from the operation's
    context by walking ``parents``; the context the operation points to is a ``poplibs`` one.
    Operations stored with ``replaced`` have a ``replacedDebugContext`` (the framework chain)
    while ``debugContext`` is an outlined ``Call`` context elsewhere.
    """

    def __init__(self, report: _Report, record: dict) -> None:
        self._report = report
        self.name = record["name"]
        self.firstStepIndex = record["firstStepIndex"]
        self.lastStepIndex = record["lastStepIndex"]
        base = record["id"] * 4
        # popliner reads op.vars entries by their id (var._id); no public code reads a size from them.
        if report._var_bytes:  # unknown-shape variant: entries carrying byte sizes
            self.vars = [
                _Obj(_id=base + k, name=name, bytes=size) for k, (name, size) in enumerate(record["vars"])
            ]
        else:
            self.vars = [_Obj(_id=base + k) for k in range(len(record["vars"]))]
        layer = json.loads(record["layer"]).get("layer")
        file, line = record["fileName"], record["lineNumber"]
        if layer in FRAMEWORK_LAYERS:
            framework = _context(base + 1, layer, record["name"], file, line, [])
            chain = _context(base + 2, "poplibs", record["name"] + "/poplibs", "", 0, [framework])
        else:
            chain = _context(base + 2, layer, record["name"], file, line, [])
        if record.get("replaced"):
            self.replacedDebugContext = [chain]
            self.debugContext = _context(base + 3, "popart", "Call", "outlined.py", 1, [])
        else:
            self.replacedDebugContext = []
            self.debugContext = chain

    def programs(self) -> list[_Program]:
        """Programs of the liveness steps the operation spans."""
        steps = self._report.compilation.livenessProgramSteps
        first, last = self.firstStepIndex, self.lastStepIndex
        if first is None or last is None:
            return []
        seen: dict[int, _Program] = {}
        for i in range(max(first, 0), min(last + 1, len(steps))):
            program = steps[i].program
            if program is not None:
                seen.setdefault(id(program), program)
        return list(seen.values())


class OperationAnalysis:
    """``OperationAnalysis(report).operations``: empty unless the report was opened with debug info."""

    def __init__(self, report: _Report) -> None:
        records = report._operations
        self.operations = _List(len(records), lambda i: _Operation(report, records[i]))
