"""The profile.pop reader against the pva test double: values equal the synth profile they were written from."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys

import numpy as np
import pandas as pd
import pytest
from pop_helpers import assert_table_equal, report_store

import popprof
from popprof.model.errors import InputError, MissingTableError, SdkMissingError
from popprof.model.schema import conform
from popprof.readers import detect, pop
from popprof.testing.synth import make_profile

SMALL = {"num_steps": 240, "num_programs": 120, "num_liveness_steps": 150, "num_variables": 60}
#: Read everything, including the opt-in per-program code bytes and every step's variable list.
FULL = {"code_bytes": True, "liveness_variables": "all"}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Synth profiles and the double's profile.pop files written from them, by variant."""
    root = tmp_path_factory.mktemp("pop")
    store = report_store()
    variants = {
        "single": make_profile(name="single", seed=1, **SMALL),
        "multi": make_profile(name="multi", num_ipus=4, host_stall=(0.2, 0.3), seed=2, **SMALL),
        "noexec": make_profile(name="noexec", arch="ipu1", execution=False, seed=3, **SMALL),
        "odd": make_profile(name="odd", seed=4, **SMALL),
    }
    for name in ("single", "multi"):  # synth sends as much as it receives; make them differ
        steps = variants[name].steps.copy()
        steps["data_out_bytes"] = steps["data_in_bytes"] * 3 // 4
        variants[name].set_table("steps", steps)
    paths = {}
    for name, profile in variants.items():
        path = root / name / "profile.pop"
        store.write_pop(profile, path, unknown_shape=(name == "odd"))
        paths[name] = path
    store.write_debug([variants["single"]], root / "single" / "debug.cbor")
    store.write_debug([variants["multi"]], root / "debug.cbor")  # run-directory root: the parent
    return variants, paths


def _compare_all(read: popprof.Profile, expected: popprof.Profile, skip_steps: tuple[str, ...] = ()) -> None:
    assert_table_equal(read.target, expected.target, skip=("source_format",))
    assert read.target_value("source_format") == "pop"
    assert_table_equal(read.tiles, expected.tiles)
    assert_table_equal(read.tile_memory, expected.tile_memory, sort=["tile", "category"])
    assert_table_equal(read.programs, expected.programs)
    assert_table_equal(read.variables, expected.variables)
    assert_table_equal(read.liveness, expected.liveness)
    assert_table_equal(read.liveness_variables, expected.liveness_variables, sort=["step", "bytes", "name"])
    if expected.has("steps"):
        assert_table_equal(read.runs, expected.runs)
        assert_table_equal(read.steps, expected.steps, skip=skip_steps)


def test_single_ipu_tables_equal_the_profile_written(pva_double, written):
    variants, paths = written
    profile = pop.read(paths["single"], **FULL)
    _compare_all(profile, variants["single"])
    assert_table_equal(profile.operations, variants["single"].operations, skip=("bytes",))
    assert profile.operations["bytes"].isna().all()  # op.vars entries carry no size: missing, never 0
    meta = profile.meta
    assert json.loads(meta["pop.missing_attributes"]) == []
    assert meta["pop.poplar_package_hash"] == "de1f8de2a7"
    assert meta["pop.debug_cbor"] == "debug.cbor"
    sources = json.loads(meta["source_files"])
    assert [s["name"] for s in sources] == ["profile.pop", "debug.cbor"]
    assert sources[0]["sha256"] == hashlib.sha256(paths["single"].read_bytes()).hexdigest()
    assert profile.name == "single"


def test_multi_ipu_target_and_steps(pva_double, written):
    variants, paths = written
    profile = pop.read(paths["multi"], **FULL)
    _compare_all(profile, variants["multi"])
    assert profile.target_value("num_ipus") == 4
    assert profile.target_value("num_tiles") == 4 * 1472
    assert profile.tiles.groupby("ipu").size().tolist() == [1472] * 4
    steps = profile.steps
    assert steps.groupby("step").size().eq(4).all()
    assert "global_exchange" in set(steps["category"].astype(str))
    # runs come from runs[r].steps membership: each run's steps are contiguous and complete
    per_run = steps.groupby("run")["step"].agg(["min", "max", "nunique"])
    assert per_run["nunique"].sum() == SMALL["num_steps"]
    assert (per_run["max"].to_numpy()[:-1] < per_run["min"].to_numpy()[1:]).all()


def test_debug_cbor_found_in_parent_run_directory(pva_double, written):
    variants, paths = written
    profile = pop.read(paths["multi"])  # debug.cbor sits one level up
    assert_table_equal(profile.operations, variants["multi"].operations, skip=("bytes",))
    assert set(profile.operations["layer"].astype(str)) <= {"popart", "poptorch", "poplibs", "onnx"}


def test_no_debug_information_means_no_operations(pva_double, written):
    _, paths = written
    profile = pop.read(paths["single"], debug_cbor=False)
    assert "operations" not in profile
    with pytest.raises(MissingTableError, match="debug"):
        _ = profile.operations


def test_explicit_missing_debug_path_is_input_error(pva_double, written):
    _, paths = written
    with pytest.raises(InputError, match="debug"):
        pop.read(paths["single"], debug_cbor=paths["single"].parent / "nope.cbor")


def test_no_execution_section(pva_double, written):
    variants, paths = written
    profile = pop.read(paths["noexec"], debug_cbor=False, **FULL)
    _compare_all(profile, variants["noexec"])
    assert not profile.has("steps") and not profile.has("runs")
    with pytest.raises(MissingTableError, match="execution profile"):
        _ = profile.steps
    assert profile.target_value("ipu_arch") == "ipu1"
    assert profile.target_value("tiles_per_ipu") == 1216
    # pva always has `execution`: "no profile" is decided from totalCycles.total == 0 and no steps
    notes = json.loads(profile.meta["pop.notes"])
    assert any("execution.totalCycles.total is 0" in note for note in notes), notes
    assert "execution" not in json.loads(profile.meta["pop.missing_attributes"])


def test_unknown_shape_without_optional_attributes(pva_double, written):
    variants, paths = written
    profile = pop.read(paths["odd"])
    expected = variants["odd"]
    missing = json.loads(profile.meta["pop.missing_attributes"])
    assert set(missing) == {"tile.memory.overflowed", "step.ipus.activeCycles", "step.ipus.tileBalance"}
    assert profile.tiles["overflowed_bytes"].isna().all()
    assert_table_equal(profile.tiles, expected.tiles, skip=("overflowed_bytes",))
    steps = profile.steps
    assert steps["active_from_cycles"].isna().all() and steps["active_to_cycles"].isna().all()
    assert steps["tile_balance"].isna().all()
    assert_table_equal(steps, expected.steps, skip=("active_from_cycles", "active_to_cycles", "tile_balance"))
    assert profile.meta["pop.poplar_package_hash"] == "de1f8de2a7"  # SDK 2.0 already documents it


def test_liveness_variables_keep_the_largest_five(pva_double, tmp_path):
    base = make_profile(name="live", seed=5, execution=False, debug=False, **SMALL)
    rng = np.random.default_rng(0)
    n = SMALL["num_liveness_steps"]
    many = pd.DataFrame(
        {
            "step": np.repeat(np.arange(n), 8).astype(np.int32),
            "name": [f"act_{s}_{j}" for s in range(n) for j in range(8)],
            "bytes": rng.integers(1, 10_000_000, n * 8),
        }
    )
    base.set_table("liveness_variables", many)
    report_store().write_pop(base, tmp_path / "profile.pop")
    profile = pop.read(tmp_path / "profile.pop", liveness_variables="all")
    got = profile.liveness_variables
    assert got.groupby("step").size().eq(5).all()
    expected = many.sort_values(["step", "bytes"], ascending=[True, False]).groupby("step").head(5)
    assert_table_equal(got, conform("liveness_variables", expected), sort=["step", "bytes"])
    none = pop.read(tmp_path / "profile.pop", liveness_top=0)
    assert len(none.liveness_variables) == 0


def test_tile_cycles_are_opt_in_and_match_ipu_cycles(pva_double, tmp_path):
    base = make_profile(name="tc", num_ipus=2, seed=6, num_steps=30, num_programs=60, num_liveness_steps=40)
    report_store().write_pop(base, tmp_path / "profile.pop")
    assert "step_tile_cycles" not in pop.read(tmp_path / "profile.pop")
    profile = pop.read(tmp_path / "profile.pop", tile_cycles=True)
    cycles = profile.step_tile_cycles
    assert len(cycles) == 30 * 2 * 1472
    per_ipu_max = (
        cycles.assign(ipu=cycles["tile"] // 1472).groupby(["step", "ipu"])["cycles"].max().reset_index()
    )
    steps = profile.steps[["step", "ipu", "cycles"]].astype("int64")
    merged = per_ipu_max.merge(steps, on=["step", "ipu"], suffixes=("_tiles", "_ipu"))
    assert len(merged) == 60
    assert (merged["cycles_tiles"] == merged["cycles_ipu"]).all()


def test_opened_through_the_registry_by_content(pva_double, written):
    _, paths = written
    assert detect(paths["single"]) is pop
    profile = popprof.open(paths["single"])
    assert profile.source_format == "pop"


def test_sniff(tmp_path):
    pop_file = tmp_path / "x.pop"
    pop_file.write_bytes(b"anything")
    sqlite = tmp_path / "renamed.bin"
    sqlite.write_bytes(b"SQLite format 3\x00" + bytes(100))
    pvti = tmp_path / "trace.pvti"
    pvti.write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert pop.sniff(pop_file, pop_file.read_bytes())
    assert pop.sniff(sqlite, sqlite.read_bytes())
    assert not pop.sniff(pvti, pvti.read_bytes())
    assert not pop.sniff(tmp_path, b"")
    other = tmp_path / "notes.txt"
    other.write_text("Target:\n")
    assert not pop.sniff(other, b"Target:\n")


def test_pva_missing_raises_sdk_missing(monkeypatch, written):
    _, paths = written
    monkeypatch.setitem(sys.modules, "pva", None)  # makes `import pva` raise ImportError
    with pytest.raises(SdkMissingError) as info:
        popprof.open(paths["single"])
    text = str(info.value)
    assert str(paths["single"]) in text and "pva" in text and "popprof export" in text


def test_pva_missing_cli_exits_2_with_one_line(monkeypatch, capsys, written):
    from popprof.cli import main

    _, paths = written
    monkeypatch.setitem(sys.modules, "pva", None)
    assert main(["tables", str(paths["single"])]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "pva" in err and "enable" in err and "Traceback" not in err


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty-zip"])
def test_corrupt_profile_is_input_error(pva_double, written, tmp_path, damage):
    _, paths = written
    bad = tmp_path / "profile.pop"
    data = paths["single"].read_bytes()
    if damage == "garbage":
        bad.write_bytes(b"\x00\x01 this is not a profile " * 50)
    elif damage == "truncated":
        bad.write_bytes(data[: len(data) // 2])
    else:
        bad.write_bytes(b"PK\x05\x06" + bytes(18))
    before = bad.read_bytes()
    with pytest.raises(InputError) as info:
        popprof.open(bad)
    assert str(bad) in str(info.value)
    assert "corrupt" in str(info.value)
    assert bad.read_bytes() == before  # input never modified


def test_corrupt_profile_cli_exit_2(pva_double, capsys, tmp_path):
    from popprof.cli import main

    bad = tmp_path / "profile.pop"
    bad.write_bytes(b"nonsense" * 100)
    assert main(["tables", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err


def test_run_directory_gives_one_profile_per_engine(pva_double, fixtures_dir, tmp_path):
    profiles = popprof.open_all(fixtures_dir / "run_dir")
    assert sorted(profiles) == ["inference", "training"]
    for name, profile in profiles.items():
        assert profile.name == name
        assert profile.source_format == "pop"
        assert profile.has("operations")  # debug.cbor at the run-directory root
        assert "hostname" in profile.meta["app"]
    assert profiles["training"].steps["step"].nunique() == 1_200
    assert profiles["inference"].runs.shape[0] == 1
    copy = tmp_path / "run"
    shutil.copytree(fixtures_dir / "run_dir", copy)
    (copy / "debug.cbor").unlink()
    without = popprof.open_all(copy)
    assert not any(p.has("operations") for p in without.values())
    with pytest.raises(InputError, match="several profiles"):
        popprof.open(copy)
    assert popprof.open(copy, engine="inference").name == "inference"


def test_gzipped_profile_says_to_gunzip(pva_double, written, tmp_path):
    import gzip

    _, paths = written
    packed = tmp_path / "profile.pop.gz"
    packed.write_bytes(gzip.compress(paths["single"].read_bytes()))
    with pytest.raises(InputError, match="gunzip"):
        popprof.open(packed)


def _rewrite_store(path, **changes):
    with np.load(path) as npz:
        arrays = {key: npz[key] for key in npz.files}
    arrays.update(changes)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def test_runs_that_do_not_partition_the_steps_are_noted(pva_double, written, tmp_path):
    _, paths = written
    n = SMALL["num_steps"]
    shifted = tmp_path / "shifted" / "profile.pop"
    shifted.parent.mkdir()
    shutil.copy(paths["single"], shifted)
    _rewrite_store(shifted, run_num_steps=np.array([7, n - 7]))
    profile = pop.read(shifted)
    assert profile.steps.groupby("run")["step"].nunique().tolist() == [7, n - 7]
    assert len(profile.runs) == 2
    short = tmp_path / "short" / "profile.pop"
    short.parent.mkdir()
    shutil.copy(paths["single"], short)
    _rewrite_store(short, run_num_steps=np.array([10, 10]))
    profile = pop.read(short)
    assert (profile.steps["run"] == 0).all()
    assert any("runs hold 20 steps" in note for note in json.loads(profile.meta["pop.notes"]))


def _cited():
    """The double's cited list (tests/pva_double/evidence.py): attribute name -> (status, source)."""
    import importlib.util

    from pop_helpers import PVA_DOUBLE

    spec = importlib.util.spec_from_file_location("pva_double_evidence", PVA_DOUBLE / "evidence.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Recorder:
    """Wraps a pva object and records every attribute name read through it (recursively)."""

    PRIMITIVE = (int, float, str, bytes, bool, type(None), np.ndarray, np.generic)

    def __init__(self, target, seen):
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_seen", seen)

    def _wrap(self, value):
        if isinstance(value, self.PRIMITIVE):
            return value
        return (_CallableRecorder if callable(value) else _Recorder)(value, self._seen)

    def __getattr__(self, name):
        self._seen.add(name)
        return self._wrap(getattr(self._target, name))

    def __dir__(self):
        return dir(self._target)

    def __len__(self):
        return len(self._target)

    def __getitem__(self, index):
        return self._wrap(self._target[index])

    def __iter__(self):
        return (self._wrap(v) for v in self._target)


class _CallableRecorder(_Recorder):
    def __call__(self, *args):
        return self._wrap(self._target(*args))


def _recorded_read(pva_double, monkeypatch, path, **options):
    seen: set[str] = set()
    open_report, analysis = pva_double.openReport, pva_double.OperationAnalysis
    monkeypatch.setattr(pva_double, "openReport", lambda *a: _Recorder(open_report(*a), seen))
    monkeypatch.setattr(
        pva_double,
        "OperationAnalysis",
        lambda report: _Recorder(analysis(object.__getattribute__(report, "_target")), seen),
    )
    return pop.read(path, **options), seen


def test_reader_reads_only_attributes_the_double_cites(pva_double, written, monkeypatch):
    """Every attribute the reader reads has a cited public source or is a labelled assumption."""
    _, paths = written
    profile, seen = _recorded_read(pva_double, monkeypatch, paths["multi"], tile_cycles=True, **FULL)
    assert profile.has("steps", "operations", "step_tile_cycles")
    evidence = _cited()
    uncited = seen - set(evidence.CITED)
    assert not uncited, uncited
    assert {"cyclesFrom", "tileBalance", "notAlwaysLiveMemory", "replacedDebugContext", "parents"} <= seen
    # what the reader reads without public evidence, it must survive losing (tested below / in test_pop_public)
    assumed_read = {n for n in seen if evidence.CITED[n][0] == evidence.ASSUMED}
    assert assumed_read <= {
        "numVertices",
        "cyclesByTile",
        "copyDescriptor",
        "vectorListDescriptor",
        "vertexFieldData",
    }, assumed_read


def test_default_read_skips_the_slow_per_program_and_per_step_lists(pva_double, written, monkeypatch):
    """Public code (pva_utils.py) warns pva traversals are slow: code bytes and variable lists are opt-in."""
    variants, paths = written
    profile, seen = _recorded_read(pva_double, monkeypatch, paths["single"])
    assert "codeBytesByTile" not in seen
    assert profile.programs["code_bytes"].isna().all()
    live = profile.liveness
    peak_step = int(
        live["step"].iloc[int(live["not_always_live_bytes"].astype("float64").to_numpy().argmax())]
    )
    assert set(profile.liveness_variables["step"]) == {peak_step}  # only the peak step's list is read
    expected = variants["single"].liveness_variables
    assert sorted(profile.liveness_variables["bytes"]) == sorted(
        expected[expected["step"] == peak_step]["bytes"]
    )
    assert json.loads(profile.meta["pop.options"])["liveness_variables"] == "peak"


def test_assumed_attributes_may_be_absent(pva_double, written, monkeypatch):
    _, paths = written
    open_report = pva_double.openReport

    def without_assumptions(*args):
        report = open_report(*args)
        del report.compilation.graph.numVertices
        return report

    monkeypatch.setattr(pva_double, "openReport", without_assumptions)
    monkeypatch.delattr(type(pva_double.openReport(str(paths["single"])).execution.steps[0]), "cyclesByTile")
    profile = pop.read(paths["single"], tile_cycles=True)
    assert "graph.num_vertices" not in profile.meta
    assert "step_tile_cycles" not in profile
    missing = json.loads(profile.meta["pop.missing_attributes"])
    assert {"compilation.graph.numVertices", "step.cyclesByTile"} <= set(missing)


def test_tile_cycles_too_large_is_refused_before_reading(pva_double, written, monkeypatch):
    from popprof.model.errors import UsageError

    _, paths = written
    monkeypatch.setattr(pop, "MAX_TILE_CYCLE_VALUES", 1000)
    with pytest.raises(UsageError, match="read without tile_cycles"):
        pop.read(paths["single"], tile_cycles=True)


def test_parallel_step_reading_gives_the_same_tables(pva_double, written):
    _, paths = written
    serial = pop.read(paths["multi"], workers=1)
    parallel = pop.read(paths["multi"], workers=2)
    for name in ("steps", "runs"):
        pd.testing.assert_frame_equal(parallel[name], serial[name])
    assert "parallel" not in parallel.meta["pop.notes"] and "worker" not in parallel.meta["pop.notes"]


def test_failed_worker_falls_back_to_serial(pva_double, written, monkeypatch):
    _, paths = written
    monkeypatch.setattr(pop, "_steps_worker", _raise_in_worker)
    profile = pop.read(paths["single"], workers=2)
    pd.testing.assert_frame_equal(profile.steps, pop.read(paths["single"], workers=1).steps)
    assert "worker failed" in profile.meta["pop.notes"]


def _raise_in_worker(*_args):
    raise RuntimeError("worker exploded")


def test_the_parallel_switch_reads_every_step_here(pva_double, written, monkeypatch):
    _, paths = written
    monkeypatch.setenv("POPPROF_PARALLEL", "0")
    monkeypatch.setattr(pop, "_steps_worker", _raise_in_worker)  # a worker would fail and be noted
    profile = pop.read(paths["single"], workers=2)
    assert "worker" not in profile.meta["pop.notes"] and "parallel" not in profile.meta["pop.notes"]
    monkeypatch.delenv("POPPROF_PARALLEL")
    pd.testing.assert_frame_equal(profile.steps, pop.read(paths["single"], workers=1).steps)


def test_an_error_while_workers_read_stops_them(pva_double, written, monkeypatch):
    _, paths = written

    def broken_tiles(self, *_args):
        raise InputError(paths["single"], "tiles exploded")

    monkeypatch.setattr(pop._Builder, "tiles", broken_tiles)
    stopped = []
    real_stop = pop._Builder.stop_workers

    def spy(self, terminate=False):
        stopped.append((self.pool is not None, terminate))
        real_stop(self, terminate)

    monkeypatch.setattr(pop._Builder, "stop_workers", spy)
    with pytest.raises(InputError, match="tiles exploded"):
        pop.read(paths["single"], workers=2)
    assert stopped == [(True, True)]


@pytest.mark.parametrize(("cores", "load", "expected"), [(2, 0.2, 2), (2, 1.5, 1), (8, 3.0, 2), (1, 0.0, 1)])
def test_a_worker_is_used_only_with_an_idle_core(monkeypatch, cores, load, expected):
    monkeypatch.setattr(pop.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(pop.os, "getloadavg", lambda: (load, load, load))
    assert pop._idle_workers() == expected


@pytest.mark.parametrize("clock, arch", [(1.33e9, "ipu2"), (1.85e9, "bow"), (1.5e9, None)])
def test_architecture_inferred_like_the_other_readers_when_pva_lacks_it(
    pva_double, written, monkeypatch, clock, arch
):
    _, paths = written
    open_report = pva_double.openReport

    def without_architecture(*args):
        report = open_report(*args)
        del report.compilation.target.architecture
        report.compilation.target.clockFrequency = clock
        return report

    monkeypatch.setattr(pva_double, "openReport", without_architecture)
    profile = pop.read(paths["single"])
    assert (profile.target_value("tiles_per_ipu"), profile.target_value("bytes_per_tile")) == (1472, 638_976)
    assert profile.target_value("ipu_arch") == arch  # Mk2 sizes; the clock tells Mk2 from Bow, else unknown
    assert "compilation.target.architecture" in json.loads(profile.meta["pop.missing_attributes"])
