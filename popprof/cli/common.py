"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from ..profile import Profile
from ..readers import open_all


def format_option(*choices: str, default: str = "text") -> Callable:
    """``--format`` with the given choices."""
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=default, show_default=True,
                        help="Output format.")


def engine_option() -> Callable:
    """``--engine NAME`` to pick one engine of a run directory."""
    return click.option("--engine", default=None, metavar="NAME",
                        help="For a run directory with several engines: analyse only this one.")


def load_profiles(path: str | Path, engine: str | None = None, **options: object) -> dict[str, Profile]:
    """Open a path into profiles by name, keeping only ``engine`` when given."""
    profiles = open_all(path, **options)
    if engine is not None:
        if engine not in profiles:
            from ..errors import InputError

            raise InputError(path, f"no engine {engine!r}; found: {', '.join(profiles)}")
        profiles = {engine: profiles[engine]}
    return profiles


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
