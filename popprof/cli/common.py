"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from ..model.errors import InputError, UsageError
from ..model.profile import Profile
from ..readers import open_all


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


def device_map_inputs(device_map: str | None) -> list[str]:
    """The file a ``--device-map`` names (for the never-overwrite-an-input check); [] for inline JSON."""
    return [device_map] if device_map and not device_map.lstrip().startswith("{") else []


def reader_options(device_map: str | None = None, config: dict | None = None, **options: object) -> dict:
    """Reader options with the device map resolved: ``--device-map`` wins, else the config's ``device_map``.

    A bad map (unknown category, bad regex, unreadable file) is a UsageError before any profile is read.
    """
    from ..trace.device import load_device_map

    configured = (config or {}).get("device_map")
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


def load_profiles(path: str | Path, engine: str | None = None, **options: object) -> dict[str, Profile]:
    """Open a path into profiles by name, keeping only ``engine`` when given."""
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
    from ..readers.bundle import MANIFEST

    return bool(profile.source) and (Path(str(profile.source)) / MANIFEST).is_file()


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


def echo_json(data: object) -> None:
    """Print ``data`` as indented JSON on stdout (NaN -> null)."""
    click.echo(json.dumps(data, indent=2, default=_json_default, allow_nan=False))


def _json_default(value: object) -> object:
    import numpy as np
    import pandas as pd

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if np.isnan(value) else float(value)
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)


def clean_for_json(value: object) -> object:
    """Replace NaN floats by None, recursively, so JSON output stays valid."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: clean_for_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_for_json(v) for v in value]
    return value
