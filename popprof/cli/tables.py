"""``popprof tables``: which tables a profile has, their row counts and columns."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .common import (
    check_output,
    device_map_inputs,
    echo_json,
    emit,
    engine_option,
    format_option,
    is_stdout,
    load_config_file,
    load_profiles,
    output_option,
    reader_options,
    reading_options,
    require_inputs,
    start_reading,
    text_width,
)

#: The fewest columns a table's description keeps beside its row count before it goes under the row.
MIN_DESCRIPTION = 30


@click.command("tables")
@click.argument("path", type=click.Path())
@engine_option()
@click.option("--columns/--no-columns", default=True, help="List each table's columns and dtypes.")
@format_option("text", "json")
@output_option()
@reading_options(config=True)
def tables_command(
    path: str,
    engine: str | None,
    columns: bool,
    fmt: str,
    output: Path | None,
    config_file: Path | None,
    device_map: str | None,
) -> None:
    """List the tables of a profile with row counts and columns.

    \b
    Example:
      popprof tables fixtures/mk2_training.popprof
    """
    require_inputs(path)  # before the schema's imports: a missing file is said at once
    from ..model.readproblems import problems
    from ..model.schema import TABLES
    from ..report.findings import wrap_text
    from ..report.fit import fit_lines

    start_reading(path)  # first: the parse worker forks before the output check's imports
    check_output(output, [path, config_file, *device_map_inputs(device_map)])
    profiles = load_profiles(path, engine, **reader_options(device_map, load_config_file(config_file)))
    if fmt == "json":
        echo_json(
            {
                name: {
                    t: {"rows": len(f), "columns": {c: str(d) for c, d in f.dtypes.items()}}
                    for t, f in p.tables.items()
                }
                for name, p in profiles.items()
            },
            output,
        )
        return
    width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
    lines = []
    for name, profile in profiles.items():
        lines += fit_lines([f"{name} ({profile.source_format})"], width)
        for text in problems(profile).values():  # what the reader worked around, kept in a bundle too
            lines += fit_lines([f"  read with problems: {text}"], width)
        for table, frame in profile.tables.items():
            row = f"  {table:<20} {len(frame):>12,} {'row ' if len(frame) == 1 else 'rows'}   "
            if width - len(row) >= MIN_DESCRIPTION:  # the description beside the count, wrapped under itself
                lines += wrap_text(TABLES[table].row, width, row, " " * len(row))
            else:  # too narrow: the description on the lines under the row
                lines += [row.rstrip(), *wrap_text(TABLES[table].row, width, "      ", "      ")]
            if columns:
                lines += fit_lines((f"      {col:<24} {dtype}" for col, dtype in frame.dtypes.items()), width)
    lines += _analysis_lines(width, columns)
    emit("".join(line + "\n" for line in lines), output)


def _analysis_lines(width: int, columns: bool) -> list[str]:
    """The analysis tables a query can name (``popprof.analysis_tables``): each with what a row is and, with
    ``columns``, its columns; none is computed here."""
    from ..analysis_tables import analysis_tables
    from ..report.findings import wrap_text
    from ..report.fit import fit_lines

    lines = fit_lines(["analysis tables (computed when a query names them)"], width)
    for table in analysis_tables().values():
        row = f"  {table.name:<12} "
        lines += wrap_text(f"one row per {table.row}", width, row, " " * len(row))
        if columns:
            lines += wrap_text(", ".join(table.columns), width, "      ", "      ")
    return lines
