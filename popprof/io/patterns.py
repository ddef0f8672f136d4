"""User regular expressions in bounded time: a pattern that could backtrack catastrophically is refused.

Python's ``re`` backtracks: ``(a+)+$`` takes exponential time on ``aaaa...b``, and one such
pattern in a device map (``--device-map``, a config's ``[device_map]``) or a redaction policy
hung ``summary`` on a 37-character event name. Matching cannot be interrupted once it runs, so
the bound is a check before compiling: :func:`compile_bounded` walks the parsed pattern and
refuses, with one line (exit 2), the shapes whose matching time grows faster than the text
times a small power:

- a quantifier over something that itself holds a quantifier (``(a+)+``, ``(\\w*\\s?)*``), or that
  may match nothing (``(a?){20}``);
- a quantifier over alternatives that can start with the same character (``(a|ab)*``);
- three unbounded quantifiers in a row over common characters (``.*.*.*x``: cubic);
- a backreference (``(a*)\\1``), whose matching no engine bounds.

The check is conservative: it may refuse a pattern that would in fact be fast, never accepts
one of the shapes above; but it knows shapes, and a shape it does not know (``a?a?...a?aa...a``:
exponential in Python's ``re``, and none of the above) would run unbounded. So a pattern that
passes it runs on RE2 (the ``google-re2`` bindings), a linear-time engine: whatever the pattern
and the text, matching costs time linear in the text. A pattern RE2 cannot run (lookaround
``(?=`` ``(?!`` ``(?<=`` ``(?<!``, atomic groups, possessive quantifiers) is refused with one line
too: on ``re`` it would be bounded by the check alone. The built-in maps, which use lookahead,
are not user input and run on ``re``. In RE2, ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII (``\\pL``
is a letter of any script).
"""

from __future__ import annotations

import re
import warnings
from re import _constants as sre  # the parser's opcodes (stable since 3.11)
from re import _parser as sre_parse
from typing import Protocol

from ..model.errors import UsageError


class Matcher(Protocol):
    """What a bounded pattern offers (a compiled RE2 or ``re`` pattern): the ``re`` calls popprof makes."""

    pattern: str

    def search(self, text: str) -> object | None: ...

    def match(self, text: str) -> object | None: ...

    def fullmatch(self, text: str) -> object | None: ...


#: Stands for "any character" in first-character sets.
_ALL = frozenset({-1})
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}
#: Longest pattern accepted (a device map or policy entry is a line, not a program).
MAX_PATTERN_CHARS = 4096


def compile_bounded(pattern: str, where: str) -> Matcher:
    """``pattern`` compiled for RE2 (``re`` when RE2 cannot run it), or UsageError naming ``where`` when the
    pattern is invalid or could backtrack catastrophically (see the module docstring)."""
    if not isinstance(pattern, str):
        raise UsageError(f"{where}: a regular expression must be a string, not {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UsageError(
            f"{where}: regular expression of {len(pattern):,} characters (at most {MAX_PATTERN_CHARS:,})"
        )
    try:
        with warnings.catch_warnings():  # ("possible nested set" and the like: stderr is for one line)
            warnings.simplefilter("ignore")
            compiled = re.compile(pattern)
            parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UsageError(f"{where}: bad regular expression {pattern!r}: {exc}") from None
    problem = _problem(parsed.data if hasattr(parsed, "data") else list(parsed))
    if problem:
        raise UsageError(
            f"{where}: regular expression {pattern!r} could take exponential time on some names ({problem}); "
            "rewrite it without nested or overlapping repetition (docs/limits.md)"
        )
    return _linear(pattern, where) or compiled


def _linear(pattern: str, where: str) -> Matcher | None:
    """``pattern`` compiled by RE2; UsageError naming ``where`` when RE2 cannot run it. ``None`` only without
    the bindings (a dependency: a platform without a google-re2 wheel keeps the check above as the bound)."""
    try:
        import re2
    except ImportError:
        return None
    options = re2.Options()
    options.log_errors = False  # RE2 would write each pattern it refuses to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise UsageError(
            f"{where}: regular expression {pattern!r} needs a construct the linear-time engine (RE2) does not "
            f"have ({reason}; lookaround, atomic groups and possessive quantifiers are not supported): "
            "rewrite it without (docs/limits.md)"
        ) from None


def _items(sub) -> list:
    return list(sub.data) if hasattr(sub, "data") else list(sub)


def _problem(seq: list) -> str | None:
    """The first catastrophic shape in the parsed sequence ``seq`` (and everything below it), or None."""
    unbounded: list[frozenset] = []
    for op, av in seq:
        if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            return "a backreference"
        if op in _REPEATS:
            low, high, body = av
            body_items = _items(body)
            if high > 1:
                if _has_repeat(body_items):
                    return "a quantifier over a quantifier"
                if _nullable(body_items):
                    return "a quantifier over something that may be empty"
                if _overlapping_branch(body_items):
                    return "a quantifier over alternatives that start alike"
            if high == sre.MAXREPEAT:
                unbounded.append(_first(body_items))
                if len(unbounded) >= 3 and _overlap_all(unbounded[-3:]):
                    return "three unbounded quantifiers over the same characters"
            found = _problem(body_items)
        elif op == sre.SUBPATTERN:
            found = _problem(_items(av[-1]))
        elif op == sre.BRANCH:
            found = next((f for b in av[1] if (f := _problem(_items(b)))), None)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            found = _problem(_items(av[1]))
        else:
            found = None
        if found:
            return found
    return None


def _overlap_all(sets: list[frozenset]) -> bool:
    alls = [s for s in sets if -1 in s]
    rest = [s for s in sets if -1 not in s]
    if not rest:
        return True
    common = frozenset.intersection(*rest)
    return bool(common) or (len(rest) == 1 and bool(alls))


def _has_repeat(seq: list) -> bool:
    """Whether ``seq`` holds a quantifier that can repeat (``+``, ``*``, ``{2,}``...), at any depth."""
    for op, av in seq:
        if op in _REPEATS and av[1] > 1:
            return True
        if op in _REPEATS and _has_repeat(_items(av[2])):
            return True
        if op == sre.SUBPATTERN and _has_repeat(_items(av[-1])):
            return True
        if op == sre.BRANCH and any(_has_repeat(_items(b)) for b in av[1]):
            return True
    return False


def _overlapping_branch(seq: list) -> bool:
    """Whether ``seq`` holds alternatives (at any depth) two of which can start with the same character."""
    for op, av in seq:
        if op == sre.BRANCH:
            firsts = [_first(_items(b)) for b in av[1]]
            for i, one in enumerate(firsts):
                for other in firsts[i + 1 :]:
                    if -1 in one or -1 in other or one & other or not one or not other:
                        return True
            if any(_overlapping_branch(_items(b)) for b in av[1]):
                return True
        elif (op == sre.SUBPATTERN and _overlapping_branch(_items(av[-1]))) or (
            op in _REPEATS and _overlapping_branch(_items(av[2]))
        ):
            return True
    return False


def _first(seq: list) -> frozenset:
    """Characters a match of ``seq`` can start with (``_ALL``: any), through the items that may be empty."""
    out: set[int] = set()
    for op, av in seq:
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue  # zero width
        if op == sre.LITERAL:
            out.add(av)
            return frozenset(out)
        if op in (sre.NOT_LITERAL, sre.ANY):
            return _ALL
        if op == sre.IN:
            chars = _class(av)
            return _ALL if chars is _ALL else frozenset(out | chars)
        if op == sre.SUBPATTERN:
            inner = _first(_items(av[-1]))
            if -1 in inner:
                return _ALL
            out |= inner
            if not _nullable(_items(av[-1])):
                return frozenset(out)
            continue
        if op == sre.BRANCH:
            for branch in av[1]:
                inner = _first(_items(branch))
                if -1 in inner:
                    return _ALL
                out |= inner
            if not any(_nullable(_items(b)) for b in av[1]):
                return frozenset(out)
            continue
        if op in _REPEATS:
            inner = _first(_items(av[2]))
            if -1 in inner:
                return _ALL
            out |= inner
            if av[0] > 0 and not _nullable(_items(av[2])):
                return frozenset(out)
            continue
        return _ALL  # anything else: assume the worst
    return frozenset(out)


def _nullable(seq: list) -> bool:
    """Whether ``seq`` can match the empty string."""
    for op, av in seq:
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue
        if op in _REPEATS:
            if av[0] == 0 or _nullable(_items(av[2])):
                continue
            return False
        if op == sre.SUBPATTERN:
            if _nullable(_items(av[-1])):
                continue
            return False
        if op == sre.BRANCH:
            if any(_nullable(_items(b)) for b in av[1]):
                continue
            return False
        return False
    return True


def _class(items: list) -> frozenset:
    """The characters of a character class (``_ALL`` for a negated one or one with categories)."""
    out: set[int] = set()
    for op, av in items:
        if op == sre.LITERAL:
            out.add(av)
        elif op == sre.RANGE:
            low, high = av
            if high - low > 4096:
                return _ALL
            out.update(range(low, high + 1))
        else:  # NEGATE, CATEGORY (\w, \d, \s) and the like
            return _ALL
    return frozenset(out)
