"""The JSON guard's token check (``structure``): numbers, literals and the order of values outside strings.

:class:`~popprof.io.bounded.JsonGuard` with ``structure`` checks brackets and separators against each other
(which kind of container is open, which separator is due); this module checks everything else outside strings,
a chunk at a time, in numpy and ``bytes.translate``: every byte outside strings is a bracket, a separator, white
space or part of a number or literal; each number follows JSON's grammar (``-``, digits, one ``.`` with digits
after it, one exponent with digits after it) and each literal is spelled out (``true`` ``false`` ``null``); and
values, separators and brackets come in an order JSON allows (after ``[`` a value or ``]``, after ``{`` a key or
``}``, after ``,`` or ``:`` a value, after a value a ``,``, a closing bracket or, after a key, ``:``).

How, without a loop over tokens:

1. each byte's class (:data:`_CLASS`, one ``translate``), cleared inside strings (a prefix XOR of the quote bits,
   64 bytes to a word: :func:`string_parity`);
2. each byte's class with the one before it, as one byte (``before << 4 | class``), mapped by a second
   ``translate`` (:data:`_PAIRS`) to what the pair adds to the *item stream*, with the pairs that add nothing
   deleted in the same call: a bracket, separator or opening quote adds itself; the first byte of a number a
   value, of a literal a literal; a ``.`` or exponent after a digit adds that, and what follows an exponent its
   digits (so ``1e,`` is an exponent without them); a pair that no JSON holds (``1#``, ``--``, ``.,``) adds
   "wrong";
3. the stream (a few bytes per value) checked pair by pair against what JSON lets follow what (a third
   ``translate`` deletes the pairs allowed: anything left is wrong), literals (rare) against their spelling,
   and leading zeros (``01``, ``-05``) in a stream of their own from the same pairs (:func:`_zero_item`).

The stream's brackets and separators, in order, are what the bracket and separator check reads. Nothing here
sees a string's content, so damage inside a string (a control character, a broken escape) is not found.
"""

from __future__ import annotations

import re

import numpy as np

# byte classes (0: white space, or inside a string); brackets, separators and the quote are their stream codes
_OPEN_A, _CLOSE_A, _OPEN_O, _CLOSE_O, _COMMA, _COLON, _QUOTE = 1, 2, 3, 4, 5, 6, 7
_DIGIT, _MINUS, _PLUS, _DOT, _EXP, _LETTER, _ZERO, _STRAY = 8, 9, 10, 11, 12, 13, 14, 15
_SCALAR = (_DIGIT, _MINUS, _PLUS, _DOT, _EXP, _LETTER, _ZERO)
_MARKS = b'[]{},:"'

_table = bytearray([_STRAY]) * 256
for _b in b" \t\r\n":
    _table[_b] = 0
for _i, _b in enumerate(_MARKS):
    _table[_b] = _OPEN_A + _i
for _b in b"123456789":
    _table[_b] = _DIGIT
_table[ord("0")] = _ZERO  # a class of its own for the leading zero check
_table[ord("-")], _table[ord("+")], _table[ord(".")] = _MINUS, _PLUS, _DOT
_table[ord("e")] = _table[ord("E")] = _EXP
for _b in b"trufalsn":
    _table[_b] = _LETTER
#: each byte's class (a ``bytes.translate`` table)
_CLASS = bytes(_table)

# item stream codes (4 bits): 1-7 the marks; the first byte of a number; a '.' after a digit; an exponent ('e' or
# 'E' after a digit) and what follows it (a digit or sign: its digits); the first byte of a literal; 15: wrong
_VALUE, _DOT_ITEM, _EXP_ITEM, _EXP_DIGITS, _WORD, _WRONG = 8, 9, 10, 11, 12, 15
#: the pairs of numbers and literals one byte to the next (the spelling of literals is checked apart)
_WITHIN = {
    *((a, b) for a in (_DIGIT, _ZERO, _DOT, _EXP, _MINUS, _PLUS) for b in (_DIGIT, _ZERO)),
    *((a, b) for a in (_DIGIT, _ZERO) for b in (_DOT, _EXP)),
    (_EXP, _MINUS), (_EXP, _PLUS), (_LETTER, _LETTER), (_LETTER, _EXP),
}  # fmt: skip
#: the pairs inside a number or literal that add an item
_WITHIN_ITEMS = {
    **{(d, _DOT): _DOT_ITEM for d in (_DIGIT, _ZERO)},
    **{(d, _EXP): _EXP_ITEM for d in (_DIGIT, _ZERO)},
    **{(_EXP, c): _EXP_DIGITS for c in (_DIGIT, _ZERO, _MINUS, _PLUS)},
}
_DELETE = 0


def _pair_item(before: int, this: int) -> int:
    """The stream code a byte of class ``this`` after one of class ``before`` adds (``_DELETE``: none)."""
    if this == _STRAY:
        return _WRONG
    if this in _SCALAR:
        if before in _SCALAR:
            return _WITHIN_ITEMS.get((before, this), _DELETE) if (before, this) in _WITHIN else _WRONG
        if this in (_DIGIT, _ZERO, _MINUS):
            return _VALUE
        return _WORD if this == _LETTER else _WRONG  # '.5', '+1', 'e5': no JSON
    # a mark or white space: the token before it, if any, must end whole ('1e,' is caught in the stream: the
    # exponent without its digits; 'true,' ends in an 'e' too)
    return _WRONG if before in (_MINUS, _PLUS, _DOT) else this  # white space: 0, deleted


_PAIR_TABLE = bytearray(256)
for _a in range(16):
    for _c in range(16):
        _PAIR_TABLE[_a << 4 | _c] = _pair_item(_a, _c)
#: pair of classes -> stream code (a ``translate`` table) and the pairs that add nothing (deleted)
_PAIRS = bytes(_PAIR_TABLE)
_NO_ITEM = bytes(i for i in range(256) if _PAIR_TABLE[i] == _DELETE)
#: pair of classes -> 1 where a literal starts, else 0 (a ``translate`` table)
_WORD_STARTS = bytes(int(code == _WORD) for code in _PAIR_TABLE)

_START = 0  # the stream's code before the document
_VALUE_STARTS = (_OPEN_A, _OPEN_O, _QUOTE, _VALUE, _WORD)
_AFTER_VALUE = (_COMMA, _CLOSE_A, _CLOSE_O)
_FOLLOW = {
    _START: (_OPEN_A, _OPEN_O),
    _OPEN_A: (*_VALUE_STARTS, _CLOSE_A),
    _OPEN_O: (_QUOTE, _CLOSE_O),
    _COMMA: _VALUE_STARTS,
    _COLON: _VALUE_STARTS,
    _CLOSE_A: _AFTER_VALUE,
    _CLOSE_O: _AFTER_VALUE,
    _QUOTE: (*_AFTER_VALUE, _COLON),
    _VALUE: (*_AFTER_VALUE, _DOT_ITEM, _EXP_ITEM),
    _DOT_ITEM: (*_AFTER_VALUE, _EXP_ITEM),
    _EXP_ITEM: (_EXP_DIGITS,),
    _EXP_DIGITS: _AFTER_VALUE,
    _WORD: _AFTER_VALUE,
}
#: pairs of stream codes in JSON's order (``before << 4 | code``), deleted to find the others
GOOD_PAIRS = bytes(_a << 4 | _c for _a, _next in _FOLLOW.items() for _c in _next)


def _zero_item(before: int, this: int) -> bytes:
    """What a pair of classes adds to the leading zero stream (b"": nothing): a zero that starts a number (L) or
    follows a minus (M), a zero and what follows it (D: a digit, X: anything else), a minus after an exponent's
    'e' (E) and before a digit other than zero (N). Wrong: L then D, and M then D unless after E."""
    if before == _ZERO:
        return b"D" if this in (_DIGIT, _ZERO) else b"X"
    if this == _ZERO:
        return b"M" if before == _MINUS else (b"L" if before not in _SCALAR else b"")
    if before == _EXP and this == _MINUS:
        return b"E"
    return b"N" if before == _MINUS and this == _DIGIT else b""


_ZERO_TABLE = bytearray(256)
for _a in range(16):
    for _c in range(16):
        _ZERO_TABLE[_a << 4 | _c] = (_zero_item(_a, _c) or b"\0")[0]
#: pair of classes -> leading zero stream code (a ``translate`` table), and the pairs that add none
_ZEROS = bytes(_ZERO_TABLE)
_NO_ZERO_ITEM = bytes(i for i in range(256) if _ZERO_TABLE[i] == 0)
_LEADING_ZERO = re.compile(rb"LD|(?<!E)MD")

#: stream code -> the bracket or separator it stands for (a ``translate`` table), and the codes that stand for none
_TOKEN_BYTES = bytes(_MARKS[c - 1] if 1 <= c <= 6 else 0 for c in range(256))
_NOT_TOKEN = bytes(c for c in range(256) if not 1 <= c <= 6)

_NAMES = {_START: "the start", _QUOTE: "a string", _VALUE: "a number", _WORD: "a literal"}
_NAMES.update({c: f"'{chr(b)}'" for c, b in zip(range(1, 7), _MARKS, strict=False)})
_NAMES.update({_DOT_ITEM: "'.'", _EXP_ITEM: "an exponent", _EXP_DIGITS: "an exponent's digits"})
_LITERALS = (b"true", b"false", b"null")
#: the literals, each in 6 bytes (zeros after it), to compare with a window of each literal's bytes
_SPELLED = np.array([list(w.ljust(6, b"\0")) for w in _LITERALS], dtype=np.uint8)


class Damage(Exception):
    """What the token check found, and where: ``at``, a byte offset in the chunk."""

    def __init__(self, at: int, what: str) -> None:
        super().__init__(what)
        self.at, self.what = at, what


def string_parity(quote: np.ndarray, in_string: bool) -> np.ndarray:
    """Per byte of a chunk, 1 inside a string (its closing quote included, its opening quote not), else 0.

    ``quote``: the chunk's real quotes (bool per byte); ``in_string``: a string is open at the chunk's start.
    A prefix XOR of the quote bits, 64 at a time in uint64 words (little-endian), then across the words."""
    n = len(quote)
    packed = np.packbits(quote, bitorder="little")
    words = np.zeros((len(packed) + 7) // 8, dtype=np.uint64)
    words.view(np.uint8)[: len(packed)] = packed
    quotes = words.copy()
    for shift in (1, 2, 4, 8, 16, 32):
        words ^= words << np.uint64(shift)
    carry = np.bitwise_xor.accumulate((words >> np.uint64(63)).astype(np.uint8))
    before = np.empty_like(carry)
    before[0] = in_string
    before[1:] = carry[:-1] ^ in_string
    words ^= np.uint64(0) - before.astype(np.uint64)  # all ones where a string is open at the word's start
    words ^= quotes  # the opening quote out, the closing one in
    return np.unpackbits(words.view(np.uint8), count=n, bitorder="little")


class TokenCheck:
    """The token check, chunk by chunk; keeps the class of the last byte, the last stream code and the
    start of a literal cut by the chunk's end."""

    def __init__(self) -> None:
        self.last_class = 0  # the class of the last byte checked
        self.last_byte = b" "  # ... and the byte
        self.last_items = bytes([_START])
        self._buffer = bytearray()  # the pairs of classes of a chunk
        self.last_zeros = b""  # the last two codes of the leading zero stream
        self.word = b""  # a literal's bytes at the end of the last chunk (to be spelled with the next)

    def check(self, raw: bytes, quote: np.ndarray, in_string: bool) -> tuple[bytes, Damage | None]:
        """The brackets and separators outside strings of the chunk ``raw``, in order (what the bracket and
        separator check reads), and the first damage found in it (None: none). ``quote``: the chunk's real
        quotes per byte; ``in_string``: a string is open at its start."""
        n = len(raw)
        if not n:
            return b"", None
        cls = self._classes(raw, quote, in_string)
        if (
            len(self._buffer) < n
        ):  # kept from chunk to chunk: a fresh one costs more in page faults than in work
            self._buffer = bytearray(max(n, 1 << 16))
        pair = np.frombuffer(self._buffer, dtype=np.uint8, count=n)
        pair[0] = self.last_class << 4
        np.left_shift(cls[:-1], 4, out=pair[1:])
        pair |= cls
        whole = self._pairs(n)
        stream = whole.translate(_PAIRS, _NO_ITEM)
        damage = self._order(raw, stream, pair)
        zeros = self._leading_zero(whole, pair)
        if zeros is not None and (damage is None or zeros.at < damage.at):
            damage = zeros
        stream = bytes(stream)
        words = stream.count(_WORD) if _WORD in stream else 0
        if words or self.word:
            found = self._spell(raw, cls, pair, words)
            if found is not None and (damage is None or found.at < damage.at):
                damage = found
        if damage is None:
            self.last_class = int(cls[-1])
            self.last_byte = raw[-1:]
            self.last_items = (self.last_items + stream)[-1:]
        return stream.translate(_TOKEN_BYTES, _NOT_TOKEN), damage

    def _classes(self, raw: bytes, quote: np.ndarray, in_string: bool) -> np.ndarray:
        """Each byte's class, 0 inside strings (and at closing quotes)."""
        inside = string_parity(quote, in_string)
        inside -= 1  # 0xFF outside strings (and at an opening quote), 0 inside
        return np.bitwise_and(np.frombuffer(raw.translate(_CLASS), dtype=np.uint8), inside, out=inside)

    def _order(self, raw: bytes, stream: bytes, pair: np.ndarray) -> Damage | None:
        """The first stream code out of order (or wrong in itself), located in the chunk."""
        codes = np.frombuffer(self.last_items[-1:] + stream, dtype=np.uint8)
        pairs = codes[:-1] << 4
        pairs |= codes[1:]
        if not pairs.tobytes().translate(None, GOOD_PAIRS):
            return None
        first = int(np.flatnonzero(~np.isin(pairs, np.frombuffer(GOOD_PAIRS, dtype=np.uint8)))[0])
        before, code = int(codes[first]), int(codes[first + 1])
        at = self._locate(pair, first)
        if code == _WRONG:
            if _CLASS[raw[at]] == _STRAY:
                return Damage(
                    at, f"'{_show(raw[at : at + 1])}' outside strings, where JSON has no place for it"
                )
            return Damage(at, f"a number or literal broken at '{_show((self.last_byte + raw)[at : at + 2])}'")
        if before == _EXP_ITEM:
            return Damage(at, "a number ends in its exponent ('e' without digits)")
        if code in (_DOT_ITEM, _EXP_ITEM):
            return Damage(at, f"{_NAMES[code]} a second time in one number")
        return Damage(at, f"{_NAMES.get(code, '?')} right after {_NAMES.get(before, '?')}")

    def _pairs(self, n: int) -> bytearray:
        """The chunk's pairs of classes as a bytearray, to translate: the buffer itself (translated in place, at
        twice the speed of a copy's), a copy for a short chunk."""
        return self._buffer if n == len(self._buffer) else self._buffer[:n]

    def _leading_zero(self, whole: bytearray, pair: np.ndarray) -> Damage | None:
        """The first number with a leading zero (``01``, ``-05``; an exponent's digits may have one: ``1e-05``)."""
        zeros = whole.translate(_ZEROS, _NO_ZERO_ITEM)
        carried = self.last_zeros
        self.last_zeros = (carried + zeros)[-2:]
        text = carried + zeros
        if b"LD" not in text and b"MD" not in text:  # the fast path: a C search each
            return None
        found = next((m for m in _LEADING_ZERO.finditer(text) if m.end() > len(carried)), None)
        if found is None:
            return None
        index = found.end() - 1 - len(carried)  # the 'D': the digit after the zero
        items = np.flatnonzero(np.frombuffer(pair.tobytes().translate(_ZEROS), dtype=np.uint8))
        return Damage(int(items[index]), "a number with a leading zero (a digit right after its first '0')")

    def _locate(self, pair: np.ndarray, index: int) -> int:
        """The byte in the chunk of the stream's code ``index`` (off the fast path)."""
        items = np.flatnonzero(np.frombuffer(pair.tobytes().translate(_PAIRS), dtype=np.uint8))
        return int(items[index]) if index < len(items) else len(pair) - 1

    def _spell(self, raw: bytes, cls: np.ndarray, pair: np.ndarray, words: int) -> Damage | None:
        """The first literal of the chunk not spelled ``true`` ``false`` or ``null`` (with the one cut by the last
        chunk's end); keeps the one cut by this chunk's end."""
        starts = np.zeros(0, dtype=np.intp)
        if words:
            starts = np.flatnonzero(np.frombuffer(self._pairs(len(raw)).translate(_WORD_STARTS), dtype=bool))
        if self.word:
            end = _token_end(cls, 0)
            if end is None:  # still cut: the literal runs on to the next chunk
                self.word += raw
                return _too_long(self.word, len(raw) - 1)
            word, self.word = self.word + raw[:end], b""
            if word not in _LITERALS:  # at end - 1: -1 is the last chunk's last byte
                return Damage(end - 1, f"'{_show(word)}' is no JSON literal")
        if not words:
            return None
        # each literal's first 6 bytes and classes (a window past the chunk's end: cut, carried to the next)
        n = len(raw)
        index = starts[:, None] + np.arange(6)
        within = index < n
        np.minimum(index, n - 1, out=index)
        ended = (cls[index] < _DIGIT) & within
        has_end = ended.any(axis=1)
        length = np.where(has_end, ended.argmax(axis=1), 6)
        cut = ~has_end & ~within[:, -1]  # runs on to the chunk's end: only the last one can
        got = np.frombuffer(raw, dtype=np.uint8)[index] * (np.arange(6) < length[:, None])
        spelled = (got[:, None, :] == _SPELLED[None, :, :]).all(axis=2).any(axis=1)
        bad = np.flatnonzero(~spelled & ~cut)
        if cut[-1]:
            self.word = raw[int(starts[-1]) :]
        if len(bad):
            start, end = int(starts[bad[0]]), int(starts[bad[0]] + length[bad[0]])
            return Damage(end - 1, f"'{_show(raw[start:end])}' is no JSON literal")
        return _too_long(self.word, n - 1) if cut[-1] else None


def _token_end(cls: np.ndarray, start: int) -> int | None:
    """The end (exclusive) of the number or literal at ``start``; None when it runs to the chunk's end."""
    window = cls[start : start + 8]
    outside = np.flatnonzero(window < _DIGIT)  # a stray byte stays in: the stream names it, at its byte
    if len(outside):
        return start + int(outside[0])
    if start + 8 >= len(cls):
        return None
    return start + 8  # longer than any literal: wrong anyway


def _too_long(word: bytes, at: int) -> Damage | None:
    return Damage(at, f"'{_show(word)}' is no JSON literal") if len(word) > 5 else None


def _show(token: bytes) -> str:
    """A token for a message: at most 24 bytes, control and non-ASCII bytes escaped."""
    text = token[:24].decode("latin-1").encode("unicode_escape").decode("ascii")
    return text + ("..." if len(token) > 24 else "")
