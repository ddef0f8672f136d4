"""A plain walk over JSON text for the JSON guard's tests: what the guard finds with numpy, found byte by byte."""

from __future__ import annotations


def tokens_outside_strings(text: bytes, tokens: bytes = b"[]{},:") -> list[int]:
    """The indices of the bytes of ``tokens`` (brackets and separators by default) outside strings."""
    out, in_string, escaped = [], False, False
    for i, b in enumerate(text):
        if not in_string:
            if b == ord('"'):
                in_string = True
            elif b in tokens:
                out.append(i)
        elif escaped:
            escaped = False
        elif b == ord("\\"):
            escaped = True
        elif b == ord('"'):
            in_string = False
    return out
