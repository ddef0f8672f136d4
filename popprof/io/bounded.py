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
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..model.errors import InputError
from . import limits, units
from .jsonbytes import BRACKETS, trailing_backslashes, unescaped_quotes
from .jsongrammar import TokenCheck, string_parity
from .limits import LimitExceeded
from .plural import plural

_QUOTE, _NEWLINE = 34, 10
#: Bytes a guard checks at a time (and so the most read past a limit before it is noticed).
CHUNK_BYTES = 1 << 20
#: every byte but the quote and the four brackets (deleted to reduce a chunk to its structure)
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'"[]{}')
#: the quote and the four brackets, as a lookup of every byte
_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[list(b'"[]{}')] = True
#: the four brackets and the two separators (no quote), as a lookup of every byte
_TOKENS = np.zeros(256, dtype=bool)
_TOKENS[list(b"[]{},:")] = True
_COMMA, _COLON = 44, 58

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


class _AtByte(InputError):
    """An error of the JSON guard that knows its byte (``byte``: where, in the file)."""

    byte = -1

    def at_byte(self, byte: int) -> _AtByte:
        """This error, at ``byte``."""
        self.byte = byte
        return self


class TextAfterJson(_AtByte):
    """Something other than white space follows the top-level JSON value (see :class:`JsonGuard`)."""


class MismatchedBrackets(_AtByte):
    """A bracket outside strings closes a container of the other kind (``[ ... }``): the JSON is invalid there,
    as a byte flipped between ``{`` and ``[`` (or ``}`` and ``]``) makes it (see :class:`JsonGuard`)."""


class MisplacedSeparator(_AtByte):
    """A separator outside strings where JSON has the other one: in an object ``:`` and ``,`` alternate (every
    member is ``key : value``) and the object ends after a value, never after a ``,``; an array holds no ``:``.
    A byte flipped between ``,`` and ``:`` makes such a file, with its brackets balanced (see :class:`JsonGuard`).
    """


class MisplacedToken(InputError):
    """A byte outside strings that JSON has no place for there: a number or literal broken (``1#3``, ``trxe``,
    ``nul``), a stray byte between values, a value missing or doubled (``[1 2]``, ``[1,,2]``, ``{"a":}``), found
    by the token check (:mod:`popprof.io.jsongrammar`) of :class:`JsonGuard`'s ``structure``."""


class CutJson(InputError):
    """The input ends before its JSON value does (checked with ``structure``): cut off, or a quote or bracket lost
    opened a string or container that never closes."""


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

    With ``structure`` it also checks the brackets and separators outside strings against each other: it
    follows which kind of container is open at each depth and refuses a bracket that closes the other kind
    (:class:`MismatchedBrackets`), and in each container the separators: in an object ``:`` and ``,``
    alternate from a ``:`` and the ``}`` comes after a ``:``-led member, never after a ``,``; an array holds no
    ``:`` (:class:`MisplacedSeparator`). So one byte flipped between ``{`` and ``[``, ``}`` and ``]`` or ``,``
    and ``:`` is always refused. Besides, its token check (:mod:`popprof.io.jsongrammar`) refuses every other
    byte outside strings JSON has no place for: a broken number or literal, a stray byte, a value lost or
    doubled, out of JSON's order (:class:`MisplacedToken`); and :meth:`finish`, at the end of the input, a
    container or string still open (:class:`CutJson`). A reader that copies what is not a string as it is (the
    redaction) has no parser that would. Readers that parse leave it off: their parser refuses such a file
    anyway.
    """

    def __init__(self, inner: io.IOBase, path: Path, structure: bool = False) -> None:
        super().__init__(inner)
        self.path = path
        self.structure = structure
        self.open_kinds = np.zeros(0, dtype=np.int8)  # per depth (1 at index 0), the kind of container open
        self.last_separators = np.zeros(0, dtype=np.uint8)  # ... and its last separator so far (0: none)
        self.max_depth = limits.get("json-depth")
        self.max_string = limits.get("string-bytes")
        self.depth = 0
        self.in_string = False
        self.string_open = 0  # bytes of the string open at the end of the last chunk
        self.backslashes = 0  # backslashes ending the last chunk (inside a string)
        self.started = False  # the top-level value (an object or array) has opened
        self.ended = False  # ... and ended: only white space may follow
        self.offset = 0  # bytes checked before this chunk
        self.tokens = TokenCheck()  # with ``structure``: numbers, literals, stray bytes, the order of values

    def check(self, chunk: memoryview) -> None:
        raw = chunk.tobytes()
        if self.ended:
            self._check_after(raw, 0)
        elif self.structure:
            self._check_structure(raw)
        elif self.backslashes or len(raw) >= self.max_string or b"\\" in raw:
            self._check_exact(np.frombuffer(raw, dtype=np.uint8))
        else:
            self._check_plain(raw)
        self.offset += len(raw)

    def finish(self) -> None:
        """With ``structure``, once the input has been read to its end: :class:`CutJson` when the top-level value
        never closed (a container or a string still open: the file cut off, or a quote or bracket lost)."""
        if self.structure and self.started and not self.ended:
            where = "in a string" if self.in_string else f"{plural(self.depth, 'container')} open"
            raise CutJson(
                self.path,
                f"the file ends inside its JSON value (at byte {self.offset:,}, {where}; cut off, or a quote or "
                "bracket lost?): the file is not valid JSON",
                "the file may be damaged or cut off; write it again",
            )

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
            ).at_byte(at)

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
        marks = np.frombuffer(raw.translate(None, _NOT_STRUCTURAL), dtype=np.uint8)
        brackets = np.flatnonzero(marks != _QUOTE)
        quotes = len(marks) - len(brackets)
        self._plain_strings(raw, quotes)
        if len(brackets):
            # outside strings: an even number of quotes before it (odd when a string was open)
            outside = ((brackets - np.arange(len(brackets)) + self.in_string) & 1) == 0
            end = self._descend(np.where(outside, BRACKETS[marks[brackets]], 0))
            if end >= 0:  # the top-level value ends in this chunk (once per file): where, in the raw bytes
                structural = np.flatnonzero(_STRUCTURAL[np.frombuffer(raw, dtype=np.uint8)])
                self._check_after(raw, int(structural[brackets[end]]) + 1)
        self.in_string ^= bool(quotes % 2)

    def _plain_strings(self, raw: bytes, quotes: int) -> None:
        """The string lengths of :meth:`_check_plain`: the string left open from the last chunk and the one left
        open at its end (``quotes``: the chunk's quotes)."""
        size = len(raw)
        if self.in_string:
            self.string_open = self.string_open + (size if not quotes else raw.find(b'"'))
            if self.string_open > self.max_string:
                raise limits.string_too_long(self.path, self.string_open)
        if quotes:
            ends_inside = self.in_string ^ bool(quotes % 2)
            self.string_open = size - raw.rfind(b'"') if ends_inside else 0

    def _check_structure(self, raw: bytes) -> None:
        """The checks of a chunk with ``structure``: string lengths as without it; then the token check
        (:class:`~popprof.io.jsongrammar.TokenCheck`: numbers, literals, stray bytes, the order of values), which
        also gives the brackets and separators outside strings in order, for the bracket and separator check
        (:meth:`_structure`) and the depth. Of two errors in a chunk the one at the earlier byte is raised (at
        the same byte, the bracket and separator check's: its words are more precise)."""
        data = np.frombuffer(raw, dtype=np.uint8)
        in_string = self.in_string
        if self.backslashes or len(raw) >= self.max_string or b"\\" in raw:
            real = self._real_quotes(data)
            self._check_strings(real, len(raw))
            quote = np.zeros(len(raw), dtype=bool)
            quote[real] = True
            quotes = len(real)
        else:
            quote = data == _QUOTE
            quotes = int(np.count_nonzero(quote))
            self._plain_strings(raw, quotes)
        tokens, damage = self.tokens.check(raw, quote, in_string)

        def locate(i: int) -> int:
            """Off the fast path: where the i-th bracket or separator outside strings is in the chunk."""
            outside = string_parity(quote, in_string) == 0
            return int(np.flatnonzero(outside & _TOKENS[data])[i])

        marks = np.frombuffer(tokens, dtype=np.uint8)
        try:
            elems, steps = self._structure(marks, locate)
            end = self._descend(steps)
            if end >= 0:  # the top-level value ends in this chunk (once per file): where, in the raw bytes
                self._check_after(raw, locate(int(elems[end])) + 1)
        except (MismatchedBrackets, MisplacedSeparator, TextAfterJson) as error:
            if damage is None or self.offset + damage.at >= error.byte:
                raise
        if damage is not None:
            raise MisplacedToken(
                self.path,
                f"{damage.what} at byte {self.offset + damage.at:,} (a flipped or lost byte?): "
                "the file is not valid JSON",
                "the file may be damaged; write it again",
            )
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
        end = self._descend(delta[~inside])
        if end >= 0:
            self._check_after(data.tobytes(), int(where[~inside][end]) + 1)

    def _structure(self, marks: np.ndarray, locate: Callable[[int], int]) -> tuple[np.ndarray, np.ndarray]:
        """Check the chunk's brackets and separators outside strings (``marks``, in order, before
        :meth:`_descend` moves the depth) against each other: :class:`MismatchedBrackets` for a closing bracket
        of the other kind than its container, :class:`MisplacedSeparator` for a separator out of turn.
        ``locate(i)``: the byte offset in the chunk of ``marks[i]`` (asked only on the error path). Returns the
        indices in ``marks`` of the brackets and of each run's first separator, and their depth steps (what
        :meth:`_descend` needs: a separator does not move the depth).

        A run of separators with no bracket between stands in one container: it must alternate in an object
        and hold only ``,`` in an array (its pairs of equal neighbours tell: none in an object, all in an
        array). At one depth, containers open and close in turn, so, ordered by depth and then position, the
        openings, the runs (one element each) and the closings of each container follow each other: a run's
        first separator follows the last of the run before it in its container, or its opening bracket (then
        it is the first: ``:`` in an object), or, first at its depth in the chunk, what the chunks before left
        open there (``open_kinds``, ``last_separators``). No stack is walked token by token."""
        n = len(marks)
        if not n:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)
        sep = marks < 64  # ',' and ':' (the brackets are 91 and above)
        # the brackets and each run's first separator (a separator after another continues its run)
        head = np.empty(n, dtype=bool)
        head[0] = True
        np.logical_not(sep[1:], out=head[1:])
        head[1:] |= ~sep[:-1]
        elems = np.flatnonzero(head).astype(np.int32)
        k = len(elems)
        # each element's last token: a run's last separator, a bracket itself (never a separator: none)
        ends = np.empty(k, dtype=np.int32)
        ends[:-1] = elems[1:]
        ends[-1] = n
        ends -= 1
        mk = marks[elems]
        steps = BRACKETS[mk]
        # pairs of equal neighbours in each run (none in an object, all in an array): few, so found and counted
        equal = np.flatnonzero((marks[1:] == marks[:-1]) & sep[1:])
        same = np.bincount(np.searchsorted(elems, equal, side="right") - 1, minlength=k)
        pairs = ends - elems  # ... of all neighbours
        path = np.cumsum(steps, dtype=np.int32)
        path += self.depth
        level = path + (steps < 0)  # the container's depth (1 at the top); a separator's: where it stands
        low, high = int(level.min()), int(level.max())
        key = (level - low).astype(np.int16) if high - low < 32767 else level
        order = np.argsort(key, kind="stable")  # by depth, then position (a radix sort for small depths)
        lv, mo = level[order], mk[order]
        st = BRACKETS[mo]
        kind = _BRACE[mo]
        last_sep = marks[ends[order]]
        first = np.ones(k, dtype=bool)
        first[1:] = lv[1:] != lv[:-1]
        opens, closes, runs = st > 0, st < 0, st == 0
        # the kind of container each element stands in: of its opening bracket, the last opening at its depth
        # before it here, or, if none, of what the chunks before left open there (-1: none known)
        starts = np.flatnonzero(first)
        top = len(self.open_kinds)
        carried = np.clip(lv[starts], 0, top + 1)
        opened = kind.astype(np.int8)
        opened[starts] = np.where(
            opens[starts], kind[starts], np.concatenate(([-1], self.open_kinds, [-1]))[carried]
        )
        reset = opens | first
        container = opened[reset][np.cumsum(reset, dtype=np.int32) - 1]
        before = np.empty(k, dtype=np.uint8)  # the separator before each element in its container (else none)
        before[1:] = last_sep[:-1]
        before[starts] = np.concatenate(([0], self.last_separators, [0]))[carried]
        in_object = container == 1
        colon = mo == _COLON
        wrong = closes & (((container >= 0) & (kind != container)) | (in_object & (before == _COMMA)))
        # in an object a run starts with ':' unless it follows a ':', and alternates; in an array all ','
        same = same[order]
        wrong |= runs & in_object & ((colon == (before == _COLON)) | (same > 0))
        wrong |= runs & (container == 0) & (colon | (same < pairs[order]))
        if wrong.any():
            self._refuse(marks, elems[order], wrong, container, before, locate)
        # what stays open after the chunk: at each depth up to the new one, its last element tells
        depth = int(path[-1])
        kinds = np.full(max(depth, 0), -1, dtype=np.int8)
        lasts = np.zeros(max(depth, 0), dtype=np.uint8)
        keep = min(top, len(kinds))
        kinds[:keep] = self.open_kinds[:keep]
        lasts[:keep] = self.last_separators[:keep]
        final = np.append(starts[1:] - 1, k - 1)
        final = final[~closes[final] & (lv[final] >= 1) & (lv[final] <= len(kinds))]
        kinds[lv[final] - 1] = container[final]
        lasts[lv[final] - 1] = last_sep[final]
        self.open_kinds, self.last_separators = kinds, lasts
        return elems, steps

    def _refuse(
        self,
        marks: np.ndarray,
        at: np.ndarray,
        wrong: np.ndarray,
        container: np.ndarray,
        before: np.ndarray,
        locate: Callable[[int], int],
    ) -> None:
        """Raise for the first wrong token of the chunk (the error path of :meth:`_structure`): ``at``, the
        sorted elements' indices in ``marks``; the rest, per sorted element, as there."""
        first_at, message = len(marks), ""
        for s in np.flatnonzero(wrong)[np.argsort(at[wrong], kind="stable")]:
            i = int(at[s])
            if i >= first_at:
                break
            got, kind = chr(marks[i]), int(container[s])
            if got in "]}":
                if (got == "}") != (kind == 1):
                    first_at, message = i, f"a '{got}' closes a{'n object' if kind == 1 else 'n array'}"
                else:
                    first_at, message = i, "a '}' right after a ',' in an object"
                continue
            # a run of separators: its first is out of turn, or one inside it
            expected = ":" if kind == 1 and before[s] != _COLON else ","
            j = i
            while j + 1 < len(marks) and chr(marks[j]) == expected and chr(marks[j + 1]) in ",:":
                expected = (":" if expected == "," else ",") if kind == 1 else ","
                j += 1
            where = "an object" if kind == 1 else "an array"
            first_at, message = j, f"a '{chr(marks[j])}' where a '{expected}' belongs in {where}"
        error = MismatchedBrackets if "closes" in message else MisplacedSeparator
        byte = self.offset + locate(first_at)
        raise error(
            self.path,
            f"{message} at byte {byte:,} (a flipped byte?): the file is not valid JSON",
            "the file may be damaged; write it again",
        ).at_byte(byte)

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
