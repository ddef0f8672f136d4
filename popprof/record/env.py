"""The environment ``popprof record`` gives CMD: Poplar's and libpvti's documented variables, merged.

Profiling is switched on only through two documented environment variables
(see docs/record.md for the sources):

- ``POPLAR_ENGINE_OPTIONS``: a JSON object of Poplar engine options; the
  ``autoReport.*`` keys make every engine write ``profile.pop`` (and
  ``debug.cbor``) under ``autoReport.directory``;
- ``PVTI_OPTIONS``: a JSON object; ``{"enable": "true", "directory": DIR}``
  makes libpvti write one ``.pvti`` System Analyser trace per process in DIR.

Values the user already set are kept: their keys win over popprof's, so a
user's ``autoReport.directory`` or ``autoReport.outputExecutionProfile`` is
honoured (and ``record`` then collects from the directory they chose). A
value that is not a JSON object is a :class:`~popprof.model.errors.UsageError`,
raised before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..model.errors import UsageError

ENGINE_OPTIONS_VAR = "POPLAR_ENGINE_OPTIONS"
PVTI_OPTIONS_VAR = "PVTI_OPTIONS"


@dataclass(frozen=True)
class ProfilingChoice:
    """What to switch on: the graph profile, the execution profile, the host trace, and run count."""

    graph: bool = True
    execution: bool = True
    trace: bool = True
    run_count: int | None = None  # autoReport.executionProfileProgramRunCount; None = Poplar's default


@dataclass
class RecordEnvironment:
    """The variables to set for CMD and where Poplar / libpvti will write, after merging."""

    variables: dict[str, str] = field(default_factory=dict)  # only the variables popprof sets or changes
    report_dir: Path | None = None  # effective autoReport.directory (None: no Poplar report asked for)
    trace_dir: Path | None = None  # effective PVTI_OPTIONS directory (None: no trace asked for)
    user_keys: dict[str, list[str]] = field(default_factory=dict)  # variable -> keys the user's value kept

    def apply(self, environ: Mapping[str, str]) -> dict[str, str]:
        """A copy of ``environ`` with the variables set (the rest of the environment untouched)."""
        return {**environ, **self.variables}


def engine_options(choice: ProfilingChoice, report_dir: Path) -> dict[str, str]:
    """popprof's own ``POPLAR_ENGINE_OPTIONS`` keys for ``choice`` (empty when no profile is wanted).

    ``autoReport.all`` switches on every default output (graph and execution
    profile, debug information); a part left out is switched off explicitly,
    as Graphcore's profiling tutorial does.
    """
    if not (choice.graph or choice.execution):
        return {}
    options = {"autoReport.all": "true", "autoReport.directory": str(report_dir)}
    if not choice.execution:
        options["autoReport.outputExecutionProfile"] = "false"
    if not choice.graph:
        options["autoReport.outputGraphProfile"] = "false"
    if choice.execution and choice.run_count is not None:
        options["autoReport.executionProfileProgramRunCount"] = str(choice.run_count)
    return options


def pvti_options(choice: ProfilingChoice, trace_dir: Path) -> dict[str, str]:
    """popprof's own ``PVTI_OPTIONS`` keys for ``choice`` (empty when no trace is wanted)."""
    return {"enable": "true", "directory": str(trace_dir)} if choice.trace else {}


def parse_user_value(name: str, value: str | None) -> dict:
    """The JSON object a user set in variable ``name`` ({} when unset or blank); UsageError otherwise."""
    if value is None or not value.strip():
        return {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"${name} is not valid JSON ({exc.msg} at character {exc.pos}): {_shorten(value)}; "
            f"fix it or unset it (popprof record merges its own keys into it)"
        ) from None
    if not isinstance(parsed, dict):
        raise UsageError(
            f'${name} must be a JSON object ({{"key": "value", ...}}), not '
            f"{type(parsed).__name__}: {_shorten(value)}"
        )
    return parsed


def _shorten(value: str, limit: int = 60) -> str:
    text = " ".join(value.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _merge(name: str, ours: dict[str, str], user: dict, env: RecordEnvironment) -> dict:
    """``ours`` overridden by the user's keys; records the variable in ``env`` when it changes."""
    merged = {**ours, **user}
    if ours:
        env.variables[name] = json.dumps(merged)
        env.user_keys[name] = sorted(k for k in user if k in ours)
    return merged


def _directory(value: object, cwd: Path) -> Path | None:
    if value is None or not str(value).strip():
        return None
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else cwd / path


def build_environment(
    environ: Mapping[str, str], choice: ProfilingChoice, out_dir: Path, cwd: Path | None = None
) -> RecordEnvironment:
    """Merge popprof's profiling options into the user's ``POPLAR_ENGINE_OPTIONS`` and ``PVTI_OPTIONS``.

    popprof asks Poplar and libpvti to write into ``out_dir / "reports"`` (so
    the traces sit beside the engines' profiles, as a run directory). The
    user's keys win. Relative directories are resolved against ``cwd`` (CMD's
    working directory), as Poplar resolves them.
    """
    cwd = cwd or Path.cwd()
    wanted = out_dir / "reports"
    user_engine = parse_user_value(ENGINE_OPTIONS_VAR, environ.get(ENGINE_OPTIONS_VAR))
    user_pvti = parse_user_value(PVTI_OPTIONS_VAR, environ.get(PVTI_OPTIONS_VAR))
    env = RecordEnvironment()
    ours = engine_options(choice, wanted)
    merged = _merge(ENGINE_OPTIONS_VAR, ours, user_engine, env)
    if ours:
        env.report_dir = _directory(merged.get("autoReport.directory"), cwd) or cwd
    ours = pvti_options(choice, wanted)
    merged = _merge(PVTI_OPTIONS_VAR, ours, user_pvti, env)
    if ours:
        env.trace_dir = _directory(merged.get("directory"), cwd) or cwd
    return env
