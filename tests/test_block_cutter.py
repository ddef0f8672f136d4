"""The one block cutter (:class:`popprof.io.jsonbytes.BlockCutter`, :func:`popprof.io.jsonbytes.blocks`):
cuts land only between the items of an array, never inside a string (brackets and escaped quotes in
strings included); bytes given back are taken again; a 50 MB item is carried over in a few reads whose
copies add up to a few times its size (counted, not timed)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import orjson

from popprof.io import limits
from popprof.io.jsonbytes import BRACKETS, BlockCutter, blocks, last_opening_quote, unescaped_quotes

REAL = Path(__file__).parent.parent / "fixtures" / "real"


def item_cutter():
    """A cut after the last comma between two items of the top-level array (outside strings), or -1: the
    first block starts before the array's ``[``, each later one inside the array (one level deeper)."""
    state = {"depth": 0}

    def cut(data: bytes) -> int:
        at = _item_cut(data, state["depth"])
        if at > 0:
            state["depth"] = 1
        return at

    return cut


def _item_cut(data: bytes, start_depth: int) -> int:
    arr = np.frombuffer(data, dtype=np.uint8)
    quotes = unescaped_quotes(data)
    commas = np.flatnonzero(arr == 0x2C)
    commas = commas[np.searchsorted(quotes, commas) % 2 == 0]
    where = np.flatnonzero(BRACKETS[arr])
    where = where[np.searchsorted(quotes, where) % 2 == 0]
    depth = np.concatenate(([0], np.cumsum(BRACKETS[arr[where]], dtype=np.int64)))
    at_depth = np.searchsorted(where, commas)  # brackets before each comma
    level = start_depth + depth[at_depth]
    top = commas[level == 1]
    return int(top[-1]) + 1 if len(top) else -1


class Counting(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.calls = 0

    def read(self, size: int | None = -1) -> bytes:
        self.calls += 1
        return super().read(size)


def _hostile_items() -> list:
    """Items whose strings hold what a cutter could take for a boundary."""
    return [
        {"name": 'a "quoted" }, {"ph": name', "args": {"s": "[[{,}]]", "t": '\\"},{'}},
        {"name": "back\\slash\\", "args": {"list": [1, 2, {"x": "],["}]}},
        "}, {",
        '\\\\"',
        [1, [2, "]"], 3],
    ] * 200


def test_cuts_land_between_items_only():
    items = _hostile_items()
    text = json.dumps(items).encode()
    for size in (7, 64, 1000):
        pieces = list(blocks(io.BytesIO(text), size, item_cutter()))
        assert b"".join(pieces) == text
        for piece in pieces[1:-1]:  # each middle piece is whole items, each followed by its comma
            assert piece.endswith(b",")
            assert isinstance(orjson.loads(b"[" + piece.rstrip(b", ") + b"]"), list)


def test_cuts_before_the_last_opening_quote_split_no_string_of_a_real_trace():
    text = gzip.decompress((REAL / "traces" / "amd_mi250_minitoy.json.gz").read_bytes())
    pieces = list(blocks(io.BytesIO(text), 4096, last_opening_quote))
    assert b"".join(pieces) == text and len(pieces) > 2
    for piece in pieces[:-1]:  # each piece ends outside strings: the next one starts at an opening quote
        assert len(unescaped_quotes(piece)) % 2 == 0


def test_given_back_bytes_are_taken_again():
    cutter = BlockCutter(io.BytesIO(b"0123456789abcdef"), 4)
    assert cutter.read() and cutter.take(3) == b"012"
    cutter.give_back(b"12")
    assert cutter.pending == b"123"
    assert cutter.read() and cutter.take(len(cutter)) == b"1234567"
    cutter.replace(b"xyz")
    assert cutter.take(2) == b"xy" and cutter.pending == b"z"
    assert cutter.handle.read() == b"89abcdef"  # the handle, for a caller that reads a long item itself
    assert not cutter.read() and cutter.eof


def test_a_50_mb_item_is_carried_over_in_linear_work():
    size = 50 << 20
    head = json.dumps([{"name": f"e{i}"} for i in range(100)]).encode()[:-1]
    text = head + b', {"name": "' + b"x" * size + b'"}, {"name": "after"}]'
    reader = Counting(text)
    seen = []

    def cut(data: bytes) -> int:
        seen.append(len(data))
        return last_opening_quote(data)

    block = 1 << 20
    with limits.using(string_bytes=2 * size):
        pieces = list(blocks(reader, block, cut))
    assert b"".join(pieces) == text
    # doubling: about log2(50) reads for the item (one block at a time would take 50)
    assert reader.calls <= 2 * np.log2(len(text) / block) + 6, reader.calls
    # the bytes scanned (and copied) add up to a few times the item, not its square (~25 times it here)
    assert sum(seen) <= 4 * len(text), (sum(seen), len(text))


def test_a_string_over_the_limit_is_still_refused():
    text = b'["' + b"y" * (1 << 20) + b'"]'
    with limits.using(string_bytes=1 << 16):
        try:
            list(blocks(io.BytesIO(text), 4096, last_opening_quote, Path("t.json")))
        except limits.LimitExceeded as error:
            assert "string-bytes" in str(error)
        else:
            raise AssertionError("no LimitExceeded")
