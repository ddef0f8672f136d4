"""The diff's tables at 80 columns when some rows' figures are too wide to share columns (memory in bytes with
its binary unit): those rows are stacked, every figure whole, and the other rows keep their columns."""

from __future__ import annotations

import re
from pathlib import Path

from popprof import diff
from popprof import open as open_profile
from popprof.io import units
from popprof.report.diff import _table, render_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _text(include_unchanged: bool) -> tuple[str, object]:
    result = diff(
        open_profile(FIXTURES / "mk2_training.popprof"), open_profile(FIXTURES / "mk2_training_v2.popprof")
    )
    return render_text(result, include_unchanged=include_unchanged, width=80), result


def test_every_metric_row_keeps_its_figures_whole_on_the_ipu_pair() -> None:
    text, result = _text(include_unchanged=True)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not [line for line in lines if re.match(r"^\s+(pp|\(\+|\(-|%)", line)]  # no figure split by a wrap
    rows = result.changed_metrics(True)
    for r in rows.itertuples(index=False):
        cells = [units.value(r.base, r.unit), units.value(r.new, r.unit), units.change(r.abs_change, r.unit)]
        for cell in cells:
            assert any(cell in line for line in lines), (r.name, cell)
    # a share, a time and a count keep one line with their name: the byte rows no longer widen the columns
    for name, change in (
        ("execution.share.exchange", "+2.64 pp"),
        ("execution.total_time_us", "+565.1 us"),
        ("execution.cycles.exchange", "+751,622"),
    ):
        (line,) = [line for line in lines if line.split() and line.split()[0] == name]
        assert change in line and "%" in line


def test_a_byte_row_is_stacked_under_its_name() -> None:
    text, result = _text(include_unchanged=False)
    lines = text.splitlines()
    row = result.changed_metrics(False).set_index("name").loc["memory.peak_liveness_bytes"]
    at = lines.index("  memory.peak_liveness_bytes")
    under = " ".join(lines[at + 1 : at + 3])
    for cell in (
        units.value(row.base, row.unit),
        units.value(row.new, row.unit),
        units.change(row.abs_change, row.unit),
    ):
        assert cell in under
    assert lines[at + 1].startswith("    ") and units.value(row.base, row.unit) in lines[at + 1]


def test_rows_of_one_width_keep_their_columns() -> None:
    """A table whose rows are alike (the events table) is never stacked: names on their own lines instead."""
    rows = [
        [f"kernel_{i}_" + "x" * 60, "3", "2", "12.0 us", "8.0 us", "-4.0 us", "-33.33 %", "shrunk", "device"]
        for i in range(6)
    ]
    header = ["name", "base n", "new n", "base total", "new total", "change", "rel", "status", "on"]
    lines = _table(rows, header, {1, 2, 3, 4, 5, 6}, 80)
    assert len(lines) == 1 + 2 * len(rows)  # the header, then each row: its name, its figures
    assert all(len(line) <= 80 for line in lines)
    figures = [line for line in lines if "-4.0 us" in line]
    assert len(figures) == 6 and len({line.index("-4.0 us") for line in figures}) == 1  # one column
