"""Redacting profiles into bundles: canaries gone, numbers unchanged, pseudonyms stable, the scan bites."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.metrics import compute
from popprof.model.errors import UsageError
from popprof.readers import bundle
from popprof.redaction import redact
from popprof.redaction.policy import Policy

sys.path.insert(0, str(Path(__file__).parent))
from redact_helpers import KEY_A, KEY_B, bundle_strings, canary_profile  # noqa: E402


def _tree_hash(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(file.relative_to(path).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _kind(dtype) -> str:
    return "category" if isinstance(dtype, pd.CategoricalDtype) else str(dtype)


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("orig") / "orig.popprof"
    bundle.write(canary_profile(), out)
    return out


@pytest.fixture(scope="module")
def redacted(original, tmp_path_factory):
    out = tmp_path_factory.mktemp("red") / "red.popprof"
    mapping = out.parent / "mapping.json"
    report = redact(original, out, key=KEY_A, mapping_out=mapping)
    return out, report, mapping


def test_every_canary_is_gone_and_the_scan_passed(redacted):
    out, report, _ = redacted
    assert report.passed and report.scan["tokens"] > 0
    strings = bundle_strings(out)
    assert strings
    leaked = [s for s in strings if "canary" in s.lower()]
    assert leaked == []
    for needle in ["10.99.88.77", "fe80::1234", "corp.example.com", "hunter2", "tok_canary", "/home/"]:
        assert not any(needle in s for s in strings), needle


def test_kinds_are_counted_in_the_report(redacted):
    _, report, _ = redacted
    for kind in [
        "prog",
        "var",
        "op",
        "evt",
        "chan",
        "thr",
        "proc",
        "ctr",
        "ser",
        "file",
        "path",
        "host",
        "user",
        "email",
        "ip",
        "url",
        "secret",
        "env",
    ]:
        assert report.replaced.get(kind, {}).get("distinct", 0) >= 1, kind
    assert report.replaced["prog"]["occurrences"] > report.replaced["prog"]["distinct"]  # steps x IPUs rows
    text = json.dumps(report.to_dict())
    assert "canary" not in text.lower() and KEY_A.decode() not in text


def test_numbers_metrics_and_rules_match(original, redacted):
    out, _, _ = redacted
    a, b = popprof.open(original), popprof.open(out)
    assert compute(a) == compute(b)
    assert a.table_names == b.table_names
    for name in a.table_names:
        fa, fb = a[name], b[name]
        assert list(fa.columns) == list(fb.columns), name
        assert [_kind(d) for d in fa.dtypes] == [_kind(d) for d in fb.dtypes], name
        numeric = [c for c in fa.columns if pd.api.types.is_numeric_dtype(fa[c]) or fa[c].dtype == "boolean"]
        if name != "metadata":
            pd.testing.assert_frame_equal(fa[numeric], fb[numeric], obj=name)
    fa, fb = popprof.check(a).frame, popprof.check(b).frame
    cols = ["rule_id", "severity", "value", "threshold"]
    pd.testing.assert_frame_equal(fa[cols], fb[cols])
    assert [w.get("tiles") for w in fa["where"]] == [w.get("tiles") for w in fb["where"]]


def test_identifiers_are_pseudonyms_and_public_vocabulary_stays(redacted):
    out, _, _ = redacted
    b = popprof.open(out)
    assert all(re.fullmatch(r"prog_[0-9a-f]{8,16}", n) for n in b.programs["name"])
    assert set(b.programs["type"]) >= {"OnTileExecute", "DoExchange", "Sync"}
    assert set(b.steps["category"].astype(str)) >= {"compute", "exchange"}
    assert "vertexCode" in set(b.tile_memory["category"].astype(str))
    assert set(b.operations["layer"].astype(str)) <= {"popart", "poptorch", "poplibs", "onnx"}
    events = b.events
    assert "poplin::ConvPartial1x1Out<half,float,true,false>" in set(events["name"].astype(str))
    assert "Engine::run" in set(events["name"].astype(str))
    assert {"Poplar", "Framework"} <= set(events["channel"].astype(str))
    assert "MainThread" in set(b.threads["thread_name"]) and "python3" in set(b.threads["process_name"])
    # the steps column refers to the same pseudonyms as the programs table
    assert set(b.steps["program"].astype(str)) <= set(b.programs["name"])


def test_manifest_records_redaction_and_pseudonymises_sources(redacted):
    out, _, _ = redacted
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["redacted"]["redacted"] is True
    assert manifest["redacted"]["tool_version"] == popprof._version.__version__
    assert "scrub" in manifest["redacted"]["policy"]
    assert manifest["sources"][0]["sha256"] == "ab" * 32 and manifest["sources"][0]["size_bytes"] == 1234
    assert re.fullmatch(r"file_[0-9a-f]{12}\.pop", manifest["sources"][0]["name"])
    from popprof.redaction import key_fingerprint

    assert manifest["redacted"]["key_fingerprint"] == key_fingerprint(KEY_A)
    assert re.fullmatch(r"hmac-sha256:[0-9a-f]{12}", key_fingerprint(KEY_A)) and key_fingerprint(
        KEY_A
    ) != key_fingerprint(KEY_B)
    assert popprof.open(out).meta["redaction_key_fingerprint"] == key_fingerprint(KEY_A)


def test_the_key_is_never_written(redacted):
    out, _, mapping = redacted
    blobs = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    for blob in blobs:
        assert KEY_A not in blob and KEY_A.hex().encode() not in blob
    assert KEY_A not in mapping.read_bytes()


def test_mapping_maps_pseudonyms_back(redacted):
    out, _, mapping = redacted
    table = json.loads(mapping.read_text())
    b = popprof.open(out)
    pseudo = b.programs["name"].iloc[1]
    assert table["prog"][pseudo] == "CanaryModel/secret_block_7/MatMul"


def test_same_key_keeps_name_by_name_diff_and_other_key_differs(tmp_path):
    base, new = tmp_path / "base.popprof", tmp_path / "new.popprof"
    bundle.write(canary_profile(seed=0), base)
    bundle.write(canary_profile(seed=1), new)
    ra, rb = tmp_path / "ra.popprof", tmp_path / "rb.popprof"
    redact(base, ra, key=KEY_A)
    redact(new, rb, key=KEY_A)
    orig_diff = popprof.diff(popprof.open(base), popprof.open(new))
    red_diff = popprof.diff(popprof.open(ra), popprof.open(rb))
    pd.testing.assert_frame_equal(
        orig_diff.metrics.drop(columns=["name"]).reset_index(drop=True),
        red_diff.metrics.drop(columns=["name"]).reset_index(drop=True),
    )
    assert sorted(orig_diff.programs["status"].tolist()) == sorted(red_diff.programs["status"].tolist())
    matched = (red_diff.programs["status"] != "added") & (red_diff.programs["status"] != "removed")
    assert (
        matched.sum()
        == ((orig_diff.programs["status"] != "added") & (orig_diff.programs["status"] != "removed")).sum()
        > 0
    )
    rc = tmp_path / "rc.popprof"
    redact(base, rc, key=KEY_B)
    names_a, names_c = set(popprof.open(ra).programs["name"]), set(popprof.open(rc).programs["name"])
    assert names_a.isdisjoint(names_c)
    assert not any("different keys" in note for note in red_diff.notes)
    other_key = popprof.diff(popprof.open(rc), popprof.open(rb))
    assert any("redacted with different keys" in note for note in other_key.notes)
    assert other_key.programs.empty and "different keys" in other_key.unavailable["programs"]
    pd.testing.assert_frame_equal(
        other_key.metrics.drop(columns=["name"]).reset_index(drop=True),
        red_diff.metrics.drop(columns=["name"]).reset_index(drop=True),
    )


def test_input_is_not_modified_and_output_cannot_overwrite_it(original, tmp_path):
    before = _tree_hash(original)
    redact(original, tmp_path / "x.popprof", key=KEY_A)
    assert _tree_hash(original) == before
    with pytest.raises(UsageError):
        redact(original, original, key=KEY_A)
    with pytest.raises(UsageError):
        redact(original, original / "inside.popprof", key=KEY_A)
    assert _tree_hash(original) == before


def test_scan_fails_when_path_scrubbing_is_off_and_nothing_is_written(original, tmp_path):
    out = tmp_path / "leaky.popprof"
    report = redact(original, out, key=KEY_A, policy=Policy(scrub={"paths": False}))
    assert not report.passed
    assert "path" in report.scan["leaked_kinds"]
    assert not out.exists() and not list(tmp_path.iterdir())
    assert "canary" not in json.dumps(report.to_dict()).lower()


def test_scan_fails_with_a_broken_scrubber(original, tmp_path, monkeypatch):
    from popprof.redaction.redactor import Redactor
    from popprof.redaction.scrub import Scrubber

    # a redactor that forgets to replace free text and sensitive-key values
    monkeypatch.setattr(Scrubber, "whole", lambda self, kind, value: value)
    monkeypatch.setattr(Redactor, "free_text", lambda self, value: value)
    out = tmp_path / "leaky.popprof"
    report = redact(original, out, key=KEY_A)
    assert not report.passed and not out.exists()
    assert {"host", "secret"} <= set(report.scan["leaked_kinds"])


def test_keep_and_drop_patterns(original, tmp_path):
    out = tmp_path / "kept.popprof"
    policy = Policy(keep=["CanaryModel/*"], drop=["metadata.app", "table:counters"])
    report = redact(original, out, key=KEY_A, policy=policy)
    assert report.passed, report.scan
    b = popprof.open(out)
    assert "CanaryModel/secret_block_7/MatMul" in set(b.programs["name"])
    assert "app" not in b.meta and not b.has("counters")
    # a dropped metadata key is counted, never named (its name may be what is hidden); tables are schema names
    assert set(report.dropped) == {"metadata key", "table:counters"}


def test_standalone_scan_against_the_original(original, redacted, tmp_path):
    from popprof.redaction import scan

    out, _, _ = redacted
    assert scan(out, against=original).passed
    result = scan(original, against=original)
    assert not result.passed and {"identifier", "path"} <= set(result.leaks)


def test_run_directory_gives_one_redacted_bundle_per_engine(pva_double, tmp_path):
    from popprof.readers import open_all

    src = Path(__file__).resolve().parent.parent / "fixtures" / "run_dir"
    if not src.is_dir():
        pytest.skip("run_dir fixture not generated")
    out = tmp_path / "run.redacted"
    report = redact(src, out, key=KEY_A)
    assert report.passed, report.scan
    original, redacted = open_all(src), open_all(out)
    assert sorted(redacted) == sorted(f"{name}.popprof" for name in original)
    for name, profile in original.items():
        assert compute(profile) == compute(redacted[f"{name}.popprof"])
    strings = [s for bundle_dir in out.iterdir() for s in bundle_strings(bundle_dir)]
    assert not any("/home/" in s for s in strings)


def test_standalone_scan_reads_per_column_parquet_metadata(original, redacted, tmp_path):
    """A canary hidden in a column's own key-value metadata (not the file's) is still found."""
    import shutil

    import pyarrow.parquet as pq

    from popprof.redaction import scan

    out, _, _ = redacted
    copy = tmp_path / "copy.popprof"
    shutil.copytree(out, copy)
    file = copy / "variables.parquet"
    table = pq.read_table(file)
    column = table.schema.field("name").with_metadata({"origin": "canary_embeddings/word_table"})
    pq.write_table(table.cast(table.schema.set(table.schema.get_field_index("name"), column)), file)
    assert pq.read_schema(file).field("name").metadata  # the metadata survived the write
    result = scan(copy, against=original)
    assert not result.passed and result.leaks["identifier"] >= 1
    assert any(
        "variables.parquet:name:schema" in place for places in result.where.values() for place in places
    )


def _with_source_record(tmp_path: Path, **fields) -> Path:
    profile = canary_profile()
    meta = profile.meta
    records = json.loads(meta["source_files"])
    records[0].update(fields)
    meta["source_files"] = json.dumps(records)
    profile.update_metadata(meta)
    out = tmp_path / "orig.popprof"
    bundle.write(profile, out)
    return out


PLANTED = {
    "owner": {"user": "qzvalice", "host": "gpu-node-7.qzvcorp.example"},
    "labels": ["QzvSecretLabel", 3],
    "password": 55512345,
    "QzvSecretKeyName": 7,
    "size": 99,
}


@pytest.mark.parametrize("scan", [True, False])
def test_every_field_of_a_source_record_is_redacted(tmp_path, scan):
    """Nested values, unknown keys and numbers under secret keys of the manifest's source records go through
    the same redaction as the tables (issue 24 item 6); public keys and plain numbers stay."""
    src = _with_source_record(tmp_path, **PLANTED)
    out = tmp_path / "red.popprof"
    report = redact(src, out, key=KEY_A, scan=scan)
    assert report.passed
    text = (out / "manifest.json").read_text()
    for planted in ("qzvalice", "qzvcorp", "QzvSecretLabel", "55512345", "QzvSecretKeyName"):
        assert planted not in text, planted
    record = json.loads(text)["sources"][0]
    assert record["size_bytes"] == 1234 and record["sha256"] == "ab" * 32 and record["size"] == 99
    assert re.fullmatch(r"secret_[0-9a-f]{12}", record["password"])
    assert set(record["owner"]) == {"user", "host"} and record["labels"][1] == 3
    assert popprof.open(out).meta["redacted"] == "true"


def test_the_scan_reports_a_numeric_secret_left_in_a_source_record(tmp_path):
    """The scan derives numbers under secret keys from the original's manifest and checks them in the
    output's: a redacted bundle doctored to hold the original password again fails the scan."""
    from popprof.redaction import scan

    src = _with_source_record(tmp_path, password=55512345)
    out = tmp_path / "red.popprof"
    assert redact(src, out, key=KEY_A).passed
    assert scan(out, src).passed
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["sources"][0]["password"] = 55512345
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = scan(out, src)
    assert not result.passed and result.leaks.get("secret", 0) >= 1
    assert "manifest.json" in result.where["secret"]


def test_a_public_word_that_is_also_a_secret_value_is_no_false_refusal(tmp_path):
    """Only numeric-looking secrets are looked for as whole public-looking strings: a password that happens
    to be a public word (the thread name MainThread) is replaced under its key and stays public elsewhere."""
    src = _with_source_record(tmp_path, password="MainThread")
    out = tmp_path / "red.popprof"
    assert redact(src, out, key=KEY_A).passed
    record = json.loads((out / "manifest.json").read_text())["sources"][0]
    assert record["password"].startswith("secret_")
    assert "MainThread" in set(popprof.open(out).threads["thread_name"])
