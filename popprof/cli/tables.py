"""``popprof tables``: which tables a profile has, their row counts and columns."""

from __future__ import annotations

import click

from ..io.config import load_config
from ..model.readproblems import problems
from ..model.schema import TABLES
from .common import device_map_option, echo_json, engine_option, format_option, load_profiles, reader_options


@click.command("tables")
@click.argument("path", type=click.Path())
@engine_option()
@click.option("--columns/--no-columns", default=True, help="List each table's columns and dtypes.")
@format_option("text", "json")
@device_map_option()
def tables_command(path: str, engine: str | None, columns: bool, fmt: str, device_map: str | None) -> None:
    """List the tables of a profile with row counts and columns.

    \b
    Example:
      popprof tables fixtures/mk2_training.popprof
    """
    profiles = load_profiles(path, engine, **reader_options(device_map, load_config()))
    if fmt == "json":
        echo_json(
            {
                name: {
                    t: {"rows": len(f), "columns": {c: str(d) for c, d in f.dtypes.items()}}
                    for t, f in p.tables.items()
                }
                for name, p in profiles.items()
            }
        )
        return
    for name, profile in profiles.items():
        click.echo(f"{name} ({profile.source_format})")
        for text in problems(profile).values():  # what the reader worked around, kept in a bundle too
            click.echo(f"  read with problems: {text}")
        for table, frame in profile.tables.items():
            click.echo(f"  {table:<20} {len(frame):>12,} rows   {TABLES[table].row}")
            if columns:
                for col, dtype in frame.dtypes.items():
                    click.echo(f"      {col:<24} {dtype}")
