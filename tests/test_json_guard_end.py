"""Text after the JSON value (an appended log line, a comment) and two JSON values back to back are refused by
every command that reads a trace or a JSON profile: one line, exit code 2 (issues 24 and 27). The check is the
JSON guard's (popprof/io/bounded.py), which every JSON reader reads through."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.io import bounded
from popprof.model.errors import InputError
from popprof.readers import chrome
from popprof.readers.chrome import plan as chrome_plan
from popprof.testing import trace_synth as synth

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real" / "traces" / "cpu_only_rank-34.json.gz"
SDK1 = ROOT / "fixtures" / "sdk1_json" / "mk2_training.json"
TAILS = {
    "log line": b"\n2026-12-02 10:00:00 INFO training finished\n",
    "comment": b"// written by the profiler\n",
    "second value": None,  # the trace again, right after itself
    "stray bracket": b"]\n",
}


def _cli(capsys, *args: object) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def _with_tail(tmp_path: Path, data: bytes, tail: bytes | None, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_bytes(data + (data if tail is None else tail))
    return path


@pytest.mark.parametrize("kind", list(TAILS))
def test_a_real_trace_with_text_after_it_is_refused_by_every_command(tmp_path, capsys, kind):
    data = gzip.decompress(REAL.read_bytes())
    path = _with_tail(tmp_path, data, TAILS[kind])
    commands = [
        ["summary", path],
        ["check", path],
        ["query", path, "select count(*) from events"],
        ["export", path, "-o", tmp_path / "out.popprof"],
        ["tables", path],
    ]
    for args in commands:
        code, err = _cli(capsys, *args)
        lines = err.splitlines()
        assert code == 2, (args, err)
        assert len(lines) == 1 and "text follows the JSON value" in lines[0], (args, err)
    assert not (tmp_path / "out.popprof").exists()


@pytest.mark.parametrize("kind", list(TAILS))
def test_redact_refuses_text_after_the_value_and_writes_nothing(tmp_path, capsys, monkeypatch, kind):
    """Redaction reads through the same guard: two values back to back (``{..}{..}``) or a stray bracket end
    with ``}`` or ``]`` like a whole trace does, and are refused all the same (issue 24 item 7)."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", "a-sound-benchmark-key-0123456789")
    data = gzip.decompress(REAL.read_bytes())
    path = _with_tail(tmp_path, data, TAILS[kind])
    out = tmp_path / "redacted.json"
    for args in (["redact", path, "-o", out], ["redact", path, "-o", out, "--no-scan"]):
        code, err = _cli(capsys, *args)
        lines = err.splitlines()
        assert code == 2, (args, err)
        assert len(lines) == 1 and "text follows the JSON value" in lines[0], (args, err)
        assert not out.exists()
    assert path.read_bytes() == data + (data if TAILS[kind] is None else TAILS[kind])  # the input untouched


def test_the_same_trace_without_the_text_reads(tmp_path, capsys):
    data = gzip.decompress(REAL.read_bytes())
    path = _with_tail(tmp_path, data, b"\n \r\n\t")  # white space after the value is fine
    code, err = _cli(capsys, "summary", path)
    assert code == 0 and err == ""


def test_gzip_and_array_form_and_sdk1_json_are_refused_too(tmp_path, capsys):
    data = gzip.decompress(REAL.read_bytes())
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(data + TAILS["log line"]))
    array = tmp_path / "array.json"
    array.write_bytes(b'[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]\n[]\n')
    sdk1 = _with_tail(tmp_path, SDK1.read_bytes(), TAILS["log line"], "profile.json")
    for path in (gz, array, sdk1):
        code, err = _cli(capsys, "summary", path)
        said = (
            "text follows the JSON value" in err or "unexpected content after document" in err
        )  # SDK 1.x: orjson
        assert code == 2 and said and len(err.splitlines()) == 1, err


def test_the_split_parse_refuses_text_after_the_value(tmp_path, monkeypatch):
    """A large plain file is parsed on two processes; text after its value still ends in the one error."""
    path = synth.write_chrome_trace(tmp_path / "t.json", 30, seed=3, args="kineto", layers=4)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    assert chrome.read(path).meta["chrome.parse_parts"] != "1"  # the split runs on the clean file
    data = path.read_bytes()
    for tail in (TAILS["log line"], data):
        path.write_bytes(data + tail)
        with pytest.raises(InputError, match="text follows the JSON value"):
            chrome.read(path)


def _guard(data: bytes, chunk: int) -> None:
    guard = bounded.JsonGuard(io.BytesIO(data), Path("x.json"))
    buffer = bytearray(chunk)
    while guard.readinto(buffer):
        pass


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 16])
def test_the_guard_finds_the_end_of_the_value_in_any_chunking(chunk):
    value = b'{"a": "}]\\"}", "b": [1, {"c": "x"}], "d": "\\\\"}'
    _guard(value + b"\n\n", chunk)
    _guard(b'  "a string: [ { not a container"  ', chunk)  # a top-level scalar has no end to find
    for tail in (b"x", b" {}", b"\n[]", b' "s"', b"0"):
        with pytest.raises(InputError, match=f"at byte {len(value) + len(tail) - len(tail.lstrip())}"):
            _guard(value + tail, chunk)
