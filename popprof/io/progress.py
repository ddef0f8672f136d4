"""Progress display for long work: shown on a terminal, silent otherwise or with ``--quiet``.

Two kinds: :func:`progress` counts units of work (files, tables, plots) against
a total; :func:`reading` shows the bytes of a file read so far against its
size. Inside a :func:`reading` block every file opened through
:func:`counted` (readers do this via ``popprof.io.files.open_binary``) adds the
bytes it reads — including reads in worker processes forked inside the block,
through a counter in shared memory. Compressed files count the compressed
bytes consumed, against the compressed size, so the bar is honest either way.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

_quiet = False

#: Seconds between redraws while reading (the bar is redrawn from the shared byte counter).
REFRESH_SECONDS = 0.1


def set_quiet(quiet: bool) -> None:
    """Silence (or re-enable) progress output for this process."""
    global _quiet
    _quiet = quiet


def quiet() -> bool:
    """True when ``--quiet`` asked for no progress and no ``wrote ...`` lines on stderr."""
    return _quiet


def enabled() -> bool:
    """True when progress should be drawn: stderr is a terminal and not quiet."""
    stream = sys.stderr
    if _quiet or stream is None:  # stderr is None under pythonw and some embedders
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _bar(*columns: object):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *columns,
        TimeElapsedColumn(),
        console=Console(file=sys.stderr),
        transient=True,
        auto_refresh=False,
    )


@contextlib.contextmanager
def progress(
    description: str, total: float | None = None, *, unit: str | None = None
) -> Iterator[Callable[[float], None]]:
    """Yield ``advance(n)``; draws a rich progress bar on stderr when :func:`enabled`.

    ``unit="bytes"`` shows the amount done as bytes (``12.3/40.0 MB``), otherwise as ``done/total``.
    """
    if not enabled():
        yield lambda n=1: None
        return
    from rich.progress import DownloadColumn, MofNCompleteColumn, TextColumn

    bar = _bar(
        TextColumn("{task.percentage:>3.0f}%"), DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    )
    with bar:
        task = bar.add_task(description, total=total)

        def advance(n: float = 1) -> None:
            bar.advance(task, n)
            bar.refresh()

        yield advance


class _Meter:
    """Bytes read inside one :func:`reading` block, in shared memory so forked workers can add to it."""

    def __init__(self, prepared_for: str | None = None) -> None:
        from .parallel import shared_int

        self.value = shared_int()
        self.pid = os.getpid()
        #: the file of the :func:`reading` this meter was made for ahead of it (:func:`prepare_meter`), until then
        self.prepared_for = prepared_for

    def add(self, n: int) -> None:
        with self.value.get_lock():
            self.value.value += n

    @property
    def done(self) -> int:
        return int(self.value.value)


_meter: _Meter | None = None


class _Counted:
    """A binary file whose reads add their byte counts to the active meter (everything else passes through)."""

    def __init__(self, handle: BinaryIO, meter: _Meter) -> None:
        self._handle = handle
        self._meter = meter

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self._meter.add(len(data))
        return data

    def read1(self, size: int = -1) -> bytes:
        data = self._handle.read1(size)
        self._meter.add(len(data))
        return data

    def readinto(self, buffer) -> int:
        n = self._handle.readinto(buffer)
        self._meter.add(n or 0)
        return n

    def readable(self) -> bool:
        return True

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def __getattr__(self, name: str):
        return getattr(self._handle, name)


def counted(handle: BinaryIO) -> BinaryIO:
    """``handle`` counting its reads toward the active :func:`reading` bar, or ``handle`` itself when none.

    A meter prepared ahead of its :func:`reading` counts only the reads of the workers forked for it, not
    this process's until the reading starts (detection reads the file's head first)."""
    meter = _meter
    if meter is None or (meter.prepared_for is not None and meter.pid == os.getpid()):
        return handle
    return _Counted(handle, meter)  # type: ignore[return-value]


def prepare_meter(path: str | os.PathLike[str]) -> None:
    """Make the byte meter of the coming :func:`reading` of ``path`` now, when a bar will be drawn: a worker
    forked before that reading starts (:mod:`popprof.readers.chrome.early`) then adds its reads to it."""
    global _meter
    if enabled() and _meter is None:
        _meter = _Meter(prepared_for=os.path.realpath(path))


def drop_prepared_meter() -> None:
    """Forget a meter :func:`prepare_meter` made that no :func:`reading` took."""
    global _meter
    if _meter is not None and _meter.prepared_for is not None:
        _meter = None


@contextlib.contextmanager
def reading(path: str | os.PathLike[str], description: str | None = None) -> Iterator[None]:
    """Show the bytes read from ``path`` (by :func:`counted` files) against its size, while the block runs."""
    global _meter
    prepared = None
    if _meter is not None and _meter.prepared_for is not None:  # made ahead: for this file, or dropped
        prepared = _meter if _meter.prepared_for == os.path.realpath(path) else None
        _meter = None
    if not enabled() or _meter is not None:  # nested: the outer bar already counts these bytes
        yield
        return
    from rich.progress import DownloadColumn

    try:
        total = os.path.getsize(path)
    except OSError:
        total = None
    _meter = meter = prepared or _Meter()  # a prepared meter holds what the early worker has read so far
    meter.prepared_for = None
    stop = threading.Event()
    bar = _bar(DownloadColumn())
    try:
        with bar:
            task = bar.add_task(description or f"reading {os.path.basename(path)}", total=total)

            def show() -> None:
                done = meter.done
                bar.update(task, completed=min(done, total) if total else done)
                bar.refresh()

            def tick() -> None:
                show()
                while not stop.wait(REFRESH_SECONDS):
                    show()
                show()  # the final count once the work has ended (a loaded machine may not have ticked since)

            ticker = threading.Thread(target=tick, name="popprof-progress", daemon=True)
            ticker.start()
            try:
                yield
            finally:
                stop.set()
                ticker.join()
    finally:
        _meter = None
