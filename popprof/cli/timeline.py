"""``popprof timeline PATH -o out.json``: any profile as a Chrome trace that Perfetto opens."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..model.errors import UsageError
from .common import (
    critical_path_options,
    device_map_inputs,
    load_one_profile,
    reader_options,
    reading_options,
    require_inputs,
    require_steps,
    said_wrote,
    start_reading,
)

if TYPE_CHECKING:
    from ..model.profile import Profile
    from ..trace.timeline import Overlay


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
@critical_path_options(
    "Mark each rank's critical path (arg critical_path), its edges across threads as flows"
)
@reading_options(engine=True, config=True)
def timeline_command(
    path: Path,
    output: Path,
    engine: str | None,
    with_args: bool,
    critical_path: bool,
    steps: tuple[int, int] | None,
    device_map: str | None,
    config_file: Path | None,
) -> None:
    """Export PATH as Chrome trace JSON for ui.perfetto.dev or chrome://tracing.

    Host events are written as they are; execution steps of a Graph Analyser
    profile are laid out per IPU in time (cycles / clock frequency), coloured
    by category. With several engines, pick one with --engine.
    --critical-path marks the events on each rank's critical path of a GPU
    trace and draws its edges between threads or streams as arrows (flows,
    category critical_path); without GPU work the trace is written unchanged
    and a note says so.

    \b
    Examples:
      popprof timeline run_dir/training/profile.pop -o training.json
      popprof timeline trace.pvti -o trace.json.gz
      popprof timeline pytorch_trace.json.gz -o roundtrip.json --with-args
      popprof timeline trace.json.gz -o path.json --critical-path
      popprof timeline trace.json.gz -o step5.json --critical-path --steps 5
    """
    require_inputs(path)  # before the timeline's imports: a missing file is said at once
    from ..io.atomic import refuse_overwriting_inputs
    from ..io.config import load_config
    from ..trace.timeline import write_timeline

    refuse_overwriting_inputs(output, [path, config_file, *device_map_inputs(device_map)])
    critical_path = critical_path or steps is not None
    reads_args = with_args or critical_path  # the path's syncs are in the args
    start_reading(path, with_args=reads_args)
    options = reader_options(device_map, load_config(explicit=config_file), with_args=reads_args)
    profile = load_one_profile(path, engine, **options)
    if not (profile.has("events") or profile.has("steps")):
        raise UsageError(f"{path}: nothing to put on a timeline (no trace events and no execution steps)")
    require_steps(profile, steps)
    overlay = _critical_path(profile, steps) if critical_path else None
    stats = write_timeline(profile, output, overlay=overlay, keep_args=with_args)
    if overlay is not None:
        from ..io.plural import plural

        marked, arrows = plural(stats.marked, "event"), plural(stats.overlay_flows // 2, "arrow")
        click.echo(f"popprof: critical path: {marked} marked, {arrows} across threads and streams", err=True)
    for note in stats.notes:
        click.echo(f"popprof: note: {note}", err=True)
    if stats.skipped_no_start:
        click.echo(
            f"popprof: note: {stats.skipped_no_start:,} events without a start time were left out", err=True
        )
    said_wrote(output, f"{stats.events:,} events, {stats.steps:,} steps, {stats.counters:,} counter samples")


def _critical_path(profile: Profile, steps: tuple[int, int] | None) -> Overlay | None:
    """The critical path overlay (of ``steps`` only, when given), or None (said in a note) when the trace has
    none."""
    from ..metrics.critical_overlay import critical_path_overlay

    overlay = critical_path_overlay(profile, steps)
    if overlay is None:
        click.echo(
            "popprof: note: no critical path (no GPU work with its launch call in the trace); "
            "written unchanged",
            err=True,
        )
    return overlay
