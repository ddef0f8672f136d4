"""The leak scan's two halves, run beside a trace redaction on processes of their own.

- :class:`Derivation`: what is sensitive, derived from the ORIGINAL by a forked process that
  reads the file itself (:func:`.sensitive.derive`).
- :class:`OutputStrings`: every distinct string of the OUTPUT, found by a forked process in the
  bytes the redactor writes (sent through a pipe as they are written, before compression), cut
  where the scan's own rule says and tokenized by the scan's own code (:func:`.chrome.block_strings`).

Neither half sees a decision of the redactor; they meet only when both are done
(:mod:`popprof.redaction` checks the output's strings against the original's sensitive set). Both
are forked before any thread of the redaction starts (:func:`popprof.io.parallel.context`). Without
``fork`` (Windows), with parallel work off (``POPPROF_PARALLEL=0``), or when a process cannot start,
fails or dies, the same work is done in this process instead (same result, just not in parallel), so
errors are raised where they are reported.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from ..io import parallel
from ..io.heap import keep_freed_memory_in_helper
from ..io.jsonbytes import SCAN_BLOCK
from ..io.workers import quiet_worker
from .sensitive import SensitiveSet, derive

#: Output blocks held between the redaction and the output scan (back-pressure beyond that).
PENDING_BLOCKS = 4
#: How much lower the helper processes' priority is than the redaction's (``os.nice``).
HELPER_NICENESS = 5
#: The pipe's buffer for the output's bytes (Linux ``F_SETPIPE_SZ``; at most ``/proc/sys/fs/pipe-max-size``,
#: 1 MiB by default): with the default 64 KiB each block takes a hundred wake-ups, and the output scan's
#: process spent about 0.7 s more system time per GB receiving.
PIPE_BYTES = 1 << 20


def _widen_pipe(connection) -> None:
    """Ask for a :data:`PIPE_BYTES` buffer on the pipe behind ``connection`` (where the platform allows it)."""
    try:
        import fcntl
    except ImportError:  # not on Windows
        return
    option = getattr(fcntl, "F_SETPIPE_SZ", None)
    if option is not None:
        with contextlib.suppress(OSError, ValueError):
            fcntl.fcntl(connection.fileno(), option, PIPE_BYTES)


def _fork_context():
    """The fork context of :mod:`popprof.io.parallel` (None without fork, or with parallel work off)."""
    return parallel.context("fork")


def _background() -> None:
    """Yield the CPU to the redaction: it is the longest job, and the halves only have to be done by
    the time it ends (they wait for it anyway), so they run at a lower priority. A helper ends silently
    on SIGTERM or Ctrl-C, like every popprof worker (:func:`popprof.io.workers.quiet_worker`)."""
    quiet_worker()
    keep_freed_memory_in_helper()  # this process ends with its job: no allocator setting outlives it
    with contextlib.suppress(OSError, AttributeError):
        os.nice(HELPER_NICENESS)


def _answer(send, compute: Callable[[], object]) -> None:
    """Send what ``compute`` returns, or None when it fails (the parent then does the work itself and
    reports any error). Never raises: the parent may have stopped listening (it failed first, or
    was interrupted), and a helper has nothing to say on the terminal."""
    try:
        answer = compute()
    except BaseException:  # noqa: BLE001
        answer = None
    with contextlib.suppress(BaseException):
        send.send(answer)
    with contextlib.suppress(BaseException):
        send.close()


def _damage(source: Path, kind: str) -> tuple[int, int, int, str] | None:
    """Where the JSON of a Chrome trace is first invalid, when its text is not UTF-8 (None for other kinds, or
    none found: :func:`.chrome.first_damage`)."""
    from .chrome import first_damage

    return first_damage(source) if kind == "chrome" else None


def _derive_child(send, source: Path, kind: str, keep) -> None:
    _background()

    def state() -> tuple:
        found = derive(source, kind, keep)
        return found.strings, found.wholes, found.words, found.exempt, _damage(source, kind)

    _answer(send, state)


class Derivation:
    """:func:`.sensitive.derive` on a forked process; :meth:`result` waits for the sensitive set."""

    def __init__(
        self,
        source: Path,
        kind: str,
        keep: Callable[[str], bool] | None = None,
    ) -> None:
        self.args = (source, kind, keep)
        #: Where a Chrome trace's JSON is first invalid (:func:`.chrome.first_damage`), once :meth:`result` is in
        self.damage: tuple[int, int, int, str] | None = None
        self.process = self.receive = None
        context = _fork_context()
        if context is None:
            return
        try:
            self.receive, send = context.Pipe(duplex=False)
            self.process = context.Process(target=_derive_child, args=(send, *self.args), daemon=True)
            self.process.start()
            send.close()
        except OSError:
            self.process = self.receive = None

    def result(self) -> SensitiveSet:
        """The sensitive set of the original (waits for the process; derives here if it failed), and
        :attr:`damage` set."""
        state = None
        if self.process is not None:
            try:
                state = self.receive.recv()
            except (EOFError, OSError):
                state = None
            self.cancel()
        if state is None:
            self.damage = _damage(*self.args[:2])
            return derive(*self.args)
        found = SensitiveSet(self.args[2])
        found.strings, found.wholes, found.words, found.exempt, self.damage = state
        return found

    def cancel(self) -> None:
        """Stop the process (if still running) and release it."""
        _stop(self.process, self.receive)
        self.process = None


def _stop(process, connection) -> None:
    if process is None:
        return
    if process.is_alive():
        process.terminate()
    process.join()
    connection.close()


class StringFinder:
    """The output's bytes in, in order and however the writer cut them; every distinct string out.

    Cuts pieces of about ``block_size`` bytes where the scan's own rule says
    (:func:`.chrome.cut_opening_quote`), then finds the strings of each piece
    (:func:`.chrome.block_strings`)."""

    def __init__(self, block_size: int | None = None) -> None:
        self.block_size = block_size or SCAN_BLOCK
        self.held = b""
        self.strings: set[bytes] = set()

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the output."""
        from .chrome import cut_opening_quote

        held = self.held + data if self.held else data
        start = 0
        while len(held) - start >= self.block_size:
            piece = held[start : start + self.block_size]
            at = cut_opening_quote(piece)
            if at <= 0:  # no place to cut in this piece: look at a longer one
                piece = held[start:]
                at = cut_opening_quote(piece)
                if at <= 0:
                    break
            self._find(piece[:at])
            start += at
        self.held = held[start:]

    def _find(self, data: bytes) -> None:
        from .chrome import block_strings

        self.strings |= block_strings(data)

    def close(self) -> set[bytes]:
        """Every distinct string of the output (after the last :meth:`feed`)."""
        if self.held:
            self._find(self.held)
            self.held = b""
        return self.strings


def _output_child(receive, send, block_size: int | None) -> None:
    """Receive output blocks (a thread keeps reading the pipe while this one tokenizes), then send
    back the distinct strings, or None when anything went wrong."""
    _background()
    blocks: queue.Queue = queue.Queue(PENDING_BLOCKS)

    def pump() -> None:
        try:
            while True:
                data = receive.recv_bytes()
                blocks.put(data)
                if not data:
                    return
        except (EOFError, OSError):
            blocks.put(None)

    threading.Thread(target=pump, daemon=True).start()

    def strings() -> set[bytes] | None:
        finder = StringFinder(block_size)
        while data := blocks.get():
            finder.feed(data)
        return finder.close() if data is not None else None

    _answer(send, strings)


class OutputStrings:
    """Every distinct string of an output being written, found on a forked process (see the module
    docstring). :meth:`feed` each written chunk in order; :meth:`close` returns the strings."""

    def __init__(self, block_size: int | None = None) -> None:
        self.block_size = block_size
        self.fallback: StringFinder | None = None
        self.process = self.send = self.receive = None
        self.sent = 0
        context = _fork_context()
        if context is not None:
            try:
                to_child, self.send = context.Pipe(duplex=False)
                _widen_pipe(self.send)
                self.receive, from_child = context.Pipe(duplex=False)
                self.process = context.Process(
                    target=_output_child, args=(to_child, from_child, block_size), daemon=True
                )
                self.process.start()
                to_child.close()
                from_child.close()
            except OSError:
                self.process = None
        if self.process is None:
            self.fallback = StringFinder(block_size)

    def feed(self, data: bytes) -> None:
        """Take the next bytes written to the output."""
        if not data:
            return
        if self.fallback is not None:
            self.fallback.feed(data)
        elif self.process is not None:
            try:
                self.send.send_bytes(data)
            except OSError:  # the process died: close() says so, and the caller scans the file
                self.cancel()

    def close(self) -> set[bytes] | None:
        """The output's distinct strings, or None when the process failed (then scan the written file)."""
        if self.fallback is not None:
            return self.fallback.close()
        if self.process is None:
            return None
        try:
            self.send.send_bytes(b"")
            strings = self.receive.recv()
        except (EOFError, OSError):
            strings = None
        self.cancel()
        return strings

    def cancel(self) -> None:
        """Stop the process (if still running) and release it."""
        if self.process is None:
            return
        self.send.close()
        _stop(self.process, self.receive)
        self.process = None
