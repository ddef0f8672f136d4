"""The JSON guard's bracket matching (``JsonGuard(structure=True)``), which the redaction reads through:
it copies what is not a string as it is, so without it a ``{`` flipped to ``[`` (the same byte count, valid
UTF-8, JSON's own characters) was redacted into invalid JSON with a clean scan.

The guard's vectorised match is checked against a plain stack walk, bracket by bracket, on random documents
cut into random chunks; then the redaction of a real trace with such flips."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import pytest
from cli_helpers import redact_refusals
from json_walk import tokens_outside_strings

from popprof.cli import main
from popprof.io.bounded import JsonGuard, MismatchedBrackets, MisplacedSeparator, MisplacedToken

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
KEY = "a-sound-benchmark-key-0123456789"


def _document(rng: random.Random, depth: int = 0) -> object:
    """A random JSON value with strings that hold brackets and escaped quotes (which the guard must skip)."""
    roll = rng.random()
    if depth > 5 or roll < 0.3:
        return rng.choice([1, 2.5, None, True, 'x"[{', "]}", "a\\\\b", "plain"])
    if roll < 0.65:
        return [_document(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"k{i}{rng.choice(['', '[', '}'])}": _document(rng, depth + 1) for i in range(rng.randint(0, 4))}


def _first_mismatch(text: bytes) -> int | None:
    """The index of the first bracket outside strings that closes the other kind of container, by a stack."""
    stack: list[int] = []
    in_string = escaped = False
    for i, b in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif b == ord("\\"):
                escaped = True
            elif b == ord('"'):
                in_string = False
        elif b == ord('"'):
            in_string = True
        elif b in b"[{":
            stack.append(b)
        elif b in b"]}":
            opener = stack.pop() if stack else None
            if opener is not None and (opener == ord("[")) != (b == ord("]")):
                return i
    return None


def _guard_refuses(text: bytes, rng: random.Random) -> bool:
    """Feed ``text`` to a matching guard in random chunks; whether it refused a mismatched bracket (or, a '{'
    read as '[', the ':' then in an array first, or a value where a key belongs: ``{1``)."""
    guard = JsonGuard(io.BytesIO(), Path("doc.json"), structure=True)
    at = 0
    try:
        while at < len(text):
            size = rng.randint(1, 40)
            guard.check(memoryview(text[at : at + size]))
            at += size
    except (MismatchedBrackets, MisplacedSeparator, MisplacedToken):
        return True
    return False


SWAP = {ord("["): b"{", ord("{"): b"[", ord("]"): b"}", ord("}"): b"]"}


@pytest.mark.parametrize("seed", range(40))
def test_the_vectorised_match_agrees_with_a_stack_walk(seed: int) -> None:
    """Valid documents pass in any chunking; a bracket outside strings flipped to the other kind is refused
    exactly when a stack walk finds a container closed by the other kind, which one flip always makes."""
    rng = random.Random(seed)
    text = json.dumps({"traceEvents": [_document(rng) for _ in range(6)]}).encode()
    assert not _guard_refuses(text, rng)
    refused = 0
    for i in rng.sample(tokens_outside_strings(text, b"[]{}"), 8):
        flipped = text[:i] + SWAP[text[i]] + text[i + 1 :]
        expected = _first_mismatch(flipped) is not None
        assert _guard_refuses(flipped, rng) == expected, (seed, i)
        refused += expected
    assert refused == 8  # one flipped bracket always leaves a container closed by the other kind


def test_readers_that_parse_leave_the_match_off() -> None:
    """Off by default: every parser downstream refuses such a file itself."""
    guard = JsonGuard(io.BytesIO(), Path("doc.json"))
    guard.check(memoryview(b'{"a": [1, 2}, "b": 3]'))  # no error from the guard alone


def test_redact_refuses_a_real_trace_with_a_brace_flipped_to_a_bracket(capsys, tmp_path, monkeypatch) -> None:
    """A '{' read as '[' (and a '}' read as ']') in the middle of HTA's simple-add trace: valid UTF-8, JSON's
    own characters, the same length. The redaction wrote invalid JSON with a clean scan; now it is refused,
    exit 2, in the reader's words at the flipped byte, nothing written, the input untouched."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    data = gzip.decompress((REAL / "traces" / "hta_simple_add.json.gz").read_bytes())
    opening = data.index(b"{", len(data) // 2)
    closing = data.index(b"}", len(data) // 3)
    damaged = tmp_path / "trace.json"
    for at, flip in ((opening, b"["), (closing, b"]")):
        for line, byte in redact_refusals(capsys, tmp_path, data, at, flip):
            assert line.startswith(
                f"popprof: error: {damaged}: the file is damaged before its end (not cut off): invalid JSON at "
            ), line
            # where the JSON first reads as invalid: at the flip or a few tokens after it ('["ph": ...' at the ':')
            assert at <= byte < at + 64, (at, line)
            assert line.endswith("; it would not be redacted (the file may be damaged; write it again)"), line
    # the intact trace still redacts
    intact = tmp_path / "intact.json"
    intact.write_bytes(data)
    assert main(["-q", "redact", str(intact), "-o", str(tmp_path / "ok.json")]) == 0
    json.loads((tmp_path / "ok.json").read_bytes())
