"""The string-length limit counts one string, not the file (issue 24 item 7): a valid kineto trace with one
70 KB thread name redacts (with the scan), scans and summarises at the real block size, with the limit set low
enough that holding the rest of the file behind that event would trip it. (7a8401c refused the reported 123 MB
trace with "a JSON string of more than 67,138,811 bytes"; a string over the limit is still refused.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.redaction import chrome as chrome_mod
from popprof.testing import trace_synth as synth

LIMIT = 128 << 10  # bytes of one string; the trace is about 80 times longer


def _cli(capsys, *args: object) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def _trace_with_thread_name(tmp_path: Path, name: str) -> Path:
    base = synth.write_chrome_trace(tmp_path / "base.json", 5, seed=1, args="kineto", layers=582)
    data = base.read_bytes()
    cut = data.index(b"\n{", 4096) + 1  # early: the whole rest of the file follows the long event
    event = {
        "name": "thread_name",
        "ph": "M",
        "ts": 5_000_000_000,
        "pid": 4242,
        "tid": 9999,
        "args": {"name": name},
    }
    path = tmp_path / "trace.json"
    path.write_bytes(data[:cut] + json.dumps(event).encode() + b",\n" + data[cut:])
    assert (
        path.stat().st_size > chrome_mod.BLOCK + LIMIT
    )  # what the old redactor held back would pass the limit
    return path


@pytest.fixture
def limited(monkeypatch):
    monkeypatch.setenv("POPPROF_MAX_STRING_BYTES", str(LIMIT))
    monkeypatch.setenv("POPPROF_REDACT_KEY", "a-sound-benchmark-key-0123456789")


def test_a_70_kb_thread_name_redacts_scans_and_summarises(tmp_path, capsys, limited):
    name = "thread " + "x7Qz" * 17_500  # 70 KB, with a space: free text
    src = _trace_with_thread_name(tmp_path, name)
    out = tmp_path / "redacted.json"
    code, err = _cli(capsys, "redact", src, "-o", out)
    assert code == 0, err
    written = out.read_text()
    assert "x7Qzx7Qz" not in written
    assert [e for e in json.loads(written)["traceEvents"] if e.get("tid") == 9999][0]["args"][
        "name"
    ].startswith("thr")
    code, err = _cli(capsys, "scan", out, "--against", src)
    assert code == 0, err
    for path in (src, out):
        code, err = _cli(capsys, "summary", path)
        assert code == 0 and "Traceback" not in err, err


def test_a_string_over_the_limit_is_still_refused_in_one_line(tmp_path, capsys, limited):
    src = _trace_with_thread_name(tmp_path, "thread " + "x7Qz" * (LIMIT // 4 + 100))
    for args in (["redact", src, "-o", tmp_path / "redacted.json"], ["summary", src]):
        code, err = _cli(capsys, *args)
        assert code == 2 and len(err.splitlines()) == 1 and "string-bytes" in err, (args, err)
    assert not (tmp_path / "redacted.json").exists()
