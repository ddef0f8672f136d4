"""``popprof fleet``: questions across the many jobs of a store (``fleet ranks``)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import check_output, emit, format_option, last_option, output_option


@click.group("fleet")
def fleet_command() -> None:
    """Questions across the jobs of a run store (docs/store.md)."""


@fleet_command.command("ranks")
@click.argument("store")
@click.option(
    "--figure",
    default="step_us",
    show_default=True,
    help="Per-rank figure: step_us, step_p90_us, late_start or idle_share.",
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

    \b
    Examples:
      popprof fleet ranks runs/ --last 1000 --z 3.5
      popprof fleet ranks runs/ --format csv -o stragglers.csv
    """
    from ..store.fleet import straggling_ranks
    from .store import frame_text

    check_output(output, [store])
    emit(frame_text(straggling_ranks(store, figure=figure, z=threshold, last=last), fmt), output)
