"""``popprof timeline PATH -o out.json``: any profile as a Chrome trace that Perfetto opens."""

from __future__ import annotations

from pathlib import Path

import click

from ..model.errors import UsageError
from .common import (
    device_map_inputs,
    load_one_profile,
    reader_options,
    reading_options,
    require_inputs,
    said_wrote,
    start_reading,
)


@click.command("timeline")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(path_type=Path),
    help="Chrome trace JSON to write (.json, or .json.gz to compress).",
)
@click.option("--with-args", is_flag=True, help="Keep trace event args (Chrome traces) in the export.")
@reading_options(engine=True, config=True)
def timeline_command(
    path: Path,
    output: Path,
    engine: str | None,
    with_args: bool,
    device_map: str | None,
    config_file: Path | None,
) -> None:
    """Export PATH as Chrome trace JSON for ui.perfetto.dev or chrome://tracing.

    Host events are written as they are; execution steps of a Graph Analyser
    profile are laid out per IPU in time (cycles / clock frequency), coloured
    by category. With several engines, pick one with --engine.

    \b
    Examples:
      popprof timeline run_dir/training/profile.pop -o training.json
      popprof timeline trace.pvti -o trace.json.gz
      popprof timeline pytorch_trace.json.gz -o roundtrip.json --with-args
    """
    require_inputs(path)  # before the timeline's imports: a missing file is said at once
    from ..io.atomic import refuse_overwriting_inputs
    from ..io.config import load_config
    from ..trace.timeline import write_timeline

    refuse_overwriting_inputs(output, [path, config_file, *device_map_inputs(device_map)])
    start_reading(path, with_args=with_args)
    options = reader_options(device_map, load_config(explicit=config_file), with_args=with_args)
    profile = load_one_profile(path, engine, **options)
    if not (profile.has("events") or profile.has("steps")):
        raise UsageError(f"{path}: nothing to put on a timeline (no trace events and no execution steps)")
    stats = write_timeline(profile, output)
    for note in stats.notes:
        click.echo(f"popprof: note: {note}", err=True)
    if stats.skipped_no_start:
        click.echo(
            f"popprof: note: {stats.skipped_no_start:,} events without a start time were left out", err=True
        )
    said_wrote(output, f"{stats.events:,} events, {stats.steps:,} steps, {stats.counters:,} counter samples")
