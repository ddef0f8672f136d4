"""``popprof fleet``: questions across the many jobs of a store (``fleet ranks``)."""

from __future__ import annotations

import click

from .common import format_option


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
@click.option("--last", type=click.IntRange(1, None), default=None, help="Only the N latest jobs.")
@format_option("table", "csv", "json", default="table")
def ranks_command(store: str, figure: str, threshold: float, last: int | None, fmt: str) -> None:
    """Ranks and hosts of STORE that straggle repeatedly across jobs (robust z-score per job).

    \b
    Example:
      popprof fleet ranks runs/ --last 1000 --z 3.5
    """
    from ..store.fleet import straggling_ranks
    from .store import print_frame

    print_frame(straggling_ranks(store, figure=figure, z=threshold, last=last), fmt)
