"""One pass over a stream of events (the whole file, or one piece of a split file) into a :class:`Parsed`."""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterator
from gzip import BadGzipFile
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...io.bounded import TextAfterJson
from ...io.files import is_gzip, open_binary, open_json
from ...io.heap import release_free_memory
from .columns import Parsed
from .events import StreamState
from .framing import TRIM_EVERY, Unframeable, blocks, head_members, members_after_array
from .longevent import Misframed, Unfinished
from .plan import Plan

CHUNK_EVENTS = 1 << 14
#: the bytes an ijson pass keeps of its stream's start and end, where the members around the event array are
EDGE_BYTES = 1 << 20


def parse_stream(handle, prefix: str, with_args: bool, parser: str = "orjson", flows: bool = True) -> Parsed:
    """Parse a stream of events with ``parser`` (:data:`.plan.PARSERS`): ``arrow`` and ``orjson`` take blocks
    of whole events (``arrow`` through Arrow where the events are plain, and never with ``with_args``),
    ``ijson`` one event at a time. Without ``flows`` the flow events are counted, not kept (their own fields
    are not even converted). A stream the blocks cannot be cut from raises :class:`.framing.Unframeable` (or
    :class:`.longevent.Misframed`), for the plan to decide (:meth:`.plan.Plan.fall_back`)."""
    state = StreamState(with_args, flows)
    error = ""
    parsed = 0
    if parser != "ijson":
        tables = 0
        ended: list[str] = []
        fast = parser == "arrow" and not with_args
        for events in _until_unfinished(
            blocks(handle, prefix, state.top, fast, state.warnings, flows), ended
        ):
            if isinstance(events, pa.Table):
                parsed += events.num_rows
                state.take_table(events)
                del events
                tables += 1
                if tables % TRIM_EVERY == 0:
                    release_free_memory()  # the blocks' text copies: free pages back (it costs ~10 ms a call)
                continue
            for lo in range(0, len(events), CHUNK_EVENTS):
                part = events[lo : lo + CHUNK_EVENTS]
                parsed += len(part)
                state.take(part)
        error = "".join(ended)
    else:
        import ijson

        batch: list = []
        append = batch.append
        edges = _Edges(handle)
        try:
            for ev in ijson.items(edges, prefix, use_float=True, buf_size=1 << 16):
                append(ev)
                if len(batch) >= CHUNK_EVENTS:
                    parsed += len(batch)
                    state.take(batch)
                    batch.clear()
        except (ijson.JSONError, EOFError, zlib.error, BadGzipFile, UnicodeDecodeError) as exc:
            error = f"{type(exc).__name__}: {_first_line(exc)}".strip()
        if batch:
            parsed += len(batch)
            state.take(batch)
        if prefix != "item":  # the members around the event array, as the block parsers read them
            state.top.update(head_members(edges.head))
            state.top.update(members_after_array(edges.last(), prefix))
    return Parsed(
        state.names.labels,
        state.cats.labels,
        state.complete.arrays(),
        state.complete.args,
        state.be.arrays(),
        np.asarray(state.be_kind, dtype=bool),
        state.be.args,
        state.counters,
        state.process_names,
        state.thread_names,
        state.ids.synthetic,
        state.skipped,
        state.warnings,
        parsed,
        error,
        state.flow_arrays(),
        state.top,
        state.meta,
        state.flow_labels.labels,
        flow_count=state.flow_count,
    )


def _first_line(exc: BaseException) -> str:
    """The first line of an error's message; yajl's can come as bytes (an invalid UTF-8 string: its context
    follows on the next lines, the damaged bytes in it)."""
    message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], bytes) else str(exc)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "backslashreplace")
    return message.splitlines()[0] if message else ""


class _Edges:
    """A byte stream read through, keeping its first and last :data:`EDGE_BYTES` (the members around the event
    array, which ijson's ``items`` passes over: one pass, also for gzip)."""

    def __init__(self, handle) -> None:
        self._handle = handle
        self.head = b""
        self._tail: deque[bytes] = deque()
        self._kept = 0

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        if len(self.head) < EDGE_BYTES:
            self.head += data[: EDGE_BYTES - len(self.head)]
        self._tail.append(data)
        self._kept += len(data)
        while self._kept - len(self._tail[0]) >= EDGE_BYTES:
            self._kept -= len(self._tail.popleft())
        return data

    def last(self) -> bytes:
        """The last bytes read (at least :data:`EDGE_BYTES` of them when the stream had that many)."""
        return b"".join(self._tail)


def _until_unfinished(events: Iterator, ended: list[str]) -> Iterator:
    """``events``, until the stream ends inside a long event (:class:`.longevent.Unfinished`): then the reason
    goes to ``ended`` (the pass's error, as ijson's would) and the events read so far stand."""
    try:
        yield from events
    except Unfinished as exc:
        if exc.events:
            yield exc.events
        ended.append("IncompleteJSONError: the file ends inside an event longer than the event-bytes limit")


#: what ends a framed parser's pass over a stream it cannot cut into blocks, and the reason the plan records
UNFRAMED = {
    Unframeable: "the stream cannot be cut into blocks of whole events",
    Misframed: "an event does not end where the block cutter expects",
    EOFError: "the gzip stream ends early",
    zlib.error: "corrupt gzip data",
    BadGzipFile: "corrupt gzip data",
    UnicodeDecodeError: "text that is not UTF-8",
}


def parse_file(
    path: Path,
    prefix: str,
    with_args: bool,
    before: tuple | None = None,
    flows: bool = True,
    plan: Plan | None = None,
) -> tuple[Parsed, Plan]:
    """One pass over the whole file with the parser of ``plan`` (``arrow``, automatic, when none), and the
    plan that ran: a framed parser that cannot cut the stream hands it to ijson by :meth:`.plan.Plan.fall_back`
    (which refuses when the parser was named), so the change is recorded, never silent.

    With ``before`` (:func:`popprof.io.files.snapshot`) a file that changes during the pass ends in
    :class:`~popprof.io.files.ChangedWhileRead` at the next read. Without ``flows`` flows are counted only.
    A ``.json.gz`` cut off reads as the same trace cut off uncompressed: the events before the cut, and the
    truncation warning (``cut_off_ends``; docs/readers.md)."""
    try:
        return _parse_file(path, prefix, with_args, before, flows, plan)
    except TextAfterJson:
        # the JSON guard counts brackets only: a bracket flipped inside the file closes its value early and
        # leaves the rest as 'text after it'; where yajl first finds the JSON invalid tells the two apart
        where = first_invalid_byte(path)
        if where is None or "trailing garbage" in where[3]:
            raise
        from ...io.jsonwords import DAMAGED_HINT
        from ...model.errors import InputError

        raise InputError(
            path, f"the file is damaged before its end (not cut off): {_where(path, where)}", DAMAGED_HINT
        ) from None


def _where(path: Path, where: tuple[int, int, int, str]) -> str:
    """``invalid JSON at line L, column C (byte B of the file): MESSAGE`` of :func:`first_invalid_byte`."""
    offset, line, column, message = where
    text = "of the decompressed JSON" if is_gzip(path) else "of the file"
    return f"invalid JSON at line {line:,}, column {column:,} (byte {offset:,} {text}): {message}"


def _parse_file(
    path: Path,
    prefix: str,
    with_args: bool,
    before: tuple | None,
    flows: bool,
    plan: Plan | None,
) -> tuple[Parsed, Plan]:
    plan = plan or Plan("orjson" if with_args else "arrow", 1)
    if plan.framed:
        try:
            with open_json(path, before, cut_off_ends=True) as handle:
                return parse_stream(handle, prefix, with_args, plan.parser, flows), plan
        except tuple(UNFRAMED) as exc:
            plan = plan.fall_back(next(why for kind, why in UNFRAMED.items() if isinstance(exc, kind)))
    with open_json(path, before, cut_off_ends=True) as handle:
        return parse_stream(handle, prefix, with_args, "ijson", flows), plan


#: Words of a pass's error that say the parser met the end of the stream inside the JSON: a file cut off
_AT_THE_END = ("premature EOF", "Incomplete JSON", "EOFError")
#: A framed pass's error when the stream ends inside what it took for a long event: a cut, or damage before
#: the end that hid where an event ends (bytes flipped in a key), which only a parse of the text tells apart
_ENDS_INSIDE_AN_EVENT = "ends inside an event"
#: Bytes fed to the locating parser at a time (:func:`first_invalid_byte`)
_LOCATE_CHUNK = 1 << 16


def read_problem(path: Path, error: str) -> tuple[str, str]:
    """The read note (``warnings.<key>``, its value) of a pass that ended with ``error``
    (:attr:`.columns.Parsed.error`): ``truncated`` when the file ends early (cut off), ``damaged`` when it holds
    damage before its end: JSON that is invalid there, with where (:func:`first_invalid_byte`), or text that
    is not UTF-8. Only on the error path: a cut the parser met at the end costs nothing more; anything else
    one parse of the text up to the damage (two passes when there is damage)."""
    if any(word in error for word in _AT_THE_END):
        return "truncated", error
    where = first_invalid_byte(path) if "JSONError" in error else None
    if where is None:
        return ("truncated" if _ENDS_INSIDE_AN_EVENT in error else "damaged"), error
    return "damaged", _where(path, where)


def first_invalid_byte(path: Path) -> tuple[int, int, int, str] | None:
    """Where the JSON text of ``path`` (gunzipped) is first invalid: (byte offset, line, column, yajl's
    message), line and column from 1; None when it parses to its end (cut there or not) or cannot be read
    through (corrupt gzip data, gzip cut off).

    Two passes with yajl's push parser (C; the read's ijson backend): one finds the 64 KiB chunk it refuses,
    the next feeds the chunks before it and then that chunk a byte at a time."""
    import ijson

    def parser():
        target = ijson.utils.sendable_list()
        return target, ijson.basic_parse_coro(target)

    target, coro = parser()
    accepted = 0
    try:
        with open_binary(path) as handle:
            while block := handle.read(_LOCATE_CHUNK):
                try:
                    coro.send(block)
                except ijson.JSONError:
                    break
                target.clear()
                accepted += 1
            else:
                return None
        target, coro = parser()
        offset = lines = line_start = 0
        with open_binary(path) as handle:
            for _ in range(accepted):
                block = handle.read(_LOCATE_CHUNK)
                coro.send(block)
                target.clear()
                if newlines := block.count(b"\n"):
                    lines += newlines
                    line_start = offset + block.rindex(b"\n") + 1
                offset += len(block)
            block = handle.read(_LOCATE_CHUNK)
            for i in range(len(block)):
                try:
                    coro.send(block[i : i + 1])
                except ijson.JSONError as exc:
                    before = block[:i]
                    if newlines := before.count(b"\n"):
                        lines += newlines
                        line_start = offset + before.rindex(b"\n") + 1
                    return offset + i, lines + 1, offset + i - line_start + 1, _first_line(exc)
                target.clear()
    except (OSError, EOFError, zlib.error):
        return None
    return None
