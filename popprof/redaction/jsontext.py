"""JSON held in a string, decoded and written back byte-exact except for the strings redaction replaces.

``json.loads`` + ``json.dumps`` would change the data: ``1e400`` becomes ``Infinity`` (not JSON),
``0.1000000000000000055511`` becomes ``0.1``, and a repeated key loses all but its last value.
:func:`loads_exact` keeps every number as the text it was written with (:class:`Number`) and every
object as its list of pairs (:class:`Pairs`, duplicates and order kept); :func:`dumps_exact` writes
them back that way. Strings are written with ``ensure_ascii=False`` escaping (only what JSON needs).
"""

from __future__ import annotations

import json


class Number(str):
    """A JSON number kept as the exact text it was written with."""


class Pairs(list):
    """A JSON object as its ``(key, value)`` pairs, in order, duplicates kept."""


def loads_exact(text: str) -> object:
    """Decode ``text``; numbers stay :class:`Number`, objects :class:`Pairs`. Raises ValueError."""
    return json.loads(
        text,
        parse_float=Number,
        parse_int=Number,
        parse_constant=Number,
        object_pairs_hook=Pairs,
    )


def dumps_exact(obj: object) -> str:
    """Encode a value of :func:`loads_exact` (compact separators ``, `` and ``: `` as ``json.dumps``)."""
    out: list[str] = []
    stack: list[object] = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            out.append(item.text)
        elif isinstance(item, Number):
            out.append(str.__str__(item))
        elif isinstance(item, str):
            out.append(json.dumps(item, ensure_ascii=False))
        elif isinstance(item, Pairs):
            parts: list[object] = [_Text("{")]
            for i, pair in enumerate(item):
                key, value = pair
                if i:
                    parts.append(_Text(", "))
                parts.extend((_Text(json.dumps(str(key), ensure_ascii=False) + ": "), value))
            parts.append(_Text("}"))
            stack.extend(reversed(parts))
        elif isinstance(item, list):
            parts = [_Text("[")]
            for i, value in enumerate(item):
                if i:
                    parts.append(_Text(", "))
                parts.append(value)
            parts.append(_Text("]"))
            stack.extend(reversed(parts))
        else:
            out.append(json.dumps(item))
    return "".join(out)


class _Text:
    """Literal JSON syntax on the encoder's stack."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
