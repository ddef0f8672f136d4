"""The lexer's token patterns (io/jsonbytes): the boundary between two objects, the separator, members."""

from __future__ import annotations

import json
import re

import orjson
import pytest

from popprof.io.jsonbytes import OBJECT_SEPARATOR, WS, member, object_boundary
from popprof.readers.chrome.framing import BOUNDARY, EVENT_KEYS, TRACE_EVENTS

EVENTS = [
    {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": 10.5, "dur": 3.0},
    {"name": "void gemm<float>", "ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 11.0, "dur": 1.5},
    {"ph": "s", "id": 4, "pid": 1, "tid": 2, "ts": 10.6, "cat": "ac2g", "name": "ac2g"},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
]
LAYOUTS = [
    {"separators": (",", ":")},  # compact
    {"separators": (", ", ": ")},
    {"indent": 2},  # kineto's own layout is close to this
    {"indent": "\t"},
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_boundary_cuts_between_two_events(layout: dict) -> None:
    text = json.dumps(EVENTS, **layout).encode()
    body = text[text.index(b"[") + 1 : text.rindex(b"]")]
    matches = list(BOUNDARY.finditer(body))
    assert len(matches) == len(EVENTS) - 1
    pieces, start = [], 0
    for match in matches:
        pieces.append(orjson.loads(body[start : match.start() + 1]))
        start = match.end()
        assert body[start : start + 1] == b"{"  # the match ends where the next event starts
    pieces.append(orjson.loads(body[start:]))
    assert pieces == EVENTS
    assert len(OBJECT_SEPARATOR.findall(body)) == len(EVENTS) - 1
    # Arrow reads objects separated by white space: with each separator made a newline, every event is there
    assert _objects(OBJECT_SEPARATOR.sub(b"}\n{", body)) == EVENTS


def _objects(data: bytes) -> list:
    """The JSON values of ``data``, one after another, separated by white space only."""
    decoder, text, at, out = json.JSONDecoder(), data.decode(), 0, []
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if at == len(text):
            return out
        value, at = decoder.raw_decode(text, at)
        out.append(value)


def test_boundary_needs_an_event_key_after_it() -> None:
    nested = b'{"ph":"X","args":{"shapes":[{"a":1}, {"b":2}]}}, {"ph":"X"}'
    starts = [m.start() for m in BOUNDARY.finditer(nested)]
    assert starts == [nested.index(b"}}, {") + 1]  # not the "}, {" between the args objects
    assert len(OBJECT_SEPARATOR.findall(nested)) == 2  # the plain separator does not tell them apart


def test_boundary_inside_a_string_is_found_and_its_cut_does_not_parse() -> None:
    text = b'{"ph":"X","name":"a}, {\\"ph\\": b"}, {"ph":"i","name":"c"}'
    body = b'{"ph":"X","name":"a}, {"ph": b"}, {"ph":"i","name":"c"}'  # unescaped: a cut inside the string
    for data in (text, body):
        assert [m.start() for m in BOUNDARY.finditer(data)][-1] == data.rindex(
            b"}, {"
        )  # the real one is found
    first = next(BOUNDARY.finditer(body))
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(b"[" + body[: first.start() + 1] + b"]")


def test_only_json_white_space_counts() -> None:
    assert re.fullmatch(WS, b" \t\r\n")
    assert not re.fullmatch(WS, b"\x0c")  # form feed is white space to the regex \s, not to JSON
    assert BOUNDARY.search(b'{"ph":"X"}\x0c,{"ph":"X"}') is None
    assert BOUNDARY.search(b'{"ph":"X"}\r\n,\t{ "ph" :"X"}') is not None


def test_member_and_event_keys() -> None:
    head = b'{"schemaVersion": 1, "traceEvents"  :\n [ {"ph": "X"'
    match = TRACE_EVENTS.search(head)
    assert match is not None and head[match.end() - 1 : match.end()] == b"["
    assert TRACE_EVENTS.search(b'{"traceEvents": {"x": 1}}') is None  # not an array
    assert re.search(member(b"a.b", b"{"), b'"a.b" : {') and not re.search(member(b"a.b", b"{"), b'"axb": {')
    assert b"ph" in EVENT_KEYS and b"stack" in EVENT_KEYS
    only_ts = object_boundary([b"ts"])
    assert only_ts.search(b'{"ph":"X"}, {"ph":"X"}') is None
    assert only_ts.search(b'{"ph":"X"}, {"ts":1}') is not None
