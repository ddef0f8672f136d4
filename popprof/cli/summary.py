"""``popprof summary``: the key figures of a profile."""

from __future__ import annotations

import click

from ..io.config import load_config
from ..metrics.summary import summarise
from ..report.summary import render_text
from .common import (
    clean_for_json,
    device_map_option,
    echo_json,
    engine_option,
    format_option,
    load_profiles,
    reader_options,
)


@click.command("summary")
@click.argument("path", type=click.Path())
@engine_option()
@format_option("text", "json", "csv")
@device_map_option()
def summary_command(path: str, engine: str | None, fmt: str, device_map: str | None) -> None:
    """Summarise a profile: target, memory, execution and trace figures.

    PATH is a profile.pop, a run directory, a bundle, a text summary,
    SDK 1.x JSON, a .pvti, a Chrome trace or a directory of per-rank
    Chrome traces (one profile with every rank). --format csv prints the
    per-device table (one row per profile, rank and device: busy, idle,
    compute, communication, memory, overlap, host wait), the same columns
    for GPU traces and IPU profiles.

    \b
    Examples:
      popprof summary fixtures/mk2_training.popprof
      popprof summary run_dir/ --engine training --format json
      popprof summary traces_dir/ --format csv
    """
    profiles = load_profiles(path, engine, **reader_options(device_map, load_config()))
    if fmt == "csv":
        from ..metrics.devices import device_table

        click.echo(device_table(profiles.values()).to_csv(index=False), nl=False)
        return
    summaries = [summarise(p) for p in profiles.values()]
    if fmt == "json":
        echo_json(clean_for_json(summaries[0] if len(summaries) == 1 else summaries))
        return
    click.echo("\n\n".join(render_text(s) for s in summaries))
