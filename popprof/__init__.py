"""popprof: scriptable analysis of Graphcore IPU profiles.

Readers turn every form of IPU profiling data into pandas DataFrames with one schema
(:class:`Profile`); rule checks flag memory peaks, exchange-heavy phases and host stalls; a diff
compares profiles and gates regressions; redaction makes a profile safe to share. The functions
here are the front door for notebooks and scripts and mirror the CLI: each takes a Profile (or a
path where the CLI takes one) and hands on to the package that does the work.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ._version import __version__
from .io import config  # popprof.config.load_config(): the project's [tool.popprof]
from .model.errors import InputError, MissingTableError, PopprofError
from .model.profile import Profile
from .readers import open_all
from .readers import open_profile as open  # noqa: A001

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from .compare import GateResult, ProfileDiff
    from .redaction.report import RedactionReport
    from .rules import Findings

PathLike = str | os.PathLike[str]


def _profile(value: Profile | PathLike) -> Profile:
    return value if isinstance(value, Profile) else open(value)


def export(
    profile: Profile,
    out: PathLike,
    *,
    redaction: dict | None = None,
    sources: list[dict] | None = None,
) -> Path:
    """Write ``profile`` as a bundle directory at ``out`` (atomically); returns its path."""
    from .readers import bundle

    return bundle.write(profile, out, redaction=redaction, sources=sources)


def check(
    profile: Profile | PathLike,
    rules: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    params: Mapping[str, object] | None = None,
    config: Mapping[str, object] | None = None,
) -> Findings:
    """Run the rule checks on ``profile``; returns :class:`popprof.rules.Findings` (``.frame`` is a DataFrame).

    ``rules``/``skip``: rule ids, globs or families; ``params``: rule parameters; ``config``: the
    ``[tool.popprof]`` table (:func:`popprof.config.load_config`), as ``popprof check`` uses it.
    """
    from .rules import check as run_rules

    return run_rules(_profile(profile), rules=rules, skip=skip, params=params, config=config)


def diff(base: Profile | PathLike, new: Profile | PathLike, *, tolerance: float | None = None) -> ProfileDiff:
    """Compare two profiles (or paths, a baseline JSON too); returns :class:`popprof.compare.ProfileDiff`."""
    from .compare import DEFAULT_TOLERANCE
    from .compare import diff as compare

    return compare(
        _profile(base), _profile(new), tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance
    )


def gate(
    result: ProfileDiff, budget: Mapping[str, object] | PathLike | None = None, *, strict: bool | None = None
) -> GateResult:
    """Apply a regression budget to a diff (as ``popprof diff`` does); returns :class:`popprof.compare.GateResult`."""
    from .compare import gate as apply_budget

    return apply_budget(result, budget, strict=strict)


def redact(
    source: PathLike,
    out: PathLike,
    key: bytes | str | None = None,
    *,
    key_file: PathLike | None = None,
    mapping_out: PathLike | None = None,
    scan: bool = True,
) -> RedactionReport:
    """Redact a profile file, trace or bundle into ``out``; returns the redaction report (see ``popprof redact``)."""
    from .redaction import redact as run_redaction

    return run_redaction(source, out, key, mapping_out=mapping_out, scan=scan, key_file=key_file)


def query(
    profile: Profile | PathLike, sql: str, *, timeout_s: float | None = None, memory_bytes: int | None = None
) -> pd.DataFrame:
    """DuckDB ``sql`` over the profile's tables (registered by name), in ``popprof query``'s sandbox."""
    from .sql import run_query

    return run_query(_profile(profile), sql, timeout_s=timeout_s, memory_bytes=memory_bytes)


def summary(profile: Profile | PathLike) -> dict:
    """The figures ``popprof summary --format json`` prints for one profile, as a dict."""
    from .metrics.summary import summarise

    return summarise(_profile(profile))


__all__ = [
    "InputError",
    "MissingTableError",
    "PopprofError",
    "Profile",
    "__version__",
    "check",
    "config",
    "diff",
    "export",
    "gate",
    "open",
    "open_all",
    "query",
    "redact",
    "summary",
]
