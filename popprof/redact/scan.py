"""The leak scan: prove that no original sensitive token and no sensitive pattern remains in an output.

Two checks run over every string of the output (every Parquet value read back
with pyarrow, including the Parquet schema metadata; every JSON key and string;
the manifest; every line of a text summary):

1. **tokens** – every original the redaction replaced (identifiers and free-text
   matches, at least :data:`MIN_TOKEN` characters, public vocabulary excluded)
   must not occur anywhere, not even inside a longer string. One compiled
   trie-shaped regular expression finds any of tens of thousands of tokens in
   one pass per string; distinct strings are checked once.
2. **patterns** – the free-text detectors of :mod:`.scrub` (paths, usernames,
   hosts, emails, IPs, URLs with credentials, secrets, environment values) run
   again on the output whatever the policy switched off, so disabling a
   scrubber makes the scan fail.

A failed scan names the leaked kinds and where (file, table, column), never the value.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .allowlist import Allowlist
from .scrub import PREFIXES, PSEUDONYM_RE, detect

MIN_TOKEN = 4
#: JSON keys whose values are content hashes kept on purpose (not secrets).
HASH_KEYS = frozenset({"sha256", "sha1", "md5", "hash", "digest"})
_NUMERIC = re.compile(r"[\d\s.,:;+\-eE%()x/]*")
_SHORT_HEX = re.compile(r"[0-9a-f]{1,11}")


@dataclass
class ScanResult:
    """Outcome of a leak scan: ``passed`` and, when not, leaked kinds with counts and places (no values)."""

    passed: bool = True
    tokens: int = 0
    strings_checked: int = 0
    leaks: Counter = field(default_factory=Counter)
    where: dict[str, set] = field(default_factory=dict)

    def add(self, kind: str, place: str) -> None:
        self.passed = False
        self.leaks[kind] += 1
        self.where.setdefault(kind, set()).add(place)

    def summary(self) -> str:
        """One line: which kinds leaked where (never the values)."""
        if self.passed:
            return f"leak scan passed ({self.strings_checked:,} distinct strings, {self.tokens:,} tokens)"
        parts = [f"{kind} x{n} in {', '.join(sorted(self.where[kind])[:4])}" for kind, n in self.leaks.most_common()]
        return "leak scan FAILED: sensitive " + "; ".join(parts)

    def to_dict(self) -> dict:
        return {"passed": self.passed, "tokens": self.tokens, "strings_checked": self.strings_checked,
                "leaked_kinds": dict(self.leaks), "where": {k: sorted(v) for k, v in self.where.items()}}


def usable_tokens(originals: dict[str, str], allowlist: Allowlist | None = None,
                  keep: Callable[[str], bool] | None = None) -> dict[str, str]:
    """The originals worth scanning for: long enough, not public, not numbers, not pseudonym-like."""
    allowlist = allowlist or Allowlist()
    prefixes = [p + "_" for p in set(PREFIXES.values())]
    out: dict[str, str] = {}
    for token, kind in originals.items():
        token = token.strip()
        if len(token) < MIN_TOKEN or token in allowlist or (keep and keep(token)):
            continue
        if _NUMERIC.fullmatch(token) or _SHORT_HEX.fullmatch(token) or PSEUDONYM_RE.fullmatch(token):
            continue
        if any(token in p for p in prefixes):
            continue
        out.setdefault(token, kind)
    return out


class TokenMatcher:
    """Finds any of many literal tokens (each at least :data:`MIN_TOKEN` characters) inside a string.

    Tokens are indexed by their first :data:`MIN_TOKEN` characters; a string's own
    ``MIN_TOKEN``-grams are intersected with that index (a C-level set operation) and only
    the few candidates are verified, so tens of thousands of tokens cost no more per string
    than a handful, and building the index takes milliseconds.
    """

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens
        self._index: dict[str, list[str]] = {}
        for token in tokens:
            self._index.setdefault(token[:MIN_TOKEN], []).append(token)
        self._keys = self._index.keys()

    def find(self, text: str) -> str | None:
        """The kind of a token found in ``text``, or None."""
        if not self.tokens or len(text) < MIN_TOKEN:
            return None
        kind = self.tokens.get(text)
        if kind is not None:
            return kind
        grams = {text[i:i + MIN_TOKEN] for i in range(len(text) - MIN_TOKEN + 1)}
        for gram in self._keys & grams:
            for token in self._index[gram]:
                if token in text:
                    return self.tokens[token]
        return None


class Scanner:
    """Checks strings for tokens and sensitive patterns, once per distinct string."""

    def __init__(self, originals: dict[str, str], allowlist: Allowlist | None = None,
                 keep: Callable[[str], bool] | None = None) -> None:
        self.allowlist = allowlist or Allowlist()
        self.keep = keep or (lambda s: False)
        self.matcher = TokenMatcher(usable_tokens(originals, self.allowlist, self.keep))
        self.result = ScanResult(tokens=len(self.matcher.tokens))
        self._seen: set[str] = set()

    def check(self, value: str, place: str, key: str | None = None) -> None:
        """Check one string (and, when it is JSON, every key and string inside it)."""
        if not value or (value, key) in self._seen or PSEUDONYM_RE.fullmatch(value):
            return
        self._seen.add((value, key))  # type: ignore[arg-type]
        self.result.strings_checked += 1
        kind = self.matcher.find(value)
        if kind is not None:
            self.result.add(kind, place)
        stripped = value.strip()
        if stripped[:1] in "{[" and stripped[-1:] in "}]":
            try:
                parsed = json.loads(stripped)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict | list):
                # each decoded key and string gets both checks again: JSON escapes (\u00fc, \\, \")
                # hide a token from the raw match, and a string may itself hold JSON
                for k, v in _json_strings(parsed):
                    self.check(v, place, k)
                return
        self._patterns(value, place, key)

    def _patterns(self, value: str, place: str, key: str | None) -> None:
        # public vocabulary is not exempt as a whole: a sensitive span inside it still counts
        if not value or self.keep(value):
            return
        if key is not None and key.lower() in HASH_KEYS:
            return
        for kind, span in detect(value):
            if not self.keep(span) and span not in self.allowlist:
                self.result.add(kind, place)

    def check_json(self, obj: object, place: str) -> None:
        """Check every key and string of a parsed JSON value."""
        for key, value in _json_strings(obj):
            if key is not None:
                self.check(key, place)
            self.check(value, place, key)


def _json_strings(obj: object, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield None, str(k)
            yield from _json_strings(v, str(k))
    elif isinstance(obj, list):
        for v in obj:
            yield from _json_strings(v, key)
    elif isinstance(obj, str):
        yield key, obj


def scan_bundle(path: Path, scanner: Scanner) -> ScanResult:
    """Scan every file under ``path`` (a bundle, or a directory of bundles): the manifests, every
    Parquet value and schema metadata, any other file line by line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path).as_posix()
        for part in file.relative_to(path).parts:
            scanner.check(part, rel)
        if file.suffix == ".parquet":
            schema = pq.read_schema(file)
            for k, v in (schema.metadata or {}).items():
                scanner.check(k.decode("utf-8", "replace"), f"{rel}:schema")
                scanner.check(v.decode("utf-8", "replace"), f"{rel}:schema")
            for schema_field in schema:
                scanner.check(schema_field.name, f"{rel}:{schema_field.name}")
                for k, v in (schema_field.metadata or {}).items():  # per-column key-value metadata
                    scanner.check(k.decode("utf-8", "replace"), f"{rel}:{schema_field.name}:schema")
                    scanner.check(v.decode("utf-8", "replace"), f"{rel}:{schema_field.name}:schema")
            # numbers cannot hold a token: read back only the columns that hold text
            textual = [f.name for f in schema if _is_textual(f.type)]
            table = pq.read_table(file, columns=textual)
            for name in table.column_names:
                scanner.check(name, f"{rel}:{name}")
                column = table.column(name)
                typ = column.type
                if pa.types.is_dictionary(typ):
                    column = column.combine_chunks().dictionary if column.num_chunks else pa.array([], pa.string())
                    typ = column.type
                if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
                    for value in pc.unique(column).to_pylist():
                        if value is not None:
                            scanner.check(value, f"{rel}:{name}")
                elif pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
                    for value in pc.unique(column).to_pylist():
                        if value is not None:
                            scanner.check(value.decode("utf-8", "replace"), f"{rel}:{name}")
                else:  # nested values: every string inside
                    for value in column.to_pylist():
                        scanner.check(json.dumps(value, default=str, ensure_ascii=False), f"{rel}:{name}")
        elif file.suffix == ".json":
            text = file.read_text("utf-8", "replace")
            try:
                doc = json.loads(text)
            except ValueError:
                doc = None
            if doc is not None:
                if file.name == "manifest.json" and isinstance(doc, dict) and isinstance(doc.get("redacted"), dict):
                    policy = dict(doc["redacted"].get("policy") or {})
                    policy.pop("keep", None)  # the user's own patterns, recorded on purpose
                    policy.pop("drop", None)
                    doc = {**doc, "redacted": {**doc["redacted"], "policy": policy}}
                scanner.check_json(doc, rel)
            else:
                for line in text.splitlines():
                    scanner.check(line, rel)
        else:
            for line in file.read_text("utf-8", "replace").splitlines():
                scanner.check(line, rel)
    return scanner.result


def _is_textual(typ) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_binary(typ)
            or pa.types.is_large_binary(typ) or pa.types.is_string_view(typ) or pa.types.is_nested(typ))


def scan_text_file(path: Path, scanner: Scanner) -> ScanResult:
    """Scan every line of a text file."""
    from ..readers import open_binary

    with open_binary(path) as handle:
        for number, line in enumerate(handle.read().decode("utf-8", "replace").splitlines(), 1):
            scanner.check(line, f"{path.name}:{(number // 100) * 100}+")
    return scanner.result
