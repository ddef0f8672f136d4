"""``popprof redact`` / ``popprof scan`` on the command line: exit codes, messages, key handling."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.readers import bundle

sys.path.insert(0, str(Path(__file__).parent))
from redact_helpers import KEY_A, canary_profile, chrome_trace  # noqa: E402


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "orig.popprof"
    bundle.write(canary_profile(), out)
    return out


def test_redact_with_key_file_report_and_mapping(original, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("POPPROF_REDACT_KEY", raising=False)
    key = tmp_path / "team.key"
    key.write_bytes(KEY_A)
    out, rep, mapping = tmp_path / "r.popprof", tmp_path / "rep.json", tmp_path / "map.json"
    code = main(
        [
            "redact",
            str(original),
            "-o",
            str(out),
            "--key-file",
            str(key),
            "--report",
            str(rep),
            "--mapping-out",
            str(mapping),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "leak scan: passed" in captured.out and "random key" not in captured.err
    assert "sensitive" in captured.err and str(mapping) in captured.err
    report = json.loads(rep.read_text())
    assert (
        report["key_source"] == "file" and report["scan"]["passed"] and report["replaced"]["prog"]["distinct"]
    )
    assert json.loads(mapping.read_text())["prog"]
    assert main(["scan", str(out), "--against", str(original)]) == 0


def test_without_key_a_random_key_is_announced(original, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("POPPROF_REDACT_KEY", raising=False)
    assert main(["redact", str(original), "-o", str(tmp_path / "r.popprof")]) == 0
    assert "random key" in capsys.readouterr().err


def test_env_key_gives_the_same_pseudonyms_as_the_key_file(tmp_path, capsys, monkeypatch):
    src = chrome_trace(tmp_path / "t.json")
    key = tmp_path / "k"
    key.write_bytes(KEY_A)
    assert main(["redact", str(src), "-o", str(tmp_path / "a.json"), "--key-file", str(key)]) == 0
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY_A.decode())
    assert main(["redact", str(src), "-o", str(tmp_path / "b.json")]) == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_leak_exits_1_names_the_kind_and_writes_nothing(original, tmp_path, capsys):
    policy = tmp_path / "policy.toml"
    policy.write_text("[redact.scrub]\nhosts = false\nips = false\n")
    out = tmp_path / "r.popprof"
    code = main(["redact", str(original), "-o", str(out), "--policy", str(policy)])
    err = capsys.readouterr().err
    assert code == 1 and "leak scan FAILED" in err and ("host" in err or "ip" in err)
    assert "canary" not in err.lower() and "10.99" not in err
    assert not out.exists()


def test_scan_on_an_unredacted_input_exits_1(original, capsys):
    assert main(["scan", str(original), "--against", str(original)]) == 1
    captured = capsys.readouterr()
    assert "FAILED" in captured.err and "canary" not in (captured.out + captured.err).lower()
    assert ".parquet:" in captured.err  # where: table, column and row


@pytest.mark.parametrize(
    "args",
    [
        ["redact", "{missing}", "-o", "{tmp}/x"],
        ["redact", "{orig}", "-o", "{orig}"],
        ["redact", "{orig}", "-o", "{orig}/inside"],
        ["redact", "{orig}", "-o", "{tmp}/x", "--key-file", "{missing}"],
        ["redact", "{orig}", "-o", "{tmp}/x", "--policy", "{missing}"],
        ["scan", "{missing}", "--against", "{orig}"],
    ],
)
def test_bad_usage_exits_2_with_one_line(original, tmp_path, capsys, args):
    values = {"missing": str(tmp_path / "nope"), "tmp": str(tmp_path), "orig": str(original)}
    code = main([a.format(**values) for a in args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("popprof: error:") and err.count("\n") == 1 and "Traceback" not in err


def test_report_and_mapping_never_go_into_the_input_or_output(original, tmp_path, capsys):
    out = tmp_path / "r.popprof"
    assert main(["redact", str(original), "-o", str(out), "--report", str(original / "rep.json")]) == 2
    assert main(["redact", str(original), "-o", str(out), "--mapping-out", str(out / "map.json")]) == 2
    assert not (original / "rep.json").exists() and not out.exists()


def test_a_policy_file_in_a_home_directory_does_not_leak_its_path(original, tmp_path, capsys):
    home = tmp_path / "home" / "canary.smith"
    home.mkdir(parents=True)
    policy = home / "team-policy.toml"
    policy.write_text('keep = ["MyLib::*"]\n')
    out = tmp_path / "r.popprof"
    assert main(["redact", str(original), "-o", str(out), "--policy", str(policy)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["redacted"]["policy"]["source"] == ["policy file"]
    assert "canary" not in (out / "manifest.json").read_text()


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize(
    ("source", "out_name"),
    [
        (FIXTURES / "traces" / "training_loop.json.gz", "shared.json"),
        (FIXTURES / "traces" / "training_loop.json", "shared.json.gz"),
        (FIXTURES / "traces" / "training_loop.json.gz", "shared.json.GZ"),
        (FIXTURES / "text_summary" / "mk2_training.txt", "summary.txt.gz"),
        ("gzipped summary", "summary.txt"),
    ],
)
def test_the_output_compression_follows_the_output_name(source, out_name, tmp_path, capsys):
    """issue 46 item 3: a .gz input redacted to -o x.json was written as gzip, and -o x.json.gz as plain JSON."""
    import gzip

    if source == "gzipped summary":
        source = tmp_path / "summary.txt.gz"
        source.write_bytes(gzip.compress((FIXTURES / "text_summary" / "mk2_training.txt").read_bytes()))
    out, key = tmp_path / out_name, tmp_path / "team.key"
    key.write_bytes(KEY_A)
    code = main(["redact", str(source), "-o", str(out), "--key-file", str(key)])
    capsys.readouterr()
    assert code == 0
    data = out.read_bytes()
    assert (data[:2] == b"\x1f\x8b") == out_name.lower().endswith(".gz")
    text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    assert text.lstrip().startswith("{") if "json" in out_name.lower() else "Memory Usage" in text
    if data[:2] == b"\x1f\x8b":
        assert data[4:8] == b"\0\0\0\0" and not data[3] & 0x08  # no time, no file name in the header
    import popprof

    assert popprof.open(out).name  # reads back
    assert main(["scan", str(out), "--against", str(source)]) == 0  # and the scan reads it as written
