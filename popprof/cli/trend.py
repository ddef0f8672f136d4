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


@click.group(
    "trend",
    cls=_TrendGroup,
    subcommand_metavar="STORE METRIC... | STORE --findings | ack STORE METRIC|RULE RUN_ID",
)
def trend_command() -> None:
    """How metrics moved over the runs of a store: every change of an exact metric (with the range to
    bisect), change points of a noisy one beyond its gate budget (docs/trend.md).

    With --findings: when each rule's finding started firing, changed severity or stopped, per profile, with
    the range to bisect (docs/trend.md, "Findings over the runs").

    \b
    Examples:
      popprof trend runs/ memory.total_incl_gaps_bytes --branch main
      popprof trend runs/ trace.device_idle_us --last 200 --fail-on regression --format junit -o trend.xml
      popprof trend runs/ trace.device_idle_us -o trend.png
      popprof trend ack runs/ trace.device_idle_us 4121
      popprof trend runs/ --findings --profile bert --fail-on warning
      popprof trend ack runs/ host.launch-overhead 4130
    """


@trend_command.command("show")
@click.argument("store")
@click.argument("metrics", nargs=-1)
@click.option(
    "--findings",
    is_flag=True,
    help="Report the rules' findings instead of metrics: when each started, changed severity or stopped.",
)
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
    help="A regression (or a new finding) fails --fail-on only when it is within this many latest points.",
)
@click.option(
    "--budget", "budget_file", type=click.Path(), default=None, help="Budget file (as popprof diff)."
)
@click.option(
    "--fail-on",
    type=click.Choice(["regression", "info", "warning", "error", "never"]),
    default="never",
    show_default=True,
    help="regression (metrics), or with --findings a severity: a new finding at or above it fails.",
)
@output_option("the report (a .png, .svg or .pdf name: the plot of each series, the report on stdout)")
@config_option()
@format_option("text", "json", "markdown", "junit")
def show_command(
    store: str,
    metrics: tuple[str, ...],
    findings: bool,
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
    """Report the changes of METRICS in STORE (exit 1 with --fail-on regression on an unacknowledged one), or
    with --findings when each rule's finding started, changed or stopped (exit 1 with --fail-on SEVERITY on an
    unacknowledged new one)."""
    from ..model.errors import UsageError

    if findings:
        if metrics:
            raise UsageError("--findings reports the findings only: run popprof trend again for the metrics")
        if fail_on == "regression":
            raise UsageError(
                "--fail-on regression is for metrics; with --findings give info, warning or error"
            )
        if output is not None and not is_stdout(output) and output.suffix.lower() in PLOT_SUFFIXES:
            raise UsageError("--findings has no plot: give -o a text, JSON, Markdown or XML name")
        _show_findings(store, profile, branch, last, each_run, recent, fail_on, output, fmt)
        return
    if not metrics:
        raise UsageError("give METRIC... to follow, or --findings")
    if fail_on in ("info", "warning", "error"):
        raise UsageError(f"--fail-on {fail_on} is for --findings; for metrics give regression")
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


def _show_findings(
    store: str,
    profile: str | None,
    branch: str | None,
    last: int,
    each_run: bool,
    recent: int,
    fail_on: str,
    output: Path | None,
    fmt: str,
) -> None:
    """``popprof trend STORE --findings``: the report of :mod:`popprof.store.trend_findings`."""
    from ..store import trend_report as report
    from ..store.trend_findings import findings_trend

    check_output(output, [store])
    profiles = findings_trend(
        store, profile=profile, branch=branch, last=last, recent=recent, collapse=not each_run
    )
    severity = fail_on if fail_on != "never" else "warning"
    width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
    render = {
        "text": lambda p: report.findings_text(p, width),
        "json": report.findings_json,
        "markdown": lambda p: report.findings_markdown(p, severity),
        "junit": lambda p: report.findings_junit(p, severity),
    }[fmt]
    emit(render(profiles), output)
    if fail_on != "never" and any(p.failing(fail_on) for p in profiles):
        raise click.exceptions.Exit(1)


@trend_command.command("ack")
@click.argument("store")
@click.argument("metric")
@click.argument("run_id")
@click.option("--note", default="", help="Why the change is accepted.")
def ack_command(store: str, metric: str, run_id: str, note: str) -> None:
    """Acknowledge the change of METRIC (or the new finding of a rule id, --findings) that starts at RUN_ID:
    --fail-on no longer fails on it."""
    from ..store.trend import acknowledge

    rel = acknowledge(store, metric, run_id, note)
    click.echo(f"acknowledged {metric} at run {run_id} ({rel})")
