"""Redact a Chrome trace JSON (``.json`` or ``.json.gz``) by streaming, to an output of the same kind.

The file is read in blocks (:data:`BLOCK` bytes), each cut before an object key or an array
element so no string is split. In a block without escaped quotes, numpy finds the quote
positions; a zero-copy pyarrow array over the block's strings is dictionary-encoded
(:func:`encode`, GIL-free, run on worker threads ahead of the main thread), each DISTINCT
string in each context (an object key, the value of a given key, anything else) is decided
once and cached, and only the strings that change are spliced back, so
numbers, punctuation and kept strings pass through byte for byte. Blocks holding escaped
quotes use a regex tokenizer (slower, same decisions). Decisions and what is learned from
a block (thread/process names, user names) are applied in block order, so the output does
not depend on the block size or the number of workers.

Keys decide what a value is: ``name`` -> event name (``evt_``; thread and process names
from ``thread_name`` / ``process_name`` metadata events -> ``thr_`` / ``proc_``), ``cat`` ->
channel (``chan_``, comma lists item by item), structural keys (``ph``, ``s``, ``id``, ...)
are kept when short, any other value is free text (scrubbed) when it holds spaces, or an
identifier (``arg_``) when it is a single word that is not public vocabulary. Keys and
strings in arrays are scrubbed as free text.
"""

from __future__ import annotations

import contextlib
import gzip
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..io import limits
from ..io.files import is_gzip, open_binary, open_json
from ..io.jsonbytes import (
    SCAN_BLOCK,
    STRING,
    STRING_BODY,
    alternating_pieces,
    has_escaped_quote,
    last_opening_quote,
    map_blocks,
    object_end,
    quote_spans,
    quotes_before,
    solid_after,
    solid_before,
)
from .keynames import raw_key_names_a_secret
from .redactor import Redactor

BLOCK = 8 << 20
#: Distinct strings remembered before the cache starts afresh (pseudonyms are keyed, so they do not change).
CACHE_LIMIT = 2_000_000
TOKEN_RE = re.compile(rb"((?:" + STRING + rb"\s*:\s*)?" + STRING + rb")")
_PAIR_RE = re.compile(rb"(" + STRING + rb")(\s*:\s*)(" + STRING + rb")", re.S)
_STRING_TOKEN = re.compile(STRING)
_HOME_USER = re.compile(rb"/(?:home|Users)/([A-Za-z_][\w.-]*)")
_METADATA = ((b'"thread_name"', "thread_name", "thr"), (b'"process_name"', "process_name", "proc"))
#: A bare JSON number after a key (group 1: the key's string and the colon), ended inside the block.
_NUMBER_AFTER = rb"\s*:\s*)(-?[0-9][0-9.eE+-]*)(?=\s*[,}\]])"
#: Keys followed by a bare number in a block with escapes (the token path's candidates for secret keys).
_KEY_BEFORE_NUMBER = re.compile(rb'"(' + STRING_BODY + rb')"\s*:\s*-?[0-9]')


def quote_secret_numbers(block: bytes, keys: list[bytes]) -> bytes | None:
    """``block`` with each bare number under one of ``keys`` (raw key contents that name a secret) turned into
    a JSON string (``"password": 55512345`` -> ``"password": "55512345"``), so the string path replaces it
    as the secret it is; None when there is none. A number cut at the block's end is left for the next."""
    if not keys:
        return None
    pattern = re.compile(rb'("(?:' + rb"|".join(re.escape(k) for k in keys) + rb')"' + _NUMBER_AFTER)
    out, n = pattern.subn(rb'\1"\2"', block)
    return out if n else None


class InvalidString(ValueError):
    """A JSON string of the trace that does not decode: an escape a damaged byte made invalid (``\\q``, a
    ``\\u`` without four hex digits). The redaction then locates the damage (:func:`first_damage`) and refuses
    the file (:func:`damaged_trace`)."""


def _decode(token: bytes) -> str:
    inner = token[1:-1]
    if b"\\" not in inner:
        return inner.decode("utf-8", "surrogateescape")
    try:
        return orjson.loads(token)
    except orjson.JSONDecodeError as exc:
        raise InvalidString(str(exc)) from None


def _encode(value: str) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # lone surrogates from undecodable bytes
        return orjson.dumps(value.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


_PUBLIC = 1
_SECRET_KEY = 2


class ChromeRedactor:
    """Redacts Chrome-trace JSON bytes block by block with a cache per distinct token."""

    def __init__(self, redactor: Redactor) -> None:
        self.r = redactor
        self.name_kind: dict[str, str] = {}
        self.cache: dict[bytes, bytes] = {}
        self.inner: dict[tuple[bytes, int, bytes | None], bytes] = {}
        self.public: dict[bytes, int] = {}  # content -> _PUBLIC | _SECRET_KEY bits

    # -- decisions ----------------------------------------------------------
    def _name(self, value: str) -> str:
        return self.r.identifier(self.name_kind.get(value, "evt"), value)

    def _value(self, key: str, value: str) -> str:
        r = self.r
        if key == "name":
            return self._name(value)
        if key == "cat":
            return ",".join(r.decide(part, "chan") for part in value.split(","))
        return r.decide(value, "arg", key)

    def token(self, token: bytes) -> bytes:
        """The redacted form of one regex token (a JSON string, or a ``"key": "value"`` pair)."""
        out = self.cache.get(token)
        if out is not None:
            return out
        m = _PAIR_RE.fullmatch(token) if token.count(b'"') >= 4 else None
        if m is not None:
            key, value = _decode(m.group(1)), _decode(m.group(3))
            new_key, new_value = self._key(key), self._value(key, value)
            if new_key == key and new_value == value:
                out = token
            else:  # what is kept stays byte for byte (escapes included), whatever the path
                out = (
                    (m.group(1) if new_key == key else _encode(new_key))
                    + m.group(2)
                    + (m.group(3) if new_value == value else _encode(new_value))
                )
        else:
            value = _decode(token)
            new = self.r.decide(value, "arg")
            out = token if new == value else _encode(new)
        self.cache[token] = out
        return out

    def _decide(self, content: bytes, role: int, key: bytes | None) -> bytes:
        """Redact one string's content (without quotes) in its context: ``role`` is :data:`_KEY`,
        :data:`_TEXT` or :data:`_VALUE` (then ``key`` is the content of its key). Cached per
        (content, context): the same string can be an event name in one place and free text in another."""
        ctx = (content, role, key)
        found = self.inner.get(ctx)
        if found is not None:
            return found
        value = _decode(b'"' + content + b'"')
        if role == _KEY:
            new = self._key(value)
        elif role == _VALUE and key is not None:
            key_text = _decode(b'"' + key + b'"')
            new = self._value(key_text, value)
        else:
            new = self.r.decide(value, "arg")
        out = content if new == value else _encode(new)[1:-1]
        self.inner[ctx] = out
        return out

    def _key(self, key: str) -> str:
        return self.r.decide(key, "key")

    def learn_metadata(self, block: bytes, lessons: list | None = None) -> int | None:
        """Find thread/process names in metadata events so their names get ``thr_`` / ``proc_``.

        Returns the start of a metadata event cut off by the end of the block (or None), so the
        caller can leave it for the next block.
        """
        pending: int | None = None
        for marker, label, kind in _METADATA:
            pos = block.find(marker)
            while pos != -1:
                start, done, cut_off = pos, False, False
                for _ in range(4):
                    start = block.rfind(b"{", 0, start)
                    if start < 0:
                        break
                    end = object_end(block, start)
                    cut_off = cut_off or end < 0
                    if end > pos:
                        try:
                            obj = orjson.loads(block[start:end])
                        except orjson.JSONDecodeError:
                            continue
                        if (
                            isinstance(obj, dict)
                            and obj.get("name") == label
                            and isinstance(obj.get("args"), dict)
                        ):
                            name = obj["args"].get("name")
                            if isinstance(name, str):
                                if lessons is None:
                                    self.learn_name(name, kind)
                                else:
                                    lessons.append((kind, name))
                            done = True
                            break
                if not done and cut_off:
                    first = block.rfind(b"{", 0, pos)
                    pending = first if pending is None else min(pending, first)
                pos = block.find(marker, pos + 1)
        return pending

    def learn_name(self, name: str, kind: str) -> None:
        """Apply one lesson: a thread/process name (``thr``/``proc``) or a user name (``user``)."""
        if kind == "user":
            self.r.scrubber.learn_value("user", name)
        else:
            self.name_kind.setdefault(name, kind)

    # -- streaming ------------------------------------------------------------
    def process(self, block: bytes, final: bool) -> tuple[bytes, bytes]:
        """Redact ``block`` (which starts outside any string); returns (output, carry for the next block)."""
        work, carry, lessons = self.prepare(block, final)
        for kind, name in lessons:
            self.learn_name(name, kind)
        if isinstance(work, list):
            return self.finish_tokens(work), carry
        return self.finish(work, encode(work)), carry

    def prepare(self, block: bytes, final: bool) -> tuple[bytes | memoryview, bytes, list]:
        """Sequential part: find names to learn and where to cut, without deciding anything.

        Returns ``(work, carry, lessons)``: ``work`` is a memoryview for the vectorised path
        (:func:`encode`, then :meth:`finish`) or bytes holding an escaped quote for the regex
        path; ``lessons`` are applied (:meth:`learn_name`) just before the work is finished, so
        the output does not depend on how far ahead blocks are prepared.
        """
        lessons: list = []
        pending = self.learn_metadata(block, lessons)
        rest = b""
        if pending is not None and not final:
            if pending <= 0:
                return memoryview(b""), block, lessons
            block, rest = block[:pending], block[pending:]
        if b"/" in block:  # a one-byte search first: the two-byte ones are slow in CPython
            lessons.extend(
                ("user", m.group(1).decode("utf-8", "replace")) for m in _HOME_USER.finditer(block)
            )
        if has_escaped_quote(block):  # escaped quotes: the regex tokenizer path
            secret = [k for k in set(_KEY_BEFORE_NUMBER.findall(block)) if raw_key_names_a_secret(k)]
            block = quote_secret_numbers(block, secret) or block
            parts = TOKEN_RE.split(block)
            if final:
                return parts, rest, lessons
            if len(parts) < 3:
                return memoryview(b""), block + rest, lessons
            return parts[:-2], parts[-2] + parts[-1] + rest, lessons
        if final:
            return memoryview(block), rest, lessons
        cut = _cut_before_key(block)
        if cut <= 0:
            if b'"' not in block:  # no string at all (numbers, punctuation): nothing to decide, pass it on
                return memoryview(block), rest, lessons
            return memoryview(b""), block + rest, lessons
        return memoryview(block)[:cut], block[cut:] + rest, lessons

    def finish(self, work: memoryview, enc: _Encoded) -> bytes:
        """Decide each new (string, context) in block order and rebuild the block with the replacements."""
        block = enc.block
        if enc.codes is None:
            return bytes(work)
        codes, values = enc.codes, enc.values
        # strings public in every context (most keys and values of a trace) are kept wherever they sit:
        # only the occurrences of the others need a role, a key and a decision
        everywhere_public, secret_keys = self._everywhere_public(values)
        quoted = quote_secret_numbers(bytes(work), secret_keys) if secret_keys else None
        if quoted is not None:  # a bare number under a secret key: made a string first, then decided as one
            return self.finish(memoryview(quoted), encode(memoryview(quoted)))
        maybe = np.flatnonzero(~everywhere_public[codes])
        if not len(maybe):
            return bytes(work)
        starts, ends, codes = enc.starts[maybe], enc.ends[maybe], codes[maybe]
        role, key_code = _roles(block, starts, ends, enc.codes, maybe)
        # one unit per distinct (content, role, key content): the decision depends on all three
        unit = codes.astype(np.int64) * (len(values) + 2) + np.where(role == _VALUE, key_code + 2, role)
        units, first, inverse = np.unique(unit, return_index=True, return_inverse=True)
        decide = self._decide
        contents = [values[c] for c in codes[first].tolist()]
        roles = role[first].tolist()
        keys = [values[k] if k >= 0 else None for k in key_code[first].tolist()]
        # decisions made before (in an earlier block) come from the cache in one pass; the rest are made
        # in block order (expect / learn order)
        known = self.inner.get
        new: list = [known(ctx) for ctx in zip(contents, roles, keys, strict=True)]
        if None in new:
            for i in np.argsort(first, kind="stable").tolist():
                if new[i] is None:
                    new[i] = decide(contents[i], roles[i], keys[i])
        if len(self.inner) > CACHE_LIMIT:  # bounded memory for traces with millions of unique strings
            self.inner.clear()
        changed = np.fromiter(
            (a is not b and a != b for a, b in zip(new, contents, strict=True)), dtype=bool, count=len(units)
        )
        if not changed.any():
            return bytes(work)
        inverse = inverse.ravel()
        occ = np.flatnonzero(changed[inverse])
        gaps = alternating_pieces(enc.buffer, len(block), starts[occ], ends[occ])
        repl = pa.array(new, pa.large_binary()).take(pa.array(inverse[occ]))
        m = len(gaps)
        perm = np.arange(m, dtype=np.int64)
        perm[1::2] = m + np.arange(len(occ), dtype=np.int64)
        joined = pa.concat_arrays([gaps, repl]).take(pa.array(perm))
        offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)
        data = joined.buffers()[2]
        return data[int(offsets[joined.offset]) : int(offsets[joined.offset + m])].to_pybytes() + enc.tail

    def _everywhere_public(self, values: list[bytes]) -> tuple[np.ndarray, list[bytes]]:
        """Per distinct string content of a block: True when it is public vocabulary, so every context
        keeps it (:meth:`.Redactor.decide` keeps a public string wherever it sits). Contents with an
        escape or a comma (a ``cat`` value is decided item by item) always take the full path. A block
        holding a secret key (``password``, ``api_key``) takes the full path for all its strings: the
        value under such a key is replaced even when it looks public (digits, a date). Also returns the
        secret keys among the contents."""
        known = self.public
        flags = np.zeros(len(values), dtype=bool)
        secret_keys: list[bytes] = []
        for i, content in enumerate(values):
            code = known.get(content)
            if code is None:
                text = content.decode("utf-8", "surrogateescape")
                public = b"\\" not in content and b"," not in content and self.r.is_public(text)
                if public:
                    self.r.kept["public"] += 1
                code = _PUBLIC if public else 0
                if raw_key_names_a_secret(content):
                    code |= _SECRET_KEY
                if len(known) > CACHE_LIMIT:
                    known.clear()
                known[content] = code
            flags[i] = code & _PUBLIC
            if code & _SECRET_KEY:
                secret_keys.append(content)
        if secret_keys:
            flags[:] = False
        return flags, secret_keys

    def finish_tokens(self, parts: list[bytes]) -> bytes:
        """Slower path for blocks with escaped quotes: redact the tokens of :data:`TOKEN_RE`."""
        getter = self.cache.get
        token = self.token
        parts[1::2] = [getter(t) or token(t) for t in parts[1::2]]
        return b"".join(parts)


class _Encoded:
    """The strings of a block: their spans, dictionary codes and distinct values."""

    __slots__ = ("block", "buffer", "starts", "ends", "codes", "values", "tail", "longest")

    def __init__(self, block, buffer, starts=None, ends=None, codes=None, values=None, tail=b""):
        self.block, self.buffer, self.starts, self.ends = block, buffer, starts, ends
        self.codes, self.values, self.tail = codes, values, tail
        self.longest = int((ends - starts).max()) if starts is not None and len(starts) else len(tail)


def encode(work: memoryview) -> _Encoded:
    """Parallel-safe part (numpy and pyarrow release the GIL): find the strings between quote pairs
    (the block holds no escaped quote) and dictionary-encode them."""
    quotes = np.flatnonzero(np.frombuffer(work, dtype=np.uint8) == 0x22)
    tail = b""
    if len(quotes) % 2:  # ends inside an unterminated string (only in a malformed last block)
        tail, work, quotes = bytes(work[int(quotes[-1]) :]), work[: int(quotes[-1])], quotes[:-1]
    buffer = pa.py_buffer(work)
    if not len(quotes):
        return _Encoded(work, buffer, tail=tail)
    starts, ends = quotes[0::2] + 1, quotes[1::2]
    pieces = alternating_pieces(buffer, len(work), starts, ends)
    inside = pieces.take(pa.array(np.arange(1, len(pieces), 2, dtype=np.int64)))
    encoded = pc.dictionary_encode(inside)
    return _Encoded(
        work,
        buffer,
        starts,
        ends,
        encoded.indices.to_numpy(zero_copy_only=False),
        encoded.dictionary.to_pylist(),
        tail,
    )


#: Roles of a string in a block: an object key, a value (of the preceding key), anything else.
_KEY, _TEXT, _VALUE = 0, 1, 2


def _roles(
    block, starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, index: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per string of a block (content spans ``starts``/``ends``, quotes just outside; ``index`` = their
    positions among all the block's strings, whose dictionary codes are ``codes``): its role and, for a
    value, the code of its key (else -1). A key is followed by ``:``; a value follows ``:``."""
    data = np.frombuffer(block, dtype=np.uint8)
    colon_after = solid_after(data, ends + 1) == 0x3A
    colon_before = solid_before(data, starts - 2) == 0x3A
    colon_before[index == 0] = False  # the first string of a block has no key before it in the block
    role = np.where(colon_after, _KEY, np.where(colon_before, _VALUE, _TEXT)).astype(np.int64)
    key_code = np.full(len(starts), -1, dtype=np.int64)
    value = role == _VALUE
    key_code[value] = codes[index[value] - 1]
    return role, key_code


def _cut_before_key(block: bytes, tries: int = 256) -> int:
    """Offset of an opening quote of an object key or array element near the end of ``block`` (which holds
    no escaped quotes), or -1."""
    pos = block.rfind(b'"')
    if pos <= 0:
        return -1
    before = quotes_before(block, pos)  # quotes before ``pos``; each step back passes one more quote
    for _ in range(tries):
        # an opening quote of an object key or an array element (never a value: it would lose its key)
        if before % 2 == 0 and block[max(0, pos - 64) : pos].rstrip()[-1:] in (b",", b"{", b"["):
            return pos
        pos = block.rfind(b'"', 0, pos)
        if pos <= 0:
            return -1
        before -= 1
    return -1


#: How much of the end of a trace is kept to check that nothing follows the JSON value.
TAIL_BYTES = 4096


def check_nothing_after_json(tail: bytes, source: Path) -> None:
    """Refuse a trace whose bytes go on after its JSON value (an appended log, a comment) or that ends
    before its value does (a file cut off): the redaction only knows JSON, and text it does not understand is
    never copied through. The tail alone cannot tell the two apart, so the message names both."""
    end = tail.rstrip(b" \t\r\n")
    if end and end[-1:] not in (b"}", b"]"):
        from ..model.errors import InputError

        raise InputError(
            source,
            "the file does not end with '}' or ']' (it was cut off, or text follows the JSON value): "
            "it would not be redacted",
            "re-copy the file if it was cut off, else remove what follows the trace's JSON; then redact again",
        )


def first_damage(source: Path, locate: bool = False) -> tuple[int, int, int, str] | None:
    """Where the JSON of ``source`` is first invalid: (byte, line, column, the parser's message), as the trace
    reader finds it (:func:`popprof.readers.chrome.parse.first_invalid_byte`); None when none is found.

    Bounded: a parse of the whole text (yajl through ijson) runs at about 35 MB/s, twice the redaction's own
    time, so it runs only when the text is not UTF-8 (checked at C speed, ~500 MB/s: bytes flipped in a trace
    of ASCII JSON almost always leave invalid UTF-8) or with ``locate`` (the redaction already failed: text
    after the value, no closing bracket, a leak). A file valid to its end, or up to text after its value
    (yajl's 'trailing garbage': the JSON guard's ``text follows the JSON value`` names it), is None."""
    import codecs

    from ..io.files import open_binary
    from ..readers.chrome.parse import first_invalid_byte

    if not locate:
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            with open_binary(source) as handle:
                while block := handle.read(1 << 20):
                    decoder.decode(block)
                decoder.decode(b"", final=True)
            return None
        except UnicodeDecodeError:
            pass
        except (OSError, EOFError, ValueError):
            return None  # the redaction's own read says what is wrong with the file
    where = first_invalid_byte(source)
    return None if where is None or "trailing garbage" in where[3] else where


def damaged_trace(source: Path, where: tuple[int, int, int, str]):
    """The one line (exit 2) for a trace damaged before its end (bytes flipped), in the trace reader's words
    (``the file is damaged before its end``): redacting it would copy the damage into the output, and its leak
    scan would judge strings the damage made, so it is refused whatever the policy."""
    from ..io.jsonwords import DAMAGED_HINT
    from ..model.errors import InputError

    offset, line, column, message = where
    of = "of the decompressed JSON" if is_gzip(source) else "of the file"
    return InputError(
        source,
        f"the file is damaged before its end (not cut off): invalid JSON at line {line:,}, column {column:,} "
        f"(byte {offset:,} {of}): {message.rstrip('.')}; it would not be redacted",
        DAMAGED_HINT,
    )


def _check_length(longest: int, limit: int, source: Path) -> None:
    if longest > limit:
        raise limits.string_too_long(source, longest)


def redact_chrome(
    source: Path,
    tmp_out: Path,
    redactor: Redactor,
    gz: bool,
    advance: Callable[[float], None] = lambda n: None,
    workers: int = 2,
    sink: Callable[[bytes], None] | None = None,
) -> tuple[int, int]:
    """Stream ``source`` into ``tmp_out`` (gzip when ``gz``). Returns (bytes read, bytes written).

    A small pipeline: the main thread reads, learns and cuts blocks in order and finishes them in
    order; :func:`encode` (GIL-free numpy / pyarrow work) runs on ``workers`` threads ahead of it,
    and one more thread writes the finished blocks (and feeds ``sink``) in order behind it.
    The output does not depend on ``workers`` (1 or less: :func:`encode` runs on the main thread).
    ``sink`` receives every byte written (before compression), in order: the leak scan reads the
    output there (:class:`OutputStrings`).

    Bounded (docs/limits.md), by the JSON guard every JSON reader reads through (``open_json``): gzip
    bombs, a string longer than ``string-bytes`` (the only thing that could make a block grow without
    end) and nesting beyond ``json-depth`` end in LimitExceeded, and text after the first complete JSON
    value (an appended log, a second value back to back) in an InputError, before anything is written.
    Nothing here recurses.
    """
    from collections import deque

    from ..io.parallel import SerialExecutor, thread_pool

    engine = ChromeRedactor(redactor)
    # through the JSON guard every JSON reader uses: text after the first complete value (a log line, a
    # second value: ``{..}{..}``) and nesting beyond ``json-depth`` are refused before anything is written
    reader = open_json(source, structure=True)  # no parser here: a flipped bracket or separator is seen so
    limit = limits.get("string-bytes")
    raw = open(tmp_out, "wb")  # noqa: SIM115
    # no file name (it would be the temporary one) and no time in the gzip header: only the trace is written
    writer = gzip.GzipFile(filename="", mode="wb", compresslevel=3, fileobj=raw, mtime=0) if gz else raw
    read = written = 0
    queue: deque = deque()
    emitted: deque = deque()

    def emit(out: bytes) -> None:
        writer.write(out)
        if sink is not None:
            sink(out)

    def drain(keep: int) -> None:
        nonlocal written
        while len(queue) > keep:
            work, job, lessons = queue.popleft()
            for kind, name in lessons:
                engine.learn_name(name, kind)
            if isinstance(work, list):
                _check_length(max((len(token) for token in work[1::2]), default=0), limit, source)
                out = engine.finish_tokens(work)
            else:
                enc = job.result()
                _check_length(enc.longest, limit, source)
                out = engine.finish(work, enc)
            if out:  # written (and passed to the sink) on the output thread, in order, while work goes on
                written += len(out)
                emitted.append(output.submit(emit, out))
                while len(emitted) > 2:
                    emitted.popleft().result()

    # workers <= 1: encode in this thread (beside the leak scan's helpers both cores are busy already, and
    # worker threads only add the page faults of their own heap arenas)
    encoder = thread_pool(workers) if workers > 1 else SerialExecutor()
    with raw, reader, writer, encoder as pool, thread_pool(1) as output:
        carry = b""
        tail = b""
        while True:
            block = reader.read(BLOCK)
            read += len(block)
            final = not block
            tail = (tail + block)[-TAIL_BYTES:] if block else tail
            if final:
                check_nothing_after_json(tail, source)
                reader.raw.finish()  # a file that ends in '}' or ']' with a container or string still open
            work, carry, lessons = engine.prepare(carry + block, final)
            _check_length(len(carry) - BLOCK, limit, source)  # a block that cannot be cut holds a long string
            job = None if isinstance(work, list) else pool.submit(encode, work)
            queue.append((work, job, lessons))
            drain(workers)
            advance(len(block))
            if final:
                break
        drain(0)
        while emitted:
            emitted.popleft().result()
    return read, written


_JSON_PUNCT = b'0123456789.,:{}[]+-eE "\n\r\t'
_JSON_LITERALS = re.compile(rb"true|false|null|NaN|Infinity")


def scan_chrome(
    path: Path, scanner, block_size: int | None = None, place: str | None = None, workers: int = 2
) -> None:
    """Leak-scan a Chrome trace: every distinct JSON string (keys and values) is checked once, and text
    outside strings is checked for anything that is not a number, punctuation or a JSON literal."""
    check_strings(trace_strings(path, block_size, workers), scanner, set(), place or path.name)


def trace_strings(path: Path, block_size: int | None = None, workers: int = 2) -> set[bytes]:
    """Every distinct string of a Chrome trace file (and any text outside strings that is not JSON
    syntax), as raw bytes. Gzip bombs and endless strings end in LimitExceeded; nothing here recurses."""
    found: set[bytes] = set()
    with open_binary(path) as reader:
        for strings in map_blocks(
            reader, block_strings, block_size or SCAN_BLOCK, cut_opening_quote, path, workers
        ):
            found |= strings
    return found


def cut_opening_quote(data: bytes) -> int:
    """Where the scan cuts its blocks: before the last opening quote (exact with escapes), or -1."""
    return last_opening_quote(data)


#: Put in a block's strings (:func:`block_strings`) when text outside its strings is not JSON syntax (a JSON
#: string's raw bytes never hold a NUL: it must be escaped), so the output's scan also says the output would
#: not be valid JSON: the redaction copies that text as it is, so its input was damaged.
NOT_JSON = b"\x00"


def block_strings(data: bytes) -> set[bytes]:
    """The distinct strings of a block, plus any text outside strings that is not plain JSON syntax (and then
    :data:`NOT_JSON`)."""
    if has_escaped_quote(data):
        strings = {m[1:-1] for m in _STRING_TOKEN.findall(data)}
        outside = _STRING_TOKEN.sub(b" ", data)
        strings.update(re.findall(rb"[A-Za-z_][^\s,:{}\[\]]*", outside))
        if _JSON_LITERALS.sub(b"", outside.translate(None, _JSON_PUNCT)):
            strings.add(NOT_JSON)
    else:
        starts, ends = quote_spans(np.frombuffer(data, dtype=np.uint8))
        pieces = (
            alternating_pieces(pa.py_buffer(data), len(data), starts, ends)
            if len(starts)
            else pa.array([data], pa.large_binary())
        )
        n = len(pieces)
        strings = set(pc.unique(pieces.take(pa.array(np.arange(1, n, 2, dtype=np.int64)))).to_pylist())
        outside = pieces.take(pa.array(np.arange(0, n, 2, dtype=np.int64)))
        offsets = np.frombuffer(outside.buffers()[1], dtype=np.int64)
        text = outside.buffers()[2][
            int(offsets[outside.offset]) : int(offsets[outside.offset + len(outside)])
        ]
        rest = text.to_pybytes().translate(None, _JSON_PUNCT)
        if _JSON_LITERALS.sub(b"", rest):
            for piece in outside.to_pylist():
                if _JSON_LITERALS.sub(b"", piece.translate(None, _JSON_PUNCT)):
                    strings.add(piece)
                    strings.add(NOT_JSON)
    return strings


def check_strings(strings: set[bytes], scanner, seen: set[bytes], place: str) -> None:
    """Check each distinct raw string (bytes between quotes, or text outside strings) not yet in ``seen``."""
    for piece in strings - seen:
        seen.add(piece)
        if not piece or piece == NOT_JSON:
            continue
        text = piece.decode("utf-8", "replace")
        if b"\\" in piece:
            with contextlib.suppress(orjson.JSONDecodeError):
                text = orjson.loads(b'"' + piece + b'"')
        scanner.check(text, place)


def locate_in_trace(path: Path, hits: dict[str, str], result, limit: int = 50) -> None:
    """Find the JSON path (``traceEvents[12].args.kernel``) of each leaking string of a trace.

    Runs only after a failed scan: a streaming parse (ijson) tracks the path of every key and
    string; non-public keys in a path are written ``<key>`` so the report holds no value.
    """
    import ijson

    from .scan import safe_key

    if not hits:
        return
    stack: list = []  # per open container: [is_array, index or key]
    found = 0
    opener = gzip.open if is_gzip(path) else open

    def where(last: str | None = None) -> str:
        parts = []
        for is_array, label in stack:
            if is_array:
                parts.append(f"[{label}]")
            elif label is not None:
                parts.append(
                    ("." if parts else "") + (label if safe_key(label) and label not in hits else "<key>")
                )
        text = "".join(parts)
        return text + (("." if text else "") + last if last else "")

    try:
        with opener(path, "rb") as handle:
            for _, event, value in ijson.parse(handle):
                if event in ("start_map", "start_array"):
                    _advance(stack)
                    stack.append([event == "start_array", -1 if event == "start_array" else None])
                    continue
                if event in ("end_map", "end_array"):
                    stack.pop()
                    continue
                if event == "map_key":
                    stack[-1][1] = value
                    if value in hits:
                        result.locate(hits[value], _key_place(stack, where))
                        found += 1
                    continue
                _advance(stack)
                if event == "string" and value in hits:
                    result.locate(hits[value], where())
                    found += 1
                if found >= limit:
                    return
    except (ijson.JSONError, ValueError, OSError, EOFError):
        return


def _advance(stack: list) -> None:
    if stack and stack[-1][0]:
        stack[-1][1] += 1


def _key_place(stack: list, where) -> str:
    label = stack[-1][1]
    stack[-1][1] = None
    try:
        return where("<key>")
    finally:
        stack[-1][1] = label
