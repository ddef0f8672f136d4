"""Bundle round trip: every table, column, dtype and value comes back; bad bundles give InputError."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

import popprof
from popprof.model.errors import InputError, UsageError
from popprof.readers import bundle
from popprof.testing import synth


@pytest.fixture(scope="module")
def profile():
    return synth.make_profile(num_ipus=2, num_steps=500, num_liveness_steps=120, oom_tiles=2, seed=3)


def test_round_trip_every_table(tmp_path, profile):
    out = bundle.write(profile, tmp_path / "p.popprof")
    back = popprof.open(out)
    assert back.table_names == profile.table_names
    for name in profile.table_names:
        pd.testing.assert_frame_equal(back[name], profile[name], check_exact=True, obj=name)


def test_manifest_records_tables_and_format(tmp_path, profile):
    out = bundle.write(profile, tmp_path / "p.popprof")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "popprof-bundle" and manifest["format_version"] == bundle.FORMAT_VERSION
    assert manifest["tables"]["steps"]["rows"] == len(profile.steps)
    assert manifest["redacted"] == {"redacted": False}
    assert {p.name for p in out.iterdir()} == {"manifest.json"} | {
        f"{t}.parquet" for t in profile.table_names
    }


def test_missing_parquet_is_a_clear_error(tmp_path, profile):
    out = bundle.write(profile, tmp_path / "p.popprof")
    (out / "steps.parquet").unlink()
    with pytest.raises(InputError, match="missing steps.parquet"):
        popprof.open(out)


def test_newer_format_version_is_refused(tmp_path, profile):
    out = bundle.write(profile, tmp_path / "p.popprof")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["format_version"] = bundle.FORMAT_VERSION + 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="newer than this popprof supports"):
        popprof.open(out)


def test_corrupt_parquet_and_manifest(tmp_path, profile):
    out = bundle.write(profile, tmp_path / "p.popprof")
    (out / "tiles.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="corrupt Parquet"):
        popprof.open(out)
    (out / "manifest.json").write_text("{")
    with pytest.raises(InputError, match="unreadable bundle manifest"):
        popprof.open(out)


def test_write_is_atomic_and_refuses_to_overwrite_input(tmp_path, profile):
    out = bundle.write(profile, tmp_path / "p.popprof")
    reopened = popprof.open(out)
    with pytest.raises(UsageError, match="would overwrite the input"):
        bundle.write(reopened, out)
    with pytest.raises(UsageError):
        bundle.write(reopened, out / "nested.popprof")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.popprof"]  # no temporary left behind


def test_failed_write_leaves_no_partial_output(tmp_path, profile, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pq, "write_table", boom)
    with pytest.raises(RuntimeError):
        bundle.write(profile, tmp_path / "p.popprof")
    assert list(tmp_path.iterdir()) == []


def test_bundles_in_a_bundle_a_directory_of_bundles_and_elsewhere(tmp_path, profile):
    one = bundle.write(profile, tmp_path / "set" / "a.popprof")
    two = bundle.write(profile, tmp_path / "set" / "b.popprof")
    (tmp_path / "set" / "notes").mkdir()
    assert bundle.bundles_in(one) == [one]
    assert bundle.bundles_in(tmp_path / "set") == [one, two]
    assert bundle.bundles_in(tmp_path) == [] and bundle.bundles_in(tmp_path / "missing") == []
    assert bundle.manifest_path(one).is_file() and bundle.is_manifest(bundle.manifest_path(one))


def test_only_the_bundle_module_spells_the_manifest_name():
    """Everything else asks readers/bundle.py (MANIFEST, manifest_path, is_manifest, bundles_in)."""
    import re
    from pathlib import Path

    package = Path(popprof.__file__).parent
    spelled = re.compile(r"""["'][^"'\n]*\bmanifest\.json\b[^"'\n]*["']""")
    found = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "bundle.py" or path.parent.name != "readers"
        for line in path.read_text("utf-8").splitlines()
        if spelled.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []
