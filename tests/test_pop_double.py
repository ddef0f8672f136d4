"""The pva test double (report side) provides only what its cited list (tests/pva_double/evidence.py) names."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from pop_helpers import PVA_DOUBLE, report_store

from popprof.testing.synth import make_profile


def evidence():
    spec = importlib.util.spec_from_file_location("pva_double_evidence", PVA_DOUBLE / "evidence.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public(obj) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("double")
    profile = make_profile(name="d", num_ipus=2, num_steps=50, num_programs=60, num_liveness_steps=40, seed=3)
    store = report_store()
    store.write_pop(profile, root / "profile.pop")
    store.write_pop(profile, root / "old" / "profile.pop", unknown_shape=True)
    store.write_debug([profile], root / "debug.cbor")
    return profile, root


def _walk_public(obj, seen, depth=0, out=None):
    """Every public attribute name reachable from ``obj`` (objects, lists' first items, enum members)."""
    out = set() if out is None else out
    if (
        depth > 8
        or id(obj) in seen
        or isinstance(obj, (int, float, str, bytes, type(None), np.ndarray, np.generic))
    ):
        return out
    seen.add(id(obj))
    if hasattr(obj, "__len__") and hasattr(obj, "__getitem__") and not isinstance(obj, dict):
        if len(obj):
            _walk_public(obj[0], seen, depth + 1, out)
        return out
    for name in public(obj):
        if type(obj).__module__ == "numpy" or name in ("accept", "programs", "children"):
            out.add(name)
            continue
        out.add(name)
        value = getattr(obj, name)
        if callable(value) and not hasattr(value, "__len__"):
            continue
        _walk_public(value, seen, depth + 1, out)
    return out


def test_double_exposes_only_cited_attributes(pva_double, stored):
    _, root = stored
    report = pva_double.openReport(str(root / "profile.pop"), str(root / "debug.cbor"))
    op = pva_double.OperationAnalysis(report).operations[3]
    names = _walk_public(report, set())
    for obj in (
        op,
        op.debugContext,
        op.debugContext.parents[0] if op.debugContext.parents else op,
        report.compilation.livenessProgramSteps[2].notAlwaysLiveMemoryForIpu(0),
        report.execution.steps[0].computeSets,
        report.compilation.programs[0].children,
    ):
        names |= _walk_public(obj, set())
    names |= {
        n
        for n in dir(pva_double)
        if not n.startswith("_") and n[0].isupper() or n == "openTrace" or n == "openReport"
    } - {"ARCH_ENUM", "FRAMEWORK_LAYERS"}
    cited = evidence().cited_names()
    assert names - cited == set(), names - cited
    assert {"replacedDebugContext", "parents", "numReplicas", "totalCycles"} <= names


def test_enums_are_pybind11_like(pva_double, stored):
    _, root = stored
    report = pva_double.openReport(str(root / "profile.pop"))
    target = report.compilation.target
    assert target.type is pva_double.Target.Type.Ipu
    assert target.architecture is pva_double.IPU.Architecture.Ipu2
    assert target.architecture.name == "Ipu2" and str(target.architecture) == "Architecture.Ipu2"
    assert not isinstance(target.type, str)
    types = {step.program.type for step in report.execution.steps}
    assert pva_double.Program.Type.OnTileExecute in types
    assert all(isinstance(t.name, str) and repr(t).startswith("<Type.") for t in types)


def test_execution_is_always_present(pva_double, tmp_path):
    profile = make_profile(name="n", execution=False, num_programs=40, num_liveness_steps=20, seed=1)
    report_store().write_pop(profile, tmp_path / "profile.pop")
    report = pva_double.openReport(str(tmp_path / "profile.pop"))
    assert report.execution.totalCycles.total == 0
    assert len(report.execution.steps) == 0 and len(report.execution.runs) == 0


def test_openreport_overloads(pva_double, stored):
    _, root = stored
    with pytest.raises(TypeError):
        pva_double.openReport(str(root / "profile.pop"), str(root / "debug.cbor"), "extra")


def test_operations_walk_parents_to_the_framework_context(pva_double, stored):
    profile, root = stored
    report = pva_double.OperationAnalysis(
        pva_double.openReport(str(root / "profile.pop"), str(root / "debug.cbor"))
    )
    ops = list(report.operations)
    replaced = [op for op in ops if len(op.replacedDebugContext)]
    assert replaced and len(replaced) < len(ops)
    for op in ops:
        assert all(not hasattr(v, "bytes") and not hasattr(v, "size") for v in op.vars)
        ctx = op.replacedDebugContext[0] if len(op.replacedDebugContext) else op.debugContext
        layer = json.loads(ctx.layer)["layer"]
        if ctx.parents:
            assert layer == "poplibs"
            assert json.loads(ctx.parents[0].layer)["layer"] in ("popart", "poptorch", "onnx")


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
    assert [t.name for t in visitor.seen] == [
        t.name for t in types if t.name in ("OnTileExecute", "DoExchange")
    ]


def test_unknown_shape_variant(pva_double, stored):
    _, root = stored
    odd = pva_double.openReport(str(root / "old" / "profile.pop"))
    assert odd.poplarVersion.packageHash  # documented from SDK 2.0 on: never dropped
    assert not hasattr(odd.compilation.tiles[0].memory, "overflowed")
    assert not hasattr(odd.execution.steps[0].ipus[0], "activeCycles")
    assert not hasattr(odd.execution.steps[0].ipus[0], "tileBalance")
    plain = pva_double.openReport(str(root / "profile.pop"))
    assert len(pva_double.OperationAnalysis(plain).operations) == 0  # no debug info given


def test_every_assumption_is_labelled_in_the_readme():
    readme = (PVA_DOUBLE / "README.md").read_text("utf-8")
    for name, (status, _) in evidence().CITED.items():
        assert f"`{name}`" in readme, name
        if status == evidence().ASSUMED:
            line = next(x for x in readme.splitlines() if f"`{name}`" in x and "|" in x)
            assert "assumption" in line, name


def test_storage_is_not_sqlite_and_bad_files_raise(pva_double, stored, tmp_path):
    _, root = stored
    assert not (root / "profile.pop").read_bytes().startswith(b"SQLite format 3\x00")
    bad = tmp_path / "profile.pop"
    bad.write_bytes(b"garbage")
    with pytest.raises(RuntimeError):
        pva_double.openReport(str(bad))
