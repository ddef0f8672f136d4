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
from popprof.readers.chrome import plan as chrome_plan

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


def device_work(tmp_path: Path, monkeypatch, args_bytes: int, events_after: int) -> tuple[float, int]:
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
    small, _ = device_work(tmp_path, monkeypatch, 1 << 19, events_after)
    large, _ = device_work(tmp_path, monkeypatch, 1 << 21, events_after)
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


# -- events longer than event-bytes: streamed by the lexer and shrunk, never parsed whole (issue 27) --------------


def _long_trace(path: Path, event: str, *, after: bool = True, close: bool = True) -> Path:
    """Kineto-like events around one long ``event`` (its text), 300 before it and (``after``) 300 after."""
    small = [
        json.dumps(
            {
                "ph": "X",
                "name": f"k{i}",
                "cat": "kernel",
                "pid": 1,
                "tid": 7,
                "ts": 10 * i,
                "dur": 2,
                "args": {"stream": 7, "correlation": i, "device": 0},
            }
        )
        for i in range(600)
    ]
    body = [*small[:300], event, *(small[300:] if after else [])]
    text = '{"traceEvents": [\n' + ",\n".join(body) + ('\n], "schemaVersion": 1}\n' if close else "")
    path.write_text(text)
    return path


def _inputs(n: int) -> str:
    return "[" + ", ".join([ITEM] * n) + "]"


BIG = (
    '{"ph": "X", "name": "big", "cat": "kernel", "pid": 1, "tid": 7, "ts": 3005, "dur": 4, '
    '"args": {"stream": 7, "correlation": 999, "device": 1, "External id": 12, "inputs": INPUTS, '
    '"Input Dims": [[1, 2], [3]], "note": "a \\"]}\\" in a string"}, "stack": [{"a": [1]}], "tts": 5}'
)


class _Largest:
    """``orjson`` whose ``loads`` remembers the longest text it was given."""

    def __init__(self, real) -> None:
        self.real, self.longest = real, 0
        self.JSONDecodeError = real.JSONDecodeError

    def loads(self, data):
        self.longest = max(self.longest, len(data))
        return self.real.loads(data)


def _read_small_limit(monkeypatch, path: Path, **options):
    """Read with event-bytes at 64 KiB and blocks of 32 KiB (the long event is ~30 blocks), counting orjson."""
    from popprof.readers.chrome import longevent

    monkeypatch.setenv("POPPROF_MAX_EVENT_BYTES", "64k")
    monkeypatch.setattr(framing, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(framing, "FAST_BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(longevent, "SCAN_BYTES", 1 << 14)
    largest = _Largest(framing.orjson)
    monkeypatch.setattr(framing, "orjson", largest)
    monkeypatch.setattr(longevent, "orjson", largest)
    return reading.read(path, **options), largest.longest


def _big_row(profile):
    events = profile.events
    row = events[events["name"] == "big"]
    assert len(row) == 1
    return row.iloc[0]


@pytest.mark.parametrize("after", [True, False], ids=["in-the-middle", "at-the-end"])
def test_a_long_event_is_never_parsed_whole_and_keeps_its_figures(tmp_path, monkeypatch, after):
    path = _long_trace(
        tmp_path / "t.json", BIG.replace("INPUTS", _inputs(30_000)), after=after
    )  # ~1 MB of args
    profile, longest = _read_small_limit(monkeypatch, path, parallel=False)
    size = path.stat().st_size
    assert longest < size // 4, (longest, size)  # before: the whole event went to orjson at once
    assert len(profile.events) == 601 if after else 301
    big = _big_row(profile)
    assert (big["start_us"], big["dur_us"], big["stream"], big["correlation"], big["device"]) == (
        3005.0,
        4.0,
        7,
        999,
        "gpu:1",
    )
    assert profile.meta["warnings.long_events"] == "1"
    assert profile.meta["chrome.top.schemaVersion"] == "1"
    assert "warnings.truncated" not in profile.meta


def test_with_args_a_long_event_keeps_its_scalars_and_shows_nulls_for_what_was_dropped(tmp_path, monkeypatch):
    path = _long_trace(tmp_path / "t.json", BIG.replace("INPUTS", _inputs(30_000)))
    profile, _ = _read_small_limit(monkeypatch, path, parallel=False, with_args=True)
    args = json.loads(_big_row(profile)["args"])
    assert args == {
        "stream": 7,
        "correlation": 999,
        "device": 1,
        "External id": 12,
        "inputs": None,
        "Input Dims": None,
        "note": 'a "]}" in a string',
    }
    small = profile.events[profile.events["name"] == "k5"].iloc[0]
    assert json.loads(small["args"]) == {"stream": 7, "correlation": 5, "device": 0}


def test_the_split_parse_reads_a_long_event_as_the_serial_pass_does(tmp_path, monkeypatch):
    from popprof.readers.chrome import split

    path = _long_trace(tmp_path / "t.json", BIG.replace("INPUTS", _inputs(30_000)))
    serial, _ = _read_small_limit(monkeypatch, path, parallel=False)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", path.stat().st_size // 16)  # cuts inside the long event
    both, longest = _read_small_limit(monkeypatch, path, parallel=True)
    assert longest < path.stat().st_size // 4
    cols = ["name", "start_us", "dur_us", "stream", "correlation", "device"]
    assert both.events[cols].equals(serial.events[cols])


def test_a_long_counter_keeps_its_series_and_a_long_array_item_is_malformed(tmp_path, monkeypatch):
    counter = (
        '{"ph": "C", "name": "mem", "pid": 1, "ts": 4000, "args": {"allocated": 5, "junk": INPUTS, "reserved": 9}}'
    ).replace("INPUTS", _inputs(30_000))
    path = _long_trace(tmp_path / "t.json", counter + ",\n" + _inputs(30_000))
    profile, longest = _read_small_limit(monkeypatch, path, parallel=False)
    assert longest < path.stat().st_size // 4
    assert sorted(profile.counters["series"]) == ["allocated", "reserved"]
    assert sorted(profile.counters["value"]) == [5.0, 9.0]
    assert profile.meta["warnings.long_events"] == "2"
    assert profile.meta["warnings.malformed_events"] == "1"
    assert len(profile.events) == 600


def test_a_file_that_ends_inside_a_long_event_is_truncated_not_parsed_whole(tmp_path, monkeypatch):
    text = _long_trace(tmp_path / "t.json", BIG.replace("INPUTS", _inputs(30_000)), after=False).read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) - 200_000])  # inside the args array
    profile, longest = _read_small_limit(monkeypatch, path, parallel=False)
    assert longest < path.stat().st_size // 4  # before: ijson built the whole partial event
    assert len(profile.events) == 300
    assert "ends inside an event" in profile.meta["warnings.truncated"]


def test_a_long_event_of_millions_of_scalars_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from popprof.cli import main

    members = ", ".join(f'"k{i}": {i}' for i in range(20_000))  # ~250 KB outside any nested value
    event = '{"ph": "X", "name": "big", "pid": 1, "tid": 7, "ts": 3005, "dur": 4, "args": {' + members + "}}"
    path = _long_trace(tmp_path / "t.json", event)
    monkeypatch.setattr(framing, "BLOCK_BYTES", 1 << 15)  # (events under two blocks are parsed as they come)
    monkeypatch.setattr(framing, "FAST_BLOCK_BYTES", 1 << 15)
    code = main(["--limit", "event-bytes=64k", "summary", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "event-bytes" in err and "t.json" in err


def test_a_long_event_whose_name_is_a_long_string_within_string_bytes_is_read(tmp_path, monkeypatch):
    """Strings do not count toward event-bytes (string-bytes bounds each): only what would become many objects."""
    event = BIG.replace("INPUTS", "[]").replace(
        '"name": "big"', '"name": "big", "cname": "' + "x" * 300_000 + '"'
    )
    path = _long_trace(tmp_path / "t.json", event)
    profile, _ = _read_small_limit(monkeypatch, path, parallel=False)
    assert _big_row(profile)["correlation"] == 999 and profile.meta["warnings.long_events"] == "1"


def test_the_bracket_stream_lexes_across_any_block_boundary():
    from popprof.io.jsonbytes import BracketStream

    text = b'[{"a": "x\\\\", "b": "]\\"[", "c": [1, {"d": "\\\\\\"}"}]}, [[]], "{"]'
    whole = BracketStream().feed(text)
    expected = list(zip(whole[0].tolist(), whole[2].tolist(), strict=True))
    assert [d for _, d in expected] == [1, 2, 3, 4, 3, 2, 1, 2, 3, 2, 1, 0]
    for size in (1, 2, 3, 5, 7):
        lexer, got = BracketStream(), []
        for at in range(0, len(text), size):
            where, _, after = lexer.feed(text[at : at + size])
            got += [(at + w, d) for w, d in zip(where.tolist(), after.tolist(), strict=True)]
        assert got == expected, size
    lexer = BracketStream()
    lexer.feed(b'{"ab": "c\\"d", ')  # the key "ab" (4 bytes with its quotes) and the string "c\\"d" (6)
    assert (
        lexer.string_bytes(0, 15) == 10 and lexer.string_bytes(6, 9) == 2 and lexer.string_bytes(13, 15) == 0
    )
    lexer.feed(b'"open')  # a string that runs past the block's end
    assert lexer.string_bytes(0, 5) == 5 and lexer.string_bytes(0, 1) == 1


def test_a_failed_piece_leaves_no_piece_to_take(tmp_path, monkeypatch):
    """A long event fails the split pieces cut inside it one after another: the first failure drains the claims,
    so neither process parses more pieces before the serial pass (and the reader waits for none)."""
    import multiprocessing

    from popprof.readers.chrome import split

    claims = split._Claims(multiprocessing.get_context("fork"), 6)
    assert claims.take(from_back=False) == 0 and claims.take(from_back=True) == 5
    claims.drain()
    assert claims.take(from_back=False) is None and claims.take(from_back=True) is None
    path = _long_trace(tmp_path / "t.json", BIG.replace("INPUTS", _inputs(30_000)))
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", path.stat().st_size // 16)
    jobs = [
        (str(path), lo, hi, head, tail, "traceEvents.item", False, None, True, "arrow")
        for lo, hi, head, tail in split._split_plan(
            path, "traceEvents.item", split._piece_fractions(path.stat().st_size)
        )
    ]
    taken = []
    real = split._parse_part
    monkeypatch.setattr(split, "_parse_part", lambda job: taken.append(job) or real(job))
    monkeypatch.setenv("POPPROF_MAX_EVENT_BYTES", "64k")
    monkeypatch.setattr(framing, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(framing, "FAST_BLOCK_BYTES", 1 << 15)
    done = split._parse_front(jobs, split._Claims(multiprocessing.get_context("fork"), len(jobs)))
    assert len(jobs) > 4 and done[-1][1].error and len(taken) < len(jobs), (len(jobs), len(taken))
