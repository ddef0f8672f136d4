"""The leak scan's own test of what is public, built from the vocabulary data alone.

The redactor decides what stays readable with its allowlist (:mod:`.allowlist`: exact names, public
patterns and a grammar of code names). The scan never asks it, so a string the allowlist passes by
mistake is still looked for. To the scan, a string of the original is public when it is:

- a name of the vocabulary data: every name of the vocabulary files (:mod:`.vocabulary`), popprof's
  own words (:mod:`.vocabulary.builtin`), the sensitive key names (:mod:`.keynames`: the names are
  public, their values are not) and popprof's table, column and metric names;
- text without a letter (numbers, punctuation);
- made only of public words: each word (:func:`.tokens.words`) is a word of those names (in any
  case, also without its trailing digits, ``python3``, or as the parts of a camel-case word,
  ``ncclKernel``), a number with a unit or a shape (``128x64``, ``80GB``; never a hex digest), a
  ``0x`` number of at most 16 hex digits (a pointer, ``0x7fffb8facf7c``, which the redactor keeps as a
  number), or is shorter than :data:`.tokens.MIN_WORD` (a word that short is never looked for).

A JSON document held in a string is never public by its words: its strings are read one by one. A string
only shaped like one (Kineto's ``Concrete Inputs`` hold Python's ``[True, False]``, which no JSON parser
reads) is judged by its words like any other.

This is deliberately simpler than the redactor's grammar, and different: a name that the grammar
accepts because of a mistake in it holds a word of no vocabulary file, and the scan looks for it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from ..model.schema import TABLES
from . import vocabulary
from .keynames import SENSITIVE_KEYS
from .tokens import MIN_WORD, json_in_string, looks_like_json, words
from .vocabulary import builtin

#: Text without a letter: numbers, dates, punctuation.
_NO_LETTER = re.compile(r"[^A-Za-z]*")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_TRAILING_DIGITS = re.compile(r"\d+$")
#: A word that is a number with a unit or a shape (``80GB``, ``128x64``, ``3rd``): never a digest or a key.
_NUMBER_SHAPE = re.compile(r"\d+(?:[xX]\d+)*[A-Za-z]{0,4}")
#: A ``0x`` number of a 64-bit word at most (a pointer, an address): a number, as the redactor's patterns say.
_HEX_POINTER = re.compile(r"0[xX][0-9a-fA-F]{1,16}")
#: Most distinct strings remembered per vocabulary (a trace repeats its names).
_CACHE = 1_000_000


def _json_strings(value: object) -> Iterator[str]:
    """Every key and string of a vocabulary JSON file's content, its ``provenance`` left out."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                if key != "provenance":
                    yield str(key)
                    stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            yield item


def _popprof_names() -> set[str]:
    from ..metrics import METRICS

    names = set(TABLES) | {f"{table}.parquet" for table in TABLES} | set(METRICS)
    for spec in TABLES.values():
        names.update(spec.column_names)
    return names


@functools.cache
def vocabulary_names() -> frozenset[str]:
    """Every name of the vocabulary data (files, popprof's own words and names)."""
    names: set[str] = set()
    for name in vocabulary.NAME_FILES:
        names |= vocabulary.names(name)
    for name in vocabulary.JSON_FILES:
        names.update(_json_strings(vocabulary.data(name)))
    for value in vars(builtin).values():
        if isinstance(value, frozenset):
            names |= value
    names.update(builtin.POPLAR_MESSAGES)
    names.update(SENSITIVE_KEYS)  # the key names are public; their values are not
    return frozenset(names | _popprof_names())


@functools.cache
def vocabulary_words() -> frozenset[str]:
    """The words of every vocabulary name, in lower case."""
    return frozenset(w.lower() for name in vocabulary_names() for w in words(name))


class ScanVocabulary:
    """Whether a string is public to the leak scan (see the module docstring; what a policy keeps on
    purpose is the caller's ``keep``, apart)."""

    def __init__(self) -> None:
        self.names = vocabulary_names()
        self.words = vocabulary_words()
        self._cache: dict[str, bool] = {}

    def __reduce__(self) -> tuple:
        return ScanVocabulary, ()  # built again from the cached data where it arrives, not sent

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        hit = self._cache.get(value)
        if hit is None:
            hit = self._decide(value)
            if len(self._cache) < _CACHE:
                self._cache[value] = hit
        return hit

    def _decide(self, value: str) -> bool:
        if value in self.names or _NO_LETTER.fullmatch(value):
            return True
        if looks_like_json(value) and json_in_string(value) is not None:
            return False  # a document: the scan reads each of its strings under its key instead
        return all(self.public_word(w) for w in words(value))

    def public_word(self, word: str) -> bool:
        """A word of the vocabulary, a digit-led shape, or one too short to be looked for."""
        if len(word) < MIN_WORD or _NUMBER_SHAPE.fullmatch(word) or _HEX_POINTER.fullmatch(word):
            return True
        if word.lower() in self.words:
            return True
        bare = _TRAILING_DIGITS.sub("", word)
        if bare != word and (len(bare) < MIN_WORD or bare.lower() in self.words):
            return True
        parts = _CAMEL.findall(word)
        return len(parts) > 1 and all(
            len(p) < MIN_WORD or p.isdigit() or p.lower() in self.words for p in parts
        )
