"""How text is cut into pieces, shared by the redactor (to decide) and the leak scan (to derive
what is sensitive from an original on its own): pure functions, no state.

- a **chunk** is a maximal run of characters between separators (white space and the
  punctuation that delimits names in free text: ``, ; ( ) [ ] { } < > " ' = |``). Free text is
  redacted chunk by chunk: a public chunk stays, any other becomes a pseudonym.
- a **word** is a maximal run of letters and digits (``_`` splits too). The leak scan looks for
  the words of every non-public string of the original (at least :data:`MIN_WORD` characters)
  that never occur in a public string.
"""

from __future__ import annotations

import json
import re

MIN_WORD = 4
#: JSON held in a string is decoded and redacted structurally up to this depth; deeper is text.
MAX_JSON_DEPTH = 64

_CHUNK = re.compile(r"[^\s,;()\[\]{}<>\"'=|]+")
_WORD = re.compile(r"[^\W_]+")
_BRACKETS = re.compile(r'[\[\]{}"\\]')


def chunks(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each chunk of ``text``."""
    return [m.span() for m in _CHUNK.finditer(text)]


def chunk_strings(text: str) -> list[str]:
    """The chunks of ``text`` as strings."""
    return _CHUNK.findall(text)


def words(text: str) -> list[str]:
    """The words of ``text`` (runs of letters and digits)."""
    return _WORD.findall(text)


_SPACE = re.compile(r"\s")


def has_space(text: str) -> bool:
    """True when ``text`` holds white space (then it is free text, redacted chunk by chunk)."""
    return _SPACE.search(text) is not None


def looks_like_json(text: str) -> bool:
    """An object or array held in a string (decoded only when not too deep, see :func:`json_depth`)."""
    stripped = text.strip()
    return len(stripped) >= 2 and stripped[0] in "{[" and stripped[-1] in "}]"


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of the JSON in ``text`` (strings skipped), counting stops past ``limit``.

    Iterative, so 100,000 levels cost a scan of the text, never a recursion error.
    """
    depth = deepest = 0
    in_string = escaped = False
    for m in _BRACKETS.finditer(text):
        ch = m.group(0)
        if in_string:
            if escaped:
                escaped = False
                continue
            if ch == "\\":
                # an escape consumes the next character whatever it is
                nxt = text[m.end() : m.end() + 1]
                escaped = nxt in '[]{}"\\'
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def json_in_string(value: str) -> dict | list | None:
    """The object or array a string holds as JSON (at most ``MAX_JSON_DEPTH`` deep), else None."""
    if not looks_like_json(value) or json_depth(value) > MAX_JSON_DEPTH:
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict | list) else None
