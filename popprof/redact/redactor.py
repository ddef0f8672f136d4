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
from .policy import Policy
from .pseudonym import Pseudonymizer
from .scrub import PSEUDONYM_RE, Scrubber

_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d[\d,_]*)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


class Redactor:
    """Pseudonymises identifiers and scrubs free text under one key and one policy."""

    def __init__(self, key: bytes, policy: Policy | None = None, allowlist: Allowlist | None = None) -> None:
        self.policy = policy or Policy()
        self.allowlist = allowlist or Allowlist()
        self.pseudonyms = Pseudonymizer(key)
        self.scrubber = Scrubber(self.pseudonyms, self.policy.families, keep=self.policy.keeps)
        self.occurrences: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()
        self.dropped: list[str] = []
        self._ident_cache: dict[tuple[str, str], str] = {}
        self.expected: dict[str, str] = {}
        self._public: dict[str, bool] = {}

    def is_public(self, value: str) -> bool:
        """Allowlisted vocabulary, a value the policy keeps, a plain number, or already a pseudonym."""
        hit = self._public.get(value)
        if hit is None:
            hit = (value in self.allowlist or self.policy.keeps(value) or bool(_PLAIN_NUMBER.fullmatch(value))
                   or bool(PSEUDONYM_RE.fullmatch(value)))
            if len(self._public) < 1_000_000:
                self._public[value] = hit
        return hit

    def expect(self, kind: str, value: str) -> None:
        """Record an identifier found in the input, independently of how it is redacted: the leak scan
        looks for every non-public one, so a redaction bug that keeps a name still fails the scan."""
        if isinstance(value, str) and value and value not in self.expected and not self.is_public(value):
            self.expected[value] = kind

    def sensitive_tokens(self) -> dict[str, str]:
        """Every original the leak scan looks for: replaced values, expected identifiers, learned names."""
        tokens = dict(self.expected)
        tokens.update(self.scrubber.known)
        tokens.update(self.pseudonyms.originals())
        return tokens

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
                out = self.scrubber.scrub_text(value)
            else:
                out = self.pseudonyms(kind, value)
            self._ident_cache[item] = out
        if out == value:
            self.kept[kind] += count
        else:
            self.occurrences[kind] += count
        return out

    def text(self, value: str) -> str:
        """Free text with sensitive spans replaced."""
        if not isinstance(value, str) or not value or self.is_public(value):
            return value
        return self.scrubber.scrub_text(value)

    def value(self, value: str, key: str | None = None) -> str:
        """A free-text value that may be JSON, under an optional key that may mark it sensitive."""
        if not isinstance(value, str) or not value or self.is_public(value):
            return value
        return self.scrubber.scrub_value(value, key)

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
        return {kind: {"distinct": distinct.get(kind, 0), "occurrences": occ.get(kind, 0)}
                for kind in sorted(set(distinct) | set(occ))}
