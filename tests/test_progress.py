"""Progress on a terminal: bytes read against the file size while a long read runs; silence otherwise."""

from __future__ import annotations

import io
import re
import sys
import time

import pytest

import popprof
from popprof.cli import main
from popprof.io import progress
from popprof.io.files import open_binary
from popprof.readers.chrome import framing, split
from popprof.readers.chrome import plan as chrome_plan
from popprof.testing import trace_synth as synth

AMOUNT = re.compile(r"(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) (bytes|kB|MB|GB)")
SCALE = {"bytes": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal, keeping everything drawn on it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal(monkeypatch):
    """Returns ``draw(func)``: run ``func`` with a fake terminal as stderr, give back what was drawn.

    (sys.stderr is replaced inside the test body: pytest's own capture resets it between set-up and call.)
    """
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.002)  # redraw often, so even a short read shows frames

    def draw(func) -> str:
        stream, saved = FakeTerminal(), sys.stderr
        sys.stderr = stream
        try:
            func()
        finally:
            sys.stderr = saved
            progress.set_quiet(False)
        return stream.getvalue()

    return draw


def amounts(text: str) -> list[tuple[float, float]]:
    """Every ``done/total unit`` the bar drew, in bytes."""
    return [(float(a) * SCALE[u], float(b) * SCALE[u]) for a, b, u in AMOUNT.findall(text)]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    return (
        synth.write_chrome_trace(root / "trace.json.gz", 400, seed=2),
        synth.write_chrome_trace(root / "trace.json", 150, seed=3),
    )


def test_the_bar_moves_with_the_bytes_read(terminal, traces):
    """Reads through open_binary inside reading(): the bar shows each step, against the file size."""
    path = traces[1]
    size = path.stat().st_size

    def read_in_quarters() -> None:
        with progress.reading(path), open_binary(path) as handle:
            while handle.read(size // 4 + 1):
                time.sleep(0.05)  # several redraws per quarter

    drawn = amounts(terminal(read_in_quarters))
    assert all(total == pytest.approx(size, abs=0.05e6) for _, total in drawn)  # against the file size
    steps = sorted({round(done / size, 1) for done, _ in drawn})
    assert 0.0 in steps and 1.0 in steps and len(steps) >= 4, steps  # 0 %, the quarters, 100 %


def test_reading_a_compressed_trace_counts_compressed_bytes(terminal, traces, monkeypatch):
    monkeypatch.setattr(framing, "BLOCK_BYTES", 1 << 18)
    path = traces[0]
    drawn = amounts(terminal(lambda: popprof.open(path)))
    size = path.stat().st_size
    assert drawn and all(total == pytest.approx(size, rel=0.01) for _, total in drawn)
    assert max(done for done, _ in drawn) == pytest.approx(size, rel=0.01)
    assert progress._meter is None  # nothing left counting after the read


def test_worker_processes_count_their_bytes_too(terminal, traces, monkeypatch):
    """A large plain trace is parsed in parts by forked workers; their reads reach the bar."""
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split.parallel, "cores", lambda: 2)
    started = []
    real_start = split.start_parallel
    monkeypatch.setattr(
        split, "start_parallel", lambda *a, **k: started.append(real_start(*a, **k)) or started[-1]
    )
    path = traces[1]
    drawn = amounts(terminal(lambda: popprof.open(path)))
    assert started and started[0] is not None  # the parallel path ran
    size = path.stat().st_size  # shown in MB with one decimal; the main process reads only a few kB itself
    assert drawn and max(done for done, _ in drawn) == pytest.approx(size, abs=0.05e6)


def test_a_worker_started_before_the_read_counts_its_bytes_too(terminal, traces, monkeypatch):
    """The split parse's worker forked early (`popprof summary` forks it before its imports) counts what it
    read before the bar existed: the meter is made with it (progress.prepare_meter) and the read takes it."""
    from popprof.readers.chrome import early

    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split.parallel, "cores", lambda: 2)
    path = traces[1]

    def start_then_read() -> None:
        assert early.start(path)
        assert progress._meter is not None and progress._meter.prepared_for is not None
        time.sleep(0.2)  # the worker reads its pieces before the read (and its bar) starts
        popprof.open(path)

    drawn = amounts(terminal(start_then_read))
    assert early._started is None  # adopted
    assert drawn and max(done for done, _ in drawn) == pytest.approx(path.stat().st_size, abs=0.05e6)
    assert progress._meter is None
    kept = []
    terminal(lambda: (early.start(path), kept.append(progress._meter), early.discard()))
    assert kept[0] is not None and progress._meter is None  # a worker nobody read from takes its meter along


def test_silent_when_not_a_terminal_or_quiet(terminal, traces, monkeypatch):
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    popprof.open(traces[0])
    assert plain.getvalue() == ""
    codes = []
    assert terminal(lambda: codes.append(main(["--quiet", "tables", str(traces[0])]))) == ""
    assert codes == [0]


def test_counted_files_add_nothing_without_a_bar(traces):
    handle = open(traces[1], "rb")  # noqa: SIM115
    assert progress.counted(handle) is handle  # no wrapper, no cost, when nothing is drawn
    handle.close()


def test_summary_shows_an_analysis_phase_after_the_read(terminal, traces):
    """Issue 28: on a 228 MB trace the bar was full at 8 s and then sat for 6 s of analysis."""
    drawn = terminal(lambda: main(["summary", str(traces[1]), "--format", "json"]))
    assert "reading" in drawn and "analysing trace.json" in drawn
    assert drawn.index("analysing") > drawn.rindex("reading")
    quiet = terminal(lambda: main(["summary", str(traces[1]), "-q"]))
    assert "analysing" not in quiet
