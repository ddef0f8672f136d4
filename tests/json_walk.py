"""A plain walk over JSON text for the JSON guard's tests: what the guard finds with numpy, found byte by byte."""

from __future__ import annotations


def outside_strings(text: bytes) -> list[int]:
    """The indices of the bytes outside strings' content (the quotes included)."""
    out, in_string, escaped = [], False, False
    for i, b in enumerate(text):
        if not in_string:
            out.append(i)
            in_string = b == ord('"')
        elif escaped:
            escaped = False
        elif b == ord("\\"):
            escaped = True
        elif b == ord('"'):
            in_string = False
            out.append(i)
    return out


def tokens_outside_strings(text: bytes, tokens: bytes = b"[]{},:") -> list[int]:
    """The indices of the bytes of ``tokens`` (brackets and separators by default) outside strings."""
    return [i for i in outside_strings(text) if text[i] in tokens and text[i] != ord('"')]
