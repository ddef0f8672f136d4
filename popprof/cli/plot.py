"""``popprof plot`` (one figure to PNG/SVG/PDF) and ``popprof report`` (a self-contained HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..io.atomic import refuse_overwriting_inputs
from ..model.errors import UsageError
from .common import (
    FIGURES_ONLY,
    config_option,
    critical_path_options,
    device_map_inputs,
    kernel_sequence_options,
    load_one_profile,
    load_profiles,
    reader_options,
    reading_options,
    reads_arguments,
    require_inputs,
    require_steps,
    said_wrote,
    shapes_option,
)

if TYPE_CHECKING:
    from ..io.config import Config

PLOT_KINDS = (
    "memory",
    "histogram",
    "tilemap",
    "liveness",
    "execution",
    "timeline",
    "account",
    "categories",
    "roofline",
    "device-memory",
)
IMAGE_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def _use_agg() -> None:
    from ..plots import require_matplotlib

    matplotlib = require_matplotlib()
    matplotlib.use("Agg")


def _config(config_file: Path | None) -> Config:
    from ..io.config import load_config

    return load_config(explicit=config_file)


@click.command("plot")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--kind",
    type=click.Choice(PLOT_KINDS),
    default=None,
    metavar="KIND",  # the kinds are listed, one per line, in the text above
    help="Which plot to draw [default: the most useful one the profile can draw: memory for a full "
    "profile, the histogram for a text summary, the timeline for a trace].",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    metavar="FILE",
    help="Image to write (.png, .svg or .pdf), atomically.",
)
@click.option(
    "--dpi", type=click.IntRange(30, 600), default=120, show_default=True, help="Resolution of PNGs."
)
@click.option(
    "--ipu", type=int, default=None, help="execution: cycles of this IPU (default: busiest per step)."
)
@config_option("Config for the rule thresholds and shaded findings (default: nearest pyproject.toml).")
@reading_options(engine=True)
def plot_command(
    path: Path,
    kind: str | None,
    output: Path,
    dpi: int,
    ipu: int | None,
    config_file: Path | None,
    engine: str | None,
    device_map: str | None,
) -> None:
    """Draw one plot of a profile to an image file.

    \b
    Kinds:
      memory     memory per tile by category, capacity and headroom lines, flagged tiles
      histogram  number of tiles per memory range
      tilemap    each IPU's tiles as a grid coloured by memory use
      liveness   live memory per program step, the peak marked with its program
      execution  cycles by category over steps, exchange-heavy phases shaded
      timeline   host threads and device activity over time, stalls shaded
      roofline   GPU operators' achieved TFLOP/s against the device's roofline
                 (reads the trace's recorded shapes)
      device-memory
                 a GPU trace's allocated and reserved bytes over time, the
                 peak named with its operator, profiler steps shaded
                 (a trace recorded with profile_memory=True)

    Without --kind, draws the most useful plot the profile can: memory, else
    the histogram, else the timeline (then execution, liveness, tilemap).
    A --kind the profile cannot draw stops with one line listing the kinds it can.

    \b
    Examples:
      popprof plot profile.popprof -o memory.png
      popprof plot profile.popprof --kind memory -o memory.png
      popprof plot reports/ --engine training --kind liveness -o liveness.svg
      popprof plot trace.json.gz --kind timeline -o timeline.png
      popprof plot trace.json.gz --kind roofline -o roofline.png
      popprof plot trace.json.gz --kind device-memory -o memory.png
    """
    fmt = IMAGE_FORMATS.get(output.suffix.lower())
    if fmt is None:
        raise UsageError(f"{output}: unknown image type {output.suffix!r}; use .png, .svg or .pdf")
    require_inputs(path)  # before matplotlib and the readers: a missing file is said at once
    refuse_overwriting_inputs(output, [path, config_file, *device_map_inputs(device_map)])
    config = _config(config_file)
    # the roofline needs the operators' recorded shapes: the events' arguments
    read_options = reader_options(device_map, config, with_args=kind == "roofline", **FIGURES_ONLY)
    _use_agg()
    from ..io.atomic import atomic_path
    from ..plots import plot
    from ..report.html import run_checks

    profile = load_one_profile(path, engine, **read_options)
    kind = _drawable_kind(profile, kind)
    findings = run_checks(profile, config) if kind in ("memory", "execution", "timeline") else None
    options = {"ipu": ipu} if kind == "execution" and ipu is not None else {}
    fig = plot(profile, kind, findings, config=config, **options)
    with atomic_path(output) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi)
    said_wrote(output, f"{kind} plot")


def _drawable_kind(profile, kind: str | None) -> str:
    """``kind`` if the profile can draw it, else (kind None) the default; UsageError listing what it can draw."""
    from ..plots import available_kinds, default_kind

    available = available_kinds(profile)
    if kind is None:
        kind = default_kind(profile)
        if kind is None:
            raise UsageError(
                f"{profile.source or profile.name}: nothing to plot (no tiles, liveness, steps, trace events, "
                "execution or memory totals); `popprof tables` shows what it holds"
            )
        return kind
    if kind not in available:
        raise UsageError(
            f"{profile.source or profile.name}: cannot draw --kind {kind} "
            f"({_needs(kind)}); it can draw: {', '.join(available) or 'nothing'}"
        )
    return kind


def _needs(kind: str) -> str:
    """What the kind needs, in the words of :data:`popprof.model.profile.NEEDS_HINT` (its first table set)."""
    from ..model.profile import NEEDS_HINT
    from ..plots import KINDS

    first = KINDS[kind][2][0][0]
    return f"no {first} table: " + NEEDS_HINT.get(first, f"needs a {first} table")


@click.command("report")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    metavar="FILE",
    help="HTML file to write, atomically.",
)
@click.option("--title", default=None, help="Report title (default: the profile names).")
@click.option("--svg", "svg", is_flag=True, help="Embed plots as inline SVG instead of PNG.")
@click.option("--no-plots", is_flag=True, help="Summary and findings only.")
@critical_path_options("Add each rank's critical path, and each step's on 2 or more steps")
@kernel_sequence_options()
@config_option("Config for the rule checks (default: nearest popprof.toml or pyproject.toml).")
@shapes_option()
@reading_options(engine=True)
def report_command(
    path: Path,
    output: Path,
    title: str | None,
    svg: bool,
    no_plots: bool,
    critical_path: bool,
    steps: tuple[int, int] | None,
    sequences: str | None,
    min_sequence_length: int,
    config_file: Path | None,
    shapes: bool | None,
    engine: str | None,
    device_map: str | None,
) -> None:
    """Write one self-contained HTML report (summary, findings, plots) to attach to a bug.

    The file needs no network to view: plots are embedded images and all
    styles are inline. A run directory with several engines gives one section
    per engine.

    \b
    Examples:
      popprof report profile.popprof -o report.html
      popprof report reports/ --svg -o report.html
      popprof report trace.json.gz --critical-path -o report.html
      popprof report trace.json.gz --kernel-sequences aten::conv2d -o report.html
    """
    require_inputs(path)  # before matplotlib and the readers: a missing file is said at once
    refuse_overwriting_inputs(output, [path, config_file, *device_map_inputs(device_map)])
    config = _config(config_file)
    critical_path = critical_path or steps is not None
    shapes = reads_arguments([path], shapes) or critical_path  # the path's syncs are in the args
    read_options = reader_options(device_map, config, with_args=shapes, **FIGURES_ONLY)
    if not no_plots:
        try:
            _use_agg()
        except UsageError as exc:
            click.echo(f"popprof: warning: {exc}; writing the report without plots", err=True)
            no_plots = True
    from ..report.html import write

    profiles = load_profiles(path, engine, **read_options)
    for profile in profiles.values():
        require_steps(profile, steps)
    write(
        list(profiles.values()),
        str(output),
        title=title,
        plots=not no_plots,
        image_format="svg" if svg else "png",
        config=config,
        critical_path=critical_path,
        steps=steps,
        kernel_sequences=sequences,
        min_sequence_length=min_sequence_length,
    )
    said_wrote(output)
