"""The byte-level JSON lexer (numpy, no Python loop over bytes): white space, quotes and escapes, brackets, and
cutting a stream into blocks where no string is split. Pure functions shared by the Chrome trace reader's framing,
the JSON guard (:mod:`popprof.io.bounded`), the trace redactor and the leak scan's reading of an original.

The token patterns over bytes (:data:`WS`, :data:`STRING`, :func:`member`, :data:`OBJECT_SEPARATOR`,
:func:`object_boundary`) are the lexer's too: the Chrome reader finds its event array and the cuts between two
events with them, the redactor its string tokens."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

import numpy as np

#: Bytes the leak scan's readers tokenize at a time: small enough that a block's arrays stay in the CPU
#: cache (1 MiB pieces tokenize about a quarter faster than 8 MiB ones).
SCAN_BLOCK = 1 << 20
T = TypeVar("T")
SPACE = np.zeros(256, dtype=bool)
SPACE[list(b" \t\r\n")] = True
#: A JSON string token, quotes included, as a regular expression over bytes (escapes skipped, unrolled:
#: linear). The redactor's token patterns and the leak scan's string pattern are built from it.
STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
#: The same without its quotes (for a group around a string's content).
STRING_BODY = rb'[^"\\]*(?:\\.[^"\\]*)*'
#: +1 for ``[`` and ``{``, -1 for ``]`` and ``}``, 0 for every other byte.
BRACKETS = np.zeros(256, dtype=np.int8)
BRACKETS[list(b"[{")] = 1
BRACKETS[list(b"]}")] = -1
#: JSON white space (space, tab, carriage return, line feed; the bytes of :data:`SPACE`), any amount.
WS = rb"[ \t\r\n]*"
#: The end of one object and the start of the next in an array: ``}``, the comma, ``{`` (white space
#: around the comma). Found by a regex it may also lie inside a string: a parse of what it cuts decides.
OBJECT_SEPARATOR = re.compile(rb"\}" + WS + rb"," + WS + rb"\{")


def member(key: bytes, opening: bytes) -> bytes:
    """A pattern for the member ``"key":`` followed by a value that starts with ``opening`` (``[``, ``{``
    or ``"``; a regex byte, escaped here), white space allowed around the colon."""
    return rb'"' + re.escape(key) + rb'"' + WS + rb":" + WS + re.escape(opening)


def object_boundary(first_keys: Iterable[bytes]) -> re.Pattern[bytes]:
    """The boundary between two objects of an array whose next object starts with one of ``first_keys``:
    matches ``}`` and the comma (with white space around it) and looks ahead to ``{"key":``, so a match
    ends where the next object starts. The key list makes a boundary inside a string or a nested value
    less likely; where one still is, a parse of what it cuts fails and the caller tries another."""
    keys = rb"|".join(re.escape(key) for key in first_keys)
    return re.compile(rb"\}" + WS + rb"," + WS + rb"(?=\{" + WS + rb'"(?:' + keys + rb')"' + WS + rb":)")


def solid_after(data: np.ndarray, positions: np.ndarray, rounds: int = 16) -> np.ndarray:
    """For each position, the byte at it or after it that is not JSON white space (0 past the end).

    Steps over white space a few bytes at a time for all positions at once (JSON written by
    profilers has at most a few spaces or an indent between tokens); positions still on white
    space after ``rounds`` steps fall back to a search over the non-space bytes."""
    return _solid(data, positions, 1, rounds)


def solid_before(data: np.ndarray, positions: np.ndarray, rounds: int = 16) -> np.ndarray:
    """Like :func:`solid_after`, looking backwards (0 before the start)."""
    return _solid(data, positions, -1, rounds)


def _solid(data: np.ndarray, positions: np.ndarray, step: int, rounds: int) -> np.ndarray:
    n = len(data)
    if not n or not len(positions):
        return np.zeros(len(positions), dtype=np.uint8)
    # most tokens are followed (preceded) by punctuation right away: one gather answers them
    out = np.take(data, positions, mode="clip")
    outside = (positions < 0) | (positions >= n)
    if outside.any():
        out[outside] = 0
    maybe = out <= 0x20  # white space is " \t\r\n"; other control bytes are rare and settled by the slow path
    if maybe.any():
        which = np.flatnonzero(maybe & ~outside)
        out[which] = _solid_slow(data, positions[which], step, rounds)
    return out


def _solid_slow(data: np.ndarray, positions: np.ndarray, step: int, rounds: int) -> np.ndarray:
    n = len(data)
    pos = positions.astype(np.int64, copy=True)
    inside = (pos >= 0) & (pos < n)
    out = np.zeros(len(pos), dtype=np.uint8)
    todo = np.flatnonzero(inside)
    for _ in range(rounds):
        if not len(todo):
            return out
        byte = data[pos[todo]]
        space = SPACE[byte]
        done = todo[~space]
        out[done] = byte[~space]
        todo = todo[space]
        pos[todo] += step
        keep = (pos[todo] >= 0) & (pos[todo] < n)
        todo = todo[keep]
    if len(todo):  # deep indentation: search the non-space bytes for the few left
        solid = np.flatnonzero(~SPACE[data])
        if step > 0:
            at = np.searchsorted(solid, pos[todo])
            ok = at < len(solid)
            out[todo[ok]] = data[solid[at[ok]]]
        else:
            at = np.searchsorted(solid, pos[todo], side="right") - 1
            ok = at >= 0
            out[todo[ok]] = data[solid[at[ok]]]
    return out


def has_escaped_quote(data: bytes) -> bool:
    """Whether ``data`` holds ``\\"``: a one-byte search first (memchr-fast), the two-byte one (much slower
    in CPython) only when there is a backslash at all."""
    return b"\\" in data and b'\\"' in data


def quote_spans(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the string bodies of a block that holds no escaped quote (``arr``: its bytes as
    uint8), pairing its quotes in order; an unpaired last quote (a string cut at the block's end) is left out."""
    quotes = np.flatnonzero(arr == 0x22)
    if len(quotes) % 2:
        quotes = quotes[:-1]
    return quotes[0::2] + 1, quotes[1::2]


def alternating_pieces(buffer, size: int, starts: np.ndarray, ends: np.ndarray):
    """A zero-copy ``pyarrow.LargeBinaryArray`` over ``buffer`` (``size`` bytes) whose elements alternate: the
    text before span 0, span 0, the text between spans 0 and 1, span 1, ..., the text after the last span
    (with :func:`quote_spans`: string bodies at the odd positions)."""
    import pyarrow as pa

    offsets = np.empty(2 * len(starts) + 2, dtype=np.int64)
    offsets[0], offsets[-1] = 0, size
    offsets[1:-1:2], offsets[2:-1:2] = starts, ends
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), buffer]
    )


def quotes_before(data: bytes, pos: int) -> int:
    """How many ``"`` bytes ``data[:pos]`` holds (numpy: several times faster than ``bytes.count``)."""
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8, count=max(0, pos)) == 0x22))


def unescaped_quotes(data: bytes, carry: int = 0) -> np.ndarray:
    """Positions of the ``"`` bytes of ``data`` that are not escaped (not after an odd run of backslashes).

    ``carry``: the backslashes that end the bytes before ``data`` (a run continuing into its start), for a
    stream lexed block by block (see :func:`trailing_backslashes`). For a block that starts outside any
    string, even indices are opening quotes and odd ones closing."""
    arr = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(arr == 0x22)
    if not len(quotes) or (not carry and b"\\" not in data):
        return quotes
    slashes = np.flatnonzero(arr == 0x5C)
    length = np.zeros(len(quotes), dtype=np.int64)  # the run of backslashes right before each quote
    if len(slashes):
        # runs of consecutive backslashes: where each run starts and ends
        breaks = np.flatnonzero(np.diff(slashes) != 1) + 1
        run_starts = slashes[np.concatenate(([0], breaks))]
        run_ends = slashes[np.concatenate((breaks - 1, [len(slashes) - 1]))]
        which = np.searchsorted(run_ends, quotes - 1)  # the run that could end right before each quote
        found = which < len(run_ends)
        touching = np.zeros(len(quotes), dtype=bool)
        touching[found] = run_ends[which[found]] == quotes[found] - 1
        length[touching] = quotes[touching] - run_starts[which[touching]]
    length[length == quotes] += carry  # runs that reach the block's start go on from the bytes before it
    return quotes[length % 2 == 0]


def trailing_backslashes(data: bytes, carry: int = 0) -> int:
    """The backslashes ending ``data`` (plus ``carry``, those before it, when the run is all of ``data``)."""
    n = len(data) - len(data.rstrip(b"\\"))
    return n + carry if n == len(data) else n


def container_end(data: bytes, start: int) -> int:
    """End (exclusive) of the JSON object or array opening at ``data[start]``, or -1 when ``data`` ends first.

    Brackets inside strings (by the parity of unescaped quotes) do not count. Linear, in numpy, however
    long the container's strings are."""
    piece = data[start:]
    arr = np.frombuffer(piece, dtype=np.uint8)
    where = np.flatnonzero(BRACKETS[arr])
    where = where[np.searchsorted(unescaped_quotes(piece), where) % 2 == 0]  # outside strings
    closed = np.flatnonzero(np.cumsum(BRACKETS[arr[where]], dtype=np.int64) == 0)
    return start + int(where[closed[0]]) + 1 if len(closed) else -1


def object_end(data: bytes, start: int, quick: int = 4096) -> int:
    """End (exclusive) of the JSON object starting at ``data[start] == '{'``, or -1 when ``data`` ends first.

    A byte loop for the first ``quick`` bytes (metadata events are short); a longer object (a thread
    name of 70 KB) is measured by :func:`container_end` over the rest of ``data``, however long its strings are, so
    an object that ends inside the block is never taken for one cut off by the block's end."""
    end = _object_end_loop(data, start, min(len(data), start + quick))
    if end >= 0 or start + quick >= len(data):
        return end
    return container_end(data, start)  # numpy, linear


def _object_end_loop(data: bytes, start: int, stop: int) -> int:
    depth, i, in_str = 0, start, False
    while i < stop:
        c = data[i]
        if in_str:
            if c == 0x5C:
                i += 1
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def array_closes(data: bytes, levels: int) -> np.ndarray:
    """Positions (ascending) of the ``]`` bytes outside strings of ``data`` after which the brackets outside
    strings close ``levels`` more containers than they open: with ``data`` the end of a document, the ``]``
    closing an array ``levels`` deep (1: a member of the top-level object; 0: the top-level array itself).

    Strings are told from the end (``data`` ends outside any string), so ``data`` may start anywhere. Linear,
    in numpy: each ``]`` costs nothing more than any other byte (trying each ``]`` with a parser of what
    follows it was quadratic in the bytes of a large nested value near the end of a file).
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    where = np.flatnonzero(BRACKETS[arr])
    if not len(where):
        return where
    quotes = unescaped_quotes(data)
    outside = (len(quotes) - np.searchsorted(quotes, where)) % 2 == 0  # an even number of quotes after it
    where = where[outside]
    steps = BRACKETS[arr[where]].astype(np.int64)
    after = np.cumsum(steps[::-1])[::-1] - steps  # the steps after each bracket, itself left out
    return where[(arr[where] == 0x5D) & (after == -levels)]


def last_opening_quote(data: bytes) -> int:
    """Offset of the last opening quote of ``data`` (which starts outside any string), or -1: a place to
    cut where no string is split. Exact with escaped quotes too."""
    pos = data.rfind(b'"')
    if pos < 0:
        return len(data)  # no string at all: the whole of it is outside strings
    if pos == 0:
        return -1
    if b"\\" not in data:  # no escapes: counting the quotes before the last one is enough
        return pos if quotes_before(data, pos) % 2 == 0 else data.rfind(b'"', 0, pos)
    quotes = unescaped_quotes(data)
    last = len(quotes) - 1 if (len(quotes) - 1) % 2 == 0 else len(quotes) - 2
    return int(quotes[last]) if last >= 0 and quotes[last] > 0 else -1


class BlockCutter:
    """A binary stream read in blocks of about ``block_size`` bytes, with the bytes read and not yet taken
    (``pending``) kept here: the one block source of the Chrome reader's framing and of :func:`blocks`.

    The caller cuts where it is safe (between two array items, outside strings) and :meth:`take` s the
    front; it may give bytes back (:meth:`give_back`, :meth:`replace`). When no cut fits, :meth:`grow`
    reads as much again as is pending, so a long item costs a few reads and copies of its size (not its
    square). ``handle`` stays exposed for a caller that reads a very long item itself; ``reads`` counts
    the reads (for tests)."""

    def __init__(self, handle: BinaryIO, block_size: int, pending: bytes = b"") -> None:
        self.handle = handle
        self.block_size = block_size
        self.pending = pending
        self.eof = False
        self.reads = 0

    def __len__(self) -> int:
        return len(self.pending)

    def read(self, size: int | None = None) -> bool:
        """Read up to ``size`` bytes (one block by default) onto ``pending``; ``False`` at the stream's end."""
        more = self.handle.read(self.block_size if size is None else size)
        self.reads += 1
        if not more:
            self.eof = True
            return False
        self.pending = self.pending + more if self.pending else more
        return True

    def grow(self, cap: int | None = None) -> bool:
        """Read as much again as is pending (at least one block; with ``cap``, so that ``pending`` stops
        at about ``cap`` bytes when it is below it): doubling, for an item longer than a block."""
        size = max(self.block_size, len(self.pending))
        if cap is not None and len(self.pending) <= cap:
            size = max(self.block_size, min(size, cap + 1 - len(self.pending)))
        return self.read(size)

    def take(self, n: int) -> bytes:
        """The first ``n`` pending bytes, no longer pending."""
        data, self.pending = self.pending[:n], self.pending[n:]
        return data

    def drop(self, n: int) -> None:
        """Forget the first ``n`` pending bytes."""
        self.pending = self.pending[n:]

    def give_back(self, data: bytes) -> None:
        """Put ``data`` back in front of the pending bytes (it is taken again first)."""
        self.pending = data + self.pending

    def replace(self, pending: bytes) -> None:
        """Make ``pending`` the bytes not yet taken (after a caller read past them from :attr:`handle`)."""
        self.pending = pending


def blocks(
    reader: BinaryIO, block_size: int, cut: Callable[[bytes], int], source: Path | None = None
) -> Iterator[bytes]:
    """The bytes of ``reader`` in blocks of about ``block_size``, each split where ``cut`` says it is safe
    (a block with no safe place grows, doubling, until it holds one); the last block holds the rest.

    Only a string can leave no safe place, so held bytes beyond the ``string-bytes`` limit (plus one
    block) end in :class:`~popprof.io.limits.LimitExceeded` naming ``source``."""
    from . import limits

    longest = limits.get("string-bytes") + block_size
    cutter = BlockCutter(reader, block_size)
    grown = cutter.read()
    while grown:
        at = cut(cutter.pending)
        if at > 0:
            yield cutter.take(at)
            grown = cutter.read()
            continue
        if len(cutter) > longest:
            raise limits.string_too_long(source or Path("input"), len(cutter) - block_size)
        grown = cutter.grow(longest)
    if cutter.pending:
        yield cutter.take(len(cutter))


def map_blocks(
    reader: BinaryIO,
    fn: Callable[[bytes], T],
    block_size: int,
    cut: Callable[[bytes], int],
    source: Path | None = None,
    workers: int = 2,
) -> Iterator[T]:
    """``fn`` of each block of :func:`blocks`, in order, computed on ``workers`` threads (for numpy / pyarrow
    work that releases the GIL: several cores stay busy while the blocks are read); with ``workers`` of 1 or
    less, in the calling thread (no thread at all: worker threads allocate from arenas of their own, whose
    freed pages glibc hands back and faults in again block after block)."""
    from collections import deque

    from . import parallel

    if workers <= 1:
        for data in blocks(reader, block_size, cut, source):
            yield fn(data)
        return

    pending: deque = deque()
    with parallel.thread_pool(workers) as pool:  # POPPROF_PARALLEL=0: each block computed here, in order
        for data in blocks(reader, block_size, cut, source):
            pending.append(pool.submit(fn, data))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


class BracketStream:
    """The brackets outside strings of a stream lexed block by block, with the depth after each.

    The state carried from block to block: inside a string or not, the backslashes ending the
    last block, and the depth (``depth`` to start with: the stream starts outside any string).
    Linear, in numpy; the temporaries are a few times one block.
    """

    def __init__(self, depth: int = 0) -> None:
        self.depth = depth
        self.in_string = False
        self.backslashes = 0
        self._strings = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))

    def feed(self, data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The positions in ``data`` of its brackets outside strings, the byte at each and the depth after it."""
        arr = np.frombuffer(data, dtype=np.uint8)
        quotes = unescaped_quotes(data, self.backslashes if self.in_string else 0)
        # the strings of this block, for string_bytes: [start, end) spans (one open at an end runs to it)
        bounds = np.concatenate(([0] if self.in_string else [], quotes, [len(data)]))
        starts, ends = bounds[: len(bounds) - 1 : 2], np.minimum(bounds[1::2] + 1, len(data))
        self._strings = (starts, ends, np.cumsum(ends - starts))
        where = np.flatnonzero(BRACKETS[arr])
        outside = (np.searchsorted(quotes, where) + self.in_string) % 2 == 0
        where = where[outside]
        kinds = arr[where]
        after = self.depth + np.cumsum(BRACKETS[kinds], dtype=np.int64)
        if len(after):
            self.depth = int(after[-1])
        self.in_string ^= len(quotes) % 2 == 1
        self.backslashes = trailing_backslashes(data, self.backslashes) if self.in_string else 0
        return where, kinds, after

    def string_bytes(self, lo: int, hi: int) -> int:
        """How many bytes of ``data[lo:hi]`` (of the block last fed) lie inside strings, quotes included."""
        return self._inside(hi) - self._inside(lo)

    def _inside(self, x: int) -> int:
        starts, ends, total = self._strings
        i = int(np.searchsorted(starts, x, side="right")) - 1
        if i < 0:
            return 0
        return int(total[i - 1] if i else 0) + min(x, int(ends[i])) - int(starts[i])
