"""Byte-level framing of the event array: where it starts and ends, and cutting it into blocks of whole
events that orjson (or Arrow, :mod:`.arrow`) parses; anything it cannot cut safely is :class:`Unframeable`."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Generator, Iterator

import orjson
import pyarrow as pa

from ...io.jsonbytes import BlockCutter, array_closes, member, object_boundary
from . import arrow, longevent


def strip_bom(head: bytes) -> bytes:
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()


class Unframeable(Exception):
    """The block framer cannot cut this stream safely: parse it with ijson instead."""


#: the keys a trace event may start with (any of the fields the format defines)
EVENT_KEYS = tuple(b"ph name cat pid tid ts dur args id s bp cname tts sf stack".split())
#: the end of one event and the start of the next: ``}`` ``,`` ``{"key":`` (the lexer's object boundary)
BOUNDARY = object_boundary(EVENT_KEYS)
#: the top-level member holding the event array (of the object form)
TRACE_EVENTS = re.compile(member(b"traceEvents", b"["))
#: Arrow blocks between two returns of free heap pages to the system: rare, because the pages a block
#: freed are reused by the next one, while pages given back are faulted in again (every 8 blocks cost
#: about 3 % of a 600,000-event load in page faults; every 64 raises its peak from ~198 to ~211 MiB)
TRIM_EVERY = 64
#: blocks in a row that the Arrow fast path could not take before the rest of a stream goes to orjson only
FAST_MISSES = 3
FAST_BLOCK_BYTES = 1 << 20  # larger Arrow blocks are no faster here and leave more in the heap
#: what orjson takes first where the Arrow path stopped (an event it does not take): the leading metadata
#: of a trace or one counter among complete events is a few kB, so orjson parses about this much and
#: Arrow goes on after it; each further stop in a row doubles the step, up to :data:`BLOCK_BYTES`
FIRST_STEP_BYTES = 1 << 16
BLOCK_BYTES = 1 << 20  # ~8,000 kineto events: bounds the Python objects alive at once (and stays in cache)
MAX_PENDING_BYTES = 256 << 20


def _array_start(handle, prefix: str, top: dict | None = None) -> bytes:
    """Read up to the opening ``[`` of the event array; return the bytes after it.

    The top-level members before the array (``distributedInfo``, ``deviceProperties``, ...) go to ``top``.
    """
    buf = handle.read(BLOCK_BYTES)
    head = strip_bom(buf)
    if prefix == "item":
        if not head.startswith(b"["):
            raise Unframeable
        return head[1:]
    match = TRACE_EVENTS.search(buf)
    if match is None:
        raise Unframeable
    try:  # proves the key is a member of the top-level object (not inside a string or a nested value)
        head = orjson.loads(buf[: match.end()] + b"]}")
    except orjson.JSONDecodeError:
        head = None
    if not isinstance(head, dict):
        raise Unframeable
    if top is not None:
        top.update((k, v) for k, v in head.items() if k != "traceEvents")
    return buf[match.end() :]


def head_members(head: bytes) -> dict:
    """The top-level members before the event array, from the stream's first bytes (``{}`` when they cannot
    be read there): for a pass that does not cut blocks (ijson), as :func:`_array_start` reads them."""
    match = TRACE_EVENTS.search(head)
    if match is None:
        return {}
    try:
        members = orjson.loads(head[: match.end()] + b"]}")
    except orjson.JSONDecodeError:
        return {}
    return {k: v for k, v in members.items() if k != "traceEvents"} if isinstance(members, dict) else {}


def members_after_array(last: bytes, prefix: str) -> dict:
    """The top-level members after the event array, from the stream's last bytes (``{}`` when none is found)."""
    end = event_array_end(last, prefix)
    return tail_members(last[end + 1 :]) if end is not None else {}


def event_array_end(last: bytes, prefix: str) -> int | None:
    """The index in ``last`` (the stream's last bytes) of the ``]`` closing the event array, or ``None``.

    Of the candidates of :func:`array_ends` (last first), the first whose last element is an event: the
    object after the last boundary before it parses and has a ``ph``. A later top-level array (Kineto's
    ``INFO`` log lines, ``deviceProperties``) also closes the document, but ends in no event. When no
    candidate can be checked that way (no boundary near it: an array of one long event), the last one."""
    first = None
    for end in array_ends(last, prefix):
        first = end if first is None else first
        window = max(0, end - (1 << 16))
        boundaries = list(BOUNDARY.finditer(last, window, end))
        if not boundaries:
            continue
        start = last.index(b"{", boundaries[-1].start() + 1)
        try:
            element = orjson.loads(last[start:end].rstrip())
        except orjson.JSONDecodeError:
            continue
        if isinstance(element, dict) and "ph" in element:
            return end
    return first


def tail_members(rest: bytes) -> dict:
    """The top-level members after the event array (``rest`` starts after its closing ``]``)."""
    try:
        tail = orjson.loads(b'{"_":[]' + rest)
    except orjson.JSONDecodeError:
        return {}
    return {k: v for k, v in tail.items() if k != "_"} if isinstance(tail, dict) else {}


def array_ends(buf: bytes, prefix: str) -> Iterator[int]:
    """Candidate indices (last first) of the ``]`` closing the event array in the stream's last bytes.

    Candidates are the ``]`` that close an array at the event array's level (from the lexer,
    :func:`popprof.io.jsonbytes.array_closes`: a few per file, whatever the last values hold); one
    qualifies when what follows it closes the document; the caller also checks that what precedes
    it parses as the array's last events (a later array, such as ``deviceProperties``, qualifies on
    the first test only).
    """
    if prefix == "item":
        # a top-level array: only white space may follow its "]", so the one candidate is the last byte that is
        # not white space (outside any string, and with no bracket after it: what array_closes would find)
        end = len(buf.rstrip()) - 1
        if end >= 0 and buf[end] == 0x5D:
            yield end
        return
    start = len(buf) - min(len(buf), 1 << 20)
    for at in array_closes(buf[start:], 1)[::-1].tolist():  # a member of the top-level object
        index = start + at
        rest = buf[index + 1 :]
        try:
            orjson.loads(b'{"_":[]' + rest)
        except orjson.JSONDecodeError:
            continue
        yield index


def blocks(
    handle,
    prefix: str,
    top: dict | None = None,
    fast: bool = False,
    warnings: Counter | None = None,
    flows: bool = True,
) -> Iterator[list | pa.Table]:
    """Events of the stream as lists of dicts, one ~1 MB block at a time, parsed by orjson.

    With ``fast``, blocks of plain X and flow events come as Arrow tables instead
    (:func:`.arrow.parse_block`; without ``flows``, the fields only flows have are skipped); where Arrow
    stops (an event it does not take), orjson
    parses from there, ~64 kB first, twice as much at each further stop in a row, up to
    ~1 MB, then Arrow goes on; after a few blocks in a row that Arrow took nothing of,
    the rest of the stream goes to orjson only.

    A block is cut after the last ``}, {"key":`` in it and parsed as ``[`` block
    ``]``. A cut that falls inside nested ``args`` makes that parse fail, and the
    previous candidate is tried, so every yielded list holds exactly the events of
    the block. An event longer than the ``event-bytes`` limit is streamed and shrunk by
    :mod:`.longevent` (counted in ``warnings``). Anything else unusual raises :class:`Unframeable`
    (or :class:`.longevent.Misframed`, :class:`.longevent.Unfinished`).
    """
    cutter = BlockCutter(handle, BLOCK_BYTES, _array_start(handle, prefix, top))
    framer = _Framer(cutter, prefix, top, fast, warnings, flows)
    while True:
        if not framer.fill():
            continue
        if not framer.cutter.eof:
            yield from framer.middle()
        elif (yield from framer.end()):
            return


class _Framer:
    """The state of :func:`blocks` between two of its steps: the block source (its pending bytes: read,
    not yet parsed), whether the Arrow path is on, its misses in a row and the step orjson takes where
    it stops, and whether the pending bytes hold no event that could be cut (read more first)."""

    def __init__(
        self,
        cutter: BlockCutter,
        prefix: str,
        top: dict | None,
        fast: bool,
        warnings: Counter | None,
        flows: bool,
    ) -> None:
        self.cutter, self.prefix, self.top, self.fast = cutter, prefix, top, fast
        self.warnings, self.flows = warnings, flows
        self.misses = 0
        self.step = FIRST_STEP_BYTES  # how much orjson takes where the Arrow path stops
        self.stuck = False  # no event could be cut from what is pending: read more before trying again

    @property
    def pending(self) -> bytes:
        return self.cutter.pending

    def fill(self) -> bool:
        """Read a block when fewer bytes than one are pending (or when stuck); ``False`` when a further
        read is needed before the next step."""
        size = FAST_BLOCK_BYTES if self.fast else BLOCK_BYTES
        if self.cutter.eof or not (len(self.cutter) < size or self.stuck):
            return True
        # stuck inside one long event: read as much again as is pending, so the copies into the pending
        # bytes and the parse attempts over them add up to a few times the event's size (not its square)
        stuck, self.stuck = self.stuck, False
        read = self.cutter.read(max(size, len(self.cutter)) if stuck else size)
        return not read or len(self.cutter) >= size

    def plain(self, text: bytes | memoryview) -> tuple[pa.Table | None, int]:
        """The Arrow path's table of ``text`` and the bytes it covers; a few misses in a row turn it off."""
        table, covered = arrow.parse_block(text, self.flows)
        self.misses = 0 if table is not None else self.misses + 1
        self.fast = self.misses < FAST_MISSES
        return table, covered

    def small_cuts(self, near: int | None = None) -> list:
        """Boundaries near ``near`` (:data:`BLOCK_BYTES`, read when called): orjson takes a large pending
        block ~1 MB at a time (less after a stop of the Arrow path)."""
        near = BLOCK_BYTES if near is None else near
        margin = min(1 << 16, near // 2)
        return list(BOUNDARY.finditer(self.pending, max(0, near - margin), near + margin))

    def take(
        self, found: tuple[list, int] | None, taken: tuple[list, bytes] | None = None
    ) -> Generator[list, None, bool]:
        """Yield the events ``found`` (by a parse up to a cut) or ``taken`` (a long event's) and drop their
        bytes; return whether there were any."""
        if found is not None:
            yield found[0]
            self.cutter.drop(found[1])
        elif taken is not None:
            yield taken[0]
            self.cutter.replace(taken[1])
        return found is not None or taken is not None

    def take_long(self) -> tuple[list, bytes] | None:
        return _take_long(self.pending, self.cutter.handle, self.warnings)

    def middle(self) -> Iterator[list | pa.Table]:
        """One step before the stream's end: a block cut at its last boundary, by Arrow or orjson."""
        cuts = _last_cuts(self.pending)
        found = None
        if self.fast and cuts:
            cuts = yield from self.middle_fast(cuts)
            if cuts is None:
                return
            found = _parse_to_cut(self.pending, self.small_cuts(self.step))  # a short step first; then Arrow
            self.step = min(2 * self.step, BLOCK_BYTES)
        large = len(self.pending) > 2 * BLOCK_BYTES
        if found is None and large:
            found = _parse_to_cut(self.pending, self.small_cuts())
        if found is None:  # (also when the boundaries near the front are inside an event longer than a block)
            found = _parse_to_cut(self.pending, cuts[-2:] if large else cuts)
        if (yield from self.take(found, self.take_long() if found is None else None)):
            return
        if len(self.pending) > MAX_PENDING_BYTES:
            raise Unframeable
        self.stuck = True

    def middle_fast(self, cuts: list) -> Generator[pa.Table, None, list | None]:
        """Arrow's table up to the last boundary of ``cuts``; the boundaries for orjson where it stopped, or
        ``None`` when it took all."""
        # the block as a view, not a copy (the Arrow path's blanking makes the one copy it needs)
        table, covered = self.plain(memoryview(self.pending)[: cuts[-1].start() + 1])
        if table is not None:
            yield table
        if covered == cuts[-1].start() + 1:
            self.cutter.drop(cuts[-1].end())
            self.step = FIRST_STEP_BYTES
            return None
        if covered:  # the events from the first one that is not plain go through orjson
            self.cutter.drop(covered)
            cuts = self.small_cuts() or list(BOUNDARY.finditer(self.pending))
        return cuts

    def end(self) -> Generator[list | pa.Table, None, bool]:
        """One step at the stream's end; return whether the event array is all parsed."""
        ends = list(itertools.islice(array_ends(self.pending, self.prefix), 8))
        if self.fast and ends:
            table, covered = self.plain(memoryview(self.pending)[: ends[0]])
            if table is not None:
                yield table
            if covered == ends[0]:
                self.tail(ends[0])
                return True
            if covered:
                self.cutter.drop(covered)
                return False
        if len(self.pending) > 2 * BLOCK_BYTES:
            found = _parse_to_cut(self.pending, self.small_cuts())
            if (yield from self.take(found, self.take_long() if found is None else None)):
                return False
            # no boundary near the front parses (an event longer than a block): all of it in one parse below
        events = self.last_events(ends)
        if events:
            yield events
        return True

    def last_events(self, ends: list) -> list:
        """The events before the first of ``ends`` after which the array parses (the members after it go to
        ``top``); with no such end, :class:`Unframeable` (an array document may omit its closing ``]``)."""
        pending = self.pending
        for end in ends:
            try:
                events = orjson.loads(b"[" + pending[:end] + b"]")
            except orjson.JSONDecodeError:
                continue
            self.tail(end)
            return events
        if self.prefix != "item":
            raise Unframeable
        try:  # the array format may omit its closing bracket
            return orjson.loads(b"[" + pending.rstrip().rstrip(b",") + b"]")
        except orjson.JSONDecodeError:
            raise Unframeable from None

    def tail(self, end: int) -> None:
        """The top-level members after the event array closing at ``end``, into ``top``."""
        if self.top is not None and self.prefix != "item":
            self.top.update(tail_members(self.pending[end + 1 :]))


def _take_long(pending: bytes, handle, warnings: Counter | None) -> tuple[list, bytes] | None:
    """The events of ``pending`` and the bytes after them when it holds one longer than ``event-bytes``
    (:func:`.longevent.take`, which reads the rest of an open one from ``handle``), else ``None``."""
    if len(pending) <= longevent.threshold():
        return None
    source = getattr(getattr(handle, "raw", None), "path", None)  # the JSON guard's file, for the error
    return longevent.take(pending, handle, source, warnings)


#: the most boundaries :func:`_parse_to_cut` tries, from the last
CUTS_TRIED = 8
#: the tails of the pending bytes searched for boundaries, shortest first: a block of short events (the usual
#: one) has its last :data:`CUTS_TRIED` within 4 kB, and listing the ~500 of the last 64 kB cost ~0.1 ms a block
CUT_WINDOWS = (1 << 12, 1 << 16)


def _last_cuts(pending: bytes) -> list:
    """The boundaries in the shortest tail of ``pending`` (:data:`CUT_WINDOWS`) that holds :data:`CUTS_TRIED` of
    them (the same last ones as any longer tail: a boundary match cannot overlap another), else all those of the
    longest tail, else all those of ``pending``."""
    for window in CUT_WINDOWS:
        cuts = list(BOUNDARY.finditer(pending, max(0, len(pending) - window)))
        if len(cuts) >= CUTS_TRIED:
            return cuts
    return cuts or list(BOUNDARY.finditer(pending))


def _parse_to_cut(pending: bytes, cuts: list) -> tuple[list, int] | None:
    """The events of ``pending`` up to the latest of its last eight boundaries that parses (a boundary
    inside nested ``args`` does not), and where the rest starts; ``None`` when none does."""
    for cut in reversed(cuts[-CUTS_TRIED:]):
        try:
            return orjson.loads(b"[" + pending[: cut.start() + 1] + b"]"), cut.end()
        except orjson.JSONDecodeError:
            continue
    return None
