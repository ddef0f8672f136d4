"""Text for people laid out for a width: long lines wrapped with a hanging indent, rows whose name does
not fit given the name on a line of its own (``popprof summary`` text; docs/figures.md "How text prints")."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..io.names import NAME_WIDTH, short_names
from .findings import wrap_text

#: The width text is laid out for when the caller names none (a pipe, a CI log: docs/figures.md).
WIDTH = 80
#: A count, its ``x`` and the figure after it (``80 x 20.34 ms``), kept on one line by no-break spaces
#: while wrapping (was: the count and ``x`` only, so ``hipMemcpyWithStream 2 x`` / ``95.8 us``).
_TIMES = re.compile(r"(\d) x (?=[+-]?\d)")
#: The fewest columns a name keeps after its figures on one line before it goes under them.
MIN_NAME = 40
#: How much deeper than its line the continuation of a wrapped line is indented.
HANG = "    "


def fit_lines(lines: Iterable[str], width: int = WIDTH) -> list[str]:
    """``lines`` with each one wider than ``width`` wrapped at word boundaries (never inside a number and
    its unit), its continuation indented under it by :data:`HANG`."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += wrap_text(_TIMES.sub("\\1\u00a0x\u00a0", line.strip()), width, lead, lead + HANG)
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
