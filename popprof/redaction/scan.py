"""The leak scan: prove that nothing sensitive of the ORIGINAL remains in an output, without
trusting the redactor.

What is sensitive comes from the original alone (:mod:`.sensitive`: every string, chunk and
word of the original that is not public vocabulary, plus detector matches). The scan then reads
every string of the output (every Parquet value, schema and key-value metadata, the manifest,
every JSON key, string and list item of a trace, every line of a text) and fails when:

1. **tokens** – a sensitive string or chunk of the original (:data:`.sensitive.MIN_SUBSTRING`
   characters or more) occurs anywhere inside it, or one of its words is a sensitive word;
2. **patterns** – the scan's own detector (:mod:`.leakshapes`: paths, users, hosts, e-mails, IPs,
   URLs with credentials, secrets; not the redactor's :mod:`.scrub`) or detect-secrets
   (:mod:`.secrets_scan`) matches in it, whatever the policy switched off.

Pseudonyms are skipped; public strings (to the scan's own vocabulary, :mod:`.scan_vocabulary`, never
the redactor's allowlist) are checked for patterns and for whole sensitive strings inside them only.
A failed scan names each leak's kind and where it is (a JSON path such as
``traceEvents[12].args.kernel``, ``table.parquet:column[row]``, ``file:line``), never the value.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..readers.bundle import corrupt_parquet, is_manifest
from .leakshapes import PSEUDONYM, find
from .scan_vocabulary import ScanVocabulary
from .secrets_scan import detector
from .sensitive import MIN_SUBSTRING, SensitiveSet, is_digest, numeric_looking, secret_number
from .tokens import MAX_JSON_DEPTH, chunk_strings, json_depth, looks_like_json, words

MIN_TOKEN = 4
#: JSON keys whose values are content hashes kept on purpose (not secrets).
#: Detector kinds that can matter inside a public string (paths and secrets are shapes of public names).
_PUBLIC_KINDS = ("user", "host", "email", "ip", "url")
#: Leaks located precisely (JSON path / row); more are counted by kind only.
MAX_LOCATED = 50


@dataclass
class ScanResult:
    """Outcome of a leak scan: ``passed`` and, when not, leaked kinds with counts and places (no values)."""

    passed: bool = True
    tokens: int = 0
    strings_checked: int = 0
    leaks: Counter = field(default_factory=Counter)
    where: dict[str, set] = field(default_factory=dict)
    locations: list[dict] = field(default_factory=list)

    def add(self, kind: str, place: str) -> None:
        self.passed = False
        self.leaks[kind] += 1
        self.where.setdefault(kind, set()).add(place)

    def locate(self, kind: str, where: str) -> None:
        """Record one precise place of a leak (a JSON path, a row, a line)."""
        entry = {"kind": kind, "where": where}
        if len(self.locations) < MAX_LOCATED and entry not in self.locations:
            self.locations.append(entry)

    def summary(self) -> str:
        """One line: which kinds leaked where (never the values)."""
        if self.passed:
            return f"leak scan passed ({self.strings_checked:,} distinct strings, {self.tokens:,} tokens)"
        if self.locations:
            shown = "; ".join(f"{loc['kind']} at {loc['where']}" for loc in self.locations[:6])
            more = len(self.locations) - 6
            return f"leak scan FAILED ({sum(self.leaks.values())} leaks): sensitive {shown}" + (
                f"; and {more} more located" if more > 0 else ""
            )
        parts = [
            f"{kind} x{n} in {', '.join(sorted(self.where[kind])[:4])}"
            for kind, n in self.leaks.most_common()
        ]
        return "leak scan FAILED: sensitive " + "; ".join(parts)

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "tokens": self.tokens,
            "strings_checked": self.strings_checked,
            "leaked_kinds": dict(self.leaks),
            "where": {k: sorted(v) for k, v in self.where.items()},
            "locations": list(self.locations),
        }


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

    def find(self, text: str, bounded: bool = False) -> str | None:
        """The kind of a token found in ``text``, or None. ``bounded``: only where the token is not
        part of a longer identifier (no letter, digit or ``_`` just before or after it)."""
        if not self.tokens or len(text) < MIN_TOKEN:
            return None
        kind = self.tokens.get(text)
        if kind is not None:
            return kind
        grams = {text[i : i + MIN_TOKEN] for i in range(len(text) - MIN_TOKEN + 1)}
        for gram in self._keys & grams:
            for token in self._index[gram]:
                if token in text and (not bounded or _bounded(text, token)):
                    return self.tokens[token]
        return None


def _bounded(text: str, token: str) -> bool:
    start = text.find(token)
    while start != -1:
        end = start + len(token)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        start = text.find(token, start + 1)
    return False


class Scanner:
    """Checks output strings against the sensitive set of the original, once per distinct string.

    Every leaking string is remembered (in memory only, never reported) with its kind, so the
    caller can find where it sits (:attr:`hits`).
    """

    def __init__(
        self,
        sensitive: SensitiveSet,
        keep: Callable[[str], bool] | None = None,
        second_detector: bool = True,
    ) -> None:
        self.vocabulary = sensitive.vocabulary
        self.keep = keep or sensitive.keep or (lambda s: False)
        self.matcher = TokenMatcher(
            {
                t: k
                for t, k in sensitive.substring_tokens().items()
                if len(t) >= MIN_SUBSTRING and not self.keep(t)
            }
        )
        #: Numeric-looking secrets of the original (values under secret keys, ``password=...``: digits, a date,
        #: ``0x`` hex), looked for as whole output strings although the vocabulary accepts their shape (other
        #: secrets are found by the token matchers; a public word that is also a secret stays public)
        self.secrets = {
            t
            for t, k in sensitive.substring_tokens().items()
            if k == "secret" and numeric_looking(t) and not self.keep(t)
        }
        self.wholes = TokenMatcher({t: k for t, k in sensitive.whole_tokens().items() if not self.keep(t)})
        self.word_tokens = {w: k for w, k in sensitive.word_tokens().items() if not self.keep(w)}
        self._word_keys = self.word_tokens.keys()
        self.result = ScanResult(tokens=len(self.matcher.tokens) + len(self.word_tokens))
        self.hits: dict[str, str] = {}
        self._seen: set = set()
        #: The second, independent detector (detect-secrets) over every output string.
        self.second = detector() if second_detector else None

    def check(self, value: str, place: str, key: str | None = None, top: str | None = None) -> None:
        """Check one string; when it holds JSON, every decoded key and string inside it instead
        (JSON escapes such as ``\\u00fc`` would hide a token from a raw match, and a string may
        itself hold JSON). ``top`` is the outermost string, remembered for locating leaks."""
        if not value or (value, key) in self._seen:
            return
        self._seen.add((value, key))
        self.result.strings_checked += 1
        if PSEUDONYM.fullmatch(value) or self.keep(value) or is_digest(key, value):
            return
        if looks_like_json(value) and value not in self.vocabulary and json_depth(value) <= MAX_JSON_DEPTH:
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                parsed = None
            if isinstance(parsed, dict | list):
                for k, v in _json_strings(parsed):
                    self.check(v, place, k, top or value)
                return
        kind = self._find(value, key)
        if kind is not None:
            self.result.add(kind, place)
            self.hits.setdefault(top or value, kind)

    def _find(self, value: str, key: str | None) -> str | None:
        found = self._first_half(value, key)
        if found is None and self.second is not None:
            secret = self.second.find(value)  # knows nothing of the original or the vocabulary
            if secret is not None:
                return f"secret ({secret}, detect-secrets)"
        return found

    def _first_half(self, value: str, key: str | None) -> str | None:
        if value in self.secrets or value.strip() in self.secrets:
            return "secret"
        if value in self.vocabulary:
            # a public name holds no free part, but a sensitive string of the original may still sit
            # inside it (``at::<a user's name>``); of patterns, only those no public shape can mimic count
            return self.wholes.find(value, bounded=True) or self._patterns(value, key, public=True)
        kind = self.matcher.find(value)
        if kind is None and self._word_keys:
            hit = self._word_keys & set(words(value))
            if hit:
                kind = self.word_tokens[next(iter(hit))]
        if kind is not None:
            return self._patterns(value, key) or kind  # a detector names the kind better
        return self._patterns(value, key)

    def _patterns(self, value: str, key: str | None, public: bool = False) -> str | None:
        """The kind of a detector match in ``value`` that no public name explains, or None.

        In a public string, path- and token-like spans are parts of its public shape (``/device:GPU:0``,
        ``ConvPartial1x1Out``); in other text, spans inside a public chunk are skipped likewise."""
        if is_digest(key, value):
            return None
        found = find(value, _PUBLIC_KINDS) if public else find(value)
        if not found:
            return None
        # a span is explained only by an exact name of the vocabulary (a path is never public by its words)
        names = self.vocabulary.names
        shields = [c for c in chunk_strings(value) if c in names] if not public else []
        for kind, span in found:
            if self.keep(span) or span in names:
                continue
            if public and kind in ("path", "secret"):
                continue
            if any(span in shield for shield in shields) and kind in ("path", "secret"):
                continue
            return kind
        return None

    def check_json(self, obj: object, place: str) -> None:
        """Check every key and string of a parsed JSON value."""
        for key, value in _json_strings(obj):
            self.check(value, place, key)


def _json_strings(obj: object, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    """``(key, string)`` for every key (key None) and string of a JSON value, iteratively, and the text of
    every number under a secret key (``"password": 55512345``: a numeric secret is a secret all the same)."""
    stack: list[tuple[object, str | None]] = [(obj, key)]
    while stack:
        item, under = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                yield None, str(k)
                stack.append((v, str(k)))
        elif isinstance(item, list):
            stack.extend((v, under) for v in reversed(item))
        elif isinstance(item, str):
            yield under, item
        elif secret_number(item, under):
            yield under, str(item)


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
            with corrupt_parquet(file, "redact the original again"):
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
            with corrupt_parquet(file, "redact the original again"):
                table = pq.read_table(file, columns=textual)
            for name in table.column_names:
                scanner.check(name, f"{rel}:{name}")
                column = table.column(name)
                typ = column.type
                if pa.types.is_dictionary(typ):
                    column = (
                        column.combine_chunks().dictionary if column.num_chunks else pa.array([], pa.string())
                    )
                    typ = column.type
                before = dict(scanner.hits)
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
                if len(scanner.hits) > len(before):
                    _locate_rows(
                        table.column(name),
                        {v: k for v, k in scanner.hits.items() if v not in before},
                        f"{rel}:{name}",
                        scanner.result,
                    )
        elif file.suffix == ".json":
            text = file.read_text("utf-8", "replace")
            try:
                doc = json.loads(text)
            except ValueError:
                doc = None
            if doc is not None:
                if is_manifest(file) and isinstance(doc, dict) and isinstance(doc.get("redacted"), dict):
                    policy = dict(doc["redacted"].get("policy") or {})
                    policy.pop("keep", None)  # the user's own patterns, recorded on purpose
                    policy.pop("drop", None)
                    doc = {**doc, "redacted": {**doc["redacted"], "policy": policy}}
                before = dict(scanner.hits)
                scanner.check_json(doc, rel)
                new_hits = {v: k for v, k in scanner.hits.items() if v not in before}
                for where, value in json_paths(doc, set(new_hits)):
                    scanner.result.locate(new_hits[value], f"{rel}:{where}")
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
    return (
        pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_string_view(typ)
        or pa.types.is_nested(typ)
    )


def scan_text_file(path: Path, scanner: Scanner, name: str | None = None) -> ScanResult:
    """Scan every line of a text file (``name``: how the report names it, default its file name)."""
    name = name or path.name
    from ..io.files import open_binary

    with open_binary(path) as handle:
        for number, line in enumerate(handle.read().decode("utf-8", "replace").splitlines(), 1):
            before = len(scanner.hits)
            scanner.check(line, name)
            if len(scanner.hits) > before or line in scanner.hits:
                scanner.result.locate(scanner.hits[line], f"{name}:line {number}")
    return scanner.result


@functools.cache
def _safe() -> ScanVocabulary:
    return ScanVocabulary()


def safe_key(key: str) -> bool:
    """A key that may be written in a leak report: public vocabulary (to the scan) or a pseudonym."""
    return key in _safe() or PSEUDONYM.fullmatch(key) is not None


def _locate_rows(column, hits: dict[str, str], place: str, result: ScanResult) -> None:
    """The first row of each leaking value of a Parquet column (only run when the scan failed)."""
    values = column.to_pylist()
    for row, value in enumerate(values):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        if not isinstance(text, str):
            text = json.dumps(value, default=str, ensure_ascii=False) if value is not None else None
        if text in hits:
            result.locate(hits.pop(text), f"{place}[row {row}]")
            if not hits:
                return


def json_paths(
    obj: object, targets: set[str], shown: Callable[[str], bool] | None = None
) -> Iterator[tuple[str, str]]:
    """``(path, string)`` for every key or string of a JSON value that is in ``targets``.

    Paths read like ``traceEvents[12].args.kernel``; a key that is itself a leak, or that
    ``shown`` does not accept (a non-public key), is written ``<key>``, so a path never holds
    a sensitive value."""
    if not targets:
        return
    shown = shown or safe_key
    stack: list[tuple[object, str]] = [(obj, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                label = str(k) if k not in targets and shown(str(k)) else "<key>"
                sub = f"{path}.{label}" if path else label
                if k in targets:
                    yield (f"{path}.<key>" if path else "<key>"), k
                stack.append((v, sub))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, str) and item in targets:
            yield path, item
