"""``--key-file`` and ``--policy`` are read like every option file (a regular file within ``option-bytes``:
a FIFO or /dev/zero is one line, exit 2, never a hang); user patterns are bounded regexes; a key is
checked for content as well as length, from every source."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.model.errors import UsageError
from popprof.redaction import redact
from popprof.redaction.policy import build_policy
from popprof.redaction.pseudonym import key_weakness

sys.path.insert(0, str(Path(__file__).parent))
from redact_helpers import KEY_A, canary_profile  # noqa: E402

GOOD_KEY = "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps({"traceEvents": [{"ph": "i", "name": "QzvCanary", "pid": 1, "tid": 1, "ts": 1}]})
    )
    return path


class _Result:
    def __init__(self, exit_code: int, output: str) -> None:
        self.exit_code, self.output = exit_code, output


@pytest.fixture
def run(capsys, monkeypatch):
    """``popprof ARGS`` through the entry point (its error handling: one line, exit 2), with a key."""

    def invoke(args: list[str], env: dict | None = None) -> _Result:
        for name, value in {"POPPROF_REDACT_KEY": GOOD_KEY, **(env or {})}.items():
            monkeypatch.setenv(name, value)
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return _Result(code, captured.out + captured.err)

    return invoke


@pytest.mark.parametrize("option", ["--key-file", "--policy"])
def test_a_fifo_option_file_is_one_line_exit_2(tmp_path, option, run):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: an open for reading would block forever
    result = run(["redact", str(_trace(tmp_path)), "-o", str(tmp_path / "o.json"), option, str(fifo)])
    assert result.exit_code == 2, result.output
    assert "not a regular file" in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("option", ["--key-file", "--policy"])
def test_dev_zero_as_an_option_file_is_refused(tmp_path, option, run):
    result = run(["redact", str(_trace(tmp_path)), "-o", str(tmp_path / "o.json"), option, "/dev/zero"])
    assert result.exit_code == 2 and "not a regular file" in result.output, result.output


def test_an_oversized_key_file_is_refused(tmp_path, run):
    key = tmp_path / "key"
    key.write_bytes(os.urandom(64) * 10)
    result = run(
        ["--limit", "option-bytes=256", "redact", str(_trace(tmp_path)), "-o", str(tmp_path / "o.json"),
         "--key-file", str(key)]
    )  # fmt: skip
    assert result.exit_code == 2 and "option-bytes" in result.output, result.output


def test_a_catastrophic_keep_regex_is_one_line_exit_2(tmp_path, run):
    result = run(["redact", str(_trace(tmp_path)), "-o", str(tmp_path / "o.json"), "--keep", "re:(a+)+$"])
    assert result.exit_code == 2 and "exponential time" in result.output, result.output
    policy = tmp_path / "policy.toml"
    policy.write_text('keep = ["re:(\\\\w*\\\\s?)*x"]\n')
    with pytest.raises(UsageError, match="exponential time"):
        build_policy(policy, use_config=False)
    assert build_policy(keep=["re:^layer_[0-9]+$", "MyLib::*"], use_config=False).keeps("layer_12")


@pytest.mark.parametrize(
    "key",
    [
        "k" * 32,  # one character
        "abababababababababab",  # two
        "0123456789abcdef" * 2,  # a repeated part
        "abcdefghijklmnopqrstuvwxyz",  # a run of consecutive characters
        "kkkkkkkk0123456789",
    ],
)
def test_weak_keys_are_refused_from_every_source(tmp_path, key, run):
    assert key_weakness(key.encode()) is not None
    src = _trace(tmp_path)
    with pytest.raises(UsageError):
        redact(src, tmp_path / "api.json", key=key)
    result = run(["redact", str(src), "-o", str(tmp_path / "env.json")], env={"POPPROF_REDACT_KEY": key})
    assert result.exit_code == 2 and not (tmp_path / "env.json").exists(), result.output
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    result = run(["redact", str(src), "-o", str(tmp_path / "file.json"), "--key-file", str(key_file)])
    assert result.exit_code == 2 and "key" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "key",
    [GOOD_KEY, KEY_A.decode(), "correct horse battery staple", os.urandom(32).hex()],
    # stable ids: every pytest-xdist worker must collect the same names
    ids=["hex-key", "team-key", "passphrase", "random-32-bytes"],
)
def test_sound_keys_pass(tmp_path, key, run):
    assert key_weakness(key.encode()) is None
    assert redact(_trace(tmp_path), tmp_path / "o.json", key=key).passed


def test_redact_takes_a_config_file_and_its_redact_table_is_the_policy(tmp_path, run):
    config = tmp_path / "team.toml"
    config.write_text('[redact]\nkeep = ["QzvCanary"]\n')
    out = tmp_path / "o.json"
    result = run(["redact", str(_trace(tmp_path)), "-o", str(out), "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "QzvCanary" in out.read_text()  # kept, as the config says
    assert "keeps 1 pattern readable" in result.output  # and said on stderr
    result = run(
        ["redact", str(_trace(tmp_path)), "-o", str(tmp_path / "x.json"), "--config", str(tmp_path / "no")]
    )
    assert result.exit_code == 2 and "config file not found" in result.output


def test_scan_writes_its_report_atomically_with_o(tmp_path, run):
    src = _trace(tmp_path)
    out = tmp_path / "o.json"
    assert run(["redact", str(src), "-o", str(out)]).exit_code == 0
    report = tmp_path / "scan.json"
    result = run(["scan", str(out), "--against", str(src), "-o", str(report)])
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["scan"]["passed"] is True
    assert "wrote" in result.output
    leaked = tmp_path / "leak.json"
    result = run(["scan", str(src), "--against", str(src), "-o", str(leaked)])  # the original leaks itself
    assert result.exit_code == 1
    scan = json.loads(leaked.read_text())["scan"]
    assert scan["passed"] is False and scan["locations"]
    assert "QzvCanary" not in leaked.read_text()  # places and kinds, never the value
    result = run(["scan", str(out), "--against", str(src), "-o", str(src)])
    assert result.exit_code == 2 and json.loads(src.read_text())  # never overwrites an input


def test_the_scan_reads_an_original_bundle_as_the_bundle_reader_does(tmp_path, monkeypatch):
    """The leak scan's own reading of an original bundle goes through readers/bundle.py: its manifest is
    bounded and every field checked (read_manifest), its tables are regular files inside it (open_member)."""
    from popprof.model.errors import InputError
    from popprof.readers import bundle
    from popprof.redaction import scan
    from popprof.redaction.sensitive import derive

    src = bundle.write(canary_profile(), tmp_path / "in.popprof")
    out = tmp_path / "out.popprof"
    assert redact(src, out, key=KEY_A).passed
    assert scan(out, against=src).passed
    outside = tmp_path / "elsewhere.parquet"
    table = next(src.glob("*.parquet"))
    outside.write_bytes(table.read_bytes())
    table.unlink()
    table.symlink_to(outside)  # a received bundle's member pointing anywhere on this machine
    with pytest.raises(InputError, match="symlink"):
        derive(src, "bundle")
    table.unlink()
    table.write_bytes(outside.read_bytes())
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["sources"] = ["not an object"]
    (src / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="sources"):
        derive(src, "bundle")
