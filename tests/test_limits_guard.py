"""The bounded-reading guards (popprof/readers/bounded.py) agree with a reference on any JSON, cut anywhere;
docs/limits.md lists every limit."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from popprof.io import bounded, limits, units
from popprof.io.files import open_binary, read_text_bytes
from popprof.io.limits import LimitExceeded

ROOT = Path(__file__).resolve().parent.parent

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{}:,\u00e9\n', max_size=12),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet='k"\\[{', max_size=4), children, max_size=4)
    ),
    max_leaves=30,
)


def _reference(value: object, depth: int = 0) -> tuple[int, int]:
    """(nesting depth, longest encoded string) of a JSON value, by walking it."""
    if isinstance(value, list):
        inner = [_reference(v, depth + 1) for v in value]
        return max([depth + 1] + [d for d, _ in inner]), max([0] + [s for _, s in inner])
    if isinstance(value, dict):
        inner = [_reference(v, depth + 1) for v in value.values()]
        keys = [len(json.dumps(k)) - 1 for k in value]
        return max([depth + 1] + [d for d, _ in inner]), max([0] + keys + [s for _, s in inner])
    if isinstance(value, str):
        return depth, len(json.dumps(value)) - 1  # from the opening quote to the closing one
    return depth, 0


def _guard_reads(data: bytes, chunk: int) -> None:
    guard = bounded.JsonGuard(io.BytesIO(data), Path("x.json"))
    buffer = bytearray(chunk)
    while guard.readinto(buffer):
        pass


@settings(max_examples=300, deadline=None)
@given(_json_values, st.integers(1, 64))
def test_json_guard_depth_and_string_length_match_a_reference(value, chunk):
    data = json.dumps(value).encode()
    depth, longest = _reference(value)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POPPROF_MAX_JSON_DEPTH", str(max(depth, 1)))
        mp.setenv("POPPROF_MAX_STRING_BYTES", str(max(longest, 1)))
        _guard_reads(data, chunk)  # exactly at the limits: fine
        if depth >= 2:
            mp.setenv("POPPROF_MAX_JSON_DEPTH", str(depth - 1))
            with pytest.raises(LimitExceeded, match="json-depth"):
                _guard_reads(data, chunk)
            mp.setenv("POPPROF_MAX_JSON_DEPTH", str(max(depth, 1)))
        if longest >= 2:
            mp.setenv("POPPROF_MAX_STRING_BYTES", str(longest - 1))
            with pytest.raises(LimitExceeded, match="string-bytes"):
                _guard_reads(data, chunk)


_plain_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet="ab[]{}:, \u00e9", max_size=12),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet="k[{}", max_size=4), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_plain_values, st.integers(1, 64), st.booleans())
def test_json_guard_chunks_without_backslashes_match_the_exact_pass(value, chunk, pretty):
    """Chunks with no backslash take a shortcut (the chunk reduced to quotes and brackets); after every
    chunk its state (depth, inside a string, length of the open string) is the exact pass's."""
    data = json.dumps(value, indent=1 if pretty else None, ensure_ascii=False).encode()
    fast = bounded.JsonGuard(io.BytesIO(data), Path("x.json"))
    exact = bounded.JsonGuard(io.BytesIO(data), Path("x.json"))
    exact.max_string = fast.max_string = 1 << 20
    plain = fast._check_plain
    taken: list[int] = []
    fast._check_plain = lambda raw: taken.append(len(raw)) or plain(raw)
    for start in range(0, len(data), chunk):
        piece = data[start : start + chunk]
        fast.check(memoryview(piece))
        exact._check_exact(np.frombuffer(piece, dtype=np.uint8))
        assert (fast.depth, fast.in_string, fast.string_open) == (
            exact.depth,
            exact.in_string,
            exact.string_open,
        )
    assert len(taken) == len(range(0, len(data), chunk))  # every chunk took the shortcut


def test_escaped_quotes_and_backslash_runs_across_chunk_boundaries(monkeypatch):
    data = json.dumps({"a": '\\\\\\"[[[', "b": ["\\" * 4]}).encode()  # "a": "\\\\\\\"[[[" is 12 bytes
    monkeypatch.setenv("POPPROF_MAX_JSON_DEPTH", "2")
    for chunk in range(1, len(data) + 1):
        monkeypatch.setenv("POPPROF_MAX_STRING_BYTES", "12")
        _guard_reads(data, chunk)  # brackets inside strings never count, escapes never end a string
        monkeypatch.setenv("POPPROF_MAX_STRING_BYTES", "11")
        with pytest.raises(LimitExceeded, match="string-bytes"):
            _guard_reads(data, chunk)


def test_gzip_guard_stops_a_bomb_at_the_ratio(tmp_path, monkeypatch):
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b" " * (80 << 20), 9))
    monkeypatch.setenv("POPPROF_MAX_GZIP_RATIO", "100")
    with pytest.raises(LimitExceeded, match="gzip-ratio"), open_binary(path) as handle:
        while handle.read(1 << 20):
            pass
    monkeypatch.setenv("POPPROF_MAX_GZIP_BYTES", "1M")
    with pytest.raises(LimitExceeded, match="gzip-bytes"), open_binary(path) as handle:
        handle.read()


def test_text_read_keeps_at_most_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "log.txt"
    path.write_bytes(b"line\n" * 100_000)
    monkeypatch.setenv("POPPROF_MAX_TEXT_BYTES", "64k")
    assert len(read_text_bytes(path, truncate=True)) == 64 << 10
    with pytest.raises(
        LimitExceeded, match=r"text-bytes = 65,536 B \(64 KiB\) \(raise it with POPPROF_MAX_TEXT_BYTES"
    ):
        read_text_bytes(path)


def test_every_limit_is_documented_with_its_default():
    doc = (ROOT / "docs" / "limits.md").read_text()
    for limit in limits.LIMITS.values():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{limit.name}` |")), None)
        assert row is not None, limit.name
        assert f"`{limit.env}`" in row
        default = (
            units.bytes_short(limit.default)
            if limit.unit == "bytes"
            else units.amount(limit.default, limit.unit)
        ).replace(" seconds", " s")
        assert default in row, (limit.name, default, row)
    assert "docs/limits.md" in (ROOT / "README.md").read_text()
