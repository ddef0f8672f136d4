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


class Program:
    """A program: ``name``, ``type``, ``children``, ``vars``, ``codeBytesByTile``, ``accept(visitor)``."""

    def __init__(self, report: _Report, index: int) -> None:
        store = report._store
        self._report = report
        self._index = index
        self.name = store.values("program_name")[index]
        self.type = store.values("program_type")[index]

    @property
    def children(self) -> list[Program]:
        # The double gives control programs (Sequence, Repeat) the next few programs as children.
        if self.type not in ("Sequence", "Repeat"):
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
        out[first:first + spread] = total // spread
        out[first] += total - (total // spread) * spread
        return out

    def accept(self, visitor: ProgramVisitor) -> None:
        """Call ``visitor.visit<Type>(self)`` when the visitor defines it."""
        method = getattr(visitor, "visit" + str(self.type), None)
        if method is not None:
            method(self)


class ProgramVisitor:
    """Base class for program visitors: override ``visitOnTileExecute(p)`` and friends."""

    def __init__(self) -> None:
        pass

    def visitOnTileExecute(self, program: Program) -> None:  # noqa: N802 - pva's names
        pass

    def visitDoExchange(self, program: Program) -> None:  # noqa: N802
        pass

    def visitGlobalExchange(self, program: Program) -> None:  # noqa: N802
        pass

    def visitStreamCopyBegin(self, program: Program) -> None:  # noqa: N802
        pass

    def visitStreamCopyMid(self, program: Program) -> None:  # noqa: N802
        pass

    def visitStreamCopyEnd(self, program: Program) -> None:  # noqa: N802
        pass


class _Tiles:
    """Per-tile memory: builds ``tile.memory`` objects from the stored arrays."""

    def __init__(self, store: _Store) -> None:
        self.store = store
        self.older = store.header["older_sdk"]
        self.categories = store.header["memory_categories"]

    def tile(self, t: int) -> _Obj:
        v = self.store.values
        total = _Obj(includingGaps=v("tile_incl")[t], excludingGaps=v("tile_excl")[t])
        row = v("tile_category")[t] if self.categories else []
        category = _Obj(**{name: _Obj(total=value) for name, value in zip(self.categories, row, strict=True)})
        memory = _Obj(total=total, alwaysLiveBytes=v("tile_always_live")[t],
                      notAlwaysLiveBytes=v("tile_not_always_live")[t], category=category)
        if not self.older:
            memory.overflowed = _Obj(includingGaps=v("tile_over_incl")[t], excludingGaps=v("tile_over_excl")[t])
        return _Obj(memory=memory)


class _LivenessStep:
    """One liveness program step."""

    def __init__(self, report: _Report, index: int) -> None:
        self._report = report
        self._index = index

    @property
    def program(self) -> Program | None:
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
        return _Obj(bytes=int(self._tile_bytes()[ipu * per_ipu:(ipu + 1) * per_ipu].sum()), variables=[])


class _Compilation:
    def __init__(self, report: _Report) -> None:
        store = report._store
        header = store.header
        t = header["target"]
        self.target = _Obj(
            numIPUs=t["numIPUs"], numTiles=t["numTiles"], tilesPerIpu=t["tilesPerIpu"],
            bytesPerTile=t["bytesPerTile"], bytesPerIPU=t["bytesPerTile"] * t["tilesPerIpu"],
            totalMemory=t["bytesPerTile"] * t["numTiles"], clockFrequency=t["clockFrequency"],
            numReplicas=t["numReplicas"], ipusPerReplica=t["ipusPerReplica"],
            tilesPerReplica=t["ipusPerReplica"] * t["tilesPerIpu"],
            memoryPerReplica=t["ipusPerReplica"] * t["tilesPerIpu"] * t["bytesPerTile"],
            type=t["type"], architecture=t["architecture"])
        num_programs = len(store.values("program_name"))
        self.graph = _Obj(numComputeSets=num_programs // 2, numVertices=num_programs * 40)
        tiles = _Tiles(store)
        self.tiles = _List(t["numTiles"], tiles.tile)
        per_ipu = t["tilesPerIpu"]
        self.ipus = _List(t["numIPUs"], lambda i: _Obj(tiles=_List(per_ipu, lambda k, i=i: tiles.tile(i * per_ipu + k))))
        program_cache: dict[int, Program] = {}

        def program(i: int) -> Program:
            if i not in program_cache:
                program_cache[i] = Program(report, i)
            return program_cache[i]

        self.programs = _List(num_programs, program)
        names, sizes = store.values("alv_name"), store.values("alv_size")
        self.alwaysLiveVariables = _List(len(names), lambda i: _Obj(name=names[i], size=sizes[i]))
        live = store.array("live_bytes")
        self.livenessProgramSteps = _List(0 if live is None else len(live), lambda i: _LivenessStep(report, i))


# -- execution -------------------------------------------------------------------------------------


def _step_ipu_old(cycles: int, data_in: int, data_out: int) -> SimpleNamespace:
    """A step on one IPU as older SDKs expose it (no activeCycles, no tile balance)."""
    return SimpleNamespace(cycles=cycles, dataIn=data_in, dataOut=data_out)


def _step_ipu(cycles: int, data_in: int, data_out: int, cycles_from: int, cycles_to: int, balance: float,
              active_balance: float) -> SimpleNamespace:
    """A step on one IPU: cycles, activeCycles.cyclesFrom/To.max, tileBalance, activeTileBalance, dataIn/Out."""
    return SimpleNamespace(cycles=cycles, dataIn=data_in, dataOut=data_out, tileBalance=balance,
                           activeTileBalance=active_balance,
                           activeCycles=SimpleNamespace(cyclesFrom=SimpleNamespace(max=cycles_from),
                                                        cyclesTo=SimpleNamespace(max=cycles_to)))


class _Steps:
    """Materialises execution steps from the stored per-step x IPU arrays."""

    def __init__(self, report: _Report) -> None:
        store = report._store
        self.report = report
        self.store = store
        self.older = store.header["older_sdk"]
        self.program_of = store.values("step_program")
        self.cycles = store.array("step_cycles")
        # One int block and one float block per step, so materialising a step is two tolist() calls.
        self.ints = np.stack([self.cycles, store.array("step_data_in"), store.array("step_data_out"),
                              store.array("step_active_from"), store.array("step_active_to")], axis=1)
        self.floats = np.stack([store.array("step_tile_balance"), store.array("step_active_tile_balance")], axis=1)
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
    def program(self) -> Program:
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
        if program.type != "OnTileExecute":
            return []
        return [_Obj(name=program.name, cyclesByTile=self.cyclesByTile)]


class _Execution:
    def __init__(self, report: _Report) -> None:
        store = report._store
        self.totalCycles = _Obj(total=store.header["total_cycles"])
        steps = _Steps(report)
        self.steps = _List(len(steps.program_of), steps.step)
        counts = store.values("run_num_steps")
        starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
        names, start_us, end_us = store.values("run_name"), store.values("run_start_us"), store.values("run_end_us")

        def run(r: int) -> _Obj:
            first = starts[r]
            return _Obj(name=names[r], steps=_List(counts[r], lambda k: steps.step(first + k)),
                        microseconds=_Obj(start=start_us[r], end=end_us[r]))

        self.runs = _List(len(counts), run)


# -- the report ------------------------------------------------------------------------------------


class _Report:
    """What ``openReport`` returns."""

    def __init__(self, path: str, debug_path: str | None) -> None:
        self._store = _Store(path)
        header = self._store.header
        pv = dict(header["poplar_version"])
        if header["older_sdk"]:
            pv.pop("packageHash", None)
        self.poplarVersion = _Obj(**pv)
        self.version = _Obj(**header["format_version"])
        self.compilation = _Compilation(self)
        if header.get("has_execution"):
            self.execution = _Execution(self)
        self._operations = _load_debug(debug_path, header["engine"]) if debug_path else []


def _load_debug(path: str, engine: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RuntimeError(f"Unable to read debug information '{path}': {exc}") from None
    if not isinstance(data, dict) or data.get("format") != DEBUG_FORMAT:
        raise RuntimeError(f"Unable to read debug information '{path}': unknown format")
    return data.get("engines", {}).get(engine, [])


def openReport(profile_path: str, debug_cbor_path: str | None = None) -> _Report:  # noqa: N802
    """Open a report stored by the double; with ``debug_cbor_path``, debug information too."""
    return _Report(str(profile_path), None if debug_cbor_path is None else str(debug_cbor_path))


class _Operation:
    def __init__(self, report: _Report, record: dict) -> None:
        self._report = report
        self._record = record
        self.name = record["name"]
        self.firstStepIndex = record["firstStepIndex"]
        self.lastStepIndex = record["lastStepIndex"]
        self.vars = [_Obj(name=name, bytes=size, alwaysLive=False) for name, size in record["vars"]]
        self.debugContext = _Obj(
            id=record["id"], layer=record["layer"], parents=[],
            json=json.dumps({"name": record["name"], "layer": json.loads(record["layer"]).get("layer")}),
            location=_Obj(fileName=record["fileName"], lineNumber=record["lineNumber"]))
        self.replacedDebugContext = []

    def programs(self) -> list[Program]:
        """Programs of the liveness steps the operation spans."""
        steps = self._report.compilation.livenessProgramSteps
        first, last = self.firstStepIndex, self.lastStepIndex
        if first is None or last is None:
            return []
        seen: dict[int, Program] = {}
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
