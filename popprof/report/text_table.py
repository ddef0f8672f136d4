"""The diff's text tables laid out for a width: names left, figures right, no figure cut or split.

A row whose figures leave its name too little room is stacked: the name on a line of its own, the figures
whole under it (``docs/figures.md``, "How text prints").
"""

from __future__ import annotations

from .fit import WIDTH

#: the characters a table keeps for its names beside the figures' columns: rows whose figures leave less are
#: stacked (:func:`table`)
NAME_ROOM = 24


def table(rows: list[list[str]], header: list[str], right: set[int], width: int = WIDTH) -> list[str]:
    """The rows under ``header``, the first column (a name) left-aligned, those in ``right`` right-aligned, laid
    out for ``width``: a name too long for the room its row's figures leave goes on a line of its own, its
    figures on the next line under the figures' columns. The rows whose figures are too wide for columns that
    fit the width (bytes with their binary unit: ``303,260,018 B (289.2 MiB)``), widest first, and a few more
    (a quarter of the rows at most) when that leaves the names :data:`NAME_ROOM` characters, are stacked: the
    name, then the figures whole, as many to a line as fit; the columns are sized by the other rows
    (``docs/figures.md``, "How text prints"). No figure is cut or split."""
    room = width - 2
    gaps = 2 * (len(header) - 1)
    figure_widths = [sum(len(str(c)) for c in r[1:]) for r in rows]
    widest = sorted(range(len(rows)), key=lambda k: -figure_widths[k])

    def figures_with(stacked: set[int]) -> int:  # the columns' width with these rows stacked
        kept = [header, *(r for j, r in enumerate(rows) if j not in stacked)]
        return sum(max(len(str(r[i])) for r in kept) for i in range(1, len(header))) + gaps

    # the widest rows stacked until the others' columns fit the width (no line wraps a figure) ...
    k = 0
    while k < len(widest) and figures_with(set(widest[:k])) > room:
        k += 1
    # ... and a few more (a quarter of the rows at most) when that leaves the names their room
    name_room = min(NAME_ROOM, max((len(str(r[0])) for r in [header, *rows]), default=0))
    for more in range(k, k + len(rows) // 4 + 1):
        if figures_with(set(widest[:more])) <= room - name_room:
            k = more
            break
    stacked = set(widest[:k])
    table = [header, *(r for j, r in enumerate(rows) if j not in stacked)]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    figures = sum(widths[1:]) + gaps
    widths[0] = max(min(widths[0], room - figures), 0)
    lines = []
    for j, r in enumerate([header, *rows]):
        name = str(r[0])
        if j - 1 in stacked:
            lines.append("  " + name)
            lines += _stacked([str(c) for c in r[1:] if str(c)], room)
            continue
        cells = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        if len(name) > widths[0]:
            lines.append("  " + name)
            cells[0] = " " * widths[0]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _stacked(cells: list[str], room: int) -> list[str]:
    """Figures of one row under its name, indented, whole and in order, as many to a line as ``room`` holds."""
    lines, line = [], ""
    for cell in cells:
        if line and len(line) + 2 + len(cell) > room - 2:
            lines.append("    " + line)
            line = ""
        line = f"{line}  {cell}" if line else cell
    if line:
        lines.append("    " + line)
    return lines
