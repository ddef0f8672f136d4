"""Opening inputs: the head of a file, gzip read transparently and guarded, the JSON guard, bounded text.

Every reader opens its input through these, so limits (``docs/limits.md``) hold for all of them.
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from pathlib import Path
from typing import BinaryIO

from ..model.errors import InputError
from . import bounded, limits
from .progress import counted

HEAD_BYTES = 1 << 16
#: the two bytes every gzip stream starts with (RFC 1952): the one test of "is this gzip" in popprof
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    """Whether the file at ``path`` starts with :data:`GZIP_MAGIC` (its content decides, not its name)."""
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of a file, transparently gunzipped; raises InputError on corrupt gzip."""
    with open(path, "rb") as handle:
        raw = handle.read(size)
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return decompressor.decompress(raw, size)
    except zlib.error as exc:
        raise InputError(
            path, f"corrupt gzip data ({exc})", "re-copy the file; it may be truncated"
        ) from None


def gzip_truncated(path: Path, block: int = 1 << 20) -> bool:
    """Whether ``path`` is gzip whose compressed stream ends before its end-of-stream marker."""
    with open(path, "rb") as handle:
        if handle.read(2) != GZIP_MAGIC:
            return False
        handle.seek(0)
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        budget = limits.get("text-bytes")  # bounded work: a bomb is not worth decompressing to its end
        try:
            while not decompressor.eof and (data := handle.read(block)):
                while data and not decompressor.eof:  # output is discarded: only the end marker matters
                    budget -= len(decompressor.decompress(data, block))
                    data = decompressor.unconsumed_tail
                    if budget < 0:
                        return False
        except zlib.error:
            return False  # corrupt rather than cut off; read_head reports that
        return not decompressor.eof


def open_binary(
    path: Path, before: tuple[int, int, int, int] | None = None, *, cut_off_ends: bool = False
) -> BinaryIO:
    """Open a file for reading bytes, gunzipping transparently when it starts with the gzip magic.

    Gzip input is guarded: past the ``gzip-ratio`` / ``gzip-bytes`` limits (a
    decompression bomb) reading raises :class:`~popprof.io.limits.LimitExceeded`. The bytes read
    from disk count toward an active :func:`popprof.io.progress.reading` bar. With ``before`` (a
    :func:`snapshot`), every read checks that the file is still that one (:class:`Unchanged`). With
    ``cut_off_ends`` gzip cut off before its end marker ends where its data ends, as a plain file cut there
    would (:class:`~popprof.io.bounded.GzipGuard`), instead of raising ``TruncatedGzip``.
    """
    with open(path, "rb") as handle:
        magic = handle.read(2)
        compressed = os.fstat(handle.fileno()).st_size
    raw = open(path, "rb")  # noqa: SIM115 - returned (closed by the caller, or by the GzipFile below)
    source = counted(raw)
    if before is not None:
        source = Unchanged(source, Path(path), before)
    if magic != GZIP_MAGIC:
        return source
    unzipped = gzip.GzipFile(fileobj=source, mode="rb")
    unzipped.myfileobj = raw  # closing the GzipFile closes the file, as gzip.open would
    guard = bounded.GzipGuard(unzipped, Path(path), compressed)
    guard.cut_off_ends = cut_off_ends
    return bounded.buffered(guard)


def open_json(
    path: Path,
    before: tuple[int, int, int, int] | None = None,
    *,
    cut_off_ends: bool = False,
    structure: bool = False,
) -> BinaryIO:
    """:func:`open_binary` plus a JSON guard: nesting beyond ``json-depth`` or a string beyond ``string-bytes``
    raises :class:`~popprof.io.limits.LimitExceeded` before a parser sees it (ijson's cost grows with depth squared).
    ``structure``: also refuse a bracket closing the other kind of container, a separator out of turn (``,`` for
    ``:`` or the reverse) and any other byte outside strings JSON has no place for (a broken number or literal,
    a stray byte, a value lost or doubled), for a reader without a parser; call the guard's ``finish`` (the
    reader's ``raw``) at the end to refuse a value left open.
    """
    return guard_json(open_binary(path, before, cut_off_ends=cut_off_ends), path, structure)


def guard_json(raw: BinaryIO, path: Path, structure: bool = False) -> BinaryIO:
    """A buffered reader over the byte stream ``raw`` with the JSON guard of :func:`open_json`."""
    return bounded.buffered(bounded.JsonGuard(raw, Path(path), structure))


def read_text_bytes(path: Path, *, truncate: bool = False) -> bytes:
    """The whole (gunzipped) content of a text input, within ``text-bytes`` and ``line-bytes``.

    With ``truncate`` (detection) the first ``text-bytes`` bytes, without the line check.
    """
    with open_binary(path) as handle:
        data = bounded.read_limited(handle, Path(path), "text-bytes", truncate=truncate)
    if not truncate:
        bounded.check_line_lengths(data, Path(path))
    return data


def read_option_file(path: str | os.PathLike[str], what: str) -> bytes:
    """The bytes of a file named by an option or a config (``--device-map``, ``--key-file``, ``--policy``,
    ``device_map = "FILE"``): a regular file within the ``option-bytes`` limit, or one line, exit 2.

    The file is opened without blocking and checked on the open descriptor: a FIFO without a writer would
    block forever and ``/dev/zero`` would be read until memory runs out, so both are refused before any
    byte is read, with the same special-file check as every input. ``what`` names the file in the error
    ("device map file").
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(path, f"{what}: no such file") from None
    except OSError as exc:
        raise InputError(path, f"{what}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((k for test, k in bounded.SPECIAL_KINDS if test(info.st_mode)), "a directory")
            raise InputError(path, f"{what} is {kind}, not a regular file", "pass a file")
        cap = limits.get("option-bytes")
        data = handle.read(cap + 1)
    if len(data) > cap or info.st_size > cap:
        raise limits.LimitExceeded(path, "option-bytes", f"a {what} of more than {cap:,} bytes")
    return data


def snapshot(path: Path) -> tuple[int, int, int, int] | None:
    """What identifies a regular file's content cheaply: (device, inode, size, mtime in ns); None otherwise."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class ChangedWhileRead(InputError):
    """The input was replaced or written to while it was read: what was read is not one version of it."""

    def __init__(self, path: object) -> None:
        super().__init__(
            path,
            "changed while it was read (its size or modification time moved)",
            "read it again once it is complete",
        )

    def __reduce__(self) -> tuple:
        return (type(self), (self.path,))


def check_unchanged(path: Path, before: tuple[int, int, int, int] | None) -> None:
    """ChangedWhileRead when ``path`` is no longer the file :func:`snapshot` saw (size, mtime or inode)."""
    if before is not None and snapshot(path) != before:
        raise ChangedWhileRead(path)


class Unchanged:
    """``handle``, the open file ``path``, with a check after every read that ``path`` is still the file
    :func:`snapshot` saw (``before``): a file rewritten, truncated or replaced while it is read ends in
    :class:`ChangedWhileRead` at the next read, instead of being parsed from two versions' bytes (which could
    make a reader spin for minutes on what no longer frames). One ``stat`` a read: reads are 64 KiB to 1 MiB.
    """

    def __init__(self, handle: BinaryIO, path: Path, before: tuple[int, int, int, int]) -> None:
        self._handle, self._path, self._before = handle, path, before

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        check_unchanged(self._path, self._before)
        return data

    def readinto(self, buffer) -> int:
        n = self._handle.readinto(buffer)
        check_unchanged(self._path, self._before)
        return n

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> Unchanged:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
