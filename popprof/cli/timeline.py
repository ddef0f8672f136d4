"""``popprof timeline PATH -o out.json``: any profile as a Chrome trace that Perfetto opens."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from .common import engine_option, load_one_profile


@click.command("timeline")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=Path),
              help="Chrome trace JSON to write (.json, or .json.gz to compress).")
@engine_option()
@click.option("--with-args", is_flag=True, help="Keep trace event args (Chrome traces) in the export.")
@click.option("--device-map", default=None, metavar="JSON|FILE",
              help="Override the device-activity mapping: a JSON object category -> regex, or a file holding one "
                   "(default: the [device_map] table of popprof.toml / [tool.popprof.device_map]).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="Config file to read instead of the nearest popprof.toml / pyproject.toml.")
def timeline_command(path: Path, output: Path, engine: str | None, with_args: bool, device_map: str | None,
                     config_path: Path | None) -> None:
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
    from ..atomic import refuse_overwriting_inputs
    from ..config import load_config
    from ..trace.device import load_device_map

    refuse_overwriting_inputs(output, [path, config_path,
                                       device_map if device_map and not device_map.lstrip().startswith("{") else None])
    from ..trace.timeline import write_timeline

    if device_map is None:
        configured = load_config(explicit=config_path).get("device_map")
        mapping = load_device_map(configured) if configured else None
    else:
        mapping = load_device_map(device_map)
    options: dict[str, object] = {"with_args": with_args}
    if mapping is not None:
        options["device_map"] = mapping
    profile = load_one_profile(path, engine, **options)
    if not (profile.has("events") or profile.has("steps")):
        raise UsageError(f"{path}: nothing to put on a timeline (no trace events and no execution steps)")
    stats = write_timeline(profile, output)
    for note in stats.notes:
        click.echo(f"popprof: note: {note}", err=True)
    if stats.skipped_no_start:
        click.echo(f"popprof: note: {stats.skipped_no_start:,} events without a start time were left out",
                   err=True)
    click.echo(f"wrote {output}: {stats.events:,} events, {stats.steps:,} steps, {stats.counters:,} counter samples",
               err=True)
