"""Issue 24's red-team findings: numeric-looking secrets, policy from a parent directory, short keys from
every source, what the manifest publishes, messages that name only existing options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.model.errors import UsageError
from popprof.redaction import redact
from popprof.redaction.policy import build_policy, project_config
from popprof.redaction.pseudonym import key_fingerprint

sys.path.insert(0, str(Path(__file__).parent))
from redact_helpers import KEY_A, canary_profile  # noqa: E402

SECRETS = {
    "password": "55512345",
    "api_key": "0x5f3a9c2e",
    "token": "2024-05-17",
    "secret": "1.2.3",
    "auth_token": "31415926535",
}


def _trace(tmp_path: Path, extra_text: str = "") -> Path:
    events = [
        {"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": dict(SECRETS)},
        {"ph": "i", "name": "password=55512345 in free text", "pid": 1, "tid": 1, "ts": 3, "s": "t"},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}) + extra_text)
    return path


def test_numeric_looking_secrets_are_replaced(tmp_path):
    out = tmp_path / "red.json"
    report = redact(_trace(tmp_path), out, key=KEY_A)
    assert report.passed
    doc = json.loads(out.read_text())
    args = doc["traceEvents"][0]["args"]
    assert set(args) == set(SECRETS)  # the keys are public, their values are not
    for key, value in SECRETS.items():
        assert args[key] != value and args[key].startswith("secret_"), key
    assert "55512345" not in out.read_text()
    assert doc["traceEvents"][0]["name"] == "aten::mm"


def test_scan_catches_a_numeric_secret_left_in_place(tmp_path):
    src = _trace(tmp_path)
    leaked = tmp_path / "leaked.json"
    leaked.write_text(src.read_text())
    assert not popprof.redaction.scan(leaked, against=src).passed


@pytest.fixture
def loosening_parent(tmp_path, monkeypatch):
    """A popprof.toml that keeps everything, in a PARENT of the working directory (like /tmp)."""
    parent = tmp_path / "shared"
    work = parent / "me" / "project"
    work.mkdir(parents=True)
    (parent / "popprof.toml").write_text('[redact]\nkeep = ["re:.*"]\n')
    monkeypatch.chdir(work)
    return parent, work


def test_a_config_in_a_parent_directory_is_never_applied(tmp_path, loosening_parent):
    _, work = loosening_parent
    assert project_config(work) is None
    policy = build_policy()
    assert policy.keep == [] and policy.loosened == []
    src = tmp_path / "in.json"
    src.write_text(
        json.dumps({"traceEvents": [{"ph": "i", "name": "QzvSecretEvent", "pid": 1, "tid": 1, "ts": 1}]})
    )
    out = tmp_path / "out.json"
    assert redact(src, out, key=KEY_A).passed
    assert "QzvSecretEvent" not in out.read_text()


def test_the_git_root_config_applies_and_loosening_is_said(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    sub = repo / "a" / "b"
    sub.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "popprof.toml").write_text('[redact]\nkeep = ["Qzv*"]\n[redact.scrub]\npaths = false\n')
    (sub / "popprof.toml").write_text('[redact]\nkeep = ["re:.*"]\n')  # not the root: ignored
    monkeypatch.chdir(sub)
    assert project_config() == repo / "popprof.toml"
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"traceEvents": [{"ph": "i", "name": "QzvKept", "pid": 1, "tid": 1, "ts": 1}]}))
    result = CliRunner().invoke(
        cli,
        ["redact", str(src), "-o", str(tmp_path / "o.json")],
        env={"POPPROF_REDACT_KEY": "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"},
    )
    assert result.exit_code == 0, result.output
    assert "keeps 1 pattern readable" in result.output and "paths scrubber off" in result.output


@pytest.mark.parametrize("key", [b"", b"ab", b"short-key-15byt", "fifteen-chars!!"])
def test_short_keys_are_refused_from_the_api(tmp_path, key):
    src = _trace(tmp_path)
    with pytest.raises(UsageError):
        redact(src, tmp_path / "o.json", key=key)


def test_short_keys_are_refused_from_the_environment_and_a_file(tmp_path):
    src = _trace(tmp_path)
    out = tmp_path / "o.json"
    result = CliRunner().invoke(cli, ["redact", str(src), "-o", str(out)], env={"POPPROF_REDACT_KEY": "ab"})
    assert result.exit_code != 0 and not out.exists()
    key_file = tmp_path / "k"
    key_file.write_bytes(b"0123456789abcde")  # 15 bytes
    result = CliRunner().invoke(cli, ["redact", str(src), "-o", str(out), "--key-file", str(key_file)])
    assert result.exit_code != 0 and not out.exists()
    assert "16 bytes" in result.output + str(result.exception)


def test_fingerprint_is_an_hmac_of_a_fixed_label():
    import hashlib
    import hmac

    fp = key_fingerprint(KEY_A)
    assert (
        fp == "hmac-sha256:" + hmac.digest(KEY_A, b"popprof redaction key fingerprint", "sha256").hex()[:12]
    )
    assert fp[12:] not in hashlib.sha256(b"popprof redaction key fingerprint\0" + KEY_A).hexdigest()


def test_manifest_publishes_no_dropped_key_names_or_keep_patterns(tmp_path):
    src = tmp_path / "in.popprof"
    profile = canary_profile()
    profile.update_metadata({"QzvSecretMetaKey": "value-of-it"})
    profile.save(src) if hasattr(profile, "save") else popprof.export(profile, src)
    out = tmp_path / "out.popprof"
    policy = build_policy(keep=["QzvKeptPattern*"], drop=["metadata.QzvSecretMetaKey"], use_config=False)
    report = redact(src, out, key=KEY_A, policy=policy)
    assert report.passed
    manifest = (out / "manifest.json").read_text()
    assert "QzvSecretMetaKey" not in manifest and "QzvKeptPattern" not in manifest
    recorded = json.loads(manifest)["redacted"]["policy"]
    assert recorded["keep"] == 1 and recorded["drop"] == 1
    assert "QzvSecretMetaKey" not in json.dumps(
        report.to_dict() if hasattr(report, "to_dict") else vars(report)
    )


def test_scan_message_names_no_option_it_does_not_have(tmp_path):
    from popprof.cli.redact import leak_message

    scan = {
        "leaked_kinds": {"secret": 9},
        "locations": [{"kind": "secret", "where": f"x:{i}"} for i in range(9)],
    }
    assert "--report" in leak_message(scan) and "--report" not in leak_message(scan, report_option=False)


def test_umask_is_respected_for_outputs(tmp_path):
    src = _trace(tmp_path)
    old = os.umask(0o077)
    try:
        out = tmp_path / "o.json"
        assert redact(src, out, key=KEY_A).passed
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o600
    mapping = tmp_path / "map.json"
    assert redact(src, tmp_path / "o2.json", key=KEY_A, mapping_out=mapping).passed
    assert mapping.stat().st_mode & 0o777 == 0o600  # the mapping is owner-only under any umask
    current = os.umask(0o022)
    os.umask(current)
    assert (tmp_path / "o2.json").stat().st_mode & 0o777 == 0o666 & ~current


@pytest.mark.parametrize("after", ["\nINFO appended log line QzvSecret\n", "\n// a comment\n", " garbage"])
def test_text_after_the_json_is_refused(tmp_path, after):
    src = _trace(tmp_path, extra_text=after)
    out = tmp_path / "o.json"
    with pytest.raises(popprof.InputError, match="text follows the JSON value"):
        redact(src, out, key=KEY_A)
    assert not out.exists()


def test_json_in_strings_keeps_numbers_and_repeated_keys_byte_for_byte(tmp_path):
    inner = '{"a": 1e400, "b": 0.1000000000000000055511, "a": "QzvSecretValue", "n": [1, 2.50, -0.0]}'
    events = [{"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 1, "s": "t", "args": {"config": inner}}]
    src = tmp_path / "t.json"
    src.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "o.json"
    assert redact(src, out, key=KEY_A).passed
    got = json.loads(out.read_text())["traceEvents"][0]["args"]["config"]
    assert got.startswith('{"a": 1e400, "b": 0.1000000000000000055511, "a": "arg_')
    assert got.endswith('"n": [1, 2.50, -0.0]}') and "QzvSecretValue" not in got
