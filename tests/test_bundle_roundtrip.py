"""The bundle: a pva-read profile survives export and re-open with identical tables; bad bundles are InputErrors."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pop_helpers import PVA_DOUBLE, report_store

import popprof
from popprof.model.errors import InputError, UsageError
from popprof.model.schema import TABLES
from popprof.readers import bundle, pop
from popprof.testing.synth import make_profile


@pytest.fixture(scope="module")
def pop_profile(tmp_path_factory):
    """A profile read through pva (the double) with every table it can give, step_tile_cycles included."""
    root = tmp_path_factory.mktemp("bundle")
    synth = make_profile(
        name="rt", num_ipus=2, num_steps=60, num_programs=80, num_liveness_steps=90, num_variables=40, seed=9
    )
    store = report_store()
    store.write_pop(synth, root / "rt" / "profile.pop")
    store.write_debug([synth], root / "rt" / "debug.cbor")
    sys.path.insert(0, str(PVA_DOUBLE))
    sys.modules.pop("pva", None)
    try:
        profile = pop.read(root / "rt" / "profile.pop", tile_cycles=True)
    finally:
        sys.path.pop(0)
        sys.modules.pop("pva", None)
    return profile


def test_every_table_and_dtype_round_trips(pop_profile, tmp_path):
    expected_tables = {
        "target",
        "tiles",
        "tile_memory",
        "programs",
        "variables",
        "liveness",
        "liveness_variables",
        "runs",
        "steps",
        "step_tile_cycles",
        "operations",
        "metadata",
    }
    assert set(pop_profile.table_names) == expected_tables
    out = bundle.write(pop_profile, tmp_path / "rt.popprof")
    back = popprof.open(out)
    assert back.table_names == pop_profile.table_names
    assert back.name == "rt"
    for name in pop_profile.table_names:
        original, read = pop_profile[name], back[name]
        pd.testing.assert_frame_equal(read, original, check_exact=True, obj=name)
        for column in TABLES[name].columns:
            if column.name in read:
                assert str(read[column.name].dtype) == str(original[column.name].dtype)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tables"]["steps"]["rows"] == 60 * 2
    assert [s["name"] for s in manifest["sources"]] == ["profile.pop", "debug.cbor"]
    assert manifest["source_format"] == "pop"


def test_round_trip_keeps_missing_values(tmp_path):
    synth = make_profile(name="na", num_steps=20, num_programs=40, num_liveness_steps=30, debug=False)
    steps = synth.steps.copy()
    steps["tile_balance"] = float("nan")
    steps["active_from_cycles"] = pd.array([None] * len(steps), dtype="Int64")
    synth.set_table("steps", steps)
    back = popprof.open(bundle.write(synth, tmp_path / "na.popprof"))
    pd.testing.assert_frame_equal(back.steps, synth.steps)
    assert back.steps["active_from_cycles"].isna().all()


@pytest.fixture
def good_bundle(tmp_path):
    synth = make_profile(name="b", num_steps=20, num_programs=40, num_liveness_steps=30)
    return bundle.write(synth, tmp_path / "b.popprof")


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def test_missing_parquet_file(good_bundle):
    (good_bundle / "steps.parquet").unlink()
    with pytest.raises(InputError, match="missing steps.parquet"):
        popprof.open(good_bundle)


def test_newer_format_version(good_bundle):
    manifest = _manifest(good_bundle)
    manifest["format_version"] = bundle.FORMAT_VERSION + 1
    (good_bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="newer") as info:
        popprof.open(good_bundle)
    assert "upgrade" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        '{"format": "something-else", "format_version": 1}',
        '{"format": "popprof-bundle"}',
    ],
)
def test_corrupt_manifest(good_bundle, text):
    (good_bundle / "manifest.json").write_text(text)
    with pytest.raises(InputError) as info:
        popprof.open(good_bundle)
    assert "manifest" in str(info.value)


def test_corrupt_parquet_and_row_mismatch(good_bundle):
    (good_bundle / "tiles.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="corrupt Parquet"):
        popprof.open(good_bundle)


def test_row_count_mismatch(good_bundle):
    manifest = _manifest(good_bundle)
    manifest["tables"]["programs"]["rows"] += 1
    (good_bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="manifest says"):
        popprof.open(good_bundle)


@pytest.mark.parametrize("file", ["../outside.parquet", "/etc/hostname", "sub/tiles.parquet", "..", "", 7])
def test_manifest_cannot_point_outside_the_bundle(good_bundle, file):
    outside = good_bundle.parent / "outside.parquet"
    outside.write_bytes(
        (good_bundle / "tiles.parquet").read_bytes()
    )  # a readable file, so only the name is wrong
    manifest = _manifest(good_bundle)
    manifest["tables"]["tiles"]["file"] = file
    (good_bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="not a file inside the bundle"):
        popprof.open(good_bundle)


@pytest.mark.parametrize("tables", [[], {"tiles": "tiles.parquet"}])
def test_manifest_tables_of_the_wrong_shape(good_bundle, tables):
    manifest = _manifest(good_bundle)
    manifest["tables"] = tables
    (good_bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"'tables'.* is .*, expected an object"):
        popprof.open(good_bundle)


def test_bad_bundle_cli_one_line_exit_2(good_bundle, capsys):
    from popprof.cli import main

    (good_bundle / "liveness.parquet").unlink()
    assert main(["tables", str(good_bundle)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "liveness.parquet" in err and "Traceback" not in err


def test_write_is_atomic(good_bundle, monkeypatch, tmp_path):
    profile = popprof.open(good_bundle)
    existing = bundle.write(profile, tmp_path / "existing.popprof")
    existing_manifest = _manifest(existing)
    before = sorted(p.name for p in tmp_path.iterdir())
    calls = []
    real = pq.write_table

    def failing(table, where, **kwargs):
        calls.append(where)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(table, where, **kwargs)

    monkeypatch.setattr(pq, "write_table", failing)
    with pytest.raises(OSError):
        bundle.write(profile, tmp_path / "new.popprof")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no half bundle, no temp left
    calls.clear()
    with pytest.raises(OSError):
        bundle.write(profile, existing)  # replacing a bundle fails half way: the old one stays whole
    assert _manifest(existing) == existing_manifest
    monkeypatch.undo()
    pd.testing.assert_frame_equal(popprof.open(existing).steps, profile.steps)


def test_refuses_to_write_over_its_input(good_bundle):
    profile = popprof.open(good_bundle)
    with pytest.raises(UsageError):
        bundle.write(profile, good_bundle)
    with pytest.raises(UsageError):
        bundle.write(profile, good_bundle / "inner.popprof")


def _sample_column(dtype: str, nullable: bool, n: int = 4) -> object:
    """Values of a schema dtype, with a missing value in the last row when the column allows one."""
    values = {
        "str": ["a", "b c", "ü/ß", "d"],
        "category": ["x", "y", "x", "z"],
        "int16": [0, 1, -2, 300],
        "int32": [0, 1, 70_000, 3],
        "int64": [0, 1, 2**40, 5],
        "Int32": [0, 1, 70_000, 3],
        "Int64": [0, 1, 2**40, 5],
        "float64": [0.5, 1e-9, 3e12, 4.0],
        "boolean": [True, False, True, False],
    }[dtype]
    if nullable and dtype != "category":
        values = values[:-1] + [None]
    if dtype == "float64" and nullable:
        values = values[:-1] + [float("nan")]
    return pd.Series(values, dtype=dtype if dtype not in ("str",) else "str")


def test_every_schema_table_and_dtype_round_trips(tmp_path):
    tables = {}
    for name, spec in TABLES.items():
        tables[name] = pd.DataFrame({c.name: _sample_column(c.dtype, c.nullable) for c in spec.columns})
    profile = popprof.Profile("all", tables)
    assert profile.table_names == list(TABLES)
    back = popprof.open(bundle.write(profile, tmp_path / "all.popprof"))
    assert back.table_names == list(TABLES)
    for name in TABLES:
        pd.testing.assert_frame_equal(back[name], profile[name], check_exact=True, obj=name)


def test_cli_export_of_a_run_directory_round_trips(pva_double, fixtures_dir, tmp_path):
    from popprof.cli import main

    source = fixtures_dir / "run_dir"
    before = {p: p.stat().st_mtime_ns for p in source.rglob("*")}
    assert main(["export", str(source), "-o", str(tmp_path / "bundles")]) == 0
    direct = popprof.open_all(source)
    for name, profile in direct.items():
        back = popprof.open(tmp_path / "bundles" / f"{name}.popprof")
        assert back.table_names == profile.table_names
        for table in profile.table_names:
            pd.testing.assert_frame_equal(back[table], profile[table], obj=f"{name}.{table}")
        assert back.meta["pop.missing_attributes"] == "[]"
    assert {p: p.stat().st_mtime_ns for p in source.rglob("*")} == before  # inputs untouched
