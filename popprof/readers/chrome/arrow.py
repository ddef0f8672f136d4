"""The fast path of the Chrome trace reader: a block of plain complete and flow events, parsed by Arrow.

Most of a large kineto trace is ``X`` events and ``ac2g`` / ``fwdbwd`` flows with
integer ids. For a block of such events (the text the reader's block framer cut
between two events) Arrow's JSON reader fills exactly the columns the reader
keeps (``ph``, ``name``, ``cat``, ``pid``, ``tid``, ``ts``, ``dur``, ``id``,
``bind_id``, ``bp`` and ``args.stream`` / ``correlation`` / ``device``) in C,
without a Python object per event, and skips every other field.

It is strict on purpose: a value of another type than the usual one (a string
pid such as kineto's ``"Spans"``, a ``"0x0"`` stream, a float id), a duplicate
key, a non-finite number, a phase other than X / s / t / f, or a cut that fell
inside nested ``args`` makes :func:`parse_block` give up at that event, and the
reader parses the rest of the block with orjson, which handles everything. Arrow
reads objects separated by whitespace, so the comma between two events becomes a
space (the two layouts kineto and our generator write, blanked in numpy from the newlines)
or, in any other layout, the separator becomes a newline; a ``}, {`` inside a
string is left alone or becomes a raw newline there, which Arrow rejects, so that
block also goes the general way.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from ...io.jsonbytes import OBJECT_SEPARATOR
from . import kernels

#: The fields read (all others are skipped) and the one type each must have in the block.
SCHEMA = pa.schema(
    [
        ("ph", pa.string()),
        ("name", pa.string()),
        ("cat", pa.string()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("ts", pa.float64()),
        ("dur", pa.float64()),
        ("id", pa.int64()),
        ("bind_id", pa.int64()),
        ("bp", pa.string()),
        ("args", pa.struct([("stream", pa.int64()), ("correlation", pa.int64()), ("device", pa.int64())])),
    ]
)
_PARSE = pa_json.ParseOptions(
    explicit_schema=SCHEMA, unexpected_field_behavior="ignore", newlines_in_values=True
)
#: the fields only flows have: a pass that leaves the flows for later (counts them) does not convert them
FLOW_ONLY_FIELDS = ("id", "bind_id", "bp")
_PARSE_WITHOUT_FLOWS = pa_json.ParseOptions(
    explicit_schema=pa.schema([f for f in SCHEMA if f.name not in FLOW_ONLY_FIELDS]),
    unexpected_field_behavior="ignore",
    newlines_in_values=True,
)
#: a byte that is not white space (what ``bytes.strip`` would keep)
_CONTENT = re.compile(rb"\S")
_READ = pa_json.ReadOptions(use_threads=False, block_size=1 << 26)


@functools.cache
def _fast_phases() -> pa.Array:
    """The phases the Arrow path takes (made when first needed: ``pa.array`` makes pyarrow import pandas).

    Typed, so pyarrow infers nothing: inferring the type of a Python value makes it import
    ``dateutil`` (about 25 ms) in a parse worker that has no pandas."""
    return pa.array(["X", "s", "t", "f"], type=pa.string())


@functools.cache
def complete_phase() -> pa.Scalar:
    """``"X"`` as a typed Arrow scalar, to compare the ``ph`` column with (no type inference, as above)."""
    return pa.scalar("X", type=pa.string())


#: the C heap (not Arrow's caching allocator): what a block used is free for the next one and for the
#: reader's own arrays, and :func:`popprof.io.heap.release_free_memory` can give it back
_POOL = kernels.POOL


def parse_block(text: bytes | memoryview, flows: bool = True) -> tuple[pa.Table | None, int]:
    """The leading plain events of ``text`` (JSON objects separated by commas) as a table, and where they end.

    Returns ``(table, len(text))`` when every event is plain; ``(table, offset)`` when the
    event starting at byte ``offset`` is not (a counter, metadata, a non-finite number):
    the table holds the events before it; ``(None, 0)`` when nothing could be taken.
    Without ``flows`` the fields only flows have (:data:`FLOW_ONLY_FIELDS`) are skipped. ``text`` may be a
    view of the reader's pending bytes (no copy of the block before the one the blanking makes).
    """
    if not _CONTENT.search(text):  # white space only
        return None, 0
    options = _PARSE if flows else _PARSE_WITHOUT_FLOWS
    # the comma between two events becomes a space: objects separated by whitespace are what Arrow reads
    table = _read(_blank_separators(text), options)
    if table is None:  # other layouts: the separator with any whitespace around it
        table = _read(OBJECT_SEPARATOR.sub(b"}\n{", text), options)
    if table is None:
        return None, 0
    table = table.combine_chunks(memory_pool=_POOL)  # one chunk per column
    if table.num_rows == 0:
        return table, len(text)
    # a phase the path takes (a missing one is not), and ts / dur finite (NaN / Infinity literals are not
    # JSON: the general parser reports them); nearly every block passes on the counts alone
    call = kernels.call
    plain = kernels.is_in(table.column("ph").chunk(0), _fast_phases())
    finite = [call("is_finite", table.column(key).chunk(0)) for key in ("ts", "dur")]
    if not plain.false_count and not any(f.false_count for f in finite):
        return table, len(text)
    odd = call("invert", kernels.fill_null(plain, False))
    for f in finite:
        odd = call("or", odd, kernels.fill_null(call("invert", f), False))
    first = kernels.first_index(odd, True)
    if first < 0:
        return table, len(text)
    if first == 0:
        return None, 0
    for k, match in enumerate(
        OBJECT_SEPARATOR.finditer(text), start=1
    ):  # the boundary before event ``first``
        if k == first:
            return table.slice(0, first), match.end() - 1
    return None, 0


_COMMA, _NEWLINE, _SPACE, _OPEN, _CLOSE = b",\n {}"


def _blank_separators(text: bytes | memoryview) -> bytearray:
    """``text`` with the comma of every ``},\n{`` (the compact layout) and ``},\n  {`` (Kineto's) blanked.

    The same bytes as ``text.replace(b"},\n{", b"} \n{")`` followed by the same for Kineto's layout,
    found from the newlines in numpy (about twice as fast as ``bytes.replace``, and one pass for
    both layouts). A raw newline is never inside a JSON string, so no string is changed.
    """
    data = np.frombuffer(text, dtype=np.uint8)
    out = bytearray(text)
    n = len(data)
    at = np.flatnonzero(data == _NEWLINE)
    at = at[(at >= 2) & (at < n - 1)]
    at = at[(data[at - 1] == _COMMA) & (data[at - 2] == _CLOSE)]
    after = data[at + 1]
    compact = after == _OPEN
    indented = (after == _SPACE) & (at < n - 3)
    indented[indented] = (data[at[indented] + 2] == _SPACE) & (data[at[indented] + 3] == _OPEN)
    np.frombuffer(out, dtype=np.uint8)[at[compact | indented] - 1] = _SPACE
    return out


def _read(lines: bytes | bytearray, options: pa_json.ParseOptions = _PARSE) -> pa.Table | None:
    """Arrow's JSON reader on newline-separated events (it stops at the first separator it does not accept)."""
    try:
        return pa_json.read_json(
            pa.BufferReader(lines), read_options=_READ, parse_options=options, memory_pool=_POOL
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def column(table: pa.Table, key: str) -> pa.Array:
    """One column of a table from :func:`parse_block` (``args.<field>`` for the three args fields)."""
    if key.startswith("args."):
        return kernels.struct_field(table.column("args").chunk(0), key.removeprefix("args."))
    return table.column(key).chunk(0)
