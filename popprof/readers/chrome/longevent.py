"""Events longer than the ``event-bytes`` limit (issue 27): lexed as a stream and shrunk before they are parsed.

orjson builds a parsed event as Python objects, about 15 times the bytes of an ``args`` array of small
objects. An event longer than ``event-bytes`` is therefore never handed to it whole: the byte lexer
(:class:`popprof.io.jsonbytes.BracketStream`) reads it block by block and keeps only what lies outside
its nested values. Every array that is the value of one of the event's members (``"stack": [...]``,
an ``args`` that is an array) and every array or object that is the value of a member of one of its
objects (``args.inputs``, ``args["Input Dims"]``) is replaced by ``null``; the event's own fields and
the numbers and strings of its ``args`` (``stream``, ``correlation``, ``device``, a counter's series)
are kept. What is kept must stay within ``event-bytes`` too, strings aside (each is bounded by
``string-bytes``): an event of millions of scalar members is refused with one line. Memory is a block
and what is kept; time is linear in the event's bytes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import orjson

from ...io import limits, units
from ...io.jsonbytes import BracketStream

#: bytes read (and lexed) at a time while a long event is streamed
SCAN_BYTES = 4 << 20
_OPEN = (ord("["), ord("{"))
_NULL = b"null"


class Unfinished(Exception):
    """The stream ends inside a long event (a truncated file, or a piece of a split file cut inside one);
    ``events``: the complete events read with it, before it."""

    def __init__(self, events: list | None = None) -> None:
        super().__init__("the stream ends inside an event")
        self.events = events or []


class Misframed(Exception):
    """The lexer found more closing brackets than the stream's event array can hold: not one document."""


def threshold() -> int:
    """Events longer than this many bytes are shrunk (the ``event-bytes`` limit)."""
    return limits.get("event-bytes")


def take(pending: bytes, handle, source: Path | None, warnings: Counter | None) -> tuple[list, bytes] | None:
    """The events of ``pending`` (which starts between two events) up to its last complete one, with every
    event longer than ``event-bytes`` shrunk; an event still open at its end is read on from ``handle``
    (streamed, never held whole). Returns the events and the bytes after the last one (its comma
    removed), or ``None`` when ``pending`` holds no long event (the caller's framing goes on).

    Raises :class:`Misframed` when ``pending`` closes more brackets than an event array can (the piece of a
    split file that starts inside an event) and :class:`Unfinished` when the stream ends inside an event.
    """
    limit = threshold()
    lexer = BracketStream()
    where, kinds, after = lexer.feed(pending)
    below = np.flatnonzero(after < 0)
    stop = len(pending)
    if len(below):  # the event array's end (or, when more closes follow, no event array at all)
        if after.min() < -2:
            raise Misframed
        stop = int(where[below[0]])
        where, kinds, after = where[: below[0]], kinds[: below[0]], after[: below[0]]
    opens = where[(after == 1) & np.isin(kinds, _OPEN)]
    closes = where[after == 0]
    if len(opens) > len(closes) and stop < len(pending):
        raise Misframed  # an event open where the array closes
    spans = closes - opens[: len(closes)] + 1
    long_closed = np.flatnonzero(spans > limit)
    still_open = len(opens) > len(closes)
    if not len(long_closed) and not (still_open and len(pending) - int(opens[-1]) > limit):
        return None
    pieces: list[bytes] = []
    at = 0
    for i in long_closed.tolist():
        start, end = int(opens[i]), int(closes[i]) + 1
        pieces += [pending[at:start], _shrink_whole(pending[start:end], limit, source)]
        at = end
    rest_from = int(closes[-1]) + 1 if len(closes) else 0
    if still_open:
        start = int(opens[-1])
        pieces.append(pending[at:start])
        try:
            shrunk, rest = _shrink_streamed(pending[start:], handle, limit, source)
        except Unfinished:
            before = b"".join(pieces).rstrip(b" \t\r\n").removesuffix(b",")
            raise Unfinished(_parse(before) if before.strip() else []) from None
        pieces.append(shrunk)
        long_count = len(long_closed) + 1
    else:
        pieces.append(pending[at:rest_from])
        rest = pending[rest_from:]
        long_count = len(long_closed)
    events = _parse(b"".join(pieces))
    if warnings is not None:
        warnings["long_events"] += long_count
    rest = rest.lstrip(b" \t\r\n")
    return events, rest[1:] if rest.startswith(b",") else rest


def _parse(items: bytes) -> list:
    """The events of ``items`` (events and the commas between them); :class:`Misframed` if they do not parse."""
    try:
        return orjson.loads(b"[" + items + b"]")
    except orjson.JSONDecodeError:
        raise Misframed from None


class _Shrinker:
    """One long event (an item of the event array), fed block by block: what it keeps, and where it ends."""

    def __init__(self, limit: int, source: Path | None) -> None:
        self.lexer = BracketStream()
        self.limit, self.source = limit, source
        self.kept: list[bytes] = []
        self.size = 0
        self.dropping = -1  # while inside a dropped value: the depth its close returns to
        self.member = 0  # the bracket that opened the member value open at depth 2 (``{`` or ``[``)

    def feed(self, data: bytes) -> int:
        """Take ``data`` (the next bytes of the event); where the event ends in it, or -1 when it goes on."""
        where, kinds, after = self.lexer.feed(data)
        before = after - (np.isin(kinds, _OPEN) * 2 - 1)
        ended = np.flatnonzero(after == 0)
        end = int(where[ended[0]]) + 1 if len(ended) else len(data)
        if len(ended):
            n = ended[0] + 1
            where, kinds, after, before = where[:n], kinds[:n], after[:n], before[:n]
        opening = np.isin(kinds, _OPEN)
        # the values dropped: an item that is an array; an array in a member of the event; an array or an
        # object in a member of one of the event's objects (its args)
        member_opens = np.flatnonzero(opening & (before == 1))
        parent = np.full(len(where), self.member, dtype=np.uint8)
        if len(member_opens):
            last = np.searchsorted(member_opens, np.arange(len(where)), side="right") - 1
            has = last >= 0
            parent[has] = kinds[member_opens[last[has]]]
            self.member = int(kinds[member_opens[-1]])
        array = kinds == ord("[")
        starts = np.flatnonzero(
            opening
            & (((before == 0) & array) | ((before == 1) & array) | ((before == 2) & (parent == ord("{"))))
        )
        at = 0 if self.dropping < 0 else self._close(where, after, 0, self.dropping)
        for i in starts.tolist() if at >= 0 else ():
            pos = int(where[i])
            if pos < at:
                continue  # inside the value dropped before it (an item that is an array)
            self._keep(data[at:pos] + _NULL, at, pos)
            at = self._close(where, after, i, int(before[i]))
            if at < 0:
                self.dropping = int(before[i])
                break
        if at >= 0:
            self._keep(data[at:end], at, end)
        return end if len(ended) else -1

    def _close(self, where: np.ndarray, after: np.ndarray, i: int, depth: int) -> int:
        """Just past the close (at or after bracket ``i``) that returns to ``depth``; -1 when it is not in this
        block (still dropping)."""
        found = np.flatnonzero(after[i:] == depth)
        if not len(found):
            return -1
        self.dropping = -1
        return int(where[i + found[0]]) + 1

    def _keep(self, data: bytes, lo: int, hi: int) -> None:
        """Keep ``data`` (bytes ``lo:hi`` of the block, and a ``null``); its bytes outside strings count toward
        ``event-bytes`` (strings are bounded by ``string-bytes``, and cost only their size once parsed)."""
        self.size += len(data) - self.lexer.string_bytes(lo, hi)
        if self.size > self.limit:
            raise limits.LimitExceeded(
                self.source or Path("input"),
                "event-bytes",
                f"an event whose members outside its nested arrays and objects take more than "
                f"{units.nbytes(self.limit)} (strings aside)",
            )
        self.kept.append(data)


def _shrink_whole(data: bytes, limit: int, source: Path | None) -> bytes:
    shrinker = _Shrinker(limit, source)
    for at in range(0, len(data), SCAN_BYTES):
        shrinker.feed(data[at : at + SCAN_BYTES])
    return b"".join(shrinker.kept)


def _shrink_streamed(head: bytes, handle, limit: int, source: Path | None) -> tuple[bytes, bytes]:
    """The kept bytes of the event that starts ``head`` and goes on in ``handle``, and the bytes after it."""
    shrinker = _Shrinker(limit, source)
    data = head
    while True:
        for at in range(0, len(data), SCAN_BYTES):
            piece = data[at : at + SCAN_BYTES]
            end = shrinker.feed(piece)
            if end >= 0:
                return b"".join(shrinker.kept), piece[end:] + data[at + SCAN_BYTES :]
        data = handle.read(SCAN_BYTES)
        if not data:
            raise Unfinished
