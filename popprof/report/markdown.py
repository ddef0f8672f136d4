"""Markdown tables for pull-request comments, written one way by ``check``, ``diff`` and the rest."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(text: object) -> str:
    """Text made safe for one table cell: pipes escaped, line breaks folded to spaces."""
    return str(text).replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")


def code(text: object) -> str:
    """Text as inline code in a table cell (backticks inside become quotes so the span stays closed)."""
    return "`" + cell(text).replace("`", "'") + "`"


def table(header: Sequence[str], rows: Iterable[Sequence[object]], right: Iterable[int] = ()) -> list[str]:
    """The lines of a Markdown table; columns listed in ``right`` are right-aligned (numbers).

    Cells are used as given (already formatted, and escaped with :func:`cell` or
    :func:`code` where they hold free text).
    """
    right = set(right)
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines
