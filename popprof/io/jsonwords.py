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


#: A JSON parser's words for JSON that ends inside its value, the one sign that a file was cut off: orjson's
#: "unexpected end of data", yajl's (ijson's) "premature EOF" and "Incomplete JSON"
ENDS_EARLY = ("unexpected end of data", "premature EOF", "Incomplete JSON")
#: The hint of a file that ends inside its JSON
CUT_HINT = "the file is cut off: re-copy it, or write it again"
#: The hint of JSON malformed inside, or of a value of the wrong JSON type: damage, not a cut
DAMAGED_HINT = "the file may be damaged; write it again"


def json_parse_problem(exc: Exception) -> tuple[str, str]:
    """A JSON parser's error (orjson, ijson) as a message and its hint: ``truncated JSON: the file ends inside its
    JSON value (...)`` with :data:`CUT_HINT` when the parser met the end (:data:`ENDS_EARLY`), else ``malformed
    JSON (...)`` with :data:`DAMAGED_HINT`: a cut is said only where the text shows one."""
    text = " ".join(str(exc).split())
    if any(words in text for words in ENDS_EARLY):
        return f"truncated JSON: the file ends inside its JSON value ({text})", CUT_HINT
    return f"malformed JSON ({text})", DAMAGED_HINT
