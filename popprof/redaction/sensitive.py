"""What is sensitive in an ORIGINAL, derived from the original alone (the leak scan's half that never
asks the redactor what it did).

:class:`SensitiveSet` takes every string of the original (keys, values, list items, JSON held in
strings, table values, metadata, text lines) and keeps, for each one that is not public
vocabulary to the scan (:class:`.scan_vocabulary.ScanVocabulary`, never the redactor's allowlist) nor
kept by the policy's ``keep`` patterns:

- the whole string, each non-public chunk of it and each match of the scan's own detector in it
  (:mod:`.leakshapes`: paths, users, hosts, e-mails, IPs, URLs with credentials, secrets): looked
  for as substrings of the output when at least :data:`MIN_SUBSTRING` characters long;
- each of its words (:func:`.tokens.words`, at least :data:`.tokens.MIN_WORD` characters) that is
  not a word of a public string of the same original nor public itself: looked for as a whole
  word of every output string.

Readers for each input kind live here too (:func:`derive`): they read the original again, on
their own, and feed every string they find.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..io.jsonbytes import (
    SCAN_BLOCK,
    STRING_BODY,
    alternating_pieces,
    last_opening_quote,
    map_blocks,
    quote_spans,
    solid_after,
)
from ..readers.bundle import bundles_in, corrupt_parquet, manifest_path, open_member, read_manifest
from .keynames import ASSIGNED_SECRET, key_kind, raw_key_names_a_secret
from .leakshapes import PSEUDONYM, find
from .scan_vocabulary import ScanVocabulary
from .tokens import MIN_WORD, chunk_strings, has_space, json_in_string, words

MIN_SUBSTRING = 8
#: Keys whose values are content hashes, kept on purpose (not secrets).
HASH_KEYS = frozenset({"sha256", "sha1", "md5", "hash", "digest", "key_fingerprint"})
#: What a content hash or a key fingerprint looks like: only such a value under a hash key is exempt
#: (a ``sha256`` field holding anything else is checked like any other string).
_DIGEST = re.compile(r"[0-9a-f]{32}|[0-9a-f]{40}|[0-9a-f]{64}|hmac-sha256:[0-9a-f]{12}|scrypt:[0-9a-f]{24}")


def is_digest(key: str | None, value: str) -> bool:
    """A content hash (or a key fingerprint) under a hash key: kept on purpose, not a secret."""
    return key is not None and key.lower() in HASH_KEYS and _DIGEST.fullmatch(value) is not None


def secret_number(item: object, key: str | None) -> bool:
    """A JSON number (not a boolean) under a secret key (``"password": 55512345``): a secret all the same."""
    return (
        isinstance(item, int | float)
        and not isinstance(item, bool)
        and key is not None
        and key_kind(key) == "secret"
    )


_NUMERIC = re.compile(r"[\d\s.,:;+\-eE%()x/]*")
_HEXISH = re.compile(r"[0-9a-fA-F]{1,11}")
_HEX_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+")


def numeric_looking(text: str) -> bool:
    """Digits and number punctuation only (a number, a date, a version) or a ``0x`` hex number: text that the
    public vocabulary accepts by its shape, so a secret of that shape is looked for as a whole string."""
    stripped = text.strip()
    return bool(stripped) and (
        _NUMERIC.fullmatch(stripped) is not None or _HEX_NUMBER.fullmatch(stripped) is not None
    )


class SensitiveSet:
    """Sensitive strings and words of one original (see the module docstring)."""

    def __init__(self, keep: Callable[[str], bool] | None = None) -> None:
        self.vocabulary = ScanVocabulary()
        self.keep = keep or (lambda s: False)
        self.strings: dict[str, str] = {}
        self.wholes: dict[str, str] = {}
        self.words: dict[str, str] = {}
        self.exempt: set[str] = set()
        self._seen: set[tuple[str, str | None]] = set()

    def public(self, value: str) -> bool:
        """Public vocabulary, kept on purpose by the policy, or a pseudonym."""
        return value in self.vocabulary or self.keep(value) or PSEUDONYM.fullmatch(value) is not None

    def add(self, value: str, kind: str = "identifier", key: str | None = None) -> None:
        """Take one string of the original; ``key`` is the JSON key (or column) it sits under."""
        if not isinstance(value, str) or not value:
            return
        item = (value, key)
        if is_digest(key, value):
            return  # content hashes (sha256 of a source file) are kept on purpose
        if item in self._seen:
            return
        self._seen.add(item)
        if key is not None and key_kind(key) == "secret" and not self.keep(value):
            stripped = value.strip()
            if len(stripped) >= 6 and not PSEUDONYM.fullmatch(stripped):
                self.strings.setdefault(stripped, "secret")  # numeric-looking secrets too
        for m in ASSIGNED_SECRET.finditer(value) if ("=" in value or ":" in value) else ():  # needs = or :
            if len(m.group(1)) >= 6 and not PSEUDONYM.fullmatch(m.group(1)) and not self.keep(m.group(1)):
                self.strings.setdefault(m.group(1), "secret")
        if self.public(value):
            self.exempt.update(words(value))
            return
        parsed = json_in_string(value)
        if parsed is not None:
            self.add_json(parsed, key)
            return
        kind = key_kind(key) or kind if key else kind
        self._token(value, kind)
        stripped = value.strip()
        if len(stripped) >= MIN_SUBSTRING and not _NUMERIC.fullmatch(stripped):
            self.wholes.setdefault(stripped, kind)
        if not has_space(value):
            return  # one word: the whole string and its words are the tokens (detector spans add nothing)
        for found, span in find(value):
            self._token(span, found)
        for chunk in chunk_strings(value):
            if self.public(chunk):
                self.exempt.update(words(chunk))
            else:
                self._token(chunk, kind)

    def add_json(self, obj: object, key: str | None = None) -> None:
        """Every key and string of a decoded JSON value (iterative: any depth)."""
        stack: list[tuple[object, str | None]] = [(obj, key)]
        while stack:
            item, under = stack.pop()
            if isinstance(item, dict):
                for k, v in item.items():
                    self.add(str(k), "key")
                    stack.append((v, str(k)))
            elif isinstance(item, list):
                stack.extend((v, under) for v in item)
            elif isinstance(item, str):
                self.add(item, "identifier", under)
            elif secret_number(item, under):  # a numeric secret (``"password": 55512345``)
                self.add(str(item), "identifier", under)

    def _token(self, token: str, kind: str) -> None:
        token = token.strip()
        if not token or self.public(token):
            return
        if len(token) >= MIN_SUBSTRING and not _NUMERIC.fullmatch(token):
            self.strings.setdefault(token, kind)
        for word in words(token):
            self.words.setdefault(word, kind)

    def substring_tokens(self) -> dict[str, str]:
        """Tokens looked for anywhere inside output strings."""
        return dict(self.strings)

    def whole_tokens(self) -> dict[str, str]:
        """Whole non-public strings of the original (looked for inside public names of the output too)."""
        return dict(self.wholes)

    def word_tokens(self) -> dict[str, str]:
        """Words looked for as whole words of output strings."""
        return {
            w: k
            for w, k in self.words.items()
            if len(w) >= MIN_WORD
            and w not in self.exempt
            and not w.isdigit()
            and not _HEXISH.fullmatch(w)
            and not self.public(w)
        }


# -- reading an original on its own -------------------------------------------------------------
_STRING_RE = re.compile(rb'"(' + STRING_BODY + rb')"(\s*:)?', re.S)


def trace_strings(
    path: Path, block_size: int = SCAN_BLOCK
) -> Iterator[tuple[set[bytes], set[bytes], set[tuple[bytes, bytes]]]]:
    """The distinct (keys, strings, secret members) of a JSON file, block by block, as raw bytes between
    quotes (the strings may include the keys; a secret member is the ``(key, value)`` of a member whose key
    names a secret, :func:`_secret_members`). Gzip bombs end in LimitExceeded, and so does an endless
    string."""
    from ..io.files import open_binary

    with open_binary(path) as reader:
        # in the calling thread: the derivation runs on a helper process of its own beside the redaction,
        # and worker threads there cost more CPU (page faults of their arenas) than they save on 2 cores
        yield from map_blocks(reader, _block_strings, block_size, _last_safe_cut, path, workers=1)


def _last_safe_cut(data: bytes) -> int:
    """A cut point outside any string: just before the last opening quote (exact with escapes)."""
    return last_opening_quote(data)


#: What follows a member's key: its value, a string body (group 1) or a bare number or literal (group 2).
_MEMBER_VALUE = rb'\s*:\s*(?:"(' + STRING_BODY + rb')"|(-?[0-9][0-9A-Za-z.+:-]*))'


def _secret_members(data: bytes, keys: set[bytes]) -> set[tuple[bytes, bytes]]:
    """``(key, value)`` of each member of the block whose key names a secret (``"password": "55512345"``,
    ``"api_key": 1234``), so its value is derived under its key as a table's column value is; nothing to
    search for in the usual block, whose keys name no secret. (A member cut between two blocks, key in one
    and value in the next, is not paired.)"""
    secret = sorted(k for k in keys if raw_key_names_a_secret(k))
    if not secret:
        return set()
    pattern = re.compile(rb'"(' + rb"|".join(re.escape(k) for k in secret) + rb')"' + _MEMBER_VALUE, re.S)
    return {(m[1], m[2] if m[2] is not None else m[3]) for m in pattern.finditer(data)}


def _block_strings(data: bytes) -> tuple[set[bytes], set[bytes], set[tuple[bytes, bytes]]]:
    if b"\\" in data:
        keys: set[bytes] = set()
        values: set[bytes] = set()
        for m in _STRING_RE.finditer(data):
            (keys if m.group(2) else values).add(m.group(1))
        return keys, values, _secret_members(data, keys)
    arr = np.frombuffer(data, dtype=np.uint8)
    starts, ends = quote_spans(arr)
    if not len(starts):
        return set(), set(), set()
    is_key = solid_after(arr, ends + 1) == 0x3A
    pieces = alternating_pieces(pa.py_buffer(data), len(data), starts, ends)
    inside = pieces.take(pa.array(np.arange(1, len(pieces), 2, dtype=np.int64)))
    keys = set(pc.unique(inside.filter(pa.array(is_key))).to_pylist())
    # every distinct string, keys included (one pass, no second filter): derive_trace feeds the keys first,
    # and a string already fed as a key is not fed again
    return keys, set(pc.unique(inside).to_pylist()), _secret_members(data, keys)


def _decode(raw: bytes) -> str:
    if b"\\" not in raw:
        return raw.decode("utf-8", "replace")
    try:
        return json.loads(b'"' + raw + b'"')
    except ValueError:
        return raw.decode("utf-8", "replace")


def derive_trace(path: Path, sensitive: SensitiveSet) -> SensitiveSet:
    """Feed every key and string of a Chrome trace (``.json`` / ``.json.gz``)."""
    seen_keys: set[bytes] = set()
    seen_values: set[bytes] = set()
    for keys, values, members in trace_strings(path):
        for raw in keys - seen_keys:
            sensitive.add(_decode(raw), "key")
        for raw in values - seen_values:
            sensitive.add(_decode(raw), "identifier")
        for key, value in members:  # under its key: a numeric-looking secret is a secret
            sensitive.add(_decode(value), "identifier", _decode(key))
        seen_keys |= keys
        seen_values |= values
    return sensitive


def derive_text(path: Path, sensitive: SensitiveSet) -> SensitiveSet:
    """Feed every line of a text file."""
    from ..io.files import open_binary

    with open_binary(path) as handle:
        for line in handle.read().decode("utf-8", "replace").splitlines():
            sensitive.add(line.strip(), "text")
    return sensitive


def derive_profiles(source: Path, sensitive: SensitiveSet) -> SensitiveSet:
    """Feed every text value of every table, the metadata and the manifest of a profile source."""
    import pandas as pd

    from ..readers import open_all

    for engine, profile in open_all(source).items():
        sensitive.add(engine, "profile")
        sensitive.add(profile.name, "profile")
        for table, frame in profile.tables.items():
            for column in frame.columns:
                series = frame[column]
                if isinstance(series.dtype, pd.CategoricalDtype):
                    values: Iterable = series.cat.categories.tolist()
                elif series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
                    values = pd.unique(series.dropna())
                else:
                    continue
                for value in values:
                    if isinstance(value, str):
                        sensitive.add(value, "identifier", None if table == "metadata" else column)
                    elif isinstance(value, bytes):
                        sensitive.add(value.decode("utf-8", "replace"), "identifier")
        for key, value in profile.meta.items():
            sensitive.add(str(key), "key")
            if isinstance(value, str):
                sensitive.add(value, "identifier", str(key))
    if source.is_dir() and manifest_path(source).exists():
        sensitive.add_json(read_manifest(source))  # bounded and validated: the bundle reader's own rules
    return sensitive


def derive_bundle_files(source: Path, sensitive: SensitiveSet) -> bool:
    """Feed every text value, the schema metadata and the manifest of a bundle (or a directory of
    bundles) straight from its files (pyarrow; only text columns are read). False when ``source``
    holds no bundle."""
    import pyarrow.parquet as pq

    roots = bundles_in(source)
    if not roots:
        return False
    for root in roots:
        sensitive.add(root.name, "profile")
        # the manifest and every table file as the bundle reader opens them (a manifest within
        # manifest-bytes with its fields checked; regular files inside the bundle, never a symlink out)
        sensitive.add_json(read_manifest(root))
        for file in sorted(root.glob("*.parquet")):
            with open_member(root, file.name, "table file") as handle, corrupt_parquet(file):
                schema = pq.read_schema(handle)
            for k, v in (schema.metadata or {}).items():
                sensitive.add(k.decode("utf-8", "replace"), "key")
                sensitive.add(v.decode("utf-8", "replace"), "identifier")
            textual = []
            for field in schema:
                sensitive.add(field.name, "key")
                for k, v in (field.metadata or {}).items():
                    sensitive.add(k.decode("utf-8", "replace"), "key")
                    sensitive.add(v.decode("utf-8", "replace"), "identifier")
                typ = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
                if (
                    pa.types.is_string(typ)
                    or pa.types.is_large_string(typ)
                    or pa.types.is_binary(typ)
                    or pa.types.is_large_binary(typ)
                    or pa.types.is_string_view(typ)
                    or pa.types.is_nested(typ)
                ):
                    textual.append(field.name)
            with open_member(root, file.name, "table file") as handle, corrupt_parquet(file):
                table = pq.read_table(handle, columns=textual)
            for name in table.column_names:
                column = table.column(name).combine_chunks()
                if pa.types.is_dictionary(column.type):
                    column = column.dictionary
                if pa.types.is_nested(column.type):
                    for value in column.to_pylist():
                        if value is not None:
                            sensitive.add_json(value, name)
                    continue
                for value in pc.unique(column).to_pylist():
                    if isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    if isinstance(value, str):
                        sensitive.add(value, "identifier", None if file.stem == "metadata" else name)
    return True


def derive(source: Path, kind: str, keep: Callable[[str], bool] | None = None) -> SensitiveSet:
    """The sensitive set of an original of ``kind`` (``chrome``, ``text_summary`` or ``bundle``); ``keep``:
    what the policy keeps on purpose."""
    sensitive = SensitiveSet(keep)
    if kind == "chrome":
        return derive_trace(source, sensitive)
    if kind == "text_summary":
        return derive_text(source, sensitive)
    if source.is_dir() and derive_bundle_files(source, sensitive):
        return sensitive
    return derive_profiles(source, sensitive)
