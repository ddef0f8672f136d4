"""A trace rewritten while it is read fails at the next read with one line, exit 2 (issue 27): before, the pieces of
a split parse read whatever the file held by then, and a 288 MB trace overwritten mid-read spun the CPU for
minutes on bytes of two versions that framed nowhere. The rewrite here is deterministic: a hook in the parse."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.io.files import ChangedWhileRead
from popprof.readers import chrome
from popprof.readers.chrome import events, framing, split
from popprof.readers.chrome import plan as chrome_plan
from popprof.testing import trace_synth as synth


def _rewrite(path: Path, how: str) -> None:
    """Overwrite ``path`` in place: the same bytes (a new mtime), or cut to half (a new size)."""
    data = path.read_bytes()
    info = path.stat()
    with open(path, "r+b") as handle:
        if how == "cut":
            handle.truncate(len(data) // 2)
        else:
            handle.write(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))


_real_parse_part = split._parse_part


def _rewrite_at_first_piece(job: tuple):
    """``split._parse_part`` that rewrites the file before the first piece is read (module level: the forked
    worker may run it too; only the piece at offset 0, which this process takes first, rewrites)."""
    if job[1] == 0:
        _rewrite(Path(job[0]), os.environ["POPPROF_TEST_REWRITE"])
    return _real_parse_part(job)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return synth.write_chrome_trace(tmp_path / "k.json", 4, seed=6, args="kineto", layers=12)


@pytest.mark.parametrize("how", ["same-size", "cut"])
def test_a_rewrite_during_the_split_parse_is_refused(trace, monkeypatch, how):
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", trace.stat().st_size // 40)
    assert int(chrome.read(trace).meta["chrome.parse_parts"]) >= 8  # the split runs on the untouched file
    monkeypatch.setenv("POPPROF_TEST_REWRITE", how)
    monkeypatch.setattr(split, "_parse_part", _rewrite_at_first_piece)
    with pytest.raises(ChangedWhileRead, match="changed while it was read"):
        chrome.read(trace)  # the reader itself stops: not the check after it


@pytest.mark.parametrize("how", ["same-size", "cut"])
def test_a_rewrite_during_the_serial_parse_is_one_line_exit_2(tmp_path, monkeypatch, capsys, how):
    trace = tmp_path / "t.json"  # ~3 MB: the reader reads it in three 1 MiB reads
    rows = ",\n".join(
        f'{{"ph":"X","name":"op{i % 50}","pid":1,"tid":{i % 4},"ts":{i},"dur":1}}' for i in range(48_000)
    )
    trace.write_text('{"traceEvents":[\n' + rows + "\n]}\n")
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 1 << 62)
    monkeypatch.setattr(framing, "BLOCK_BYTES", 1 << 16)
    monkeypatch.setattr(framing, "FAST_BLOCK_BYTES", 1 << 16)
    blocks: list[int] = []
    rewrite = []

    def hook(real):
        def take(self, batch):
            blocks.append(1)
            if rewrite and len(blocks) == 1:
                _rewrite(trace, how)
            return real(self, batch)

        return take

    monkeypatch.setattr(events.StreamState, "take", hook(events.StreamState.take))
    monkeypatch.setattr(events.StreamState, "take_table", hook(events.StreamState.take_table))
    assert len(chrome.read(trace).events) == 48_000
    whole, blocks[:] = len(blocks), []
    rewrite.append(how)
    code = main(["summary", str(trace)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "changed while it was read" in err, err
    assert len(blocks) < whole / 2  # it stopped at the next read, not after parsing the rest of the file


def _slow_in_a_worker(job: tuple):
    """``split._parse_part`` that sleeps in a worker process (module level: the forked worker runs it)."""
    if os.getpid() != int(os.environ["POPPROF_TEST_MAIN_PID"]):
        time.sleep(30)
    return _real_parse_part(job)


def test_a_parse_worker_ends_silently_on_sigterm_and_the_read_goes_on(trace, monkeypatch, capfd):
    """SIGTERM to the split parse's worker mid-piece, with the CLI's SIGTERM handler installed (which a worker
    must not inherit): no traceback from the worker (before: 25 lines on stderr), and this process reads the
    file in one serial pass instead."""
    from popprof.cli import _on_sigterm

    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", trace.stat().st_size // 40)
    monkeypatch.setenv("POPPROF_TEST_MAIN_PID", str(os.getpid()))
    monkeypatch.setattr(split, "_parse_part", _slow_in_a_worker)
    real_start = split.start_parallel

    def start_then_terminate(*args, **kwargs):
        workers = real_start(*args, **kwargs)

        def terminate() -> None:
            time.sleep(0.3)
            for process in workers._pool.processes():
                os.kill(process.pid, signal.SIGTERM)

        threading.Thread(target=terminate, daemon=True).start()
        return workers

    monkeypatch.setattr(split, "start_parallel", start_then_terminate)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        profile = chrome.read(trace)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert profile.meta["chrome.parse_parts"] == "1"
    assert len(profile.events) == len(chrome.read(trace, parallel=False).events)
    assert capfd.readouterr().err == ""
