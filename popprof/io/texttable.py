"""Query results and store listings as text tables for people, laid out for a width: text columns left-aligned
and cut to fit, numbers never cut, a table too wide split into tables that repeat its key columns
(``popprof query``, ``store query``, ``store ls``, ``fleet ranks``; docs/figures.md "How text prints").

Here, below ``sql.py`` and the report, so that both lay tables out the one way."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: What ends a text value cut to fit the width (as a name cut in the summary's tables ends: io/names.py).
CUT = "..."
#: The fewest columns a text column of a table (``popprof query``, ``store ls``) is cut to (its name's
#: length when longer).
MIN_TEXT = 10


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


def _nullable_not_float(column: pd.Series) -> bool:
    """Whether ``column`` holds pandas' nullable integers or booleans (missing shown as ``<NA>``)."""
    import pandas as pd

    dtype = column.dtype
    return isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in "iub"


def _cells(column: pd.Series, na_rep: str | None) -> list[str]:
    """A text column's values as :func:`_cell` shows them, a missing one as ``na_rep`` when given."""
    if na_rep is None:
        return [_cell(v) for v in column]
    return [na_rep if gone else _cell(v) for v, gone in zip(column, column.isna().to_numpy(), strict=True)]


def text_table(
    shown: pd.DataFrame,
    width: int | None = None,
    check: Callable[[], None] | None = None,
    na_rep: str | None = None,
) -> tuple[str, bool]:
    """``shown`` as pandas' ``to_string`` without the index, text columns left-aligned and cut to ``width``
    (the other columns as pandas has them, never cut); and whether a value was cut. ``check`` is
    called between the two renderings (a query's deadline). ``na_rep``: how every missing value is shown
    (``NULL`` in a query's result), else as pandas shows each kind."""
    import pandas as pd

    missing = {} if na_rep is None else {"na_rep": na_rep}
    columns = list(shown.columns)
    if len(set(map(str, columns))) < len(columns):  # SELECT a, a: the formatters go by name
        return shown.to_string(index=False, **missing), False
    text = [c for c in columns if _is_text(shown[c])]
    if na_rep is not None:  # pandas' na_rep passes over nullable integers and booleans (<NA>): as text, right
        shown = shown.copy(deep=False)
        for c in columns:
            column = shown[c]
            if c not in text and _nullable_not_float(column) and column.isna().any():
                shown[c] = column.astype(object).where(column.notna().to_numpy(), na_rep)
    if not text:
        return shown.to_string(index=False, **missing), False
    cells = {c: _cells(shown[c], na_rep) for c in text}
    names = {c: str(c) for c in text}
    need = {c: max(len(names[c]), *(len(v) for v in cells[c])) for c in text}
    room = dict(need)
    if width is not None:
        # what the other columns and the gaps take: the table with each text column its name's width
        probe = pd.DataFrame(
            {c: ["x" * len(names[c])] * len(shown) if c in cells else shown[c] for c in columns}
        )
        fixed = max(map(len, probe.to_string(index=False, **missing).splitlines())) - sum(
            len(names[c]) for c in text
        )
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
        return shown.to_string(index=False, **missing), False
    table = pd.DataFrame(columns_out).to_string(index=False, **missing)
    return "\n".join(line.rstrip() for line in table.splitlines()), cut


def cut_note(width: int) -> list[str]:
    """The line under a table some of whose values were cut to ``width`` (wrapped to it)."""
    text = f"({CUT}: a value cut to fit {width}\u00a0columns; --format csv or json has every value whole)"
    lines = textwrap.wrap(text, width, subsequent_indent=" ", break_on_hyphens=False)
    return [line.replace("\u00a0", " ") for line in lines]


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
