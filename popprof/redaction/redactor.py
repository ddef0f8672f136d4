"""The redaction engine shared by every input kind: identifiers, free text, counts.

A :class:`Redactor` owns the key (through its :class:`~.pseudonym.Pseudonymizer`),
the allowlist, the policy and the free-text :class:`~.scrub.Scrubber`. Input
kinds (bundle, Chrome trace, text summary) call :meth:`identifier` for names
and :meth:`text` / :meth:`json_text` for free text; the redactor remembers every
original it replaced, which is what the leak scan looks for afterwards.
"""

from __future__ import annotations

import re
from collections import Counter

from .allowlist import Allowlist
from .jsontext import Number, Pairs, dumps_exact, loads_exact
from .keynames import ASSIGNED_SECRET, key_kind
from .policy import Policy
from .pseudonym import Pseudonymizer, key_fingerprint
from .scrub import FAMILIES, PSEUDONYM_RE, Scrubber, detect
from .tokens import chunks, has_space, json_in_string

_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d[\d,_]*)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


class Redactor:
    """Pseudonymises identifiers and scrubs free text under one key and one policy."""

    def __init__(self, key: bytes, policy: Policy | None = None, allowlist: Allowlist | None = None) -> None:
        self.policy = policy or Policy()
        self.allowlist = allowlist or Allowlist()
        self.pseudonyms = Pseudonymizer(key)
        self.key_fingerprint = key_fingerprint(bytes(key))
        self.scrubber = Scrubber(self.pseudonyms, self.policy.families, keep=self.policy.keeps)
        self.occurrences: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()
        self.dropped: list[str] = []
        self._ident_cache: dict[tuple[str, str], str] = {}
        self._public: dict[str, bool] = {}

    def is_public(self, value: str) -> bool:
        """Allowlisted vocabulary, a value the policy keeps, a plain number, or already a pseudonym."""
        hit = self._public.get(value)
        if hit is None:
            hit = (
                value in self.allowlist
                or self.policy.keeps(value)
                or bool(_PLAIN_NUMBER.fullmatch(value))
                or bool(PSEUDONYM_RE.fullmatch(value))
            )
            if len(self._public) < 1_000_000:
                self._public[value] = hit
        return hit

    def identifier(self, kind: str, value: str, count: int = 1) -> str:
        """The redacted form of an identifier of ``kind`` (``count`` = rows that carry it)."""
        if not isinstance(value, str) or not value:
            return value
        item = (kind, value)
        out = self._ident_cache.get(item)
        if out is None:
            if self.is_public(value):
                out = value
            elif not self.policy.identifiers:
                out = self.free_text(value) if has_space(value) else self.scrubber.scrub_text(value)
            else:
                out = self.pseudonyms(kind, value)
            self._ident_cache[item] = out
        if out == value:
            self.kept[kind] += count
        else:
            self.occurrences[kind] += count
        return out

    # -- one decision for every string, whatever its place -------------------------------------
    def decide(self, value: str, kind: str = "arg", key: str | None = None) -> str:
        """The redacted form of any string: kept when public, else replaced.

        ``kind`` names the pseudonym of a non-public single word (``evt`` for an event name,
        ``key`` for a JSON key, ...); ``key`` is the JSON key the value sits under (a sensitive
        key such as ``hostname`` replaces the value as a whole). JSON held in a string is
        redacted structurally (text when deeper than :data:`.tokens.MAX_JSON_DEPTH`); a string
        with white space is free text, redacted chunk by chunk; any other non-public string is
        one pseudonym. What decides is what the string is, never where it sits: a public
        string is kept everywhere, a non-public one replaced everywhere.
        """
        if not isinstance(value, str) or not value:
            return value
        if self._secret_value(value, key):
            return self.scrubber.whole("secret", value)  # all digits, 0x..., a date: a secret all the same
        if self.is_public(value):
            self.kept[kind] += 1
            return value
        parsed = json_in_string(value)
        if parsed is not None:  # decoded again keeping numbers' text and repeated keys: only strings change
            return dumps_exact(self.decide_json(loads_exact(value), key))
        kind_of_key = key_kind(key) if key else None
        if kind_of_key is not None:
            if kind_of_key not in self.scrubber.kinds:
                return value  # the policy switched this family off: kept (the leak scan then fails)
            self.learn(value, key)
            return self.scrubber.whole(kind_of_key, value)
        if has_space(value):
            return self.free_text(value)
        whole = self._whole_detection(value)
        if whole is not None:
            return value if whole not in self.scrubber.kinds else self.scrubber.whole(whole, value)
        return self.identifier(kind, value)

    def decide_json(self, obj: object, key: str | None = None) -> object:
        """A redacted copy of a decoded JSON value: keys, strings and list items (iterative)."""
        root: list = [None]
        stack: list[tuple[object, object, object, str | None]] = [(obj, root, 0, key)]
        while stack:
            item, parent, slot, under = stack.pop()
            if isinstance(item, Number) or (isinstance(item, int | float) and not isinstance(item, bool)):
                # a number under a secret key (``"password": 55512345``) is a secret all the same
                text = str.__str__(item) if isinstance(item, Number) else str(item)
                secret = under is not None and self._secret_value(text, under)
                parent[slot] = self.scrubber.whole("secret", text) if secret else item  # type: ignore[index]
            elif isinstance(item, Pairs):
                pairs = Pairs([None] * len(item))
                parent[slot] = pairs  # type: ignore[index]
                for i, (k, v) in enumerate(item):
                    cell: list = [self.decide(str(k), "key"), None]
                    pairs[i] = cell
                    stack.append((v, cell, 1, str(k)))
            elif isinstance(item, dict):
                out: dict = {}
                parent[slot] = out  # type: ignore[index]
                for k, v in item.items():
                    new_key = self.decide(str(k), "key")
                    out[new_key] = None
                    stack.append((v, out, new_key, str(k)))
            elif isinstance(item, list):
                seq: list = [None] * len(item)
                parent[slot] = seq  # type: ignore[index]
                stack.extend((v, seq, i, under) for i, v in enumerate(item))
            elif isinstance(item, str):
                parent[slot] = self.decide(item, "arg", under)  # type: ignore[index]
            else:
                parent[slot] = item  # type: ignore[index]
        return root[0]

    def free_text(self, value: str) -> str:
        """Free text: public chunks stay readable; each run of other chunks has its detector spans
        (paths, hosts, e-mails, ...) replaced by pseudonyms of their kind, then every chunk left
        that is not public becomes a pseudonym."""
        if "secret" in self.scrubber.kinds and ASSIGNED_SECRET.search(value):
            value = ASSIGNED_SECRET.sub(self._assigned_secret, value)
        spans = chunks(value)
        public = [self.is_public(value[s:e]) for s, e in spans]
        parts: list[str] = []
        pos = i = 0
        while i < len(spans):
            if public[i]:
                parts.append(value[pos : spans[i][1]])
                pos = spans[i][1]
                i += 1
                continue
            j = i
            while j < len(spans) and not public[j]:
                j += 1
            parts.append(self._scrub_region(value[pos : spans[j - 1][1]]))
            pos, i = spans[j - 1][1], j
        parts.append(value[pos:])
        return "".join(parts)

    def _secret_value(self, value: str, key: str | None) -> bool:
        """A value under a secret key (``password``, ``api_key``...) that is not a pseudonym or kept."""
        return (
            key is not None
            and key_kind(key) == "secret"
            and "secret" in self.scrubber.kinds
            and not (PSEUDONYM_RE.fullmatch(value) or self.policy.keeps(value))
        )

    def _assigned_secret(self, m: re.Match[str]) -> str:
        secret = m.group(1)
        if PSEUDONYM_RE.fullmatch(secret) or self.policy.keeps(secret):
            return m.group(0)
        start = m.start(1) - m.start()
        return m.group(0)[:start] + self.scrubber.whole("secret", secret)

    def _scrub_region(self, region: str) -> str:
        protected = self._disabled_spans(region)
        scrubbed = self.scrubber.scrub_text(region) if not protected else region
        parts: list[str] = []
        pos = 0
        for start, end in chunks(scrubbed):
            chunk = scrubbed[start:end]
            parts.append(scrubbed[pos:start])
            if self.is_public(chunk) or any(chunk in span for span in protected):
                parts.append(chunk)
            else:
                parts.append(self.identifier("arg", chunk))
            pos = end
        parts.append(scrubbed[pos:])
        return "".join(parts)

    def _disabled_spans(self, value: str) -> list[str]:
        disabled = [f for f in FAMILIES if f not in self.policy.families]
        return [span for _, span in detect(value, disabled)] if disabled else []

    def _whole_detection(self, value: str) -> str | None:
        """The detector kind when one detector match covers the whole value (e.g. a path)."""
        for kind, span in detect(value):
            if span == value or (kind == "path" and span.rstrip("/\\") == value.rstrip("/\\")):
                return kind
        return None

    def text(self, value: str) -> str:
        """Free text (kept when public, else redacted chunk by chunk); same as :meth:`decide`."""
        return self.decide(value, "arg")

    def value(self, value: str, key: str | None = None) -> str:
        """A value that may be JSON, under an optional key that may mark it sensitive."""
        return self.decide(value, "arg", key)

    def learn(self, value: str, key: str | None = None) -> None:
        """Learn usernames and hostnames from a value before scrubbing anything."""
        if not isinstance(value, str) or not value:
            return
        stripped = value.strip()
        if stripped[:1] in "{[":
            import json

            try:
                self.scrubber.learn_json(json.loads(stripped), key)
                return
            except ValueError:
                pass
        self.scrubber.learn_json(value, key)

    def replaced_counts(self) -> dict[str, dict[str, int]]:
        """``{kind: {"distinct": n, "occurrences": m}}`` for everything replaced."""
        occ = Counter(self.occurrences)
        occ.update(self.scrubber.occurrences)
        distinct = self.pseudonyms.counts()
        return {
            kind: {"distinct": distinct.get(kind, 0), "occurrences": occ.get(kind, 0)}
            for kind in sorted(set(distinct) | set(occ))
        }
