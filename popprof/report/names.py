"""Long names (C++ kernel signatures, program paths) shortened for text and Markdown tables.

A GPU trace's kernel names are often thousands of characters of template arguments and
parameter lists; a table row shows the name's head with those lists folded to ``...``. JSON
outputs keep the full name: this is for tables read by people only.
"""

from __future__ import annotations

#: Widest name a text or Markdown table shows before shortening it.
NAME_WIDTH = 90

_OPEN = {"<": ">", "(": ")", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}


def fold_brackets(name: str) -> str | None:
    """``name`` with the contents of each outermost ``<...>``, ``(...)`` and ``[...]`` folded to ``...``.

    ``None`` when the brackets do not pair up (an ``operator<`` or a cut name): then nothing is folded.
    """
    out: list[str] = []
    stack: list[str] = []
    for char in name:
        if char in _OPEN:
            if not stack:
                out.append(char + "...")
            stack.append(char)
        elif char in _CLOSE:
            if not stack or stack[-1] != _CLOSE[char]:
                return None
            stack.pop()
            if not stack:
                out.append(char)
        elif not stack:
            out.append(char)
    return None if stack else "".join(out)


def short_name(name: object, width: int = NAME_WIDTH) -> str:
    """``name`` as a table shows it: as is when it fits in ``width``, else with its bracketed lists
    folded (``void at::native::kernel<...>(...)``), and cut to ``width`` with ``...`` if still too long."""
    text = str(name)
    if len(text) <= width:
        return text
    folded = fold_brackets(text)
    if folded is not None and len(folded) <= width:
        return folded
    base = folded if folded is not None else text
    return base[: max(width - 3, 1)] + "..."
