"""The profile.pop reader on the behaviours public code shows for the real pva (tests/pva_double/README.md).

SDK 2.x (one-argument openReport, no OperationAnalysis), RuntimeError from ``import pva``,
pybind11 enums read by ``.name``, operations attributed through ``replacedDebugContext`` and
``parents``, operation bytes missing rather than 0, and physical-range checks.
"""

from __future__ import annotations

import json
import sys

import pytest
from pop_helpers import report_store

import popprof
from popprof.model.errors import InputError, SdkMissingError
from popprof.readers import pop
from popprof.testing.synth import make_profile

SPEC = {"num_steps": 80, "num_programs": 60, "num_liveness_steps": 90, "num_variables": 20}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("public")
    profile = make_profile(name="p", num_ipus=2, seed=12, **SPEC)
    report_store().write_pop(profile, root / "p" / "profile.pop")
    report_store().write_debug([profile], root / "p" / "debug.cbor")
    return profile, root / "p" / "profile.pop"


def _sdk2(pva_double, monkeypatch):
    """Make the double look like SDK 2.0's pva: openReport(filename) only, no OperationAnalysis."""
    real = pva_double.openReport
    monkeypatch.setattr(pva_double, "openReport", lambda filename: real(filename))
    monkeypatch.delattr(pva_double, "OperationAnalysis")


def test_sdk2_opens_without_debug_information(pva_double, stored, monkeypatch):
    _, path = stored
    _sdk2(pva_double, monkeypatch)
    profile = pop.read(path)  # debug.cbor sits next to it: SDK 2.x cannot take it
    assert profile.has("tiles", "steps") and "operations" not in profile
    notes = json.loads(profile.meta["pop.notes"])
    assert any("needs SDK 3.0 or later" in n and "debug.cbor" in n for n in notes), notes
    assert "pop.debug_cbor" not in profile.meta


def test_pva_without_operation_analysis_notes_it(pva_double, stored, monkeypatch):
    _, path = stored
    monkeypatch.delattr(pva_double, "OperationAnalysis")
    profile = pop.read(path)
    assert "operations" not in profile
    assert any(
        "needs SDK 3.0 or later" in n and "OperationAnalysis" in n
        for n in json.loads(profile.meta["pop.notes"])
    )


def test_import_pva_runtime_error_is_sdk_missing_one_line(stored, tmp_path, monkeypatch, capsys):
    from popprof.cli import main

    _, path = stored
    broken = tmp_path / "sdk" / "pva"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise RuntimeError('libpva.so: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(broken.parent))
    monkeypatch.delitem(sys.modules, "pva", raising=False)
    with pytest.raises(SdkMissingError):
        popprof.open(path)
    monkeypatch.delitem(sys.modules, "pva", raising=False)
    assert main(["tables", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pva" in err and "Traceback" not in err
    monkeypatch.delitem(sys.modules, "pva", raising=False)


def test_enums_are_read_by_name_whatever_their_str(pva_double, stored, monkeypatch):
    """pybind11's str() of an enum differs between versions; .name does not."""
    _, path = stored
    enum_value = type(pva_double.Program.Type.OnTileExecute)
    monkeypatch.setattr(enum_value, "__str__", enum_value.__repr__)  # "<Type.OnTileExecute: 0>"
    profile = pop.read(path)
    types = set(profile.programs["type"].astype(str))
    assert "OnTileExecute" in types and not any("<" in t or ":" in t for t in types)
    assert set(profile.steps["program_type"].astype(str)) <= types
    assert profile.target_value("target_type") == "Ipu"
    assert profile.target_value("ipu_arch") == "ipu2"


@pytest.mark.parametrize(
    ("enum_name", "expected"), [("Ipu1", "ipu1"), ("Ipu2", "ipu2"), ("Ipu21", "Ipu21"), ("Ipu31", "Ipu31")]
)
def test_architecture_names_are_mapped_explicitly_or_kept(
    pva_double, stored, monkeypatch, enum_name, expected
):
    _, path = stored
    open_report = pva_double.openReport

    def with_architecture(*args):
        report = open_report(*args)
        report.compilation.target.architecture = pva_double.IPU.Architecture.member(enum_name)
        return report

    monkeypatch.setattr(pva_double, "openReport", with_architecture)
    assert pop.read(path).target_value("ipu_arch") == expected  # never guessed as "bow"


def test_operations_come_from_the_framework_context(pva_double, stored):
    profile, path = stored
    read = pop.read(path)
    ops, expected = read.operations, profile.operations
    assert list(ops["name"]) == list(expected["name"])
    assert list(ops["layer"].astype(str)) == list(expected["layer"].astype(str))
    assert list(ops["file"]) == list(expected["file"]) and list(ops["line"]) == list(expected["line"])
    report = pva_double.openReport(str(path), str(path.parent / "debug.cbor"))
    replaced = sum(
        1 for op in pva_double.OperationAnalysis(report).operations if len(op.replacedDebugContext)
    )
    assert replaced > 0  # some came through replacedDebugContext[0]
    assert ops["bytes"].isna().all()  # op.vars entries carry no size in public code: missing, never 0


def test_operation_bytes_are_summed_when_entries_carry_sizes(pva_double, stored, tmp_path):
    profile, path = stored
    report_store().write_debug([profile], tmp_path / "debug.cbor", var_bytes=True)  # unknown-shape variant
    read = pop.read(path, debug_cbor=tmp_path / "debug.cbor")
    assert read.operations["bytes"].tolist() == profile.operations["bytes"].tolist()


def _patched_target(pva_double, monkeypatch, **values):
    open_report = pva_double.openReport

    def patched(*args):
        report = open_report(*args)
        for key, value in values.items():
            setattr(report.compilation.target, key, value)
        return report

    monkeypatch.setattr(pva_double, "openReport", patched)


def test_public_example_figures_are_read_as_such(pva_double, stored):
    """ipu_tensorflow_addons' profile_test: 1,472 tiles per Mk2 IPU, 638,976 B, clock 1330000000.0 Hz (float)."""
    _, path = stored
    profile = pop.read(path)
    assert profile.target_value("tiles_per_ipu") == 1472
    assert profile.target_value("bytes_per_tile") == 638_976
    clock = profile.target_value("clock_hz")
    assert isinstance(clock, float) and clock == 1_330_000_000.0
    balance = profile.steps["tile_balance"].dropna()
    assert ((balance >= 0) & (balance <= 1)).all()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"clockFrequency": 1330.0}, "clock of 1330.0 Hz"),  # MHz where pva gives Hz
        ({"tilesPerIpu": 0}, "0 tiles per IPU"),
        ({"numTiles": 9999}, "9999 tiles for 2 IPUs"),
        ({"bytesPerTile": -638_976}, "-638976 bytes per tile"),
    ],
)
def test_target_outside_physical_ranges_is_refused(pva_double, stored, monkeypatch, values, message):
    _, path = stored
    _patched_target(pva_double, monkeypatch, **values)
    with pytest.raises(InputError, match="outside physical ranges") as info:
        pop.read(path)
    assert message in str(info.value) and len(str(info.value).splitlines()) == 1


def test_tile_balance_outside_0_1_is_refused(pva_double, tmp_path):
    profile = make_profile(name="bad", seed=13, **SPEC)
    steps = profile.steps.copy()
    steps.loc[steps.index[5], "tile_balance"] = 1.7
    profile.set_table("steps", steps)
    report_store().write_pop(profile, tmp_path / "profile.pop")
    with pytest.raises(InputError, match="tile balance"):
        pop.read(tmp_path / "profile.pop")


def test_negative_cycles_are_refused(pva_double, tmp_path):
    profile = make_profile(name="bad", seed=14, **SPEC)
    steps = profile.steps.copy()
    steps["cycles"] = steps["cycles"].astype("int64")
    steps.loc[steps.index[3], "cycles"] = -50
    profile.set_table("steps", steps)
    report_store().write_pop(profile, tmp_path / "profile.pop")
    with pytest.raises(InputError, match="negative cycle"):
        pop.read(tmp_path / "profile.pop")
