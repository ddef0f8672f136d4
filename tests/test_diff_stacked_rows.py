"""The diff's text tables at 80 columns: bytes to 4 significant figures in their binary unit (the exact counts stay
in the JSON and Markdown), so that the metrics table's byte rows and the tiles table's rows are one row of figures
each, every figure whole; a table whose figures are too wide for columns still stacks those rows
(``report.text_table.table``)."""

from __future__ import annotations

import re
from pathlib import Path

from popprof import diff
from popprof import open as open_profile
from popprof.compare.document import to_dict
from popprof.io import units
from popprof.report.diff import render_markdown, render_text
from popprof.report.text_table import table

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _text(include_unchanged: bool) -> tuple[str, object]:
    result = diff(
        open_profile(FIXTURES / "mk2_training.popprof"), open_profile(FIXTURES / "mk2_training_v2.popprof")
    )
    return render_text(result, include_unchanged=include_unchanged, width=80), result


def _figures(r) -> list[str]:
    """A metric row's base, new and change as the text prints them: bytes to 4 significant figures."""
    if r.unit == "bytes":
        return [
            units.bytes_figures(r.base),
            units.bytes_figures(r.new),
            units.bytes_figures(r.abs_change, signed=True),
        ]
    return [units.value(r.base, r.unit), units.value(r.new, r.unit), units.change(r.abs_change, r.unit)]


def _row_line(lines: list[str], name: str) -> str:
    """The line holding a metric row's figures: its name's own line, else the line under it."""
    at = next(i for i, line in enumerate(lines) if line.split() and line.split()[0] == name)
    return lines[at] if len(lines[at].split()) > 1 else lines[at + 1]


def test_every_metric_row_keeps_its_figures_whole_on_the_ipu_pair() -> None:
    text, result = _text(include_unchanged=True)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not [line for line in lines if re.match(r"^\s+(pp|\(\+|\(-|%)", line)]  # no figure split by a wrap
    rows = result.changed_metrics(True)
    for r in rows.itertuples(index=False):
        line = _row_line(lines, r.name)
        for cell in _figures(r):  # every figure of the row on one line, byte rows included
            assert cell in line, (r.name, cell, line)
    # a share, a time and a count keep one line with their name
    for name, change in (
        ("execution.share.exchange", "+2.64 pp"),
        ("execution.total_time_us", "+565.1 us"),
        ("execution.total_cycles", "+751,622"),
    ):
        (line,) = [line for line in lines if line.split() and line.split()[0] == name]
        assert change in line and "%" in line


def test_a_byte_row_is_one_line_of_figures_in_the_columns() -> None:
    """Bytes print to 4 significant figures in the text (the JSON and Markdown keep the exact count), so a byte
    row's figures share the other rows' columns: on its name's line, or, for a name longer than the name column,
    on the one line under it; never stacked over two lines of figures."""
    text, result = _text(include_unchanged=False)
    lines = text.splitlines()
    row = result.changed_metrics(False).set_index("name").loc["memory.always_live_bytes"]
    (line,) = [line for line in lines if line.startswith("  memory.always_live_bytes ")]
    assert line.split()[1:] == ["114", "MiB", "115.5", "MiB", "+1.563", "MiB", "+1.37", "%", "worse"]
    assert row.base == 119_496_224 and row.new == 121_134_624  # 113.96 MiB, 115.52 MiB
    at = lines.index("  memory.peak_liveness_per_replica_bytes")
    assert lines[at + 1].split() == ["289.2", "MiB", "290.8", "MiB", "+1.563", "MiB", "+0.54", "%", "worse"]
    assert lines[at + 2].split()[0].startswith("memory.")  # the next row, not more figures
    # the figures in the columns of the rows that keep their names beside them
    assert lines[at + 1].index("+1.563 MiB") == line.index("+1.563 MiB")
    # the Markdown keeps the exact bytes
    markdown = render_markdown(result)
    assert "+1,638,400 B (+1.6 MiB)" in markdown and "119,496,224 B (114 MiB)" in markdown


def test_the_tiles_table_is_one_line_per_tile_at_80_columns() -> None:
    text, result = _text(include_unchanged=False)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("tiles: 100 of 1,472 compared tiles"))
    assert lines[at + 1].split() == ["tile", "ipu", "base", "new", "change", "rel"]
    top = result.top_tiles(10)
    rows = lines[at + 2 : at + 2 + len(top)]
    for t, line in zip(top.itertuples(index=False), rows, strict=True):
        assert len(line) <= 80
        expected = [
            str(t.tile),
            str(t.ipu),
            units.bytes_figures(t.base_bytes),
            units.bytes_figures(t.new_bytes),
            units.bytes_figures(t.change_bytes, signed=True),
            units.relative(t.rel_change),
        ]
        assert line.split() == " ".join(expected).split()
    assert rows[0].split() == ["0", "0", "406.3", "KiB", "422.3", "KiB", "+16", "KiB", "+3.94", "%"]
    assert lines[at + 2 + len(top)] == ""  # the section ends: 10 tiles, 10 lines
    # the JSON keeps the exact bytes of the same tiles
    doc = to_dict(result)
    assert (
        doc["tiles"]["top"][0]["base_bytes"] == 416_099 and doc["tiles"]["top"][0]["change_bytes"] == 16_384
    )


def test_bytes_to_four_significant_figures() -> None:
    cases = {
        0: "0 B",
        24: "24 B",
        1023: "1,023 B",
        1024: "1 KiB",
        16_384: "16 KiB",
        416_099: "406.3 KiB",
        1_638_400: "1.563 MiB",  # 1.5625: half up
        119_496_224: "114 MiB",  # 113.96
        1_048_535: "1 MiB",  # 1023.96 KiB rounds to 1024 KiB: the next unit
        102_398_976: "97.66 MiB",
    }
    for value, text in cases.items():
        assert units.bytes_figures(value) == text, value
    assert units.bytes_figures(16_384, signed=True) == "+16 KiB"
    assert units.bytes_figures(-24, signed=True) == "-24 B"
    assert units.bytes_figures(None) == units.MISSING


def test_rows_of_one_width_keep_their_columns() -> None:
    """A table whose rows are alike (the events table) is never stacked: names on their own lines instead."""
    rows = [
        [f"kernel_{i}_" + "x" * 60, "3", "2", "12.0 us", "8.0 us", "-4.0 us", "-33.33 %", "shrunk", "device"]
        for i in range(6)
    ]
    header = ["name", "base n", "new n", "base total", "new total", "change", "rel", "status", "on"]
    lines = table(rows, header, {1, 2, 3, 4, 5, 6}, 80)
    assert len(lines) == 1 + 2 * len(rows)  # the header, then each row: its name, its figures
    assert all(len(line) <= 80 for line in lines)
    figures = [line for line in lines if "-4.0 us" in line]
    assert len(figures) == 6 and len({line.index("-4.0 us") for line in figures}) == 1  # one column
