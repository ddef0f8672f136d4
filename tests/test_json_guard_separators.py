"""The JSON guard's separator check (``JsonGuard(structure=True)``), which the redaction reads through: it copies
what is not a string as it is, so a ``,`` flipped to ``:`` (or back), which keeps the brackets balanced, was
redacted into invalid JSON.

In an object the separators at its own depth alternate ``:`` ``,`` ``:`` ... from a ``:`` and the ``}`` never
follows a ``,``; an array holds no ``:``. One separator flipped always breaks that at the flipped byte, and the
guard names that byte. The vectorised check is compared with a plain walk over the bytes on random documents cut
into random chunks; then the redaction of a real trace with one separator flipped."""

from __future__ import annotations

import gzip
import io
import json
import random
import re
from pathlib import Path

import pytest
from cli_helpers import one_error
from json_walk import tokens_outside_strings

from popprof.cli import main
from popprof.io.bounded import (
    JsonGuard,
    MismatchedBrackets,
    MisplacedSeparator,
    MisplacedToken,
    TextAfterJson,
)

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
KEY = "a-sound-benchmark-key-0123456789"
TRICKY = ['x"[{', "]}", "a\\\\b", "plain", ",", ":", '":"', '","', "{:}", "[,]", "\\", 'k\\"', ""]


def _document(rng: random.Random, depth: int = 0) -> object:
    """A random JSON value: nested objects and arrays, strings holding separators, brackets and escaped quotes."""
    roll = rng.random()
    if depth > 5 or roll < 0.3:
        return rng.choice([1, -2.5e3, None, True, False, *TRICKY])
    if roll < 0.6:
        return [_document(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {f"k{i}{rng.choice(TRICKY)}": _document(rng, depth + 1) for i in range(rng.randint(0, 5))}


def _text(rng: random.Random, most: int = 1500) -> bytes:
    """A random document written compact, with spaces or indented, of at most ``most`` bytes (the first of
    several tries that fits: the tests below feed every variant to a guard in small chunks)."""
    while True:
        value = {"traceEvents": [_document(rng) for _ in range(rng.randint(1, 4))]}
        style = rng.choice([{"separators": (",", ":")}, {}, {"indent": 1}])
        text = json.dumps(value, **style).encode()
        if len(text) <= most:
            return text


def _first_wrong(text: bytes) -> int | None:
    """The index of the first bracket or separator out of place, by a stack walk (what the guard checks): a
    bracket closing the other kind, a separator out of turn in an object (``:`` and ``,`` alternate from a
    ``:``), a ``}`` right after a ``,``, a ``:`` in an array."""
    stack: list[list] = []  # [kind of container, its last separator]
    for i in tokens_outside_strings(text):
        b = text[i]
        if b in b"[{":
            stack.append([b, None])
        elif b in b"]}":
            if not stack:
                continue
            kind, last = stack.pop()
            if (kind == ord("[")) != (b == ord("]")) or (b == ord("}") and last == ord(",")):
                return i
        elif stack:
            kind, last = stack[-1]
            if kind == ord("{"):
                expected = ord(",") if last == ord(":") else ord(":")
                if b != expected:
                    return i
            elif b == ord(":"):
                return i
            stack[-1][1] = b
    return None


def _guard(text: bytes, rng: random.Random, largest: int = 40) -> str | None:
    """Feed ``text`` to a checking guard in random chunks; its error line, or None."""
    guard = JsonGuard(io.BytesIO(), Path("doc.json"), structure=True)
    at = 0
    try:
        while at < len(text):
            size = rng.randint(1, largest)
            guard.check(memoryview(text[at : at + size]))
            at += size
    except (MisplacedSeparator, MismatchedBrackets, MisplacedToken) as exc:
        return str(exc)
    return None


def _byte(line: str) -> int:
    return int(re.search(r" at byte ([\d,]+) ", line)[1].replace(",", ""))


FLIP = {ord(","): b":", ord(":"): b","}


@pytest.mark.parametrize("seed", range(30))
def test_every_single_separator_flip_is_refused_at_its_byte(seed: int) -> None:
    """Valid documents pass in any chunking; each separator outside strings flipped (',' <-> ':') is refused, the
    line naming the flipped byte and what belongs there. The flipped documents are invalid JSON to json.loads."""
    rng = random.Random(seed)
    text = _text(rng)
    json.loads(text)
    for largest in (3, 40, 4096):
        assert _guard(text, rng, largest) is None
    separators = [i for i in tokens_outside_strings(text) if text[i] in b",:"]
    assert separators
    for i in separators:
        flipped = text[:i] + FLIP[text[i]] + text[i + 1 :]
        with pytest.raises(json.JSONDecodeError):
            json.loads(flipped)
        line = _guard(flipped, rng, rng.choice([16, 64, 4096]))
        assert line is not None, (seed, i)
        assert _byte(line) == i, (seed, i, line)
        assert f"a '{chr(flipped[i])}' where a '{chr(text[i])}' belongs in an " in line, line
        assert line.endswith(
            "(a flipped byte?): the file is not valid JSON (the file may be damaged; write it again)"
        )


def _mutate(text: bytes, rng: random.Random) -> bytes:
    """One to three changes to the separators outside strings: flipped, deleted, doubled, or a ',' put before a
    closing bracket."""
    for _ in range(rng.randint(1, 3)):
        tokens = tokens_outside_strings(text)
        i = rng.choice(tokens)
        move = rng.choice(["flip", "delete", "double", "comma"])
        if move == "comma" or text[i] not in b",:":
            text = text[:i] + b"," + text[i:] if text[i] in b"]}" else text
        elif move == "flip":
            text = text[:i] + FLIP[text[i]] + text[i + 1 :]
        elif move == "delete":
            text = text[:i] + b" " + text[i + 1 :]
        else:
            text = text[:i] + text[i : i + 1] * 2 + text[i + 1 :]
    return text


@pytest.mark.parametrize("seed", range(30))
def test_the_vectorised_check_agrees_with_a_stack_walk(seed: int) -> None:
    """Documents with a few separators flipped, deleted, doubled or added before a closing bracket, in random
    chunks: refused exactly when json.loads refuses them; when a stack walk finds a token out of place, at that
    token or before it (the token check finds a doubled ',' or a value after a value where it stands)."""
    rng = random.Random(1000 + seed)
    text = _text(rng)
    for _ in range(25):
        damaged = _mutate(text, rng)
        wrong = _first_wrong(damaged)
        line = _guard(damaged, rng, rng.choice([2, 16, 64, 4096]))
        try:
            json.loads(damaged)
        except json.JSONDecodeError:
            assert line is not None, (seed, damaged)
        else:
            assert line is None, (seed, damaged, line)
        if wrong is not None:
            assert _byte(line) <= wrong, (seed, damaged, line)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a":1,"b":2}', None),
        (b'{"a":[1,2,{"b":{}}],"c":[]}', None),
        (b'[{"a":1},{"b":2},[3,4]]', None),
        (b'{"a":1:"b":2}', "a ':' where a ',' belongs in an object at byte 6 "),
        (b'{"a",1}', "a ',' where a ':' belongs in an object at byte 4 "),
        (b'{"a":1,"b",2}', "a ',' where a ':' belongs in an object at byte 10 "),
        (b'{"a":{"b":1}:"c":2}', "a ':' where a ',' belongs in an object at byte 12 "),
        (b"[1,2:3]", "a ':' where a ',' belongs in an array at byte 4 "),
        (b'{"a":1,}', "a '}' right after a ',' in an object at byte 7 "),
        (b'{"a":[1}}', "a '}' closes an array at byte 7 "),
    ],
)
def test_what_each_refusal_says(text: bytes, message: str | None) -> None:
    """One line naming the byte and what belongs there, in any chunking."""
    for size in (1, 2, 5, 100):
        guard = JsonGuard(io.BytesIO(), Path("doc.json"), structure=True)
        try:
            for at in range(0, len(text), size):
                guard.check(memoryview(text[at : at + size]))
        except (MisplacedSeparator, MismatchedBrackets) as exc:
            assert message is not None and f"doc.json: {message}(a flipped byte?)" in str(exc), (size, exc)
            assert "\n" not in str(exc)
        else:
            assert message is None, size


@pytest.mark.parametrize("seed", range(6))
def test_text_after_the_value_is_named_at_its_byte_with_the_check_on(seed: int) -> None:
    """With the check on, the chunk is read by a path of its own (separators and brackets outside strings by a
    running count of quotes): the end of the value and the text after it are found there as without it, plain
    or with escapes, in any chunking."""
    rng = random.Random(seed)
    text = _text(rng)
    damaged = text + b' \n{"b":1}'
    for size in (3, 64, 4096):
        lines = []
        for structure in (True, False):
            guard = JsonGuard(io.BytesIO(), Path("doc.json"), structure=structure)
            with pytest.raises(TextAfterJson) as caught:
                for at in range(0, len(damaged), size):
                    guard.check(memoryview(damaged[at : at + size]))
            lines.append(str(caught.value))
        assert lines[0] == lines[1] and f"at byte {len(text) + 2:,} " in lines[0], (size, lines)


def test_readers_that_parse_leave_the_check_off() -> None:
    """Off by default: every parser downstream refuses such a file itself."""
    guard = JsonGuard(io.BytesIO(), Path("doc.json"))
    guard.check(memoryview(b'{"a",1,"b":[2:3]}'))  # no error from the guard alone


REAL_JSON = sorted(p for p in (REAL / "traces").rglob("*") if p.name.endswith((".json", ".json.gz")))


@pytest.mark.parametrize("path", REAL_JSON, ids=lambda p: p.name)
def test_every_real_trace_passes_the_check(path: Path) -> None:
    """No real trace (each valid JSON to json.loads) is refused, in the guard's own 1 MiB chunks and in chunks
    of a prime size (cut anywhere)."""
    raw = path.read_bytes()
    text = gzip.decompress(raw) if path.name.endswith(".gz") else raw
    json.loads(text)
    for size in (1 << 20, 65521):
        guard = JsonGuard(io.BytesIO(), path, structure=True)
        for at in range(0, len(text), size):
            guard.check(memoryview(text[at : at + size]))
        assert guard.ended and not guard.open_kinds.size


def _separator_near(data: bytes, start: int, byte: bytes) -> int:
    """The first ``byte`` outside strings at or after ``start`` (a walk from the start of the file)."""
    return next(i for i in tokens_outside_strings(data) if i >= start and data[i : i + 1] == byte)


def test_redact_refuses_a_real_trace_with_a_separator_flipped(capsys, tmp_path, monkeypatch) -> None:
    """A ',' read as ':' (and a ':' read as ',') in the middle of HTA's simple-add trace: the brackets stay
    balanced, the text valid UTF-8. The redaction wrote that into its output; now it is refused, exit 2, one line
    in the reader's words at the flipped byte, with and without the scan, plain and gzip, nothing written, the
    input untouched. The intact trace still redacts."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    data = gzip.decompress((REAL / "traces" / "hta_simple_add.json.gz").read_bytes())
    comma = _separator_near(data, len(data) // 2, b",")
    colon = _separator_near(data, len(data) // 3, b":")
    for at, flip in ((comma, b":"), (colon, b",")):
        flipped = data[:at] + flip + data[at + 1 :]
        for name, body in (("trace.json", flipped), ("trace.json.gz", gzip.compress(flipped, mtime=0))):
            damaged = tmp_path / name
            damaged.write_bytes(body)
            out = tmp_path / "shared.json"
            for scan in ([], ["--no-scan"]):
                line = one_error(capsys, "redact", damaged, "-o", out, *scan)
                assert line.startswith(
                    f"popprof: error: {damaged}: the file is damaged before its end (not cut off): invalid JSON at "
                ), line
                byte = int(
                    re.search(r"\(byte ([\d,]+) of the (?:file|decompressed JSON)\)", line)[1].replace(
                        ",", ""
                    )
                )
                assert at <= byte < at + 64, (at, line)
                assert line.endswith(
                    "; it would not be redacted (the file may be damaged; write it again)"
                ), line
                assert not out.exists() and not list(tmp_path.glob(".*"))
                assert damaged.read_bytes() == body
            damaged.unlink()
    intact = tmp_path / "intact.json"
    intact.write_bytes(data)
    assert main(["-q", "redact", str(intact), "-o", str(tmp_path / "ok.json")]) == 0
    json.loads((tmp_path / "ok.json").read_bytes())
