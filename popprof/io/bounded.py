"""Bounded reading for every reader: input-file checks, decompression caps, JSON depth and string caps.

Readers open files through :func:`popprof.io.files.open_binary` (gzip-bomb guard)
or :func:`popprof.io.files.open_json` (plus a JSON guard), and read whole text
through :func:`read_limited`. All checks are linear in the bytes read and keep
no more than one chunk; when a limit is exceeded they raise
:class:`~popprof.io.limits.LimitExceeded` (one line, exit code 2). See docs/limits.md.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from pathlib import Path

import numpy as np

from ..model.errors import InputError
from . import limits, units
from .jsonbytes import BRACKETS, trailing_backslashes, unescaped_quotes
from .limits import LimitExceeded

_QUOTE, _NEWLINE = 34, 10
#: Bytes a guard checks at a time (and so the most read past a limit before it is noticed).
CHUNK_BYTES = 1 << 20
#: every byte but the quote and the four brackets (deleted to reduce a chunk to its structure)
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'"[]{}')
#: the quote and the four brackets, as a lookup of every byte
_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[list(b'"[]{}')] = True

SPECIAL_KINDS = _KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO) or process substitution"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_input_file(path: Path) -> os.stat_result:
    """``stat`` of an input that must be a regular file or a directory; InputError for pipes, devices, sockets.

    Reading a FIFO with no writer would block forever and a pipe can be read only
    once, while detection reads a file more than once: such inputs are refused
    before anything opens them.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(path, "no such file or directory") from None
    except OSError as exc:
        raise InputError(path, f"cannot access: {exc.strerror or exc}") from None
    for test, kind in _KINDS:
        if test(info.st_mode):
            raise InputError(
                path,
                f"is {kind}, not a regular file",
                "save the data to a file first (e.g. `cat ... > trace.json`) and pass that file",
            )
    return info


class _Guard(io.RawIOBase):
    """A raw stream over ``inner`` that runs ``check(chunk)`` on every chunk read."""

    def __init__(self, inner: io.IOBase) -> None:
        super().__init__()
        self._inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")[:CHUNK_BYTES]  # checked a chunk at a time, whatever was asked
        n = self._fill(view)
        if n:
            self.check(view[:n])
        return n or 0

    def _fill(self, view: memoryview) -> int:
        return self._inner.readinto(view)

    def check(self, chunk: memoryview) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


class TruncatedGzip(InputError):
    """Gzip data cut off before its end marker. (Not an EOFError: click would turn that into "Aborted!".)"""


class CorruptGzip(InputError):
    """Gzip data that does not decompress."""


class GzipGuard(_Guard):
    """Counts decompressed bytes of a gzip stream; a decompression bomb ends in LimitExceeded.

    Cut-off or corrupt gzip raises :class:`TruncatedGzip` / :class:`CorruptGzip`, which name the file. With
    ``cut_off_ends`` a cut-off stream ends where its data ends instead (``cut_off`` is then set), as a plain
    file cut at the same place would: a reader that keeps what comes before a cut (the Chrome reader) gives
    the same answer for both (docs/readers.md).
    """

    cut_off_ends = False
    cut_off = False

    def _fill(self, view: memoryview) -> int:
        if not self.cut_off_ends:
            return self._inner.readinto(view)
        # one read of the gzip reader at a time: a read that fills the whole view would drop, with its
        # EOFError, the bytes it decompressed before the cut
        return self._inner.readinto1(view)

    def readinto(self, buffer) -> int:
        try:
            return super().readinto(buffer)
        except EOFError:
            if self.cut_off_ends:
                self.cut_off = True
                return 0
            raise TruncatedGzip(
                self.path,
                "gzip data is truncated (it ends before its end-of-stream marker)",
                "re-copy the file; it was cut off",
            ) from None
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise CorruptGzip(
                self.path,
                f"corrupt gzip data ({' '.join(str(exc).split())})",
                "re-copy the file; it may be damaged",
            ) from None

    def __init__(self, inner: io.IOBase, path: Path, compressed_bytes: int) -> None:
        super().__init__(inner)
        self.path = path
        self.compressed = max(1, compressed_bytes)
        self.total = 0
        self.max_bytes = limits.get("gzip-bytes")
        self.max_ratio = limits.get("gzip-ratio")

    def check(self, chunk: memoryview) -> None:
        self.total += len(chunk)
        if self.total > self.max_bytes:
            raise LimitExceeded(
                self.path, "gzip-bytes", f"gzip data that expands to more than {units.nbytes(self.total)}"
            )
        if self.total > limits.GZIP_RATIO_FLOOR and self.total > self.max_ratio * self.compressed:
            raise LimitExceeded(
                self.path,
                "gzip-ratio",
                f"gzip data that expands {units.count(self.total // self.compressed)}x "
                f"({units.nbytes(self.total)} from {units.nbytes(self.compressed)}; a decompression bomb?)",
            )


class TextAfterJson(InputError):
    """Something other than white space follows the top-level JSON value (see :class:`JsonGuard`)."""


class MismatchedBrackets(InputError):
    """A bracket outside strings closes a container of the other kind (``[ ... }``): the JSON is invalid there,
    as a byte flipped between ``{`` and ``[`` (or ``}`` and ``]``) makes it (see :class:`JsonGuard`)."""


#: a bracket's kind: 0 for ``[`` / ``]``, 1 for ``{`` / ``}`` (other bytes: unused)
_BRACE = np.zeros(256, dtype=np.int8)
_BRACE[list(b"{}")] = 1


class JsonGuard(_Guard):
    """Tracks JSON nesting depth and the length of the string being read, across chunks, in numpy.

    It does not validate JSON: it only counts brackets outside strings and the bytes
    between unescaped quotes, so that a parser downstream never sees nesting deeper
    than ``json-depth`` nor a string longer than ``string-bytes``. From the same count it
    knows where the top-level object or array ends, and refuses anything but white space
    after it (text appended to a trace, a second JSON value) with an
    :class:`~popprof.model.errors.InputError`: one line, exit code 2, for every reader
    that reads JSON through it.

    With ``match_brackets`` it also follows which kind of container is open at each depth and refuses a
    bracket that closes the other kind (:class:`MismatchedBrackets`): a reader that copies what is not a string
    as it is (the redaction) has no parser that would. Readers that parse leave it off: their parser refuses
    such a file anyway.
    """

    def __init__(self, inner: io.IOBase, path: Path, match_brackets: bool = False) -> None:
        super().__init__(inner)
        self.path = path
        self.match_brackets = match_brackets
        self.open_kinds = np.zeros(0, dtype=np.int8)  # per depth (1 at index 0), the kind of container open
        self.max_depth = limits.get("json-depth")
        self.max_string = limits.get("string-bytes")
        self.depth = 0
        self.in_string = False
        self.string_open = 0  # bytes of the string open at the end of the last chunk
        self.backslashes = 0  # backslashes ending the last chunk (inside a string)
        self.started = False  # the top-level value (an object or array) has opened
        self.ended = False  # ... and ended: only white space may follow
        self.offset = 0  # bytes checked before this chunk

    def check(self, chunk: memoryview) -> None:
        raw = chunk.tobytes()
        if self.ended:
            self._check_after(raw, 0)
        elif self.backslashes or len(raw) >= self.max_string or b"\\" in raw:
            self._check_exact(np.frombuffer(raw, dtype=np.uint8))
        else:
            self._check_plain(raw)
        self.offset += len(raw)

    def _check_after(self, raw: bytes, start: int) -> None:
        """InputError when ``raw[start:]``, after the top-level value's end, holds anything but white space:
        an appended log line, a comment or a second JSON value would otherwise be read as part of the file
        (or silently dropped) by whichever parser sits downstream."""
        self.ended = True
        rest = raw[start:].lstrip(b" \t\r\n")
        if rest:
            at = self.offset + len(raw) - len(rest)
            self._drain()
            raise TextAfterJson(
                self.path,
                f"text follows the JSON value at byte {at:,} (an appended log line, a comment or a second "
                "JSON value): the file is not one JSON document",
                "remove what follows the JSON value, then read the file again",
            )

    def _drain(self) -> None:
        """Read what is left of the stream below: gzip data damaged further on (a flipped byte makes deflate
        write garbage that may close the JSON value early) raises its own error, :class:`CorruptGzip`, the cause
        to name rather than the text it made."""
        chunk = bytearray(CHUNK_BYTES)
        while self._inner.readinto(chunk):
            pass

    def _check_exact(self, data: np.ndarray) -> None:
        quotes = self._real_quotes(data)
        self._check_strings(quotes, len(data))
        self._check_depth(data, quotes)
        self.in_string ^= bool(len(quotes) % 2)

    def _check_plain(self, raw: bytes) -> None:
        """The same checks for a chunk without backslashes and shorter than ``string-bytes`` (most chunks).

        Every quote is real, and no string that starts and ends inside the chunk can reach the
        limit, so only the string left open from the last chunk and the one left open at the
        end need lengths (the first and last quote). Depth needs only the order of the quotes
        and brackets: the chunk reduced to those bytes (in C) is several times shorter, and in
        it the quotes before the bracket at index i of the brackets number (its index) - i.
        """
        size = len(raw)
        marks = np.frombuffer(raw.translate(None, _NOT_STRUCTURAL), dtype=np.uint8)
        brackets = np.flatnonzero(marks != _QUOTE)
        quotes = len(marks) - len(brackets)
        if self.in_string:
            self.string_open = self.string_open + (size if not quotes else raw.find(b'"'))
            if self.string_open > self.max_string:
                raise limits.string_too_long(self.path, self.string_open)
        if quotes:
            ends_inside = self.in_string ^ bool(quotes % 2)
            self.string_open = size - raw.rfind(b'"') if ends_inside else 0
        if len(brackets):
            # outside strings: an even number of quotes before it (odd when a string was open)
            outside = ((brackets - np.arange(len(brackets)) + self.in_string) & 1) == 0
            if self.match_brackets:
                self._match(marks[brackets][outside])
            end = self._descend(np.where(outside, BRACKETS[marks[brackets]], 0))
            if end >= 0:  # the top-level value ends in this chunk (once per file): where, in the raw bytes
                structural = np.flatnonzero(_STRUCTURAL[np.frombuffer(raw, dtype=np.uint8)])
                self._check_after(raw, int(structural[brackets[end]]) + 1)
        self.in_string ^= bool(quotes % 2)

    def _real_quotes(self, data: np.ndarray) -> np.ndarray:
        """Positions of the quotes not escaped by an odd run of backslashes (runs may start in the last chunk)."""
        raw = data.tobytes()
        carry = self.backslashes
        self.backslashes = trailing_backslashes(raw, carry)
        return unescaped_quotes(raw, carry)

    def _check_strings(self, quotes: np.ndarray, size: int) -> None:
        longest = 0
        if self.in_string:
            if not len(quotes):
                self.string_open += size
                longest = self.string_open
            else:
                longest = self.string_open + int(quotes[0])
        first_open = 1 if self.in_string else 0
        opens = quotes[first_open::2]
        closes = quotes[first_open + 1 :: 2]
        if len(closes):
            longest = max(longest, int((closes - opens[: len(closes)]).max()))
        if len(opens) > len(closes):
            self.string_open = size - int(opens[-1])
            longest = max(longest, self.string_open)
        elif len(quotes):
            self.string_open = 0
        if longest > self.max_string:
            raise limits.string_too_long(self.path, longest)

    def _check_depth(self, data: np.ndarray, quotes: np.ndarray) -> None:
        # "[" "]" "{" "}" (and "Y" "_" "y" DEL) are the bytes with x & 0xD9 == 0x59: one cheap pass, then a lookup
        where = np.flatnonzero((data & 0xD9) == 0x59)
        delta = BRACKETS[data[where]]
        where = where[delta != 0]
        if not len(where):
            return
        delta = delta[delta != 0]
        inside = (np.searchsorted(quotes, where) + self.in_string) % 2 == 1
        if self.match_brackets:
            self._match(data[where[~inside]])
        end = self._descend(delta[~inside])
        if end >= 0:
            self._check_after(data.tobytes(), int(where[~inside][end]) + 1)

    def _match(self, marks: np.ndarray) -> None:
        """:class:`MismatchedBrackets` when a closing bracket of ``marks`` (the chunk's brackets outside strings, in
        order, before :meth:`_descend` moves the depth) closes a container of the other kind.

        At one depth, containers open and close in turn, so, ordered by depth and then position, a closing
        bracket follows its own opening one, or, first at its depth in the chunk, closes the container left
        open there by the chunks before (``open_kinds``). No stack is walked bracket by bracket."""
        if not len(marks):
            return
        steps = BRACKETS[marks].astype(np.int64)
        opens = steps > 0
        level = np.cumsum(steps) + self.depth + np.where(opens, 0, 1)  # the container's depth, 1 at the top
        kind = _BRACE[marks]
        order = np.lexsort((np.arange(len(marks)), level))
        lv, op, kd = level[order], opens[order], kind[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = lv[1:] != lv[:-1]
        closes = ~op & (lv >= 1)
        wrong = closes & ~first & (kd != np.roll(kd, 1))
        carried = closes & first & (lv <= len(self.open_kinds))
        if carried.any():
            wrong[carried] = kd[carried] != self.open_kinds[lv[carried] - 1]
        if wrong.any():
            at = int(order[np.flatnonzero(wrong)].min())
            raise MismatchedBrackets(
                self.path,
                f"a '{chr(marks[at])}' closes a{'n object' if kind[at] == 0 else 'n array'} in the bytes after byte "
                f"{self.offset:,} (a flipped byte?): the file is not valid JSON",
                "the file may be damaged; write it again",
            )
        # what stays open after the chunk: at each depth up to the new one, the last bracket there opened it
        depth = int(self.depth + steps.sum())
        kinds = np.zeros(max(depth, 0), dtype=np.int8)
        keep = min(len(self.open_kinds), len(kinds))
        kinds[:keep] = self.open_kinds[:keep]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = lv[:-1] != lv[1:]
        here = last & op & (lv >= 1) & (lv <= len(kinds))
        kinds[lv[here] - 1] = kd[here]
        self.open_kinds = kinds

    def _descend(self, steps: np.ndarray) -> int:
        """Follow the depth through the bracket steps (+1 / -1, 0 for none) of a chunk, outside strings, in
        order; the index of the step that closes the top-level value, or -1."""
        if not len(steps):
            return -1
        path = np.cumsum(steps, dtype=np.int64)
        path += self.depth
        if int(path.max()) > self.max_depth:
            raise LimitExceeded(
                self.path, "json-depth", f"JSON nested more than {self.max_depth} levels deep"
            )
        self.depth = int(path[-1])
        first = 0
        if not self.started:
            opened = np.flatnonzero(path > 0)
            if not len(opened):
                return -1
            self.started, first = True, int(opened[0])
        if int(path[first:].min()) > 0:
            return -1
        return first + int(np.flatnonzero(path[first:] <= 0)[0])


def buffered(raw: io.RawIOBase, size: int = 1 << 16) -> io.BufferedReader:
    """A buffered reader over a guard."""
    return io.BufferedReader(raw, size)


def read_limited(handle: io.IOBase, path: Path, name: str = "text-bytes", *, truncate: bool = False) -> bytes:
    """Read ``handle`` whole, but never more than limit ``name`` (default ``text-bytes``).

    Past the limit: LimitExceeded, or with ``truncate`` the first ``limit`` bytes.
    """
    cap = limits.get(name)
    data = bytearray()
    while len(data) <= cap and (block := handle.read(min(CHUNK_BYTES, cap + 1 - len(data)))):
        data += block
    if len(data) > cap:
        if truncate:
            return bytes(data[:cap])
        raise LimitExceeded(path, name, f"the input (more than {units.nbytes(cap)})")
    return bytes(data)


def check_line_lengths(data: bytes, path: Path) -> None:
    """LimitExceeded when a line of ``data`` is longer than ``line-bytes``."""
    cap = limits.get("line-bytes")
    if len(data) <= cap:
        return
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE)
    bounds = np.concatenate(([-1], ends, [len(data)]))
    longest = int(np.diff(bounds).max()) - 1
    if longest > cap:
        line = int(np.argmax(np.diff(bounds))) + 1
        raise LimitExceeded(path, "line-bytes", f"line {units.count(line)} ({units.nbytes(longest)})")
