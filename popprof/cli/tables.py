"""``popprof tables``: which tables a profile has, their row counts and columns."""

from __future__ import annotations

from pathlib import Path

import click

from .common import (
    check_output,
    device_map_inputs,
    echo_json,
    emit,
    engine_option,
    format_option,
    load_config_file,
    load_profiles,
    output_option,
    reader_options,
    reading_options,
    require_inputs,
    start_reading,
)


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
    lines = []
    for name, profile in profiles.items():
        lines.append(f"{name} ({profile.source_format})")
        for text in problems(profile).values():  # what the reader worked around, kept in a bundle too
            lines.append(f"  read with problems: {text}")
        for table, frame in profile.tables.items():
            lines.append(
                f"  {table:<20} {len(frame):>12,} {'row ' if len(frame) == 1 else 'rows'}   {TABLES[table].row}"
            )
            if columns:
                for col, dtype in frame.dtypes.items():
                    lines.append(f"      {col:<24} {dtype}")
    emit("".join(line + "\n" for line in lines), output)
