"""``popprof query``: DuckDB SQL over a profile's tables, registered by name."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from ..io import limits
from .common import (
    check_output,
    device_map_inputs,
    emit,
    format_option,
    is_stdout,
    load_config_file,
    load_one_profile,
    output_option,
    reader_options,
    reading_options,
    reads_arguments,
    start_reading,
    text_width,
)

#: Rows the table format prints by default.
DEFAULT_ROWS = 200


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return limits.parse_value(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def rows_option() -> Callable:
    """``-n/--rows N``: rows the table format prints (``popprof query`` and ``store query``)."""
    return click.option(
        "-n",
        "--rows",
        "rows",
        type=click.IntRange(0, None),
        default=None,
        help=f"Rows to print in table format  [default: {DEFAULT_ROWS}] (was --limit N, which still works).",
    )


def budget_options(command: Callable) -> Callable:
    """``--timeout SECONDS`` and ``--memory-limit SIZE``: the query sandbox's budget (docs/limits.md)."""
    command = click.option(
        "--memory-limit",
        "memory",
        callback=_size,
        default=None,
        metavar="SIZE",
        help="Memory DuckDB may use, e.g. 2G (default: the query-memory limit, 1 GiB).",
    )(command)
    return click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(0, None, min_open=True),
        default=None,
        metavar="SECONDS",
        help="Stop the query after this long (default: the query-seconds limit, 60).",
    )(command)


@click.command("query")
@click.argument("path", type=click.Path())
@click.argument("sql")
@format_option("table", "csv", "json", default="table")
@rows_option()
@output_option()
@budget_options
@reading_options(engine=True, config=True)
def query_command(
    path: str,
    sql: str,
    engine: str | None,
    fmt: str,
    rows: int | None,
    output: Path | None,
    config_file: Path | None,
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
      popprof query trace.json.gz "SELECT after_wait, sum(dur_us) FROM gaps GROUP BY 1"

    The analysis tables account, gaps, launches, operators and findings are
    computed when the SQL names them, by the functions that define their
    figures (popprof tables PATH lists them; docs/limits.md).

    The query runs in a sandbox: read-only SQL, no file access, at most --timeout seconds
    and --memory-limit of memory (docs/limits.md).
    """
    from ..sql import QueryBudget, analysis_tables_named, format_result, run_query

    limit = rows_to_print(rows)
    # an analysis table reads what summary reads: the events' arguments (operators' shapes) when recorded
    shapes = bool(analysis_tables_named(sql)) and reads_arguments([path], None)
    start_reading(path, with_args=shapes)  # first: the parse worker forks before the output check's imports
    check_output(output, [path, config_file, *device_map_inputs(device_map)])
    config = load_config_file(config_file)
    profile = load_one_profile(path, engine, **reader_options(device_map, config, with_args=shapes))
    budget = QueryBudget(timeout_s, memory)  # the analyses, the query, fetching and formatting: one deadline
    result = run_query(profile, sql, budget=budget, config=config)
    width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
    emit(format_result(result, fmt, limit=limit, budget=budget, width=width), output)


def rows_to_print(rows: int | None, command: str = "query") -> int:
    """Rows to print: ``--rows``, else the old ``--limit N`` (with a note naming ``command``), else the default."""
    old = click.get_current_context().meta.get("popprof.query_rows")
    if old is not None:
        click.echo(
            f"popprof: note: `{command} --limit N` is now `{command} --rows N` (--limit NAME=VALUE is the "
            "global safety limit); the old spelling still works",
            err=True,
        )
        if rows is None:
            return old
    return DEFAULT_ROWS if rows is None else rows
