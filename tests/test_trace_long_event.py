"""One event far longer than a block (a large ``args`` array) is read in work linear in its size (issue 27).

Before: the ``]`` candidates for the end of the event array were each tried by parsing what follows them (every
``]`` of a nested array near the end of the file: quadratic), the framer gave up on an event longer than two
blocks at the end of the file (ijson then re-read all of it), and a block stuck inside one event grew by one
block per read. The work is counted, not timed: bytes handed to orjson and reads of the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from popprof.readers.chrome import framing, reading

ITEM = '{"name": "t", "shape": [1, 2]}'


def _trace(path: Path, args_bytes: int, events_after: int) -> Path:
    """100 small events, one whose ``args.inputs`` is ``args_bytes`` of objects, then ``events_after`` more."""
    small = [
        json.dumps({"ph": "X", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}) for i in range(100)
    ]
    inputs = ", ".join([ITEM] * (args_bytes // (len(ITEM) + 2)))
    big = (
        '{"ph": "X", "name": "big", "pid": 1, "tid": 2, "ts": 200, "dur": 5, "args": {"inputs": ['
        + inputs
        + "]}}"
    )
    after = [
        json.dumps({"ph": "X", "name": "late", "pid": 1, "tid": 1, "ts": 300 + i, "dur": 1})
        for i in range(events_after)
    ]
    path.write_text('{"traceEvents": [\n' + ",\n".join([*small, big, *after]) + '\n], "schemaVersion": 1}\n')
    return path


class _CountingOrjson:
    """``orjson`` with its ``loads`` counting the bytes it is given."""

    def __init__(self, real) -> None:
        self.real, self.bytes = real, 0
        self.JSONDecodeError = real.JSONDecodeError

    def loads(self, data):
        self.bytes += len(data)
        return self.real.loads(data)


def _work(tmp_path: Path, monkeypatch, args_bytes: int, events_after: int) -> tuple[float, int]:
    path = _trace(tmp_path / f"t{args_bytes}_{events_after}.json", args_bytes, events_after)
    counting = _CountingOrjson(framing.orjson)
    monkeypatch.setattr(framing, "orjson", counting)
    profile = reading.read(path, parallel=False)
    assert len(profile.events) == 101 + events_after
    assert profile.meta["chrome.top.schemaVersion"] == "1"
    return counting.bytes / path.stat().st_size, path.stat().st_size


@pytest.mark.parametrize("events_after", [0, 3000], ids=["at-the-end", "in-the-middle"])
def test_a_long_event_costs_work_linear_in_its_size(tmp_path, monkeypatch, events_after):
    import ijson

    monkeypatch.setattr(framing, "BLOCK_BYTES", 1 << 15)  # the event is 15 and 60 blocks long
    monkeypatch.setattr(framing, "FAST_BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(
        ijson, "items", lambda *a, **k: pytest.fail("the framer gave up: ijson re-read the file")
    )
    small, _ = _work(tmp_path, monkeypatch, 1 << 19, events_after)
    large, _ = _work(tmp_path, monkeypatch, 1 << 21, events_after)
    # bytes parsed per byte of file: a constant (a few parses of each byte), not growing with the event's size
    assert small < 20 and large < 20, (small, large)
    assert large < 1.5 * small + 1, (small, large)


def test_the_end_of_the_event_array_is_found_by_the_lexer_among_many_brackets():
    tail = b'{"a": [1, [2]], "b": "]]"}, {"c": [[]]}\n], "deviceProperties": [{"x": [1]}], "z": 1}\n'
    # the arrays one level down whose rest closes the document, last first: deviceProperties, then traceEvents
    assert list(framing.array_ends(tail, "traceEvents.item")) == [
        tail.rindex(b"}]") + 1,
        tail.index(b"\n]") + 1,
    ]
    assert list(framing.array_ends(b'[{"a": [1]}, {"b": "]"}]\n', "item")) == [23]
