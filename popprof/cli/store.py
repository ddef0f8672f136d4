"""``popprof store``: a run store of many runs (init, add, ls, query, compact, fsck)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..io.plural import plural
from .common import (
    check_output,
    config_option,
    device_map_option,
    echo_json,
    emit,
    format_option,
    global_options,
    is_stdout,
    last_option,
    load_config_file,
    output_option,
    reader_options,
    report_read_warnings,
    text_width,
)
from .query import budget_options, rows_option, rows_to_print

if TYPE_CHECKING:
    import pandas as pd


def frame_text(
    frame: pd.DataFrame, fmt: str, limit: int = 200, width: int | None = None, keys: tuple[str, ...] = ()
) -> str:
    """A result table as an aligned table, CSV or JSON records (the text ``-o`` writes or stdout shows); the
    table laid out for ``width`` columns, split into tables repeating ``keys`` when wider (``report/fit.py``
    ``split_table``)."""
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        return frame.to_json(orient="records", indent=2, date_format="iso") + "\n"
    import pandas as pd

    if frame.empty or limit == 0:
        return "  ".join(map(str, frame.columns)) + "\n(no rows)\n"
    from ..io.texttable import cut_note, split_table

    with pd.option_context("display.max_rows", limit, "display.max_columns", 50, "display.width", 200):
        lines, cut = split_table(frame.head(limit), width, keys)
    text = "\n".join(lines + (cut_note(width) if cut and width else [])) + "\n"
    if len(frame) > limit:
        text += f"... {plural(len(frame) - limit, 'more row')} (--format csv gives them all)\n"
    return text


@click.group("store")
def store_command() -> None:
    """Keep many runs in one store (a directory or s3:// prefix of Parquet) and query them (docs/store.md).

    \b
    Examples:
      popprof store init runs/
      popprof store add runs/ build/profile.popprof --commit $SHA --branch main
      popprof store query runs/ "SELECT run_id, value FROM metrics WHERE name = 'execution.total_cycles'"
    """


@store_command.command("init")
@click.argument("store")
def init_command(store: str) -> None:
    """Create an empty store at STORE (kept as it is when it is a store already)."""
    from ..store import init

    created = init(store)
    click.echo(f"store {created.root}")


@store_command.command("add")
@click.argument("store")
@click.argument("sources", nargs=-1, required=True, type=click.Path())
@click.option(
    "--run-id", default=None, help="The run's id (default: from CI variables, else the content hash)."
)
@click.option("--commit", default=None, help="Commit of the code that made the run (default: from CI).")
@click.option("--branch", default=None, help="Branch of that commit (default: from CI).")
@click.option("--time", "time_", default=None, metavar="ISO", help="The run's time (default: the bundle's).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label to record; repeatable.")
@click.option(
    "--profile",
    "profile",
    default=None,
    metavar="NAME",
    help="The series the run belongs to (default: the file or bundle name); pin it so a renamed "
    "artefact continues its history.",
)
@click.option("--replace", is_flag=True, help="Overwrite a run stored with other content.")
@click.option(
    "--keep-bundle",
    is_flag=True,
    help="Keep each run's bundle in the store (bundles/...), so popprof diff works on any stored run.",
)
@config_option(
    "Config file: its [rules] judge the runs' findings, its device_map reads them "
    "(default: nearest popprof.toml or pyproject.toml [tool.popprof] upwards)."
)
@device_map_option()
def add_command(
    store: str,
    sources: tuple[str, ...],
    run_id: str | None,
    commit: str | None,
    branch: str | None,
    time_: str | None,
    labels: tuple[str, ...],
    profile: str | None,
    replace: bool,
    keep_bundle: bool,
    config_file: Path | None,
    device_map: str | None,
) -> None:
    """Add SOURCES (bundles, run directories, traces, text summaries or baseline JSON) as runs of STORE.

    The same run again is a no-op (exit 0); the same run id with other content is refused (exit 2)
    unless --replace. A run's series is its profile name (--profile NAME, else the file or bundle
    name); the output says when a run starts a new series. Each run's findings (the rules as
    `popprof check` runs them, with the [rules] of --config FILE or the nearest configuration)
    and time account are kept too: the findings and account views.
    """
    from ..store import add
    from ..store.identity import parse_labels

    config = load_config_file(config_file)
    results = add(
        store,
        sources,
        run_id=run_id,
        commit=commit,
        branch=branch,
        time=time_,
        labels=parse_labels(labels),
        replace=replace,
        reader_options=reader_options(device_map, config),
        keep_bundle=keep_bundle,
        profile=profile,
        on_read=report_read_warnings,
        config=config,
    )
    from ..report.fit import fit_lines

    width = text_width(terminal=sys.stdout.isatty())
    for result in results:
        click.echo(f"{result.status}: run {result.run_id} profile {result.profile} (month {result.month})")
        if result.new_series:
            note = (
                f"new series: no earlier run of profile {result.profile} in the store "
                "(--profile NAME adds a renamed artefact to its series)"
            )
            click.echo("\n".join(fit_lines([note], width)))


@store_command.command("ls")
@click.argument("store")
@click.option("--branch", default=None, help="Only runs of this branch.")
@last_option("runs")
@format_option("table", "csv", "json", default="table")
@output_option("the list")
def ls_command(store: str, branch: str | None, last: int | None, fmt: str, output: Path | None) -> None:
    """List the runs of STORE, oldest first."""
    from ..store import open as open_store

    check_output(output, [store])

    where = "WHERE branch = ?" if branch is not None else ""
    sql = (
        "SELECT run_id, profile, created, commit, branch, kind, source_format, month "
        f"FROM runs {where} ORDER BY created DESC, run_id DESC"
    )
    if last is not None:
        sql += f" LIMIT {last}"
    frame = open_store(store).frame(sql, [branch] if branch is not None else [], kinds=["runs"])
    width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
    emit(
        frame_text(frame.iloc[::-1].reset_index(drop=True), fmt, len(frame) or 1, width, ("run_id",)), output
    )


@store_command.command("query")
@click.argument("store")
@click.argument("sql")
@format_option("table", "csv", "json", default="table")
@rows_option()
@output_option()
@budget_options
@global_options
def query_command(
    store: str,
    sql: str,
    fmt: str,
    rows: int | None,
    output: Path | None,
    timeout_s: float | None,
    memory: int | None,
) -> None:
    """Run read-only DuckDB SQL over STORE's views: runs, metrics, ranks, findings, account and one per
    bundle table.

    The query runs in the same sandbox as `popprof query`, with read access to the store's files only,
    at most --timeout seconds and --memory-limit of memory (docs/limits.md).
    """
    from ..sql import QueryBudget, format_result
    from ..store import open as open_store

    limit = rows_to_print(rows, "store query")
    check_output(output, [store])
    budget = QueryBudget(timeout_s, memory)  # the query, fetching and formatting: one deadline
    frame = open_store(store).query(sql, budget=budget)
    width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
    emit(format_result(frame, fmt, limit=limit, budget=budget, width=width), output)


@store_command.command("compact")
@click.argument("store")
@click.option(
    "--before", default=None, metavar="YYYY-MM", help="Compact months before this (default: this month)."
)
@click.option(
    "--migrate",
    is_flag=True,
    help="Also rewrite every month (closed or not) holding files of an older (or newer) popprof's columns.",
)
def compact_command(store: str, before: str | None, migrate: bool) -> None:
    """Rewrite each closed month of STORE into one file per table (queries get much faster)."""
    from ..store.compact import compact

    done = compact(store, before=before, migrate=migrate)
    click.echo(f"compacted {plural(len(done), 'month partition')}" + (": " + ", ".join(done) if done else ""))


@store_command.command("fsck")
@click.argument("store")
@click.option("--fix", is_flag=True, help="Remove what the check finds (never a live run's file).")
@format_option("text", "json", default="text")
def fsck_command(store: str, fix: bool, fmt: str) -> None:
    """Check STORE: files no run refers to (from a crash or --replace), temporaries, symbolic links, files
    that cannot be read or are damaged (a page failing its checksum), live runs missing a file, store version.

    The files of an add under way are listed as pending and left alone. Exit 1 when problems are found
    and not fixed (unreadable, damaged and missing files cannot be fixed: they are reported, never removed).
    """
    from ..store.compact import fsck

    found = fsck(store, fix=fix)
    problems = [p for p in found if p.kind != "pending"]
    left = [p for p in problems if not p.fixed]
    if fmt == "json":
        echo_json([p.__dict__ for p in found])
    else:
        for p in found:
            click.echo(f"{'removed' if p.fixed else p.kind}: {p.path} ({p.detail})")
        text = plural(len(problems), "problem")
        if fix and problems:
            text += " fixed" if not left else f", {len(problems) - len(left)} fixed, {len(left)} not fixable"
        pending = len(found) - len(problems)
        if pending:
            text += f"; {plural(pending, 'file')} of adds under way left alone"
        click.echo(text)
    if left:
        raise click.exceptions.Exit(1)
