"""Text for people laid out for a width: long lines wrapped with a hanging indent, rows whose name does
not fit given the name on a line of its own (``popprof summary`` text; docs/figures.md "How text prints")."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..io.names import NAME_WIDTH, short_names
from .findings import wrap_text

if TYPE_CHECKING:
    import pandas as pd

#: The width text is laid out for when the caller names none (a pipe, a CI log: docs/figures.md).
WIDTH = 80
#: A count and its ``x`` (``80 x 20.34 ms``), kept on one line by a no-break space while wrapping.
_TIMES = re.compile(r"(\d) x(?= )")
#: The fewest columns a name keeps after its figures on one line before it goes under them.
MIN_NAME = 40
#: How much deeper than its line the continuation of a wrapped line is indented.
HANG = "    "
#: What ends a text value cut to fit the width (as a name cut in the summary's tables ends: io/names.py).
CUT = "..."
#: The fewest columns a text column of a table (``popprof query``, ``store ls``) is cut to (its name's
#: length when longer).
MIN_TEXT = 10


def fit_lines(lines: Iterable[str], width: int = WIDTH) -> list[str]:
    """``lines`` with each one wider than ``width`` wrapped at word boundaries (never inside a number and
    its unit), its continuation indented under it by :data:`HANG`."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += wrap_text(_TIMES.sub("\\1\u00a0x", line.strip()), width, lead, lead + HANG)
    return out


def named_rows(
    prefixes: list[str], names: Iterable[object], width: int = WIDTH, indent: str = "      "
) -> list[str]:
    """Table rows ``prefix + name``: one line each when every name fits after its figures (shortened when
    at least :data:`MIN_NAME` columns are left; never beyond ``NAME_WIDTH``), else the figures on one
    line and the name under them at ``indent``, shortened to the width when still too long
    (``report/names.py``: names that differ are kept apart)."""
    names = [str(n) for n in names]
    room = min(width - max((len(p) for p in prefixes), default=0), NAME_WIDTH)
    if all(len(n) <= room for n in names) or room >= MIN_NAME:
        return [p + n for p, n in zip(prefixes, short_names(names, width=room), strict=True)]
    lines: list[str] = []
    for prefix, name in zip(
        prefixes, short_names(names, width=min(width - len(indent), NAME_WIDTH)), strict=True
    ):
        lines += [prefix.rstrip(), indent + name]
    return lines


def _is_text(column: pd.Series) -> bool:
    kind = str(column.dtype)
    return column.dtype == object or kind.startswith("str") or kind == "category"


def _cell(value: object) -> str:
    """A text column's value as pandas shows it (a missing one as ``None``, ``NaN`` or ``<NA>``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value != value:
        return "NaN"
    return str(value)


def text_table(
    shown: pd.DataFrame, width: int | None = None, check: Callable[[], None] | None = None
) -> tuple[str, bool]:
    """``shown`` as pandas' ``to_string`` without the index, text columns left-aligned and cut to ``width``
    (the other columns as pandas has them, never cut); and whether a value was cut. ``check`` is
    called between the two renderings (a query's deadline)."""
    import pandas as pd

    columns = list(shown.columns)
    if len(set(map(str, columns))) < len(columns):  # SELECT a, a: the formatters go by name
        return shown.to_string(index=False), False
    text = [c for c in columns if _is_text(shown[c])]
    if not text:
        return shown.to_string(index=False), False
    cells = {c: [_cell(v) for v in shown[c]] for c in text}
    names = {c: str(c) for c in text}
    need = {c: max(len(names[c]), *(len(v) for v in cells[c])) for c in text}
    room = dict(need)
    if width is not None:
        # what the other columns and the gaps take: the table with each text column its name's width
        probe = pd.DataFrame(
            {c: ["x" * len(names[c])] * len(shown) if c in cells else shown[c] for c in columns}
        )
        fixed = max(map(len, probe.to_string(index=False).splitlines())) - sum(len(names[c]) for c in text)
        if check is not None:
            check()
        left = width - fixed
        if sum(need.values()) > left:  # the narrow ones whole, the rest share what is left equally
            rest = sorted(text, key=need.get)
            while rest:
                share = left // len(rest)
                c = rest.pop(0)
                floor = min(need[c], max(len(names[c]), MIN_TEXT))
                room[c] = max(min(need[c], share), floor)
                left -= room[c]
    cut = False
    columns_out = {}
    for c in columns:
        if c not in cells:
            columns_out[str(c)] = shown[c]
            continue
        w = room[c]
        values = []
        for v in cells[c]:
            if len(v) > w:
                v, cut = v[: w - len(CUT)] + CUT, True
            values.append(v.ljust(w))
        columns_out[names[c].ljust(w)] = pd.Series(values, index=shown.index, dtype=object)
    if len(columns_out) < len(columns):  # a padded name met another column's name
        return shown.to_string(index=False), False
    table = pd.DataFrame(columns_out).to_string(index=False)
    return "\n".join(line.rstrip() for line in table.splitlines()), cut


def cut_note(width: int) -> list[str]:
    """The line under a table some of whose values were cut to ``width`` (wrapped to it)."""
    return wrap_text(
        f"({CUT}: a value cut to fit {width} columns; --format csv or json has every value whole)",
        width,
        "",
        " ",
    )


def split_table(
    frame: pd.DataFrame, width: int | None, keys: Iterable[object] = ()
) -> tuple[list[str], bool]:
    """``frame`` as :func:`text_table` lays it out, as one table when it fits ``width``; else its columns,
    each into the first table it fits (in their order within it), in as few tables as that makes, each
    repeating the ``keys`` columns (a run's id), one blank line apart (``popprof store ls``, ``fleet
    ranks``; as the summary's device table splits). A column too wide for a table of its own has its text
    cut; numbers are never cut. Returns the lines and whether a value was cut."""
    text, _ = text_table(frame)
    lines = text.splitlines()
    if width is None or max(map(len, lines), default=0) <= width:
        return lines, False
    keys = [k for k in keys if k in frame.columns]
    rest = [c for c in frame.columns if c not in keys]

    def widest(columns: list[object]) -> int:
        return max(map(len, text_table(frame[columns])[0].splitlines()), default=0)

    groups: list[list[object]] = []
    for column in rest:  # into the first table it fits (a short column joins an earlier one), else a new one
        group = next((g for g in groups if widest([*keys, *g, column]) <= width), None)
        if group is None:
            groups.append([column])
        else:
            group.append(column)
    out: list[str] = []
    cut = False
    for group in groups or [[]]:
        table, cut_here = text_table(frame[[*keys, *group]], width)
        out += ([""] if out else []) + table.splitlines()
        cut = cut or cut_here
    return out, cut
