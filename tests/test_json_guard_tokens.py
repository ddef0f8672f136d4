"""The JSON guard's token check (``JsonGuard(structure=True)``, popprof/io/jsongrammar.py), which the redaction
reads through: it copies what is not a string as it is, so a byte flipped inside a number or literal (``1#3``,
``trxe``), a stray byte between values, a ``,`` lost or doubled in an array (``[1 2]``, ``[1,,2]``) or a member
missing its key or value (``{"a":}``) was redacted into invalid JSON.

Property: every single byte outside strings flipped (to any of a set of bytes) or deleted, in random and
real documents fed in random chunks, is refused exactly when ``json.loads`` refuses the result (one line, at or
right next to the byte; a number with a leading zero, ``01``, included)."""

from __future__ import annotations

import gzip
import io
import json
import random
import re
from pathlib import Path

import pytest
from cli_helpers import redact_refusals
from json_walk import outside_strings

from popprof.cli import main
from popprof.io.bounded import JsonGuard
from popprof.model.errors import InputError

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
KEY = "a-sound-benchmark-key-0123456789"
#: what a byte is flipped to: JSON's own bytes, digits and number signs, the letters of literals, stray bytes
FLIPS = b'0159-+.eE:,[]{}" \ntrufalsnx#!\\\x00\xff'
STRINGS = ["x", "12", "1e5", "true", "a,b", "[1 2]", '{"k":}', "tab\there", 'q\\"', "\\", ""]


def _scalar(rng: random.Random) -> object:
    """A number of any shape json.dumps writes, a literal or a string that holds JSON-like text."""
    return rng.choice(
        [
            rng.randint(-5, 5),
            rng.randint(-(10**12), 10**12),
            round(rng.uniform(-1e4, 1e4), rng.randint(0, 6)),
            rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30),  # 1e-05, 2.5e+30 ...
            0.0,
            -0.0,
            True,
            False,
            None,
            rng.choice(STRINGS),
        ]
    )


def _document(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth > 4 or roll < 0.35:
        return _scalar(rng)
    if roll < 0.65:
        return [_document(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {f"k{i}{rng.choice(STRINGS)}": _document(rng, depth + 1) for i in range(rng.randint(0, 5))}


def _text(rng: random.Random, most: int = 700) -> bytes:
    """A random document, compact, with spaces or indented, of at most ``most`` bytes."""
    while True:
        value = {"traceEvents": [_document(rng) for _ in range(rng.randint(1, 4))]}
        style = rng.choice([{"separators": (",", ":")}, {}, {"indent": 1}])
        text = json.dumps(value, **style).encode()
        if len(text) <= most:
            return text


def _valid(text: bytes) -> bool:
    """JSON to json.loads, without its extensions (NaN, Infinity)."""

    def no_constant(name: str) -> None:
        raise ValueError(name)

    try:
        json.loads(text, parse_constant=no_constant)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError too
        return False
    return True


def _refusal(text: bytes, rng: random.Random, largest: int) -> str | None:
    """Read ``text`` through a checking guard, each read of a random size up to ``largest``: its error line, or
    None."""
    guard = JsonGuard(io.BytesIO(text), Path("doc.json"), structure=True)
    try:
        while guard.readinto(bytearray(rng.randint(1, largest))):
            pass
        guard.finish()  # what the redaction asks at the end of its input
    except InputError as exc:
        line = str(exc)
        assert "\n" not in line
        return line
    return None


def _byte(line: str) -> int:
    return int(re.search(r"at byte ([\d,]+)", line)[1].replace(",", ""))


#: from a damaged byte: the rest of its number or literal, a separator and the next number or literal
_NEXT = re.compile(rb"\s*[^\s,:\]}]*\s*[,:]?\s*[^\s,:\]}]*\s*.?")


def _check_damage(text: bytes, at: int, damaged: bytes, rng: random.Random, largest: int) -> bool:
    """One damaged document: refused exactly when json.loads refuses it, near the damage. Whether refused."""
    line = _refusal(damaged, rng, largest)
    if _valid(damaged):
        assert line is None, (text, at, damaged, line)
        return False
    assert line is not None, (text, at, damaged)
    # a quote lost or flipped turns strings inside out (found further on, or at the end); a bracket is matched
    # at its closing bracket: elsewhere the line names the damage's byte or one right next to it, at most the
    # rest of its number and the next value on ('{"a": 1,5}': the '}' is where a key was due)
    if set(text[at : at + 1] + damaged[at : at + 1]) & set(b'"[]{}'):
        return True
    after = at + len(_NEXT.match(damaged, at)[0])
    assert at - 6 <= _byte(line) <= after, (text, at, damaged, line)
    return True


@pytest.mark.parametrize("seed", range(25))
def test_every_single_byte_flipped_or_lost_outside_strings(seed: int) -> None:
    """Random documents with numbers of every shape, literals and strings holding JSON-like text: each byte
    outside strings flipped to each of a set of bytes, or deleted, read in random chunks (down to one byte, so
    tokens are cut anywhere): refused exactly when invalid JSON, one line near the byte; the intact document
    read in any chunking."""
    rng = random.Random(seed)
    text = _text(rng)
    for largest in (1, 3, 16, 4096):
        assert _refusal(text, rng, largest) is None
    refused = 0
    for at in outside_strings(text):
        largest = rng.choice([3, 16, 64, 4096, 4096, 4096])
        refused += _check_damage(text, at, text[:at] + text[at + 1 :], rng, largest)
        for flip in rng.sample(FLIPS, 8):
            if flip != text[at]:
                refused += _check_damage(text, at, text[:at] + bytes([flip]) + text[at + 1 :], rng, largest)
    assert refused > len(outside_strings(text))


REAL_SHAPED = [
    "cpu_only_rank-34.json.gz",
    "hta_cuda_event_sync.json.gz",
    "tracelens_collectives_reference.json",
]


@pytest.mark.parametrize("name", REAL_SHAPED)
def test_single_bytes_flipped_or_lost_in_real_traces(name: str) -> None:
    """Real traces (Kineto's and HTA's layout: indented, long numbers, literals): 150 bytes outside strings,
    each deleted and flipped to three bytes, read in 1 KiB to 64 KiB chunks."""
    raw = (REAL / name).read_bytes()
    text = gzip.decompress(raw) if name.endswith(".gz") else raw
    rng = random.Random(name)
    assert _refusal(text, rng, 1 << 16) is None
    for at in rng.sample(outside_strings(text), 150):
        largest = rng.choice([1 << 10, 1 << 16])
        _check_damage(text, at, text[:at] + text[at + 1 :], rng, largest)
        for flip in rng.sample(FLIPS, 3):
            if flip != text[at]:
                _check_damage(text, at, text[:at] + bytes([flip]) + text[at + 1 :], rng, largest)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a":[1,-2.5e+3,0,-0.0,1E-05,true,false,null,"x"],"b":{}}', None),
        (b"[1#3]", "'#' outside strings, where JSON has no place for it at byte 2 "),
        (b"[trxe]", "'x' outside strings, where JSON has no place for it at byte 3 "),
        (b"[nul!]", "'!' outside strings, where JSON has no place for it at byte 4 "),
        (b"[trua]", "'trua' is no JSON literal at byte 4 "),
        (b"[1,nul]", "'nul' is no JSON literal at byte 5 "),
        (b"[1 2]", "a number right after a number at byte 3 "),
        (b"[1,,2]", "',' right after ',' at byte 3 "),
        (b"[,1]", "',' right after '[' at byte 1 "),
        (b"[1,]", "']' right after ',' at byte 3 "),
        (b'{"a":}', "'}' right after ':' at byte 5 "),
        (b"{:1}", "':' right after '{' at byte 1 "),
        (b'{"a" 1}', "a number right after a string at byte 5 "),
        (b'{"a":1,,"b":2}', "a ',' where a ':' belongs in an object at byte 7 "),
        (b"[1.2.3]", "'.' a second time in one number at byte 4 "),
        (b"[1,01]", "a number with a leading zero (a digit right after its first '0') at byte 4 "),
        (b"[1e-05,-05]", "a number with a leading zero (a digit right after its first '0') at byte 9 "),
        (b"[1e5e3]", "an exponent a second time in one number at byte 4 "),
        (b"[1e,2]", "a number ends in its exponent ('e' without digits) at byte 3 "),
        (b"[-]", "a number or literal broken at '-]' at byte 2 "),
        (b"[.5]", "a number or literal broken at '[.' at byte 1 "),
        (b'["a" "b"]', "a string right after a string at byte 5 "),
        (b"x[1]", "'x' outside strings, where JSON has no place for it at byte 0 "),
        (b"1 [1]", "a number right after the start at byte 0 "),
        (b"[1", "the file ends inside its JSON value (at byte 2, 1 container open;"),
        (b'["a]', "the file ends inside its JSON value (at byte 4, in a string;"),
    ],
)
def test_what_each_refusal_says(text: bytes, message: str | None) -> None:
    """One line naming the byte and what is wrong there, in any chunking."""
    for size in (1, 2, 3, 100):
        line = _refusal(text, random.Random(size), size)
        if message is None:
            assert line is None, (size, line)
        else:
            assert line is not None and f"doc.json: {message}" in line, (size, line)


def test_long_numbers_and_literals_cut_anywhere() -> None:
    """Numbers and literals cut by every chunk boundary read whole, and a literal cut and misspelled across a
    boundary is refused."""
    text = json.dumps([123456789012345678901234567890, -1.25e-300, True, False, None, 0.5, 10e5]).encode()
    for size in range(1, 12):
        assert _refusal(text, random.Random(0), size) is None, size
        assert _refusal(text.replace(b"false", b"falze"), random.Random(0), size) is not None, size
        assert _refusal(text.replace(b"null", b"nulll"), random.Random(0), size) is not None, size


def test_readers_that_parse_leave_the_check_off() -> None:
    """Off by default: every parser downstream refuses such a file itself."""
    guard = JsonGuard(io.BytesIO(b"[1 2, tru, 1.2.3, {:}]"), Path("doc.json"))
    while guard.readinto(bytearray(4)):
        pass


def _second_digit_near(data: bytes, start: int) -> int:
    """The index of the second digit of the first member's number of two digits or more after ``start``."""
    outside = set(outside_strings(data))
    return next(
        start + m.start(1)
        for m in re.finditer(rb":\s*-?[0-9]([0-9])", data[start:])
        if start + m.start() in outside
    )


def test_redact_refuses_a_real_trace_with_a_digit_flipped(capsys, tmp_path, monkeypatch) -> None:
    """A digit read as '#' and a digit lost to a space (one number read as two) in the middle of HTA's simple-add
    trace: the redaction copied both into its output; now refused, exit 2, one line in the parser's words at the
    damaged number, nothing written, the input untouched."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", KEY)
    data = gzip.decompress((REAL / "hta_simple_add.json.gz").read_bytes())
    at = _second_digit_near(data, len(data) // 2)
    damaged = tmp_path / "trace.json"
    for flip in (b"#", b" "):
        for line, byte in redact_refusals(capsys, tmp_path, data, at, flip):
            assert f"popprof: error: {damaged}: " in line and "invalid JSON" in line, line
            assert at <= byte < at + 32, (
                at,
                line,
            )  # where the parser reads the JSON as invalid: at the number
    intact = tmp_path / "intact.json"
    intact.write_bytes(data)
    assert main(["-q", "redact", str(intact), "-o", str(tmp_path / "ok.json")]) == 0
