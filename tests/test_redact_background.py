"""The leak scan's halves beside a trace redaction (popprof/redact/background.py): forked processes
that derive the original's sensitive set and find the output's strings on their own, and the
fallbacks when a process cannot run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from popprof.model.errors import InputError
from popprof.redaction import background, redact
from popprof.redaction import chrome as chrome_mod
from popprof.redaction.chrome import ChromeRedactor
from popprof.redaction.scan import Scanner
from popprof.redaction.sensitive import SensitiveSet, derive

sys.path.insert(0, str(Path(__file__).parent))
from redact_helpers import KEY_A, chrome_trace  # noqa: E402


def _file_strings(path: Path) -> set[bytes]:
    """Every distinct string of a trace as the standalone scan reads it from disk."""
    seen: set[bytes] = set()

    class Recorder(Scanner):
        def check(self, value, place, key=None, top=None):
            seen.add(value)

    chrome_mod.scan_chrome(path, Recorder(SensitiveSet()))
    return seen


def _decoded(strings: set[bytes]) -> set[str]:
    out = set()
    for raw in strings:
        if raw:
            out.add(json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode())
    return out


@pytest.mark.parametrize("chunk", [7, 1000, 1 << 20])
def test_output_strings_do_not_depend_on_how_the_writer_cut_the_bytes(tmp_path, chunk):
    src = chrome_trace(tmp_path / "t.json", events=500)  # escaped quotes too: both tokenizers are used
    data = src.read_bytes()
    finder = background.OutputStrings(block_size=512)
    assert finder.process is not None  # a forked process on this platform
    for at in range(0, len(data), chunk):  # cuts fall inside strings and between a key and its value
        finder.feed(data[at : at + chunk])
    found = finder.close()
    assert found is not None
    assert _decoded(found) == _file_strings(src)
    assert "CanaryMainThread" in _decoded(found)


def test_string_finder_in_process_matches_the_forked_one(tmp_path):
    src = chrome_trace(tmp_path / "t.json", events=200)
    data = src.read_bytes()
    here = background.StringFinder(block_size=300)
    forked = background.OutputStrings(block_size=300)
    for at in range(0, len(data), 97):
        here.feed(data[at : at + 97])
        forked.feed(data[at : at + 97])
    assert here.close() == forked.close()


def test_derivation_on_a_process_equals_deriving_here(tmp_path):
    src = chrome_trace(tmp_path / "t.json", events=300)
    forked = background.Derivation(src, "chrome")
    assert forked.process is not None
    there = forked.result()
    here = derive(src, "chrome")
    assert (there.strings, there.wholes, there.words, there.exempt) == (
        here.strings,
        here.wholes,
        here.words,
        here.exempt,
    )
    assert any("canary" in token.lower() for token in there.strings)


def _same_redaction(tmp_path: Path, name: str) -> tuple[bytes, dict]:
    src = chrome_trace(tmp_path / "t.json", events=300)
    out = tmp_path / f"{name}.json"
    report = redact(src, out, key=KEY_A)
    return (out.read_bytes() if out.exists() else b""), report.scan


def test_without_fork_the_same_work_runs_here(tmp_path, monkeypatch):
    forked_bytes, forked_scan = _same_redaction(tmp_path, "forked")
    monkeypatch.setattr(background, "_fork_context", lambda: None)
    here_bytes, here_scan = _same_redaction(tmp_path, "here")
    assert forked_scan["passed"] and here_scan["passed"]
    assert here_bytes == forked_bytes
    assert here_scan["strings_checked"] == forked_scan["strings_checked"]


def test_with_parallel_work_off_no_helper_process_starts(tmp_path, monkeypatch):
    from multiprocessing.process import BaseProcess

    forked_bytes, forked_scan = _same_redaction(tmp_path, "forked")
    monkeypatch.setenv("POPPROF_PARALLEL", "0")  # io.parallel's one switch reaches the redaction too
    started: list = []
    monkeypatch.setattr(BaseProcess, "start", lambda self: started.append(self))
    here_bytes, here_scan = _same_redaction(tmp_path, "serial")
    assert started == []
    assert here_scan["passed"] and here_bytes == forked_bytes
    assert here_scan["strings_checked"] == forked_scan["strings_checked"]


def _dies(*args, **kwargs):
    raise SystemExit(9)  # the child process ends without answering


def test_a_dead_derivation_process_is_replaced_by_deriving_here(tmp_path, monkeypatch):
    monkeypatch.setattr(background, "_derive_child", _dies)
    monkeypatch.setattr(ChromeRedactor, "_name", lambda self, value: value)  # a redactor that leaks
    src = chrome_trace(tmp_path / "t.json")
    report = redact(src, tmp_path / "r.json", key=KEY_A)
    assert not report.passed and "identifier" in report.scan["leaked_kinds"]
    assert not (tmp_path / "r.json").exists()


def test_a_dead_output_process_makes_the_scan_read_the_written_file(tmp_path, monkeypatch):
    monkeypatch.setattr(background, "_output_child", _dies)
    src = chrome_trace(tmp_path / "t.json")
    assert redact(src, tmp_path / "ok.json", key=KEY_A).passed
    monkeypatch.setattr(ChromeRedactor, "_name", lambda self, value: value)
    report = redact(src, tmp_path / "r.json", key=KEY_A)
    assert not report.passed and "identifier" in report.scan["leaked_kinds"]
    assert any(loc["where"].endswith(".name") for loc in report.scan["locations"])


def test_no_process_is_left_behind(tmp_path):
    import multiprocessing

    src = chrome_trace(tmp_path / "t.json")
    redact(src, tmp_path / "r.json", key=KEY_A)
    bad = tmp_path / "bad.json"
    bad.write_bytes(src.read_bytes()[:-200])  # a cut trace is refused now (it does not end its JSON value)
    with pytest.raises(InputError, match="does not end with"):
        redact(bad, tmp_path / "r2.json", key=KEY_A)
    assert multiprocessing.active_children() == []  # the scan's helpers ended with the refusal too
    assert not (tmp_path / "r2.json").exists()


def test_a_string_longer_than_the_limit_is_one_line_exit_2(tmp_path):
    src = tmp_path / "long.json"
    src.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "name": "x",
                        "ts": 0,
                        "dur": 1,
                        "pid": 1,
                        "tid": 1,
                        "args": {"blob": "a" * 3_000_000},
                    }
                ]
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "popprof", "redact", str(src), "-o", str(tmp_path / "o.json")],
        capture_output=True,
        text=True,
        check=False,
        env={
            **__import__("os").environ,
            "POPPROF_MAX_STRING_BYTES": "1000000",
            "POPPROF_REDACT_KEY": KEY_A.decode(),
        },
    )
    assert proc.returncode == 2, proc.stderr
    assert "string" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
    assert not (tmp_path / "o.json").exists()


def test_blocks_without_strings_pass_through(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_mod, "BLOCK", 256)
    doc = {
        "traceEvents": [
            {
                "ph": "C",
                "name": "canary_counter",
                "pid": 1,
                "tid": 1,
                "ts": 0,
                "args": {"values": list(range(20_000))},
            }
        ]
    }
    src = tmp_path / "numbers.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "numbers.red.json"
    assert redact(src, out, key=KEY_A).passed
    red = json.loads(out.read_text())
    assert list(red["traceEvents"][0]["args"].values()) == [list(range(20_000))]
    assert red["traceEvents"][0]["name"] != "canary_counter"


def test_deep_structural_nesting_redacts_without_recursion(tmp_path):
    deep = "[" * 100_000 + '"canary_deep_secret"' + "]" * 100_000
    src = tmp_path / "deep.json"
    src.write_text(
        '{"traceEvents": [{"ph": "X", "name": "n", "ts": 0, "dur": 1, "pid": 1, "tid": 1, '
        f'"args": {{"x": {deep}}}}}]}}'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "popprof", "redact", str(src), "-o", str(tmp_path / "o.json")],
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, "POPPROF_REDACT_KEY": KEY_A.decode()},
    )
    assert proc.returncode in (0, 2), proc.stderr
    assert "Traceback" not in proc.stderr
    if proc.returncode == 0:
        assert "canary_deep_secret" not in (tmp_path / "o.json").read_text()


def test_cuts_are_exact_with_escaped_quotes_and_backslash_runs():
    import random
    import re

    from popprof.io.jsonbytes import last_opening_quote, unescaped_quotes

    strings = re.compile(rb'"(?:[^"\\]|\\.)*"')
    rng = random.Random(3)
    alphabet = ["a", "\\", '"', " ", "x"]
    for _ in range(300):
        items = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9))) for _ in range(rng.randint(1, 6))
        ]
        data = json.dumps({"k": items, "m": {s: s for s in items}}).encode()
        starts = [m.start() for m in strings.finditer(data)]
        bounds = sorted(p for m in strings.finditer(data) for p in (m.start(), m.end() - 1))
        assert unescaped_quotes(data).tolist() == bounds
        assert last_opening_quote(data) == (starts[-1] if starts[-1] > 0 else -1)


def test_the_allocator_settings_are_never_changed_in_the_calling_process(monkeypatch, tmp_path):
    """No process-wide mallopt in the user's process (issue 23): the heap helpers only give free pages back
    (malloc_trim), and a whole redaction with the scan sets nothing here; only the scan's own forked helpers,
    which end with their job, keep freed memory (docs/traces.md, "The C heap")."""
    from popprof.io import heap

    calls = []

    class FakeLibc:
        def mallopt(self, option, value):
            calls.append((option, value))
            return 1

        def malloc_trim(self, pad):
            calls.append(("trim", pad))
            return 1

    monkeypatch.setattr(heap, "_libc", lambda: FakeLibc())
    assert not hasattr(heap, "reuse_large_blocks")
    heap.release_free_memory()
    assert heap.keep_freed_memory_in_helper() is False
    src = tmp_path / "trace.json"
    chrome_trace(src)
    report = redact(src, tmp_path / "out.json", key=KEY_A)
    assert report.passed
    assert calls == [("trim", 0)]


def _helper_heap(send) -> None:
    from popprof.io import heap

    send.send(heap.keep_freed_memory_in_helper())


def test_a_forked_helper_keeps_freed_memory():
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_helper_heap, args=(send,))
    process.start()
    applied = receive.recv()
    process.join()
    assert applied is True


def test_gc_is_paused_only_inside_the_block():
    import gc

    from popprof.io import heap

    assert gc.isenabled()
    with heap.gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_output_pipe_has_a_wide_buffer_where_linux_allows_it():
    fcntl = pytest.importorskip("fcntl")
    if (
        not hasattr(fcntl, "F_GETPIPE_SZ")
        or int(Path("/proc/sys/fs/pipe-max-size").read_text()) < background.PIPE_BYTES
    ):
        pytest.skip("no pipe buffer sizes here")
    strings = background.OutputStrings()
    if strings.process is None:
        pytest.skip("no fork here")
    try:
        assert fcntl.fcntl(strings.send.fileno(), fcntl.F_GETPIPE_SZ) == background.PIPE_BYTES
        strings.feed(b'{"key": "value"}')
        assert strings.close() == {b"key", b"value"}
    finally:
        strings.cancel()
