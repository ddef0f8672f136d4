"""JSON's words for the types a parsed JSON document holds, for messages ("is an integer, not an object")."""

from __future__ import annotations

#: JSON's name of each Python type a JSON parser returns
JSON_KINDS: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "true/false",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def json_kind(value: object) -> str:
    """What ``value`` is in JSON's words (``an object``, ``an integer``, ``null``, ...)."""
    return JSON_KINDS.get(type(value), type(value).__name__)
