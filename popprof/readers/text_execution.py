"""The Execution section of Poplar's text summary: cycle totals, cycles by vertex type, programs executed.

Three layouts are known (see ``docs/readers.md``):

- SDK 1.x: ``Total cycles: N (approx T microseconds)`` and ``Total <category> cycles: N`` lines, where a
  figure may be ``Estimated (must enable debug.instrumentCompute)`` or replaced by
  ``Must enable debug.instrumentExternalExchange``;
- SDK 2.x/3.x: ``Total cycles`` plus ``Tile average <category> cycles: X (P% of total)`` lines;
- either with ``Cycles by vertex type:`` lines ``Type (K instances): N`` and a ``Programs executed:``
  list (on the same line, or after a blank line: ``main, main.``, ``<anonymous>.``).

Used by :mod:`popprof.readers.text_summary`; the figures go to the ``execution_totals`` and
``vertex_cycles`` tables. A figure that is not printed is missing (NaN), never 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

#: Category of an execution figure by its normalised label (after "total " / "tile average ").
CATEGORY_BY_LABEL: dict[str, str] = {
    "cycles": "total",
    "compute cycles": "compute",
    "compute cycles (including idle threads)": "compute",
    "compute cycles (excluding idle threads)": "compute_excluding_idle",
    "ipu exchange cycles": "exchange",
    "exchange cycles": "exchange",
    "internal exchange cycles": "exchange",
    "global exchange cycles": "global_exchange",
    "host exchange cycles": "host_io",
    "shared structure copy cycles": "shared_structure_copy",
    "sync cycles": "sync",
}
#: The figures a complete section prints (a section missing some of them was probably cut).
EXPECTED_CATEGORIES: tuple[str, ...] = ("total", "compute", "exchange", "global_exchange", "host_io", "sync")

FIGURE_RE = re.compile(r"^(?P<label>(?:Total|Tile average)\b[^:]*?cycles\b[^:]*?)\s*:\s*(?P<value>.*)$", re.I)
VERTEX_RE = re.compile(
    r"^(?P<type>\S.*?)\s+\(\s*(?P<instances>\d[\d,]*)\s+instances?\s*\)\s*:?\s*"
    r"(?P<cycles>\d[\d,]*)$"
)
_VALUE_RE = re.compile(r"^(?P<num>\d[\d,]*(?:\.\d+)?)(?![\d,.]*[A-Za-z_\d])")
_SHARE_RE = re.compile(r"\(\s*(?P<pct>\d+(?:\.\d+)?)\s*%\s*of\s+total\s*\)", re.I)
_APPROX_RE = re.compile(
    r"approx\.?\s+(?P<num>\d[\d,]*(?:\.\d+)?)\s*(?P<unit>microseconds|us|milliseconds|ms|"
    r"seconds|s)\b",
    re.I,
)
_TIME_UNITS = {"microseconds": 1.0, "us": 1.0, "milliseconds": 1e3, "ms": 1e3, "seconds": 1e6, "s": 1e6}
PROGRAMS_HEADING_RE = re.compile(r"^Programs executed\s*:\s*(?P<rest>.*)$", re.I)
VERTEX_HEADING_RE = re.compile(r"^Cycles by vertex type\s*:$", re.I)


@dataclass
class ExecutionFigures:
    """What an Execution section held."""

    totals: list[dict] = field(default_factory=list)
    vertices: list[tuple[str, int, int]] = field(default_factory=list)
    programs: list[str] = field(default_factory=list)
    not_printed: dict[str, str] = field(default_factory=dict)  # label -> the text printed instead
    unparsed: list[str] = field(default_factory=list)
    seen_heading: bool = False

    @property
    def any(self) -> bool:
        return bool(self.totals or self.vertices or self.programs)

    def missing_categories(self) -> list[str]:
        """Expected figures the section did not print at all (not even as 'Must enable ...')."""
        got = {row["category"] for row in self.totals}
        return [c for c in EXPECTED_CATEGORIES if c not in got]

    def totals_frame(self) -> pd.DataFrame | None:
        if not self.totals:
            return None
        return pd.DataFrame(
            self.totals, columns=["category", "basis", "cycles", "share", "estimated", "time_us", "label"]
        ).astype({"estimated": "boolean"})

    def vertex_frame(self) -> pd.DataFrame | None:
        if not self.vertices:
            return None
        return pd.DataFrame(self.vertices, columns=["vertex_type", "instances", "cycles"]).astype(
            {"instances": "Int64", "cycles": "Int64"}
        )


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def category_of(label: str) -> tuple[str, str]:
    """(category, basis) of an execution figure label; unknown labels keep the label as printed."""
    norm = " ".join(label.lower().split())
    basis = "tile_average" if norm.startswith("tile average") else "total"
    rest = norm.removeprefix("tile average").removeprefix("total").strip()
    return CATEGORY_BY_LABEL.get(rest, label.strip()), basis


def parse_figure(figures: ExecutionFigures, label: str, value: str) -> None:
    """Record one ``Total ... cycles: value`` / ``Tile average ... cycles: value`` line."""
    category, basis = category_of(label)
    if any(row["category"] == category and row["basis"] == basis for row in figures.totals):
        return  # a repeated figure keeps the first value
    value = value.strip()
    m = _VALUE_RE.match(value)
    cycles = _number(m["num"]) if m else float("nan")
    if m is None:
        if value.lower().startswith(("must enable", "estimated")) or not value:
            figures.not_printed[label.strip()] = value
        else:
            figures.unparsed.append(f"{label.strip()}: {value}")
    share = _SHARE_RE.search(value)
    approx = _APPROX_RE.search(value)
    time_us = _number(approx["num"]) * _TIME_UNITS[approx["unit"].lower()] if approx else float("nan")
    figures.totals.append(
        {
            "category": category,
            "basis": basis,
            "cycles": cycles,
            "share": float(share["pct"]) / 100 if share else float("nan"),
            "estimated": "estimated" in value.lower(),
            "time_us": time_us,
            "label": label.strip(),
        }
    )


def parse_programs(figures: ExecutionFigures, text: str) -> None:
    """Record a ``Programs executed`` list: names separated by commas, ending in a full stop."""
    names = [n.strip() for n in text.strip().rstrip(".").split(",")]
    figures.programs.extend(n for n in names if n)
