"""``popprof diff BASE NEW`` (compare and gate) and ``popprof baseline PATH -o FILE``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..io.progress import progress
from ..model.errors import UsageError
from .common import (
    FIGURES_ONLY,
    check_output,
    config_option,
    device_map_inputs,
    emit,
    format_option,
    is_stdout,
    load_config_file,
    output_option,
    reader_options,
    reading_options,
    report_read_warnings,
    require_inputs,
    said_wrote,
    select_engine,
    text_width,
    top_option,
)

if TYPE_CHECKING:
    from ..model.profile import Profile


def _one_profile(path: str, engine: str | None, **options: object) -> Profile:
    profiles = _open(path, engine, **options)
    if len(profiles) != 1:
        raise UsageError(
            f"{path}: holds {len(profiles)} profiles ({', '.join(profiles)}); pick one with --engine NAME"
        )
    return next(iter(profiles.values()))


def _open(path: str, engine: str | None, **options: object) -> dict[str, Profile]:
    """Profiles of ``path``; ``engine`` picks one when the path holds several (a single profile is kept as is)."""
    from ..readers import open_all

    profiles = open_all(path, **options)
    if engine is not None and len(profiles) > 1:
        profiles = select_engine(path, profiles, engine)
    for profile in profiles.values():
        report_read_warnings(profile)
    return profiles


def pair_profiles(
    base: str, new: str, engine: str | None, **options: object
) -> tuple[list[tuple[str, Profile, Profile]], list[str]]:
    """Pair the profiles of two paths: one to one, or by engine name for run directories.

    Returns the pairs (engine name, base, new) and notes on profiles only one side has. ``options`` go to
    the readers (e.g. ``device_map``: both sides are read with the same map).
    """
    left, right = _open(base, engine, **options), _open(new, engine, **options)
    if len(left) == 1 and len(right) == 1:
        (name, b), (_, n) = next(iter(left.items())), next(iter(right.items()))
        return [(name, b, n)], []
    common = [name for name in left if name in right]
    if not common:
        raise UsageError(
            f"no profile name in common between {base} ({', '.join(left)}) and {new} "
            f"({', '.join(right)}); pick one on each side with --engine NAME"
        )
    notes = [
        f"only in {label}: {', '.join(sorted(set(side) - set(common)))}"
        for label, side in (("base", left), ("new", right))
        if set(side) - set(common)
    ]
    return [(name, left[name], right[name]) for name in common], notes


@click.command("diff")
@click.argument("base", type=click.Path(exists=False, dir_okay=True))
@click.argument("new", type=click.Path(exists=False, dir_okay=True))
@format_option("text", "json", "markdown", "junit", "html")
@click.option("--all", "include_unchanged", is_flag=True, help="Include unchanged metrics.")
@click.option(
    "--budget",
    "budget_file",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Budget file (TOML or JSON). Default: [tool.popprof.gate] in pyproject.toml / popprof.toml, "
    "else the built-in default budget.",
)
@config_option(
    "Read [tool.popprof.gate] from this file instead of the nearest pyproject.toml / popprof.toml."
)
@click.option("--strict", is_flag=True, help="Fail when a budgeted metric is missing on one side (a gap).")
@click.option("--no-gate", is_flag=True, help="Report only; never exit 1.")
@output_option("the report")
@top_option("Tiles / programs / events")
@click.option(
    "--tolerance",
    type=click.FloatRange(0, None),
    default=None,
    metavar="FRACTION",
    help="Relative change under which a program or event total counts as unchanged [default: 0.01].",
)
@click.option(
    "--events-on",
    type=click.Choice(["device", "host"]),
    default=None,
    help="List only the trace event names of device work (kernels, copies) or of host work.",
)
@reading_options(engine=True)
def diff_command(
    base: str,
    new: str,
    fmt: str,
    include_unchanged: bool,
    budget_file: str | None,
    config_file: str | None,
    strict: bool,
    no_gate: bool,
    output: str | None,
    top: int,
    tolerance: float | None,
    events_on: str | None,
    engine: str | None,
    device_map: str | None,
) -> None:
    """Compare two profiles (or a baseline JSON and a profile) and gate regressions.

    Shows the metrics that changed, biggest relative change first, then the
    tiles, programs and trace events that changed most. Two run directories
    are compared engine by engine (matched by name). Exits 1 when a metric
    exceeds its budget (or, with --strict, when a budgeted metric is missing on
    one side), 2 on unreadable input or a bad budget file.

    \b
    Examples:
      popprof diff old.popprof new.popprof
      popprof diff baseline.json run/profile.pop --format markdown > comment.md
      popprof diff baseline.json new.popprof --budget budget.toml --strict --format junit > gate.xml
      popprof diff old.popprof new.popprof --format html -o diff.html
    """
    require_inputs(base, new)  # before the comparison's imports: a missing file is said at once
    from ..compare import DEFAULT_TOLERANCE, diff, gate, load_budget
    from ..report.diff import render_many

    # before any reading: a bad output path fails fast
    check_output(output, [base, new, budget_file, config_file, *device_map_inputs(device_map)])
    budget = None if no_gate else load_budget(budget_file, config_file=config_file)
    config = load_config_file(Path(config_file) if config_file else None)
    read_options = reader_options(device_map, config, **FIGURES_ONLY)
    results = []
    with progress("popprof diff: reading", total=None) as advance:
        pairs, notes = pair_profiles(base, new, engine, **read_options)
        advance(1)
    with progress("popprof diff: comparing", total=len(pairs)) as advance:
        for name, base_profile, new_profile in pairs:
            result = diff(
                base_profile,
                new_profile,
                tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance,
                events_on=events_on,
            )
            gate_result = None if budget is None else gate(result, budget, strict=True if strict else None)
            results.append((name, result, gate_result))
            advance(1)
    if fmt == "html":  # one self-contained page: a section per diff (engine named only for run directories)
        from ..report.diff_html import render_html

        named = results if len(results) > 1 or notes else [(None, r, g) for _, r, g in results]
        text = render_html(named, notes=notes, include_unchanged=include_unchanged, top=top)
    else:
        width = text_width(terminal=is_stdout(output) and sys.stdout.isatty())
        text = render_many(
            results, fmt, notes=notes, include_unchanged=include_unchanged, top=top, width=width
        )
    emit(text, output)
    if any(g is not None and not g.passed for _, _, g in results):
        raise click.exceptions.Exit(1)


@click.command("baseline")
@click.argument("path", type=click.Path(exists=False, dir_okay=True))
@output_option("the baseline")
@reading_options(engine=True, config=True)
def baseline_command(
    path: str, output: Path | None, engine: str | None, config_file: Path | None, device_map: str | None
) -> None:
    """Write a profile's metrics as a small, diff-friendly JSON baseline, safe to commit.

    CI then keeps only the baseline, not the old profile:
    `popprof diff baseline.json NEW` gates against it.

    \b
    Examples:
      popprof baseline run/profile.pop -o baseline.json
      popprof diff baseline.json new/profile.pop
    """
    require_inputs(path)
    from ..compare.baseline import dumps_baseline, write_baseline

    check_output(output, [config_file, *device_map_inputs(device_map)])
    config = load_config_file(config_file)
    profile = _one_profile(path, engine, **reader_options(device_map, config, **FIGURES_ONLY))
    if output is None or str(output) == "-":
        click.echo(dumps_baseline(profile), nl=False)
        return
    write_baseline(profile, output, protect=[path])
    said_wrote(output)
