"""``popprof export``: write a profile as a portable bundle (manifest + Parquet per table)."""

from __future__ import annotations

from pathlib import Path

import click

from ..io.atomic import refuse_overwriting_inputs
from ..model.errors import UsageError
from .common import (
    device_map_inputs,
    engine_option,
    load_config_file,
    load_profiles,
    reader_options,
    reading_options,
    require_inputs,
    said_wrote,
    start_reading,
)


@click.command("export")
@click.argument("src", type=click.Path())
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(),
    help="Bundle directory to write "
    "(NAME.popprof). For a run directory with several engines: a directory that gets one bundle "
    "per engine.",
)
@engine_option()
@click.option("--tile-cycles", is_flag=True, help="Also read per-tile cycles of every step (large).")
@click.option("--with-args", is_flag=True, help="Keep trace event args (Chrome traces).")
@reading_options(config=True)
def export_command(
    src: str,
    out: str,
    engine: str | None,
    tile_cycles: bool,
    with_args: bool,
    config_file: Path | None,
    device_map: str | None,
) -> None:
    """Export a profile as a bundle that needs no Poplar SDK to read.

    Run this where the SDK is installed; analyse the bundle anywhere
    (popprof, DuckDB, Spark, pandas).

    \b
    Examples:
      popprof export run_dir/training/profile.pop -o training.popprof
      popprof export run_dir/ -o bundles/
    """
    require_inputs(src)  # before the readers' imports: a missing file is said at once
    from ..readers import bundle

    refuse_overwriting_inputs(out, [config_file, *device_map_inputs(device_map)])
    start_reading(src, with_args=with_args)
    config = load_config_file(config_file)
    profiles = load_profiles(
        src, engine, **reader_options(device_map, config, tile_cycles=tile_cycles, with_args=with_args)
    )
    target = Path(out)
    if len(profiles) == 1:
        name, profile = next(iter(profiles.items()))
        written = [bundle.write(profile, target, protect=[src], name=name)]
    else:
        if target.exists() and not target.is_dir():
            raise UsageError(f"{out}: several profiles need a directory as output")
        written = [bundle.write(p, target / f"{name}.popprof", protect=[src]) for name, p in profiles.items()]
    for path in written:
        said_wrote(path)
