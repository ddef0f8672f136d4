"""``popprof trend``: changes and change points of metrics over a store's runs; ``trend ack``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .common import (
    check_output,
    config_option,
    emit,
    format_option,
    is_stdout,
    last_option,
    load_config_file,
    output_option,
    said_wrote,
    text_width,
)

#: ``-o`` names with these suffixes get the plot of each series (the report then goes to stdout), as
#: ``pilot -o FILE.html`` gets its HTML report.
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


class _TrendGroup(click.Group):
    """``popprof trend STORE METRIC...`` runs the report; ``popprof trend ack ...`` acknowledges."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group("trend", cls=_TrendGroup, subcommand_metavar="STORE METRIC... | ack STORE METRIC RUN_ID")
def trend_command() -> None:
    """How metrics moved over the runs of a store: every change of an exact metric (with the range to
    bisect), change points of a noisy one beyond its gate budget (docs/trend.md).

    \b
    Examples:
      popprof trend runs/ memory.total_incl_gaps_bytes --branch main
      popprof trend runs/ trace.device_idle_us --last 200 --fail-on regression --format junit -o trend.xml
      popprof trend runs/ trace.device_idle_us -o trend.png
      popprof trend ack runs/ trace.device_idle_us 4121
    """


@trend_command.command("show")
@click.argument("store")
@click.argument("metrics", nargs=-1, required=True)
@click.option("--profile", default=None, help="Only this profile (default: one series per profile).")
@click.option("--branch", default=None, help="Only runs of this branch.")
@last_option("points (commits) of each series", minimum=2, default=500)
@click.option(
    "--each-run",
    is_flag=True,
    help="One point per run (default: re-runs of one commit are one point, their median).",
)
@click.option("--mode", type=click.Choice(["auto", "exact", "noisy"]), default="auto", show_default=True)
@click.option(
    "--recent",
    type=click.IntRange(1, None),
    default=10,
    show_default=True,
    help="A regression fails --fail-on only when it is within this many latest runs.",
)
@click.option(
    "--budget", "budget_file", type=click.Path(), default=None, help="Budget file (as popprof diff)."
)
@click.option("--fail-on", type=click.Choice(["regression", "never"]), default="never", show_default=True)
@output_option("the report (a .png, .svg or .pdf name: the plot of each series, the report on stdout)")
@config_option()
@format_option("text", "json", "markdown", "junit")
def show_command(
    store: str,
    metrics: tuple[str, ...],
    profile: str | None,
    branch: str | None,
    last: int,
    each_run: bool,
    mode: str,
    recent: int,
    budget_file: str | None,
    fail_on: str,
    output: Path | None,
    config_file: Path | None,
    fmt: str,
) -> None:
    """Report the changes of METRICS in STORE (exit 1 with --fail-on regression on an unacknowledged one)."""
    from ..compare.gate import load_budget
    from ..store import trend_report as report
    from ..store.trend import trend
    from ..store.trend_config import TrendSettings

    check_output(output, [store, config_file, budget_file])
    config = load_config_file(config_file)
    series = trend(
        store,
        list(metrics),
        profile=profile,
        branch=branch,
        last=last,
        mode=mode,
        recent=recent,
        budget=load_budget(budget_file, config=config),
        collapse=not each_run,
        settings=TrendSettings.from_config(config),
    )
    plotted = not is_stdout(output) and output.suffix.lower() in PLOT_SUFFIXES  # the text goes to stdout
    width = text_width(terminal=(is_stdout(output) or plotted) and sys.stdout.isatty())
    render = {
        "text": lambda s: report.text(s, width),
        "json": report.as_json,
        "markdown": report.markdown,
        "junit": report.junit,
    }[fmt]
    if plotted:
        report.plot(series, output)
        said_wrote(output)
        click.echo(render(series), nl=False)
    else:
        emit(render(series), output)
    notes = {s.note for s in series if s.note}
    for note in sorted(notes):
        click.echo(f"popprof: note: {note}", err=True)
    if fail_on == "regression" and any(s.regressions for s in series):
        raise click.exceptions.Exit(1)


@trend_command.command("ack")
@click.argument("store")
@click.argument("metric")
@click.argument("run_id")
@click.option("--note", default="", help="Why the change is accepted.")
def ack_command(store: str, metric: str, run_id: str, note: str) -> None:
    """Acknowledge the change of METRIC that starts at RUN_ID: --fail-on no longer fails on it."""
    from ..store.trend import acknowledge

    rel = acknowledge(store, metric, run_id, note)
    click.echo(f"acknowledged {metric} at run {run_id} ({rel})")
