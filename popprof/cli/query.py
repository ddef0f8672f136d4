"""``popprof query``: DuckDB SQL over a profile's tables, registered by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from .common import device_map_option, engine_option, format_option, load_one_profile, reader_options

if TYPE_CHECKING:
    import pandas as pd

    from ..profile import Profile


def run_query(profile: Profile, sql: str) -> pd.DataFrame:
    """Run DuckDB ``sql`` with every table of ``profile`` registered under its name; returns a DataFrame.

    The connection is in memory with file-system access switched off: a query reads the
    profile's tables and writes nothing (``COPY ... TO`` cannot overwrite an input).
    """
    import duckdb

    con = duckdb.connect(config={"enable_external_access": False})
    try:
        for name, frame in profile.tables.items():
            con.register(name, frame)
        try:
            return con.execute(sql).df()
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            raise UsageError(f"SQL error: {first} (tables: {', '.join(profile.table_names)})") from None
    finally:
        con.close()


@click.command("query")
@click.argument("path", type=click.Path())
@click.argument("sql")
@engine_option()
@format_option("table", "csv", "json", default="table")
@click.option("--limit", type=click.IntRange(0, None), default=200, show_default=True,
              help="Rows to print in table format.")
@device_map_option()
def query_command(path: str, sql: str, engine: str | None, fmt: str, limit: int, device_map: str | None) -> None:
    """Run DuckDB SQL over the profile's tables (target, tiles, steps, events, ...).

    \b
    Examples:
      popprof query p.popprof "SELECT category, sum(cycles) FROM steps GROUP BY 1 ORDER BY 2 DESC"
      popprof query p.popprof "SELECT tile, bytes_incl_gaps FROM tiles ORDER BY 2 DESC LIMIT 5" \\
        --format csv
    """
    from ..config import load_config

    result = run_query(load_one_profile(path, engine, **reader_options(device_map, load_config())), sql)
    if fmt == "csv":
        click.echo(result.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(result.to_json(orient="records", indent=2))
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", limit, "display.max_columns", 50, "display.width", 200):
            if result.empty or limit == 0:  # pandas would print "Empty DataFrame ..." here
                click.echo("  ".join(map(str, result.columns)))
            else:
                click.echo(result.head(limit).to_string(index=False))
            if not len(result):
                click.echo("(no rows)")
            elif len(result) > limit:
                click.echo(f"... {len(result) - limit:,} more rows (use --limit or --format csv)")
