"""The pva test double (report side) keeps to the reference facts: documented names only, real list behaviour."""

from __future__ import annotations

import pytest
from pop_helpers import report_store

from popprof.synth import make_profile

# Public attribute names the reference facts (section 2) document, per object.
DOCUMENTED = {
    "report": {"poplarVersion", "version", "compilation", "execution"},
    "poplarVersion": {"string", "major", "minor", "point", "packageHash"},
    "version": {"major", "minor", "point", "isUnstableFormat"},
    "compilation": {"target", "graph", "tiles", "ipus", "computeSets", "programs", "alwaysLiveVariables",
                    "livenessProgramSteps", "loweredVariables"},
    "target": {"numIPUs", "numTiles", "tilesPerIpu", "bytesPerTile", "bytesPerIPU", "totalMemory",
               "clockFrequency", "numReplicas", "ipusPerReplica", "tilesPerReplica", "memoryPerReplica", "type",
               "architecture"},
    "memory": {"total", "overflowed", "alwaysLiveBytes", "notAlwaysLiveBytes", "category"},
    "program": {"name", "type", "children", "vars", "codeBytesByTile", "controlCodeByTile",
                "estimatedCyclesByTile", "computeset", "accept"},
    "liveness_step": {"program", "notAlwaysLiveMemory", "notAlwaysLiveMemoryForTile", "notAlwaysLiveMemoryForIpu"},
    "execution": {"totalCycles", "runs", "steps"},
    "run": {"name", "steps", "microseconds"},
    "step": {"program", "cyclesByTile", "computeSets", "ipus"},
    "step_ipu": {"cycles", "activeCycles", "tileBalance", "activeTileBalance", "dataIn", "dataOut"},
    "operation": {"name", "programs", "vars", "firstStepIndex", "lastStepIndex", "debugContext",
                  "replacedDebugContext"},
    "debugContext": {"id", "json", "layer", "parents", "location"},
    "graph": {"numComputeSets", "numVertices"},
    "tile": {"memory"},
    "ipu": {"tiles"},
    "category_total": {"total"},
    "always_live_variable": {"name", "size"},
    "not_always_live_memory": {"bytes", "variables"},
    "liveness_variable": {"name", "size"},
    "total_cycles": {"total"},
    "microseconds": {"start", "end"},
    "location": {"fileName", "lineNumber"},
    "compute_set": {"name", "cyclesByTile", "estimatedCyclesByTile"},
}


def public(obj) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("double")
    profile = make_profile(name="d", num_ipus=2, num_steps=50, num_programs=60, num_liveness_steps=40, seed=3)
    store = report_store()
    store.write_pop(profile, root / "profile.pop")
    store.write_pop(profile, root / "old" / "profile.pop", older_sdk=True)
    store.write_debug([profile], root / "debug.cbor")
    return profile, root


def test_only_documented_attributes(pva_double, stored):
    _, root = stored
    report = pva_double.openReport(str(root / "profile.pop"), str(root / "debug.cbor"))
    c = report.compilation
    step = report.execution.steps[3]
    ls = c.livenessProgramSteps[2]
    op = pva_double.OperationAnalysis(report).operations[0]
    objects = {"report": report, "poplarVersion": report.poplarVersion, "version": report.version,
               "compilation": c, "target": c.target, "memory": c.tiles[7].memory, "program": c.programs[0],
               "liveness_step": ls, "execution": report.execution, "run": report.execution.runs[0], "step": step,
               "step_ipu": step.ipus[1], "operation": op, "debugContext": op.debugContext}
    memory = c.tiles[7].memory
    category = memory.category
    live = next(s.notAlwaysLiveMemory for s in c.livenessProgramSteps if len(s.notAlwaysLiveMemory.variables))
    compute_step = next(s for s in report.execution.steps if s.program.type == "OnTileExecute")
    objects.update({
        "graph": c.graph, "tile": c.tiles[7], "ipu": c.ipus[1],
        **{f"category {n}": getattr(category, n) for n in public(category)},
        "always_live_variable": c.alwaysLiveVariables[0], "not_always_live_memory": live,
        "liveness_variable": live.variables[0], "total_cycles": report.execution.totalCycles,
        "microseconds": report.execution.runs[0].microseconds, "location": op.debugContext.location,
        "compute_set": compute_step.computeSets[0]})
    assert len(public(category)) == 10
    for name, obj in objects.items():
        name = "category_total" if name.startswith("category ") else name
        assert public(obj) <= DOCUMENTED[name], (name, public(obj) - DOCUMENTED[name])
    assert public(step.ipus[0].activeCycles) == {"cyclesFrom", "cyclesTo"}
    assert public(step.ipus[0].activeCycles.cyclesFrom) == {"max"}
    assert public(c.tiles[0].memory.total) == {"includingGaps", "excludingGaps"}


def test_lists_are_indexable_iterable_and_sized(pva_double, stored):
    profile, root = stored
    report = pva_double.openReport(str(root / "profile.pop"))
    tiles = report.compilation.tiles
    assert len(tiles) == 2 * 1472
    assert tiles[-1].memory.total.includingGaps == profile.tiles["bytes_incl_gaps"].iloc[-1]
    with pytest.raises(IndexError):
        _ = tiles[len(tiles)]
    assert sum(1 for _ in report.execution.steps) == 50
    assert [len(run.steps) for run in report.execution.runs] == profile.runs.shape[0] * [25]
    ipu1 = report.compilation.ipus[1].tiles
    assert len(ipu1) == 1472
    assert ipu1[0].memory.total.excludingGaps == profile.tiles["bytes_excl_gaps"].iloc[1472]
    ls = report.compilation.livenessProgramSteps[5]
    per_ipu = ls.notAlwaysLiveMemoryForIpu(0).bytes + ls.notAlwaysLiveMemoryForIpu(1).bytes
    assert per_ipu <= ls.notAlwaysLiveMemory.bytes
    assert ls.notAlwaysLiveMemoryForTile(3).bytes >= 0


def test_visitor_dispatches_on_program_type(pva_double, stored):
    _, root = stored
    report = pva_double.openReport(str(root / "profile.pop"))

    class Counter(pva_double.ProgramVisitor):
        def __init__(self):
            super().__init__()
            self.seen = []

        def visitOnTileExecute(self, program):  # noqa: N802
            self.seen.append(program.type)

        def visitDoExchange(self, program):  # noqa: N802
            self.seen.append(program.type)

    visitor = Counter()
    types = []
    for step in report.execution.steps:
        step.program.accept(visitor)
        types.append(step.program.type)
    assert visitor.seen == [t for t in types if t in ("OnTileExecute", "DoExchange")]


def test_variants(pva_double, stored):
    _, root = stored
    old = pva_double.openReport(str(root / "old" / "profile.pop"))
    assert not hasattr(old.poplarVersion, "packageHash")
    assert not hasattr(old.compilation.tiles[0].memory, "overflowed")
    assert not hasattr(old.execution.steps[0].ipus[0], "activeCycles")
    assert not hasattr(old.execution.steps[0].ipus[0], "tileBalance")
    plain = pva_double.openReport(str(root / "profile.pop"))
    assert len(pva_double.OperationAnalysis(plain).operations) == 0  # no debug info given


def test_storage_is_not_sqlite_and_bad_files_raise(pva_double, stored, tmp_path):
    _, root = stored
    assert not (root / "profile.pop").read_bytes().startswith(b"SQLite format 3\x00")
    bad = tmp_path / "profile.pop"
    bad.write_bytes(b"garbage")
    with pytest.raises(RuntimeError):
        pva_double.openReport(str(bad))
