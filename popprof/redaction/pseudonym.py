"""Keyed pseudonyms: ``HMAC-SHA-256(key, kind + NUL + value)`` shortened to a readable ``var_3f9a2c1b07de``.

The same key gives the same pseudonym for the same original (so two profiles
redacted with one key still diff name by name); another key gives unrelated
pseudonyms. The kind is part of the hashed message, so a variable and a
program with the same name get unrelated pseudonyms.

Collisions: the short form carries :data:`SHORT_HEX` hex digits (48 bits: with 100,000 names of one
kind a collision has a chance of about 2 in 100,000).
When two different originals of one kind meet the same short form within one
run, the later one gets the long form (:data:`LONG_HEX` digits), so the
redacted data never merges two names.
"""

from __future__ import annotations

import hmac
import os
import secrets

#: Identifier kind -> pseudonym prefix.
PREFIXES: dict[str, str] = {
    "var": "var",
    "prog": "prog",
    "cs": "cs",
    "op": "op",
    "evt": "evt",
    "thr": "thr",
    "proc": "proc",
    "ctr": "ctr",
    "ser": "ser",
    "run": "run",
    "chan": "chan",
    "layer": "layer",
    "vtx": "vtx",
    "dbg": "dbg",
    "file": "file",
    "profile": "profile",
    "arg": "arg",
    "label": "label",
    "key": "key",
    "line": "line",  # a whole line of ordinary program output in a text log
    # free-text kinds
    "path": "path",
    "user": "user",
    "host": "host",
    "email": "email",
    "ip": "ip",
    "url": "url",
    "secret": "secret",
    "token": "token",
    "env": "env",
}

SHORT_HEX = 12
LONG_HEX = 24
KEY_ENV = "POPPROF_REDACT_KEY"
#: The shortest key accepted from any source.
MIN_KEY_BYTES = 16


def random_key() -> bytes:
    """A fresh 32-byte random key (output redacted with it cannot be linked to any other)."""
    return secrets.token_bytes(32)


def load_key(key_file: str | os.PathLike[str] | None = None) -> tuple[bytes, str]:
    """The redaction key and where it came from: ``("file" | "env" | "random")``.

    A key file's bytes are used as they are (surrounding whitespace stripped); it is read like every
    file an option names (:func:`popprof.io.files.read_option_file`: a regular file within the
    ``option-bytes`` limit, never a FIFO or a device). The environment variable :data:`KEY_ENV` is used
    when no file is given. Either way the key must pass :func:`check_key`.
    """
    if key_file is not None:
        from ..io.files import read_option_file

        data = read_option_file(key_file, "key file").strip()
        check_key(data, f"the key file {key_file}")
        return data, "file"
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        data = env.encode("utf-8")
        check_key(data, f"${KEY_ENV}")
        return data, "env"
    return random_key(), "random"


#: The fewest distinct byte values a key may hold (a 32-digit hex key holds up to 16).
MIN_DISTINCT_BYTES = 8


def key_weakness(key: bytes) -> str | None:
    """Why ``key`` is too weak to key pseudonyms, or None. Checked: its length (:data:`MIN_KEY_BYTES`),
    how many distinct bytes it holds (:data:`MIN_DISTINCT_BYTES`: ``kkkk...``, ``abab...``), whether it
    repeats a shorter part (``0123456789abcdef`` twice) and whether a run of consecutive characters
    (``abcdefgh...``, ``012345...``) makes up more than half of it. A key made as the error suggests
    (32 random bytes as hex) passes; so does a long pass phrase."""
    if len(key) < MIN_KEY_BYTES:
        return f"a redaction key needs at least {MIN_KEY_BYTES} bytes of random material (got {len(key)})"
    if len(set(key)) < MIN_DISTINCT_BYTES:
        return f"the key holds only {len(set(key))} distinct characters (at least {MIN_DISTINCT_BYTES})"
    for period in range(1, len(key) // 2 + 1):
        if key == (key[:period] * (len(key) // period + 1))[: len(key)]:
            return f"the key repeats its first {period} characters"
    run = longest = 1
    for a, b in zip(key, key[1:], strict=False):
        run = run + 1 if abs(b - a) == 1 else 1
        longest = max(longest, run)
    if longest * 2 > len(key):
        return f"{longest} of the key's {len(key)} characters are a run of consecutive characters"
    return None


def check_key(key: bytes, where: str) -> None:
    """Refuse a weak key from any source (file, environment, API; see :func:`key_weakness`): pseudonyms
    under a guessable key can be reversed by hashing candidate names."""
    from ..model.errors import UsageError

    problem = key_weakness(key)
    if problem is not None:
        raise UsageError(
            f"{where}: {problem}; make one with `python -c 'import secrets; print(secrets.token_hex(32))' > key`"
        )


def key_fingerprint(key: bytes) -> str:
    """A short public fingerprint of a redaction key (never the key): ``HMAC-SHA-256(key, label)``
    over a fixed label, so it is a keyed value like every pseudonym (with the 16-byte minimum, no
    guess of the key can be tested against it faster than against the pseudonyms themselves). Two
    outputs with different fingerprints were made with different keys."""
    return "hmac-sha256:" + hmac.digest(bytes(key), b"popprof redaction key fingerprint", "sha256").hex()[:12]


class Pseudonymizer:
    """Maps (kind, original) to a stable keyed pseudonym and remembers every mapping made."""

    def __init__(self, key: bytes) -> None:
        self._key = bytes(key)
        self.forward: dict[tuple[str, str], str] = {}
        self._taken: dict[str, tuple[str, str]] = {}

    def digest(self, kind: str, value: str) -> str:
        """The full hex HMAC of ``value`` for ``kind``."""
        msg = kind.encode("utf-8") + b"\0" + value.encode("utf-8", "surrogatepass")
        return hmac.digest(self._key, msg, "sha256").hex()

    def __call__(self, kind: str, value: str) -> str:
        """The pseudonym of ``value`` (of identifier ``kind``)."""
        item = (kind, value)
        found = self.forward.get(item)
        if found is not None:
            return found
        digest = self.digest(kind, value)
        prefix = PREFIXES.get(kind, kind)
        name = f"{prefix}_{digest[:SHORT_HEX]}"
        if name in self._taken and self._taken[name] != item:
            name = f"{prefix}_{digest[:LONG_HEX]}"
        self._taken[name] = item
        self.forward[item] = name
        return name

    def mapping(self) -> dict[str, dict[str, str]]:
        """``{kind: {pseudonym: original}}`` for ``--mapping-out`` (sensitive!)."""
        out: dict[str, dict[str, str]] = {}
        for (kind, original), name in self.forward.items():
            out.setdefault(kind, {})[name] = original
        return out

    def counts(self) -> dict[str, int]:
        """Distinct originals replaced, by kind."""
        out: dict[str, int] = {}
        for kind, _ in self.forward:
            out[kind] = out.get(kind, 0) + 1
        return out

    def originals(self) -> dict[str, str]:
        """Every original replaced -> its kind (the leak scan looks for these)."""
        return {original: kind for (kind, original) in self.forward}
