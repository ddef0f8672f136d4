"""``popprof query``: DuckDB SQL over a profile's tables, registered by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..io import limits
from ..sql import run_query
from .common import device_map_option, engine_option, format_option, load_one_profile, reader_options

if TYPE_CHECKING:
    pass


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return limits.parse_value(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("query")
@click.argument("path", type=click.Path())
@click.argument("sql")
@engine_option()
@format_option("table", "csv", "json", default="table")
@click.option(
    "--limit",
    type=click.IntRange(0, None),
    default=200,
    show_default=True,
    help="Rows to print in table format.",
)
@device_map_option()
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(0, None, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop the query after this long (default: the query-seconds limit, 60).",
)
@click.option(
    "--memory-limit",
    "memory",
    callback=_size,
    default=None,
    metavar="SIZE",
    help="Memory DuckDB may use, e.g. 2G (default: the query-memory limit, 1 GiB).",
)
def query_command(
    path: str,
    sql: str,
    engine: str | None,
    fmt: str,
    limit: int,
    device_map: str | None,
    timeout_s: float | None,
    memory: int | None,
) -> None:
    """Run DuckDB SQL over the profile's tables (target, tiles, steps, events, ...).

    \b
    Examples:
      popprof query p.popprof "SELECT category, sum(cycles) FROM steps GROUP BY 1 ORDER BY 2 DESC"
      popprof query p.popprof "SELECT tile, bytes_incl_gaps FROM tiles ORDER BY 2 DESC LIMIT 5" \\
        --format csv

    The query runs in a sandbox: read-only SQL, no file access, at most --timeout seconds
    and --memory-limit of memory (docs/limits.md).
    """
    from ..io.config import load_config

    profile = load_one_profile(path, engine, **reader_options(device_map, load_config()))
    result = run_query(profile, sql, timeout_s=timeout_s, memory_bytes=memory)
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
