"""popprof: scriptable analysis of Graphcore IPU profiles.

Readers turn every form of IPU profiling data into pandas DataFrames with one schema
(:class:`Profile`); rule checks flag memory peaks, exchange- (IPU) or communication-heavy (GPU)
phases and host stalls; a diff compares profiles and gates regressions; redaction makes a profile
safe to share. The functions here are the front door for notebooks and scripts and mirror the CLI:
each takes a Profile (or a path where the CLI takes one) and hands on to the package that does the
work.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ._version import __version__
from .model.errors import InputError, MissingTableError, PopprofError

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from .compare import GateResult, ProfileDiff
    from .io import config  # noqa: F401  (popprof.config.load_config(): the project's [tool.popprof])
    from .model.profile import Profile
    from .redaction.report import RedactionReport
    from .rules import Findings

PathLike = str | os.PathLike[str]

#: Names of the facade loaded on first use: importing ``popprof`` (the CLI does, for ``--version`` and
#: ``--help``) must not import pandas, pyarrow or the readers.
_LAZY = {
    "config": ("io.config", None),  # popprof.config.load_config(): the project's [tool.popprof]
    "limits": ("io.limits", None),  # popprof.limits.using(text_bytes="1G"): the input limits for a block
    "Profile": ("model.profile", "Profile"),
    "open_all": ("readers", "open_all"),
}


def __getattr__(name: str) -> object:
    """``popprof.config``, ``popprof.Profile`` and ``popprof.open_all``, imported when first used."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attribute = _LAZY[name]
    loaded = importlib.import_module(f".{module}", __name__)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def open(  # noqa: A001 - popprof.open, as in pandas' read_x: the facade's one way in
    path: PathLike,
    engine: str | None = None,
    *,
    parser: str | None = None,
    workers: int | None = None,
    with_args: bool = False,
    device_map: Mapping[str, str | None] | str | None = None,
    config: Mapping[str, object] | None = None,
    **options: object,
) -> Profile:
    """Open one profile (any format popprof reads) as a :class:`Profile`.

    ``engine``: for a run directory holding several Poplar engines, the one to open. For a Chrome / Kineto
    trace, ``parser`` (``"arrow"``, ``"orjson"`` or ``"ijson"``) and ``workers`` (1 or 2 processes) name
    how it is read; ``None`` lets the reader choose (``docs/traces.md``, "The plan"), and
    ``profile.metadata["chrome.parser"]`` / ``["chrome.workers"]`` say what ran. A ``profile.pop``
    reader takes ``workers`` as its number of step-reading processes. ``with_args`` keeps each event's
    ``args``; ``device_map`` overrides the device-activity mapping; ``config`` is the project's
    ``[tool.popprof]`` table (:func:`popprof.config.load_config`). Other options go to the reader.
    """
    from .readers import open_profile
    from .readers.chrome.plan import check_request

    check_request(parser)  # a parser that cannot be right: one line before any file is opened
    if parser is not None:
        options["parser"] = parser
    if workers is not None:
        options["workers"] = workers
    if config is not None:
        options["config"] = dict(config)
    return open_profile(path, engine, with_args=with_args, device_map=device_map, **options)


def _profile(value: Profile | PathLike) -> Profile:
    from .model.profile import Profile
    from .readers import open_profile

    return value if isinstance(value, Profile) else open_profile(value)


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


def diff(
    base: Profile | PathLike,
    new: Profile | PathLike,
    *,
    tolerance: float | None = None,
    events_on: str | None = None,
) -> ProfileDiff:
    """Compare two profiles (or paths, a baseline JSON too); returns :class:`popprof.compare.ProfileDiff`.

    ``events_on``: ``"device"`` or ``"host"`` keeps the trace event names of that side only (``popprof diff
    --events-on``)."""
    from .compare import DEFAULT_TOLERANCE
    from .compare import diff as compare

    return compare(
        _profile(base),
        _profile(new),
        tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance,
        events_on=events_on,
    )


def gate(
    result: ProfileDiff, budget: Mapping[str, object] | PathLike | None = None, *, strict: bool | None = None
) -> GateResult:
    """Apply a regression budget to a diff (as ``popprof diff`` does); returns :class:`popprof.compare.GateResult`."""
    from .compare import gate as apply_budget

    return apply_budget(result, budget, strict=strict)


def redact(
    source: Profile | PathLike,
    out: PathLike,
    key: bytes | str | None = None,
    *,
    key_file: PathLike | None = None,
    mapping_out: PathLike | None = None,
    scan: bool = True,
) -> RedactionReport:
    """Redact a profile file, trace or bundle into ``out``; returns the redaction report (see ``popprof redact``).

    ``source`` may be a Profile: the file it was read from (``profile.source``) is redacted.
    """
    from .redaction import redact as run_redaction

    return run_redaction(source, out, key, mapping_out=mapping_out, scan=scan, key_file=key_file)


def query(
    profile: Profile | PathLike,
    sql: str,
    *,
    timeout_s: float | None = None,
    memory_bytes: int | None = None,
    config: Mapping[str, object] | None = None,
) -> pd.DataFrame:
    """DuckDB ``sql`` over the profile's tables (registered by name), in ``popprof query``'s sandbox, and
    over the analysis tables it names (``account``, ``gaps``, ``launches``, ``operators``, ``findings``:
    :mod:`popprof.analysis_tables`; ``config``: the rules' settings, as :func:`check` takes them). The
    operators' FLOPs need the events' arguments: open the trace with ``with_args=True``, as ``popprof query``
    does when its SQL names an analysis table."""
    from .sql import run_query

    return run_query(_profile(profile), sql, timeout_s=timeout_s, memory_bytes=memory_bytes, config=config)


def summary(profile: Profile | PathLike) -> dict:
    """The figures ``popprof summary --format json`` prints for one profile, as a dict (``what_limits`` first)."""
    from .report.explain import explained_summary

    return explained_summary(_profile(profile))


def explain(profile: Profile | ProfileDiff | PathLike, config: Mapping[str, object] | None = None):
    """What limits the run: the time account per device and the top findings priced by what fixing them
    would buy (a :class:`popprof.report.explain.WhatLimits`; shown as text or HTML in a notebook, its JSON in
    ``.doc``), as ``popprof summary`` opens with.

    Given a diff (``popprof.explain(popprof.diff(base, new))``), what changed between its two profiles: the
    blocks that open ``popprof diff``, "What changed" and "What changed in memory" (a
    :class:`popprof.report.diff_explain.WhatChanged`; text or HTML in a notebook, the JSON's documents in
    ``.what_changed``, ``.memory_changed`` and ``.doc``). ``config`` applies to a profile only."""
    from .compare.core import ProfileDiff

    if isinstance(profile, ProfileDiff):
        from .report.diff_explain import explain_diff

        return explain_diff(profile)
    from .report.explain import explain as explain_run

    return explain_run(_profile(profile), dict(config or {}))


__all__ = [
    "InputError",
    "MissingTableError",
    "PopprofError",
    "Profile",
    "__version__",
    "check",
    "explain",
    "config",
    "diff",
    "export",
    "gate",
    "limits",
    "open",
    "open_all",
    "query",
    "redact",
    "summary",
]
