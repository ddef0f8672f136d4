"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..io.progress import quiet, set_quiet
from ..model.errors import InputError, UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..io.config import Config
    from ..model.profile import Profile

# This module is imported by every command's module, also for ``--help``: it imports nothing heavy
# (pandas, pyarrow, the readers) at module level.

#: Help of the options every command takes, before or after its name (``popprof -q summary X`` and
#: ``popprof summary X -q`` are the same).
QUIET_HELP = "No progress output and no 'wrote FILE' line on stderr."
LIMIT_HELP = "Raise (or lower) a safety limit for this run, e.g. --limit text-bytes=1G (docs/limits.md)."


def _apply_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        set_quiet(True)
    return value


def _apply_limits(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """``--limit NAME=VALUE``: the limits in force until this command's context closes (then the caller's)."""
    if not value:
        return value
    from ..io import limits

    previous = chosen = limits.current()
    for assignment in value:
        if "=" not in assignment and ctx.command.name == "query" and assignment.strip().isdigit():
            # the old spelling of ``query --rows N``: kept, with a note (the global --limit is NAME=VALUE)
            ctx.meta["popprof.query_rows"] = int(assignment)
            continue
        chosen = chosen.with_option(assignment)
    if chosen is not previous:
        limits.enter(chosen)
        ctx.call_on_close(partial(limits.enter, previous))
    return value


def global_options(command: Callable) -> Callable:
    """``-q/--quiet`` and ``--limit NAME=VALUE``, the options of ``popprof`` itself, on a command too."""
    command = click.option(
        "--limit",
        "limit_values",
        multiple=True,
        metavar="NAME=VALUE",
        expose_value=False,
        callback=_apply_limits,
        help=LIMIT_HELP,
    )(command)
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=_apply_quiet,
        help=QUIET_HELP,
    )(command)


def config_option(
    help: str = "Config file (default: nearest popprof.toml or pyproject.toml [tool.popprof] upwards).",
) -> Callable:
    """``--config FILE``: the configuration to read instead of the nearest popprof.toml / pyproject.toml
    (``help`` says what the command takes from it when that differs, as for redaction)."""
    return click.option(
        "--config",
        "config_file",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        metavar="FILE",
        help=help,
    )


def shapes_option() -> Callable:
    """``--shapes/--no-shapes``: read the events' arguments or not (default None: when the trace's start records
    them, :func:`reads_arguments`), for the commands that show the operator and collective analyses."""
    return click.option(
        "--shapes/--no-shapes",
        default=None,
        help=(
            "Read the events' arguments (operators' shapes: FLOPs and roofline; "
            "collectives' sizes: bandwidths). Default: when the trace's start records them."
        ),
    )


def _parse_steps(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    """``N`` or ``A-B`` -> ``(first, last)`` step numbers; a usage error otherwise."""
    if value is None:
        return None
    first, _, last = value.strip().partition("-")
    try:
        steps = (int(first), int(last or first))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a step number N or a range A-B", ctx, param) from None
    if steps[0] < 0 or steps[1] < steps[0]:
        raise click.BadParameter(f"{value!r}: a range A-B runs from A up to B (both 0 or more)", ctx, param)
    return steps


def critical_path_options(action: str) -> Callable:
    """``--critical-path`` (``action``: what the command does with each rank's critical path) and ``--steps N``
    or ``A-B`` (only the work of those profiler steps, HTA's annotation window; implies ``--critical-path``)."""

    def decorate(command: Callable) -> Callable:
        command = click.option(
            "--steps",
            "steps",
            metavar="N|A-B",
            callback=_parse_steps,
            help="With --critical-path: only the work of these ProfilerStep#N steps (implies it).",
        )(command)
        return click.option(
            "--critical-path",
            is_flag=True,
            help=f"{action} (HTA's model; reads the events' arguments, for the sync events).",
        )(command)

    return decorate


#: ``--min-sequence-length``'s default: HTA 0.5.0's ``min_pattern_len``.
MIN_SEQUENCE_LENGTH = 3


def kernel_sequence_options() -> Callable:
    """``--kernel-sequences OP`` (the frequent kernel sequences under the calls whose name contains OP, HTA's
    fusion candidates) and ``--min-sequence-length N`` (the fewest kernels such a sequence holds)."""

    def decorate(command: Callable) -> Callable:
        command = click.option(
            "--min-sequence-length",
            "min_sequence_length",
            type=click.IntRange(min=1),
            default=MIN_SEQUENCE_LENGTH,
            show_default=True,
            metavar="N",
            help="With --kernel-sequences: the fewest kernels a sequence holds (HTA's min_pattern_len).",
        )(command)
        return click.option(
            "--kernel-sequences",
            "sequences",
            metavar="OP",
            help="Add the frequent kernel sequences under the calls whose name contains OP (HTA's; fusion "
            "candidates).",
        )(command)

    return decorate


def require_steps(profile: Profile, steps: tuple[int, int] | None) -> None:
    """A usage error when ``steps`` (``--steps``) names no step of ``profile`` the critical path can look at,
    naming the steps it has."""
    if steps is None:
        return
    from ..metrics.critical_path import path_steps

    found = path_steps(profile)
    if any(steps[0] <= n <= steps[1] for n in found):
        return
    asked = str(steps[0]) if steps[0] == steps[1] else f"{steps[0]}-{steps[1]}"
    has = ", ".join(map(str, found)) if found else "none"
    raise UsageError(
        f"--steps {asked}: {profile.name} has no such ProfilerStep#N to look at (its steps: {has}; the last "
        "step of a trace with several is left out, as HTA does)"
    )


def top_option(what: str) -> Callable:
    """``--top N``: how many ``what`` each section lists (``summary``, ``diff``)."""
    return click.option(
        "--top",
        type=click.IntRange(1, 10_000),
        default=10,
        show_default=True,
        help=f"{what} listed per section.",
    )


def last_option(what: str, *, minimum: int = 1, default: int | None = None) -> Callable:
    """``--last N``: only the N latest ``what`` of a store (``store ls``, ``trend``, ``fleet ranks``)."""
    return click.option(
        "--last",
        type=click.IntRange(minimum, None),
        default=default,
        show_default=default is not None,
        metavar="N",
        help=f"Only the N latest {what}.",
    )


def output_option(what: str = "the result") -> Callable:
    """``-o/--output FILE``: write ``what`` there atomically instead of stdout (``-`` is stdout)."""
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
        default=None,
        metavar="FILE",
        help=f"Write {what} to FILE (atomically) instead of stdout; - is stdout.",
    )


def load_config_file(config_file: Path | None) -> Config:
    """The configuration: ``--config FILE`` when given, else the nearest popprof.toml / pyproject.toml."""
    from ..io.config import load_config

    return load_config(explicit=config_file)


def is_stdout(output: str | os.PathLike[str] | None) -> bool:
    """True when ``-o`` is absent or ``-``: the result goes to standard output."""
    return output is None or str(output) == "-"


#: Width of text for people written to a pipe or a file when ``COLUMNS`` is not set (docs/figures.md).
PIPED_WIDTH = 80


def text_width(*, terminal: bool) -> int:
    """The width text for people is laid out for: ``COLUMNS`` when set to a number (the user's, or the
    shell's when exported), else the terminal's width on a terminal, else 80 columns (a CI log, a file)."""
    import shutil

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if terminal:
        return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns
    return PIPED_WIDTH


def check_output(output: str | os.PathLike[str] | None, inputs: list) -> None:
    """Before any reading: ``output`` must not overwrite an input and must not be a directory."""
    from ..io.atomic import refuse_overwriting_inputs

    if is_stdout(output):
        return
    refuse_overwriting_inputs(output, inputs)
    if Path(output).resolve().is_dir():
        raise UsageError(f"--output {output} is a directory; give a file name")


def said_wrote(path: str | os.PathLike[str], detail: str | None = None) -> None:
    """The one ``popprof: wrote FILE`` line on stderr every command gives after writing; ``-q`` silences it."""
    if quiet():
        return
    from ..model.errors import display_path

    click.echo(f"popprof: wrote {display_path(path)}" + (f" ({detail})" if detail else ""), err=True)


def emit(text: str, output: str | os.PathLike[str] | None) -> None:
    """``text`` on stdout (no ``-o``, or ``-o -``), else written to ``output`` atomically and said on stderr."""
    if is_stdout(output):
        click.echo(text, nl=False)
        return
    from ..io.atomic import write_text_atomic

    write_text_atomic(output, text)
    said_wrote(output)


def format_option(*choices: str, default: str = "text") -> Callable:
    """``--format`` with the given choices."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=True,
        help="Output format.",
    )


def engine_option() -> Callable:
    """``--engine NAME`` to pick one engine of a run directory."""
    return click.option(
        "--engine",
        default=None,
        metavar="NAME",
        help="For a run directory with several engines: analyse only this one.",
    )


def device_map_option() -> Callable:
    """``--device-map JSON|FILE``: which trace events are device activity (every command that reads traces)."""
    return click.option(
        "--device-map",
        "device_map",
        default=None,
        metavar="JSON|FILE",
        help="Which trace events are device activity: a JSON object category -> regular "
        "expression, or a file holding one (default: [tool.popprof.device_map] / the "
        "[device_map] table of popprof.toml).",
    )


def reading_options(*, engine: bool = False, config: bool = False) -> Callable:
    """The options of a command that reads profiles, in this order: ``--engine`` (with ``engine``),
    ``--config FILE`` (with ``config``), ``--device-map``, then the global ``-q`` and ``--limit``. One
    decorator instead of the same stack on each command, so every reading command takes them alike."""
    stack = [
        *([engine_option()] if engine else []),
        *([config_option()] if config else []),
        device_map_option(),
        global_options,
    ]

    def decorate(command: Callable) -> Callable:
        for option in reversed(stack):  # click lists the options in the order the decorators are written
            command = option(command)
        return command

    return decorate


def device_map_inputs(device_map: str | None) -> list[str]:
    """The file a ``--device-map`` names (for the never-overwrite-an-input check); [] for inline JSON."""
    return [device_map] if device_map and not device_map.lstrip().startswith("{") else []


def reader_options(
    device_map: str | None = None, config: Config | Mapping | None = None, **options: object
) -> dict:
    """Reader options with the device map resolved: ``--device-map`` wins, else the config's ``device_map``.

    A bad map (unknown category, bad regex, unreadable file) is a UsageError before any profile is read.
    """
    from ..io.config import Config
    from ..trace.device import load_device_map

    configured = Config.of(config).device_map
    if device_map is not None:
        mapping = load_device_map(device_map)
    elif configured:
        if not isinstance(configured, dict | str):
            raise UsageError(
                'the [device_map] configuration must be a table: category = "regular expression"'
            )
        mapping = load_device_map(configured)
    else:
        mapping = None
    out = dict(options)
    if mapping is not None:
        out["device_map"] = mapping
    return out


def require_inputs(*paths: str | os.PathLike[str] | None) -> None:
    """A missing input reported at once, before the imports a read makes (pandas, pyarrow, the readers: about
    0.4 s): the same one line the reader would give (``popprof.io.bounded.check_input_file``), within 3x of
    ``popprof --version`` (issue 46). Only absence is checked here: ``-``, URLs (``s3://``) and every other
    problem are left to the read."""
    for path in paths:
        if path is None or str(path) == "-" or "://" in str(path):
            continue
        try:
            os.stat(path)
        except FileNotFoundError:
            raise InputError(path, "no such file or directory") from None
        except (OSError, ValueError):
            continue


def start_reading(
    path: str | os.PathLike[str], *, with_args: bool = False, flows_on_use: bool = False
) -> None:
    """A command about to read ``path``: a large Chrome trace starts parsing now, on a worker forked before
    the imports the command makes first (pandas, ~0.2 s); the read adopts it (:mod:`popprof.readers.chrome.early`).

    Call it once the command's own checks of its arguments have passed, before anything imports pandas,
    with the ``with_args`` and ``flows_on_use`` the read will use (:data:`FIGURES_ONLY`). Anything else
    (not a trace, small, gzip) starts nothing. A missing ``path`` is an InputError here (:func:`require_inputs`).
    """
    require_inputs(path)
    from ..readers.chrome import early

    early.start(path, with_args=with_args, flows=not flows_on_use)


def reads_arguments(paths: Iterable[str | os.PathLike[str]], shapes: bool | None) -> bool:
    """Whether a command reads the events' arguments: as ``--shapes/--no-shapes`` says, else when a trace among
    ``paths`` (a file, or the first trace file of a directory) records input shapes, collectives' sizes or
    range-profiler counters (:func:`popprof.readers.chrome.sniffing.records_arguments`). Other formats have no
    such arguments."""
    if shapes is not None:
        return shapes
    paths = list(paths)
    require_inputs(*paths)  # a missing path is said first, before the readers' imports
    from ..readers.chrome.sniffing import ARGUMENT_MARKERS

    return _records(paths, ARGUMENT_MARKERS)


def _records(paths: Iterable[str | os.PathLike[str]], markers: tuple[bytes, ...]) -> bool:
    """Whether a Chrome trace among ``paths`` (a file, or the first trace file of a directory) holds one of
    ``markers`` in its head (:func:`popprof.readers.chrome.sniffing.source_records`); the paths exist."""
    from ..readers.chrome.sniffing import source_records

    return any(source_records(Path(given), markers) for given in paths)


#: the reader option of a command that shows figures, never a trace's flows (summary, check, diff, baseline,
#: pilot, plot, report): the Chrome reader counts the flow events instead of reading them, and reads them
#: from the file if the flows table is used after all (``popprof.readers.chrome.read``, ``flows_on_use``)
FIGURES_ONLY = {"flows_on_use": True}


def load_profiles(path: str | Path, engine: str | None = None, **options: object) -> dict[str, Profile]:
    """Open a path into profiles by name, keeping only ``engine`` when given."""
    from ..readers import open_all

    profiles = open_all(path, **options)
    if engine is not None:
        profiles = select_engine(path, profiles, engine)
    for profile in profiles.values():
        report_read_warnings(profile)
    return profiles


#: Sources already warned about in this command (each is said once, however often it is opened).
_warned: set[str] = set()


def reset_read_warnings() -> None:
    """Forget which sources were warned about (at the start of each command)."""
    _warned.clear()


def report_read_warnings(profile: Profile) -> None:
    """One stderr line saying, in plain words, what the reader worked around (``warnings.*`` metadata).

    Said once per source per command, and not for a bundle: its metadata keeps the problems of the
    source it was exported from, shown by ``popprof tables`` and ``popprof summary``.
    """
    from ..model.readproblems import describe

    text = describe(profile)
    source = str(profile.source or profile.name)
    if text is None or source in _warned or _is_bundle(profile):
        return
    _warned.add(source)
    click.echo(f"popprof: warning: {source}: read with problems: {text}", err=True)


def _is_bundle(profile: Profile) -> bool:
    from ..readers.bundle import is_bundle

    return bool(profile.source) and is_bundle(Path(str(profile.source)))


def select_engine(path: str | Path, profiles: dict[str, Profile], engine: str) -> dict[str, Profile]:
    """The one profile named ``engine`` among ``profiles`` (read from ``path``); InputError when absent."""
    if engine not in profiles:
        raise InputError(path, f"no engine {engine!r}; found: {', '.join(profiles)}")
    return {engine: profiles[engine]}


def load_one_profile(path: str | Path, engine: str | None = None, **options: object) -> Profile:
    """Open a path that must give a single profile (``engine`` picks one of a run directory).

    Commands that work on one profile (query, baseline, timeline, plot) raise
    UsageError naming the engines found when the path holds several.
    """
    profiles = load_profiles(path, engine, **options)
    if len(profiles) > 1:
        raise UsageError(
            f"{path}: holds {len(profiles)} profiles ({', '.join(profiles)}); pick one with --engine NAME"
        )
    return next(iter(profiles.values()))


def dumps_json(data: object) -> str:
    """``data`` as indented JSON text with a final newline (:func:`popprof.io.jsonout.dumps`)."""
    from ..io import jsonout

    return jsonout.dumps(data)


def echo_json(data: object, output: str | os.PathLike[str] | None = None) -> None:
    """Print ``data`` as indented JSON on stdout (NaN -> null), or write it to ``output``."""
    emit(dumps_json(data), output)


def clean_for_json(value: object) -> object:
    """``value`` as JSON-ready data (:func:`popprof.io.jsonout.plain`: NaN -> None, counts whole)."""
    from ..io import jsonout

    return jsonout.plain(value)
