"""Run CMD for ``popprof record``: output passed through live and saved, signals forwarded.

CMD's stdout and stderr are read from two pipes by two threads, each writing
every chunk to popprof's own stream (so the user sees the run as usual) and to
a log file in the output directory. Each pipe has its own reader, so neither
can fill up and block CMD (no deadlock), and every byte is kept until the pipe
ends. stdin is inherited, so interactive programs still work.

SIGINT and SIGTERM received by popprof are forwarded to CMD (see
:func:`forward_rule`); popprof then keeps waiting for CMD so that what it
wrote can still be processed, but not for ever: a CMD still running
``kill_after`` seconds after the first signal (one that ignores SIGTERM, or
hangs in its clean-up) is killed with SIGKILL, with its process group when it
has one of its own and the processes it started (:func:`kill_tree`), as
``timeout -k`` does.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..model.errors import UsageError

CHUNK_BYTES = 1 << 16
#: After CMD has exited, how long to wait for its pipes to close. A process CMD started in the background
#: may keep them open for ever; popprof then stops waiting (what it printed later is passed through, not saved).
DRAIN_TIMEOUT_S = 10.0
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: How long CMD may take to end after the first SIGINT/SIGTERM popprof received before popprof kills it
#: (SIGKILL). Slurm's KillWait and Kubernetes' termination grace period default to the same 30 s.
KILL_AFTER_S = 30.0


@dataclass
class RunResult:
    """How CMD ended."""

    returncode: int  # as subprocess reports it: negative -N when killed by signal N
    started: float  # time.time() when CMD started
    ended: float
    forwarded: list[str] = field(default_factory=list)  # names of the signals forwarded to CMD, in order
    received: list[str] = field(default_factory=list)  # names of the signals popprof received
    output_complete: bool = True  # False when a pipe stayed open after CMD ended (see DRAIN_TIMEOUT_S)
    log_errors: list[str] = field(default_factory=list)  # problems writing the logs (e.g. disk full)
    killed_by_popprof: bool = False  # CMD outlived the grace period after a signal and popprof SIGKILLed it

    @property
    def signal_number(self) -> int | None:
        """The signal that killed CMD, if any."""
        return -self.returncode if self.returncode < 0 else None

    @property
    def interrupted_by(self) -> int | None:
        """The first signal popprof received and forwarded (None when not interrupted)."""
        return signal.Signals[self.received[0]].value if self.received else None

    def describe(self) -> str:
        """CMD's end in words: ``exit code 3`` or ``killed by SIGTERM``."""
        if self.returncode >= 0:
            return f"exit code {self.returncode}"
        try:
            name = signal.Signals(-self.returncode).name
        except ValueError:
            name = f"signal {-self.returncode}"
        return f"killed by {name}"


def forward_rule(signum: int, same_terminal_group: bool) -> bool:
    """Whether a signal popprof received is sent on to CMD.

    SIGTERM always is. SIGINT is too, except when popprof is the foreground
    process group of a terminal and CMD is still in that group: then the
    terminal's Ctrl-C already reached CMD and a second SIGINT would interrupt
    CMD's own clean-up (e.g. a framework writing its profile). A CMD that
    moved to a process group of its own gets it forwarded.
    """
    return not (signum == signal.SIGINT and same_terminal_group)


def _foreground_of_terminal() -> bool:
    """Whether popprof's process group is the foreground group of its controlling terminal."""
    for stream in (sys.stdin, sys.stderr, sys.stdout):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except (AttributeError, OSError, ValueError):
            continue
    return False


def _in_our_group(proc: subprocess.Popen | None) -> bool:
    """Whether CMD runs in popprof's process group (so a terminal's Ctrl-C reached it too)."""
    if proc is None:
        return False  # not started yet: nothing reached it
    try:
        return os.getpgid(proc.pid) == os.getpgrp()
    except OSError:  # already gone
        return True


def _binary_sink(stream: object) -> BinaryIO | None:
    return getattr(stream, "buffer", None)


class _Pump(threading.Thread):
    """Copy one pipe to a stream of popprof and to a log file, chunk by chunk, until the pipe ends."""

    def __init__(self, pipe: BinaryIO, stream: object, log: BinaryIO, errors: list[str], name: str) -> None:
        super().__init__(name=f"popprof-record-{name}", daemon=True)
        self.pipe, self.stream, self.log, self.errors = pipe, stream, log, errors
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def run(self) -> None:
        fd = self.pipe.fileno()
        sink = _binary_sink(self.stream)
        while True:
            try:
                chunk = os.read(fd, CHUNK_BYTES)
            except OSError:
                break
            if not chunk:
                break
            self._save(chunk)
            sink = self._show(sink, chunk)
        self._show(sink, b"", final=True)

    def _save(self, chunk: bytes) -> None:
        if self.log is None:
            return
        try:
            self.log.write(chunk)
            self.log.flush()  # a crash or a kill of popprof keeps what CMD printed so far
        except (OSError, ValueError) as exc:
            if not getattr(self.log, "closed", False):  # closed: popprof stopped waiting for this pipe
                self.errors.append(f"{getattr(self.log, 'name', 'log')}: {exc}")
            self.log = None

    def _show(self, sink: BinaryIO | None, chunk: bytes, final: bool = False) -> BinaryIO | None:
        """Pass ``chunk`` through; a closed popprof stream stops the passthrough, never the saving.

        A text-only stream (e.g. a notebook's) gets the text decoded incrementally, so a
        character split between two chunks is not garbled.
        """
        try:
            if sink is not None:
                sink.write(chunk)
                sink.flush()
            elif self.stream is not None:
                text = self.decoder.decode(chunk, final=final)
                if text:
                    self.stream.write(text)
                    self.stream.flush()
            return sink
        except (OSError, ValueError):
            self.stream = None
            return None


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, grandchildren, ...) that still have it as an ancestor.

    Read from ``/proc`` (Linux); elsewhere, or when ``/proc`` cannot be read, none. A process whose parent
    already exited has been adopted by another and is not found.
    """
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):  # gone meanwhile, or unreadable
            continue
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found and child != pid:
                found.append(child)
                todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL process ``pid``, its process group when it has one of its own, and the processes it started.

    popprof's own process group is never signalled (CMD stays in it unless it left it).
    """
    own = os.getpgrp()
    below = _descendants(pid)
    try:
        group = os.getpgid(pid)
    except OSError:
        group = own
    if group != own:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
    for target in [pid, *below]:
        if target != os.getpid():
            with contextlib.suppress(OSError):
                os.kill(target, signal.SIGKILL)


class _Forwarder:
    """The SIGINT/SIGTERM handler while CMD runs: records each signal and sends it on by :func:`forward_rule`.

    Installed before CMD starts, so a signal arriving in between is not lost: it is
    sent as soon as CMD exists. Outside the main thread (where Python cannot
    handle signals) nothing is installed and the signals keep their usual effect.

    The first signal also starts a timer: CMD still running ``kill_after`` seconds
    later is killed (:func:`kill_tree`) and ``say`` tells why.
    """

    def __init__(self, kill_after: float = KILL_AFTER_S, say: Callable[[str], None] | None = None) -> None:
        self.proc: subprocess.Popen | None = None
        self.received: list[str] = []
        self.forwarded: list[str] = []
        self.killed = False
        self.kill_after = kill_after
        self._say = say
        self._pending: list[int] = []
        self._previous: dict[int, object] = {}
        self._timer: threading.Timer | None = None
        self._kill_due = False
        self._done = False
        self._lock = threading.Lock()

    def __enter__(self) -> _Forwarder:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in FORWARDED_SIGNALS}
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cmd_ended()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def started(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        for signum in self._pending:
            self._send(signum)
        self._pending.clear()
        if self._kill_due:
            self._escalate()

    def cmd_ended(self) -> None:
        """CMD has been waited for: no kill any more."""
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()

    def _handle(self, signum: int, _frame: object) -> None:
        self.received.append(signal.Signals(signum).name)
        if self._timer is None:
            self._timer = threading.Timer(self.kill_after, self._escalate)
            self._timer.daemon = True
            self._timer.start()
        if not forward_rule(signum, _foreground_of_terminal() and _in_our_group(self.proc)):
            return
        if self.proc is None:
            self._pending.append(signum)
        else:
            self._send(signum)

    def _escalate(self) -> None:
        """The grace period is over: kill CMD (and its processes) if it is still running."""
        with self._lock:
            if self._done:
                return
            proc = self.proc
            if proc is None:  # not started yet: killed as soon as it is
                self._kill_due = True
                return
            if proc.returncode is not None:
                return
            self.killed = True
            kill_tree(proc.pid)
            if self._say is None:
                return
            # said while the lock is held: popprof, waiting for CMD, goes on (cmd_ended) only after the line
            with contextlib.suppress(Exception):  # a closed stderr must not stop the kill's bookkeeping
                self._say(
                    f"popprof: CMD still running {self.kill_after:g} s after {self.received[0]}: killed it "
                    "and the processes it started (SIGKILL; --kill-after SECONDS sets the grace period)"
                )

    def _send(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)
                self.forwarded.append(signal.Signals(signum).name)


def _start(cmd: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen:
    try:
        return subprocess.Popen(list(cmd), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise UsageError(f"{cmd[0]}: command not found") from None
    except PermissionError:
        raise UsageError(f"{cmd[0]}: permission denied (not executable)") from None
    except OSError as exc:
        raise UsageError(f"{cmd[0]}: cannot run it ({exc.strerror or exc})") from None


def run_command(
    cmd: Sequence[str],
    env: Mapping[str, str],
    stdout_log: Path,
    stderr_log: Path,
    drain_timeout: float = DRAIN_TIMEOUT_S,
    kill_after: float = KILL_AFTER_S,
    say: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``cmd`` with ``env``; pass its output through and save it; forward SIGINT/SIGTERM.

    Raises UsageError when ``cmd`` cannot be started (not found, not executable).
    Signals are forwarded only when called from the main thread (where Python handles them); CMD still
    running ``kill_after`` seconds after the first one is killed (``say`` tells it).
    """
    errors: list[str] = []
    forwarder = _Forwarder(kill_after, say)
    with open(stdout_log, "wb") as out_log, open(stderr_log, "wb") as err_log, forwarder:
        started = time.time()
        proc = _start(cmd, env)
        forwarder.started(proc)
        pumps = [
            _Pump(proc.stdout, sys.stdout, out_log, errors, "stdout"),
            _Pump(proc.stderr, sys.stderr, err_log, errors, "stderr"),
        ]
        for pump in pumps:
            pump.start()
        returncode = proc.wait()
        forwarder.cmd_ended()
        ended = time.time()
        deadline = time.monotonic() + drain_timeout
        for pump in pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        complete = not any(p.is_alive() for p in pumps)
        for pump in pumps:
            if pump.is_alive():
                pump.log = None  # keeps passing through, stops writing to the log closed below
    return RunResult(
        returncode,
        started,
        ended,
        forwarder.forwarded,
        forwarder.received,
        complete,
        errors,
        forwarder.killed,
    )
