"""popprof record forwards SIGTERM / SIGINT to CMD and still processes what CMD left (bounded waits)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = str(Path(__file__).resolve().parent / "record_child.py")
READY_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 60.0


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"popprof record ended early ({proc.returncode}): {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("CMD never became ready")
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_is_forwarded_and_partial_results_are_processed(tmp_path: Path, signum: int) -> None:
    out, ready = tmp_path / "run", tmp_path / "ready"
    # no terminal here (stdin, stdout, stderr are not ttys): SIGINT is forwarded too
    proc = subprocess.Popen([sys.executable, "-m", "popprof", "record", "-o", str(out), "--no-plots", "--",
                             sys.executable, CHILD, "--summary", "--wait-signal", str(ready)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(ready, proc)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr[-2000:]
    assert f"child: got {name}; finishing" in stdout  # CMD got the signal and could finish its own way
    assert f"child: got {name}; finishing" in (out / "stdout.log").read_text("utf-8")
    rec = json.loads((out / "record.json").read_text("utf-8"))
    assert rec["signals_received"] == [name] and rec["signals_forwarded"] == [name]
    assert rec["cmd_exit_code"] == 128 + signum and rec["exit_code"] == 128 + signum
    findings = json.loads((out / "findings.json").read_text("utf-8"))
    assert [p["profile"] for p in findings["profiles"]] == ["stdout.text_summary"]  # what CMD printed before
    assert "memory.headroom" in [f["rule_id"] for f in findings["profiles"][0]["findings"]]
    assert (out / "report.html").is_file()
