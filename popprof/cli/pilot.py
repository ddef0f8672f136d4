"""``popprof pilot``: an IPU run and the platform it is compared with, the same figures side by side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..io.atomic import write_text_atomic
from ..io.plural import plural
from ..model.errors import InputError, UsageError
from .common import (
    FIGURES_ONLY,
    check_output,
    clean_for_json,
    config_option,
    device_map_inputs,
    emit,
    format_option,
    is_stdout,
    load_config_file,
    load_profiles,
    reader_options,
    reading_options,
    said_wrote,
    text_width,
)


def _positive(option: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        number = int(text)
    except ValueError:
        raise UsageError(f"{option} must be a whole number of samples >= 1, not {text!r}") from None
    if number < 1:
        raise UsageError(f"{option} must be a whole number of samples >= 1, not {text!r}")
    return number


def _parse_sets(sets: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in sets:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--set {item!r}: expected NAME=VALUE, e.g. --set does_not_fit_utilisation=0.95")
        out[name.strip()] = value.strip()
    return out


def _columns(
    paths: tuple[str, ...], labels: tuple[str, ...], option: str, read: dict
) -> list[tuple[str, object]]:
    if labels and len(labels) != len(paths):
        raise UsageError(
            f"{option} given {plural(len(labels), 'time')} for {plural(len(paths), 'path')}; give one per path"
        )
    out = []
    for i, path in enumerate(paths):
        profiles = load_profiles(path, **read)
        for name, profile in profiles.items():
            label = labels[i] if labels else Path(path).name or path
            out.append((label if len(profiles) == 1 else f"{label}:{name}", profile))
    return out


@click.command("pilot")
@click.argument("ipu_paths", nargs=-1, required=True, metavar="IPU_PATH...")
@click.option(
    "--baseline",
    "baselines",
    multiple=True,
    required=True,
    metavar="PATH",
    help="The run to compare with: a GPU trace, a directory of rank traces, or another IPU run "
    "(repeatable: one column each).",
)
@click.option(
    "--label-ipu",
    "ipu_labels",
    multiple=True,
    metavar="NAME",
    help="Column name of an IPU path (repeatable, one per IPU_PATH; default: the file name).",
)
@click.option(
    "--label-baseline",
    "baseline_labels",
    multiple=True,
    metavar="NAME",
    help="Column name of a baseline (repeatable, one per --baseline).",
)
@click.option(
    "--batch-size",
    default=None,
    metavar="N",
    help="Samples per step per replica (IPU) or rank (GPU): throughput in samples/s.",
)
@click.option(
    "--samples-per-step",
    default=None,
    metavar="N",
    help="Samples per step in total, on every side (instead of --batch-size).",
)
@click.option(
    "--warmup-steps",
    default="1",
    show_default=True,
    metavar="K",
    help="The first K steps are the warm-up, left out of the step-time figures.",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="NAME=VALUE",
    help="Override the diagnosis threshold, e.g. --set does_not_fit_utilisation=0.95 (docs/pilot.md).",
)
@config_option()
@format_option("text", "json", "markdown")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, allow_dash=True),
    default=None,
    metavar="FILE",
    help="FILE.html: the HTML report with both sides' plots (the --format table still goes to stdout); "
    "any other name: the --format output, written there (atomically) instead of stdout; - is stdout.",
)
@reading_options()
def pilot_command(
    ipu_paths: tuple[str, ...],
    baselines: tuple[str, ...],
    ipu_labels: tuple[str, ...],
    baseline_labels: tuple[str, ...],
    batch_size: str | None,
    samples_per_step: str | None,
    warmup_steps: str,
    sets: tuple[str, ...],
    config_file: Path | None,
    fmt: str,
    output: Path | None,
    device_map: str | None,
) -> None:
    """Compare an IPU run with the platform it replaces: the same figures side by side.

    Compile time, warm-up, step-time percentiles, throughput, device busy /
    compute / communication or all exchange / copies or stream copies / sync /
    idle with the host not submitting shares, memory headroom, rule findings,
    and a diagnosis per side: does not fit, else the run's limit as summary
    states it (device compute, data movement, load imbalance, host, launch or
    dependency, undetermined). A figure a side lacks is
    shown as missing with what to capture, never as 0. Several IPU paths
    give one column each. Exit 2 on bad input or usage.

    \b
    Examples:
      popprof pilot run_dir/ --baseline trace.json.gz --batch-size 32
      popprof pilot 1ipu.popprof 4ipu.popprof --label-ipu 1xIPU --label-ipu 4xIPU --baseline ranks/
      popprof pilot run_dir/ --baseline ranks/ --format markdown -o pilot.md
      popprof pilot run_dir/ --baseline ranks/ -o pilot.html
    """
    from ..pilot import pilot
    from ..pilot.figures import platform_of
    from ..pilot.render import render_html, render_markdown, render_text

    batch = _positive("--batch-size", batch_size)
    samples = _positive("--samples-per-step", samples_per_step)
    if batch is not None and samples is not None:
        raise UsageError("give --batch-size or --samples-per-step, not both")
    try:
        warmup = int(warmup_steps)
    except ValueError:
        warmup = -1
    if warmup < 0:
        raise UsageError(f"--warmup-steps must be a whole number >= 0, not {warmup_steps!r}")
    config = load_config_file(config_file)
    from ..pilot.diagnose import thresholds_from

    overrides = _parse_sets(sets)
    thresholds_from(config, overrides)  # bad thresholds before reading anything
    check_output(output, [*ipu_paths, *baselines, config_file, *device_map_inputs(device_map)])
    read = reader_options(device_map, config, **FIGURES_ONLY)
    ipu = _columns(ipu_paths, ipu_labels, "--label-ipu", read)
    for label, profile in ipu:
        if platform_of(profile) != "ipu":
            raise InputError(
                profile.source or label,
                "is not an IPU run (it reads as a GPU trace); give it as "
                "--baseline, and an IPU run (run directory, bundle, .pvti, text summary) as IPU_PATH",
            )
    base = _columns(baselines, baseline_labels, "--label-baseline", read)
    doc = clean_for_json(
        pilot(
            ipu,
            base,
            batch_size=batch,
            samples=samples,
            warmup_steps=warmup,
            thresholds=overrides,
            config=config,
        )
    )
    html = not is_stdout(output) and output.suffix.lower() in (".html", ".htm")
    if fmt == "json":
        text = json.dumps(doc, indent=2) + "\n"
    elif fmt == "markdown":
        text = render_markdown(doc)
    else:  # on stdout also beside an HTML report
        text = (
            render_text(doc, text_width(terminal=(is_stdout(output) or html) and sys.stdout.isatty())) + "\n"
        )
    if html:
        write_text_atomic(output, render_html(doc, [p for _, p in ipu + base]))
        said_wrote(output)
        click.echo(text, nl=False)
    else:
        emit(text, output)
