"""``popprof fleet``: questions across the many jobs of a store (``fleet ranks``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .common import check_output, emit, format_option, is_stdout, last_option, output_option, text_width


@click.group("fleet")
def fleet_command() -> None:
    """Questions across the jobs of a run store (docs/store.md)."""


@fleet_command.command("ranks")
@click.argument("store")
@click.option(
    "--figure",
    default="late_start",
    show_default=True,
    help="Per-rank figure: late_start (finds the late rank of a synchronous data-parallel job, where every "
    "rank's step time is the same), step_us, step_p90_us or idle_share.",
)
@click.option(
    "--z",
    "threshold",
    type=float,
    default=3.5,
    show_default=True,
    help="Robust z-score above which a rank straggles in a job.",
)
@last_option("jobs")
@format_option("table", "csv", "json", default="table")
@output_option("the table")
def ranks_command(
    store: str, figure: str, threshold: float, last: int | None, fmt: str, output: Path | None
) -> None:
    """Ranks and hosts of STORE that straggle repeatedly across jobs (robust z-score per job).

    The output says which figure it rests on: a first line in the table, a figure column in CSV and JSON.

    \b
    Examples:
      popprof fleet ranks runs/ --last 1000 --z 3.5
      popprof fleet ranks runs/ --format csv -o stragglers.csv
    """
    from ..report.fit import fit_lines
    from ..store.fleet import FIGURE_TEXT, straggling_ranks
    from .store import frame_text

    check_output(output, [store])
    found = straggling_ranks(store, figure=figure, z=threshold, last=last)
    found.insert(0, "figure", figure)
    width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
    text = frame_text(found, fmt, width=width, keys=("rank", "host"))
    if fmt == "table":
        head = f"figure: {figure}, {FIGURE_TEXT[figure]} (--figure to change); z > {threshold:g}"
        text = "\n".join(fit_lines([head], width)) + "\n" + text
    emit(text, output)
