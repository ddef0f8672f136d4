"""The regression gate: budgets per metric, checked against a :class:`ProfileDiff`.

A budget maps a metric name or glob pattern (``memory.category.*``) to limits:

- ``relative``: allowed worsening as a fraction of the base value (0.01 or "1%");
- ``absolute``: allowed worsening in the metric's unit;
- ``min`` / ``max``: bounds on the new value (e.g. headroom ``min = 0``).

"Worsening" follows the metric's ``better``: growth for lower-is-better
metrics, shrink for higher-is-better ones (headroom), either direction for
neutral ones. A string shorthand ``"+1%"`` / ``"+4096"`` sets ``relative`` /
``absolute``. A change exactly at a limit passes; only a change beyond it
(``>``, not ``>=``) fails. Each limit given is checked on its own.

Budgets come from ``--budget FILE`` (TOML or JSON), else from
``[tool.popprof.gate]`` in the nearest ``pyproject.toml`` / ``popprof.toml``,
else :data:`DEFAULT_BUDGET`. User budgets are matched first (exact name, then
the longest matching pattern); metrics they do not cover fall back to the
default budget unless ``defaults = false``.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import tomllib
import warnings
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pandas as pd

from ..io import units
from ..io.config import Config, load_config
from ..io.plural import plural
from ..model.errors import InputError, UsageError
from .core import COMPARED, TIME_TOLERANCE_US, ProfileDiff

#: The budget used when none is configured. Documented in docs/diff.md.
DEFAULT_BUDGET: dict[str, dict[str, float]] = {
    "memory.total_incl_gaps_bytes": {"relative": 0.01},
    "memory.total_excl_gaps_bytes": {"relative": 0.01},
    "memory.always_live_bytes": {"relative": 0.01},
    "memory.peak_liveness_bytes": {"relative": 0.01},
    "memory.max_tile_incl_gaps_bytes": {"relative": 0.02},
    "memory.max_tile_headroom_bytes": {"min": 0},
    "memory.tiles_out_of_memory": {"absolute": 0},
    "execution.total_cycles": {"relative": 0.02},
    "execution.exchange_and_sync_share": {"absolute": 0.02},
    "trace.device_idle_us": {"relative": 0.05},
    "trace.step_time_us": {"relative": 0.05},
}

LIMIT_KEYS = ("relative", "absolute", "min", "max")
OPTION_KEYS = ("strict", "defaults", "budgets")

VIOLATION_COLUMNS = [
    "metric",
    "pattern",
    "kind",
    "base",
    "new",
    "change",
    "rel_change",
    "limit",
    "budget",
    "message",
]
GAP_COLUMNS = ["metric", "pattern", "reason"]
CHECK_COLUMNS = ["metric", "pattern", "budget", "base", "new", "change", "rel_change", "result"]

#: Rounding slack for fractional metric values (relative to the values compared); none for integral ones.
_EPS = Decimal("1e-12")


@dataclass(frozen=True)
class Limit:
    """The limits for one metric pattern."""

    pattern: str
    relative: float | None = None
    absolute: float | None = None
    min: float | None = None
    max: float | None = None

    def describe(self) -> str:
        """Human-readable budget, e.g. ``+1 %`` or ``+0 tiles, >= 0``."""
        parts = []
        if self.relative is not None:
            parts.append(f"+{units.limit_percent(self.relative)}")
        if self.absolute is not None:
            parts.append(f"{self.absolute:+g}")
        if self.min is not None:
            parts.append(f">= {self.min:g}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}")
        return ", ".join(parts)


@dataclass
class Budget:
    """User limits (matched first) and the default limits (fallback when ``use_defaults``)."""

    limits: list[Limit] = field(default_factory=list)
    use_defaults: bool = True
    strict: bool = False
    source: str = "default budget"

    def limit_for(self, metric: str) -> Limit | None:
        """The most specific limit matching ``metric``: user limits first, then the defaults."""
        found = _best_match(self.limits, metric)
        if found is None and self.use_defaults:
            found = _best_match(default_limits(), metric)
        return found

    def patterns(self) -> list[Limit]:
        """Every limit in force (user ones, then defaults not shadowed by an identical pattern)."""
        mine = {lim.pattern for lim in self.limits}
        extra = [lim for lim in default_limits() if lim.pattern not in mine] if self.use_defaults else []
        return list(self.limits) + extra


def _best_match(limits: list[Limit], metric: str) -> Limit | None:
    exact = [lim for lim in limits if lim.pattern == metric]
    if exact:
        return exact[-1]
    globs = [lim for lim in limits if fnmatch.fnmatchcase(metric, lim.pattern)]
    return max(globs, key=lambda lim: len(lim.pattern.replace("*", ""))) if globs else None


def default_limits() -> list[Limit]:
    """The default budget as limits."""
    return [Limit(pattern, **spec) for pattern, spec in DEFAULT_BUDGET.items()]


@dataclass
class GateResult:
    """Outcome of a gate: ``passed``, the ``violations``, the ``gaps`` and every check made."""

    passed: bool
    violations: pd.DataFrame
    gaps: pd.DataFrame
    checks: pd.DataFrame
    not_applicable: list[str]
    strict: bool
    budget_source: str
    unknown_patterns: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """One line: PASS / FAIL with counts."""
        word = "PASS" if self.passed else "FAIL"
        parts = [f"{plural(len(self.violations), 'budget')} exceeded"]
        if len(self.gaps):
            parts.append(f"{plural(len(self.gaps), 'gap')}{' (strict: failing)' if self.strict else ''}")
        parts.append(f"{int((self.checks['result'] == 'pass').sum())} within budget")
        return f"gate {word}: " + ", ".join(parts)

    def __repr__(self) -> str:
        """The verdict and the budget's source, then each violation's message (at most five): never the
        DataFrames (``violations``, ``gaps`` and ``checks`` hold them)."""
        lines = [f"<GateResult {self.verdict} (budget: {self.budget_source})>"]
        messages = [str(m) for m in self.violations.get("message", pd.Series(dtype=object)).tolist()]
        lines += [f"  {m}" for m in messages[:5]]
        if len(messages) > 5:
            lines.append(f"  {plural(len(messages) - 5, 'more violation')}: .violations")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The verdict in Jupyter, with the violations (else every check): ``markup/templates/gate.html.j2``."""
        from ..markup import render, trusted

        table = self.violations if len(self.violations) else self.checks
        html_table = trusted(table.to_html(index=False))  # pandas escapes the cells
        return render("gate.html.j2", verdict=self.verdict, source=self.budget_source, table=html_table)


# -- parsing ------------------------------------------------------------------


def _parse_amount(value: object, where: str) -> float:
    try:
        return units.parse_share(value)
    except ValueError:
        raise UsageError(f'{where}: expected a number or a percentage like "1%", got {value!r}') from None


def parse_limit(pattern: str, spec: object, where: str = "budget") -> Limit:
    """One budget entry: a table of limits, or a shorthand string ``"+1%"`` / ``"+4096"``."""
    label = f"{where}: {pattern!r}"
    if isinstance(spec, str | int | float) and not isinstance(spec, bool):
        text = str(spec).strip()
        if isinstance(spec, str) and text.endswith("%"):
            amount = _parse_amount(text.lstrip("+"), label)
            return _checked(Limit(pattern, relative=amount), label)
        return _checked(Limit(pattern, absolute=_parse_amount(text.lstrip("+"), label)), label)
    if not isinstance(spec, dict):
        raise UsageError(
            f'{label}: expected a table of limits ({", ".join(LIMIT_KEYS)}) or a string like "+1%"'
        )
    unknown = sorted(set(spec) - set(LIMIT_KEYS))
    if unknown:
        raise UsageError(
            f"{label}: unknown {'key' if len(unknown) == 1 else 'keys'} {', '.join(unknown)}; "
            f"known: {', '.join(LIMIT_KEYS)}"
        )
    if not spec:
        raise UsageError(f"{label}: no limit given (use {', '.join(LIMIT_KEYS)})")
    values: dict[str, float] = {}
    for key, raw in spec.items():
        if key == "relative" and isinstance(raw, str) and raw.strip().endswith("%"):
            values[key] = _parse_amount(raw.lstrip("+"), f"{label}.{key}")
        elif key == "relative" and isinstance(raw, str):
            raise UsageError(f'{label}.relative: write a fraction (0.01) or a percentage ("1%"), got {raw!r}')
        else:
            values[key] = _parse_amount(raw, f"{label}.{key}")
    return _checked(Limit(pattern, **values), label)


def _checked(limit: Limit, label: str) -> Limit:
    for key in ("relative", "absolute"):
        value = getattr(limit, key)
        if value is not None and (value < 0 or not math.isfinite(value)):
            raise UsageError(f"{label}: {key} must be a finite number >= 0 (it is the allowed worsening)")
    for key in ("min", "max"):
        value = getattr(limit, key)
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{label}: {key} must be a finite number (a bound on the new value)")
    return limit


def budget_from_mapping(table: dict, source: str) -> Budget:
    """Build a :class:`Budget` from a ``[tool.popprof.gate]``-shaped mapping.

    Keys: ``strict`` (bool), ``defaults`` (bool, keep the default budget for
    metrics not listed; default true) and ``budgets`` (pattern -> limits).
    Patterns may also sit directly in the table.
    """
    if not isinstance(table, dict):
        raise UsageError(f"{source}: the gate configuration must be a table")
    strict = table.get("strict", False)
    use_defaults = table.get("defaults", True)
    if not isinstance(strict, bool) or not isinstance(use_defaults, bool):
        raise UsageError(f"{source}: 'strict' and 'defaults' must be true or false")
    budgets = table.get("budgets") or {}
    if not isinstance(budgets, dict):
        raise UsageError(f"{source}: 'budgets' must be a table of metric patterns")
    entries = dict(budgets)
    entries.update({k: v for k, v in table.items() if k not in OPTION_KEYS})
    entries = _renamed_patterns(entries, source)
    limits = [parse_limit(str(pattern), spec, source) for pattern, spec in entries.items()]
    return Budget(limits, use_defaults=use_defaults, strict=strict, source=source)


class DeprecatedMetricName(FutureWarning):
    """A budget names a metric by an old name (still accepted; see :data:`popprof.metrics.RENAMED`)."""


def _renamed_patterns(entries: dict, source: str) -> dict:
    """Budget entries with old metric names replaced by today's, and one warning naming them all."""
    from ..metrics import RENAMED

    old = [str(pattern) for pattern in entries if str(pattern) in RENAMED]
    if not old:
        return entries
    warnings.warn(
        f"{source}: old metric {'name' if len(old) == 1 else 'names'} in the budget, still accepted for now: "
        + ", ".join(f"{name} -> {RENAMED[name]}" for name in old)
        + "; please rename them (docs/diff.md)",
        DeprecatedMetricName,
        stacklevel=3,
    )
    renamed: dict = {}
    for pattern, spec in entries.items():
        name = RENAMED.get(str(pattern), str(pattern))
        if name in renamed and str(pattern) in RENAMED:
            continue  # the current name is given too: it wins
        renamed[name] = spec
    return renamed


def _gate_table(document: dict) -> dict:
    """Find the gate table in a budget file: tool.popprof.gate, gate, or the whole document."""
    tool = document.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("popprof"), dict) and "gate" in tool["popprof"]:
        return tool["popprof"]["gate"]
    if isinstance(document.get("gate"), dict):
        return document["gate"]
    return document


def read_budget_file(path: str | os.PathLike[str]) -> Budget:
    """Read a budget file (TOML, or JSON when it ends in .json or starts with ``{``).

    Opened as every file an option names (:func:`popprof.io.files.read_option_file`): a FIFO, a device or
    a file over the ``option-bytes`` limit is one line, exit 2, before any byte is read.
    """
    from ..io.files import read_option_file

    path = Path(path)
    try:
        text = read_option_file(path, "budget file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"budget file is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
            document = json.loads(text)
        else:
            document = tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(
            path,
            f"budget file is not valid {'JSON' if path.suffix == '.json' else 'TOML'} ({exc})",
            "see docs/diff.md for the budget format",
        ) from None
    if not isinstance(document, dict):
        raise InputError(path, "budget file must hold a table / object")
    try:
        return budget_from_mapping(_gate_table(document), str(path))
    except UsageError as exc:
        raise InputError(
            path, str(exc).removeprefix(f"{path}: "), "see docs/diff.md for the budget format"
        ) from None


def load_budget(
    path: str | os.PathLike[str] | None = None,
    *,
    start: Path | None = None,
    config: Config | dict | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> Budget:
    """The budget in force: ``path`` if given, else ``[tool.popprof.gate]`` config, else the default.

    The configuration is ``config`` when given, else :func:`popprof.config.load_config`
    (``config_file``, or the nearest popprof.toml / pyproject.toml from ``start``).
    """
    if path is not None:
        return read_budget_file(path)
    if config is None:
        config = load_config(start, Path(config_file) if config_file is not None else None)
    table = Config.of(config).gate
    if table:
        return budget_from_mapping(table, "[tool.popprof.gate]")
    return Budget()


# -- checking -----------------------------------------------------------------


def _dec(limit: float) -> Decimal:
    """A limit as the decimal the user wrote (``0.01`` -> exactly 1/100)."""
    return Decimal(repr(float(limit)))


def _worsening(change: Decimal, better: str | None) -> Decimal:
    """How much worse the metric got (positive = worse) in its direction."""
    if better == "lower":
        return change
    if better == "higher":
        return -change
    return abs(change)


def gate(
    result: ProfileDiff,
    budget: Budget | dict | str | os.PathLike[str] | None = None,
    *,
    strict: bool | None = None,
) -> GateResult:
    """Check the metrics of ``result`` against ``budget`` (default: :func:`load_budget`).

    ``strict`` (default: the budget's own setting) makes gaps - budgeted metrics
    one side lacks - fail the gate.
    """
    if budget is None:
        budget = load_budget()
    elif isinstance(budget, dict):
        budget = budget_from_mapping(budget, "budget")
    elif not isinstance(budget, Budget):
        budget = read_budget_file(budget)
    strict = budget.strict if strict is None else strict

    violations, gaps, checks = [], [], []
    for row in result.metrics.itertuples(index=False):
        limit = budget.limit_for(row.name)
        if limit is None:
            continue
        base, new = _num(row.base), _num(row.new)
        change, rel = _num(row.abs_change), _num(row.rel_change)
        if row.status not in COMPARED:
            side = "base" if row.status == "missing_base" else "new"
            gaps.append(
                {
                    "metric": row.name,
                    "pattern": limit.pattern,
                    "reason": f"the {side} profile lacks this metric",
                }
            )
            checks.append(
                {
                    "metric": row.name,
                    "pattern": limit.pattern,
                    "budget": limit.describe(),
                    "base": base,
                    "new": new,
                    "change": change,
                    "rel_change": rel,
                    "result": "gap",
                }
            )
            continue
        failed = _check(row.name, row.better, base, new, change, rel, limit, row.unit)
        violations.extend(failed)
        checks.append(
            {
                "metric": row.name,
                "pattern": limit.pattern,
                "budget": limit.describe(),
                "base": base,
                "new": new,
                "change": change,
                "rel_change": rel,
                "result": "fail" if failed else "pass",
            }
        )
    names = result.metrics["name"].tolist()
    not_applicable = sorted(
        lim.pattern
        for lim in budget.patterns()
        if not any(fnmatch.fnmatchcase(name, lim.pattern) for name in names)
    )
    unknown = sorted(lim.pattern for lim in budget.limits if not _known_pattern(lim.pattern))
    violations_frame = pd.DataFrame(violations, columns=VIOLATION_COLUMNS)
    gaps_frame = pd.DataFrame(gaps, columns=GAP_COLUMNS)
    checks_frame = pd.DataFrame(checks, columns=CHECK_COLUMNS)
    passed = violations_frame.empty and (not strict or gaps_frame.empty)
    verdict = GateResult(
        passed, violations_frame, gaps_frame, checks_frame, not_applicable, strict, budget.source, unknown
    )
    result.gate_result = verdict  # the diff shows its latest verdict (in Jupyter: ProfileDiff._repr_html_)
    return verdict


def _known_pattern(pattern: str) -> bool:
    """Whether a budget pattern can match a metric of the registry (catches typos in budget files)."""
    from .. import metrics as registry

    for m in registry.METRICS.values():
        if not m.family and fnmatch.fnmatchcase(m.name, pattern):
            return True
        if m.family and (
            pattern.startswith(m.name)
            or fnmatch.fnmatchcase(m.name + "x", pattern)
            or fnmatch.fnmatchcase(m.name, pattern.rstrip("*"))
        ):
            return True
    return False


def _num(value: object) -> float:
    return math.nan if value is None or pd.isna(value) else float(value)


def _check(
    name: str, better: str | None, base: float, new: float, change: float, rel: float, limit: Limit, unit: str
) -> list[dict]:
    """Violations of ``limit`` by one metric, compared in exact decimal arithmetic.

    Limits are taken as written (``0.01`` is exactly 1/100), metric values
    exactly as stored, so a change exactly at a limit passes and the smallest
    step beyond it fails, at any magnitude. Only when a value is fractional (a
    ratio computed in floating point) does a slack of 1e-12 of its magnitude
    absorb rounding; a time (unit ``us``) also gets the nanosecond a baseline's
    JSON keeps it to (:data:`popprof.compare.core.TIME_TOLERANCE_US`).
    """
    out = []
    if not (math.isfinite(base) and math.isfinite(new)):
        return [
            {
                "metric": name,
                "pattern": limit.pattern,
                "kind": "invalid",
                "base": base,
                "new": new,
                "change": change,
                "rel_change": rel,
                "limit": math.nan,
                "budget": limit.describe(),
                "message": f"{name} is not a finite number ({base} -> {new}); cannot check budget "
                f"{limit.describe()}",
            }
        ]
    d_base, d_new = Decimal(base), Decimal(new)
    integral = float(base).is_integer() and float(new).is_integer()
    slack = Decimal(0) if integral else Decimal(max(abs(base), abs(new))) * _EPS
    if unit == "us":
        slack = max(slack, Decimal(TIME_TOLERANCE_US))
    worse = _worsening(d_new - d_base, better)
    direction = {"lower": "growth", "higher": "shrink"}.get(better or "", "change")

    def fail(kind: str, limit_value: float, budget_text: str, message: str) -> None:
        out.append(
            {
                "metric": name,
                "pattern": limit.pattern,
                "kind": kind,
                "base": base,
                "new": new,
                "change": change,
                "rel_change": rel,
                "limit": limit_value,
                "budget": budget_text,
                "message": message,
            }
        )

    if limit.relative is not None and worse > _dec(limit.relative) * abs(d_base) + slack:
        shown = "new (base was 0)" if base == 0 else units.relative(rel)
        fail(
            "relative",
            limit.relative,
            f"{direction} <= {units.limit_percent(limit.relative)}",
            f"{name} changed {shown} ({units.value(base, unit)} -> {units.value(new, unit)}); "
            f"budget: {direction} <= {units.limit_percent(limit.relative)}",
        )
    if limit.absolute is not None and worse > _dec(limit.absolute) + slack:
        allowed_text = units.value(limit.absolute, unit)
        fail(
            "absolute",
            limit.absolute,
            f"{direction} <= {allowed_text}",
            f"{name} changed {units.change(change, unit)} ({units.value(base, unit)} -> {units.value(new, unit)}); "
            f"budget: {direction} <= {allowed_text}",
        )
    if limit.min is not None and d_new < _dec(limit.min) - slack:
        fail(
            "min",
            limit.min,
            f">= {limit.min:g}",
            f"{name} is {units.value(new, unit)} (was {units.value(base, unit)}); budget: must be >= {limit.min:g}",
        )
    if limit.max is not None and d_new > _dec(limit.max) + slack:
        fail(
            "max",
            limit.max,
            f"<= {limit.max:g}",
            f"{name} is {units.value(new, unit)} (was {units.value(base, unit)}); budget: must be <= {limit.max:g}",
        )
    return out
