"""The one way benchmark scripts print their figures: a Markdown table (readable in a terminal, pastable
into benchmarks/README.md), sizes in MiB, the machine's load; and the one argument parser made from a
script's docstring."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterable, Sequence


def print_table(header: Sequence[str], rows: Iterable[Sequence[object]], *, title: str | None = None) -> None:
    """Print ``rows`` under ``header`` as an aligned Markdown table; numbers are right-aligned."""
    rows = [[str(c) for c in row] for row in rows]
    widths = [
        max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)
    ]
    numeric = [bool(rows) and all(_numeric(r[i]) for r in rows) for i in range(len(header))]
    print(f"\n{title}\n" if title else "")

    def line(cells: Sequence[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric, strict=True)
            )
            + " |"
        )

    print(line([str(h) for h in header]))
    print(
        "|"
        + "|".join("-" * (w + 1) + ":" if n else "-" * (w + 2) for w, n in zip(widths, numeric, strict=True))
        + "|"
    )
    for row in rows:
        print(line(row))


_NUMBER = re.compile(r"[+-]?[\d,]*\.?\d+ ?%?( \(.*\))?")


def _numeric(text: str) -> bool:
    """A number, maybe with a percent sign and a note in parentheses: ``1,024``, ``-3.5 %``, ``0 (RSS)``."""
    return bool(_NUMBER.fullmatch(text))


def load_line() -> str:
    """The machine's load, to print next to wall times measured on a shared machine."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} CPUs"


def mib(n: float) -> str:
    """Bytes as whole MiB with thousands separators: ``1,024``."""
    return f"{n / 2**20:,.0f}"


def doc_parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser whose help is the script's docstring: its first line, then all of it verbatim."""
    return argparse.ArgumentParser(
        description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc
    )
