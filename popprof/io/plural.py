"""Counts in words with the right plural: ``1 row``, ``2 rows``, ``1,234 events`` (never ``1 row(s)``)."""

from __future__ import annotations


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``count`` (with thousands separators) and ``singular``, or ``many`` (default ``singular + "s"``)
    unless ``count`` is 1: ``plural(1, "row")`` is ``1 row``, ``plural(3, "match", "matches")`` ``3 matches``."""
    word = singular if count == 1 else (many if many is not None else singular + "s")
    return f"{count:,} {word}"
