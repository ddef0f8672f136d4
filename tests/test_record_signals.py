"""popprof record forwards SIGTERM / SIGINT to CMD and still processes what CMD left (bounded waits)."""

from __future__ import annotations

import json
import os
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
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "popprof",
            "record",
            "-o",
            str(out),
            "--no-plots",
            "--",
            sys.executable,
            CHILD,
            "--summary",
            "--wait-signal",
            str(ready),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(ready, proc)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr[-2000:]
    assert f"child: got {name} x1; finishing" in stdout  # CMD got the signal once and finished its own way
    assert f"child: got {name} x1; finishing" in (out / "stdout.log").read_text("utf-8")
    rec = json.loads((out / "record.json").read_text("utf-8"))
    assert rec["signals_received"] == [name] and rec["signals_forwarded"] == [name]
    assert rec["cmd_exit_code"] == 128 + signum and rec["exit_code"] == 128 + signum
    assert (
        rec["cmd_killed_by_popprof"] is False and "killed it" not in stderr
    )  # it ended within the grace period
    findings = json.loads((out / "findings.json").read_text("utf-8"))
    assert [p["profile"] for p in findings["profiles"]] == ["stdout.text_summary"]  # what CMD printed before
    assert "memory.headroom" in [f["rule_id"] for f in findings["profiles"][0]["findings"]]
    assert (out / "report.html").is_file()


#: Runs popprof as a session leader whose controlling terminal is its stdin (a pseudo-terminal), as a shell would.
AS_TERMINAL_SESSION = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'popprof', *sys.argv[1:]])"
)


@pytest.mark.parametrize(("own_group", "forwarded"), [(False, []), (True, ["SIGINT"])])
def test_ctrl_c_in_a_terminal_reaches_cmd_once(tmp_path: Path, own_group: bool, forwarded: list[str]) -> None:
    """Ctrl-C goes to the terminal's whole foreground group: CMD in it already has it, so popprof must not send
    it again; a CMD that left the group did not get it, so popprof forwards it."""
    pty = pytest.importorskip("pty")
    controller, terminal = pty.openpty()
    out, ready = tmp_path / "run", tmp_path / "ready"
    extra = ["--own-group"] if own_group else []
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                AS_TERMINAL_SESSION,
                "record",
                "-o",
                str(out),
                "--no-check",
                "--",
                sys.executable,
                CHILD,
                "--wait-signal",
                str(ready),
                *extra,
            ],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _wait_for(ready, proc)
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
            stdout, stderr = proc.communicate(timeout=EXIT_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 130, stderr[-2000:]
    assert "child: got SIGINT x1; finishing" in stdout
    rec = json.loads((out / "record.json").read_text("utf-8"))
    assert rec["signals_received"] == ["SIGINT"] and rec["signals_forwarded"] == forwarded


def test_a_signal_arriving_before_cmd_starts_is_sent_once_it_exists() -> None:
    from popprof.record.run import _Forwarder

    with _Forwarder() as forwarder:
        forwarder._handle(signal.SIGTERM, None)  # as if delivered between the handler's install and the start
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        forwarder.started(proc)
        assert proc.wait(timeout=EXIT_TIMEOUT_S) == -signal.SIGTERM
    assert forwarder.received == forwarder.forwarded == ["SIGTERM"]


def test_a_background_process_holding_the_pipes_does_not_hang_popprof(tmp_path: Path) -> None:
    """CMD exits but leaves a process that keeps its stdout open: popprof stops waiting after the drain timeout."""
    from popprof.record.run import run_command

    script = (
        "import subprocess, sys; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(10)']); print('early', flush=True)"
    )
    started = time.monotonic()
    result = run_command(
        [sys.executable, "-c", script],
        dict(os.environ),
        tmp_path / "out.log",
        tmp_path / "err.log",
        drain_timeout=0.5,
    )
    assert time.monotonic() - started < 8  # did not wait for the background process
    assert result.returncode == 0 and result.output_complete is False and result.log_errors == []
    assert (tmp_path / "out.log").read_text() == "early\n"


def test_text_only_streams_get_characters_split_between_chunks_whole(tmp_path: Path, monkeypatch) -> None:
    """A stream without a byte buffer (a notebook's) gets decoded text; a UTF-8 character cut by a chunk survives."""
    import io

    from popprof.record import run as record_run

    monkeypatch.setattr(record_run, "CHUNK_BYTES", 3)
    shown = io.StringIO()
    monkeypatch.setattr(sys, "stdout", shown)
    script = "import sys; sys.stdout.buffer.write('héllo wörld €\\n'.encode()); sys.stdout.flush()"
    record_run.run_command(
        [sys.executable, "-c", script], dict(os.environ), tmp_path / "o.log", tmp_path / "e.log"
    )
    assert shown.getvalue() == "héllo wörld €\n"
    assert (tmp_path / "o.log").read_text("utf-8") == "héllo wörld €\n"


#: A CMD that ignores SIGINT and SIGTERM, starts a grandchild that ignores them too (holding CMD's pipes), writes
#: the grandchild's pid to argv[1] and then sleeps for ever.
STUBBORN = (
    "import os, signal, subprocess, sys, time\n"
    "for s in (signal.SIGINT, signal.SIGTERM): signal.signal(s, signal.SIG_IGN)\n"
    "g = subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True: time.sleep(1)'])\n"
    "print('stubborn: started', flush=True)\n"
    "tmp = sys.argv[1] + '.tmp'\n"
    "open(tmp, 'w').write(str(g.pid))\n"
    "os.replace(tmp, sys.argv[1])\n"
    "while True: time.sleep(1)\n"
)


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie nobody reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_cmd_ignoring_the_signal_is_killed_after_the_grace_period(tmp_path: Path, signum: int) -> None:
    """issue 46 item 1: popprof no longer waits for ever; CMD and what it started get SIGKILL, and it says so."""
    out, ready = tmp_path / "run", tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "popprof", "record", "-o", str(out), "--no-check", "--kill-after", "0.2"]
        + ["--", sys.executable, "-c", STUBBORN, str(ready)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    grandchild = None
    try:
        _wait_for(ready, proc)
        grandchild = int(ready.read_text())
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        if grandchild is not None and not _gone(grandchild):
            os.kill(grandchild, signal.SIGKILL)
            pytest.fail("the grandchild outlived popprof record")
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr[-2000:]
    assert f"popprof: CMD still running 0.2 s after {name}: killed it" in stderr
    assert "CMD ended: killed by SIGKILL" in stderr and "killed by popprof 0.2 s after the first" in stderr
    assert "stubborn: started" in (out / "stdout.log").read_text("utf-8")
    rec = json.loads((out / "record.json").read_text("utf-8"))
    assert rec["cmd_killed_by"] == "SIGKILL" and rec["cmd_killed_by_popprof"] is True
    assert rec["signals_received"] == [name] and rec["kill_after_s"] == 0.2
    assert not any("kept its output open" in n for n in rec["notes"])  # the grandchild went too


def test_the_kill_spares_popprofs_own_process_group() -> None:
    """CMD in popprof's group: only CMD and its descendants are killed, never the group (popprof is in it)."""
    from popprof.record.run import kill_tree

    proc = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
    try:
        assert os.getpgid(proc.pid) == os.getpgrp()
        kill_tree(proc.pid)
        assert proc.wait(timeout=EXIT_TIMEOUT_S) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
