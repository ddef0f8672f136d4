"""``[tool.popprof.trend]``: which metrics are exact or noisy, and trend's own per-metric thresholds.

::

    [tool.popprof.trend]
    exact = ["memory.*", "execution.*cycles*"]   # always the exact change log (any change is real)
    noisy = ["trace.*"]                          # always change points
    [tool.popprof.trend.budgets]                 # a change is kept beyond these (before [tool.popprof.gate])
    "trace.device_idle_us" = "+3%"
    "memory.*" = { absolute = 4096 }

Patterns are shell globs over metric names; a metric matching both lists is exact. ``--mode exact|noisy``
overrides both lists for one run. A metric without a trend budget takes the gate's (``--budget FILE``,
``[tool.popprof.gate]``, the default budget), as before. Types are checked when the config is read
(:func:`popprof.io.config.validate`); the budget entries by the gate's own parser (``docs/diff.md``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..compare.gate import Budget, Limit, _best_match, parse_limit
from ..io.config import Config

SECTION = "[tool.popprof.trend]"


@dataclass
class TrendBudget(Budget):
    """A budget that looks in trend's own limits first, then in the gate budget it wraps."""

    first: list[Limit] = field(default_factory=list)
    fallback: Budget = field(default_factory=Budget)

    def limit_for(self, metric: str) -> Limit | None:
        """The most specific of trend's limits matching ``metric``, else the gate budget's."""
        return _best_match(self.first, metric) or self.fallback.limit_for(metric)


@dataclass(frozen=True)
class TrendSettings:
    """The ``[tool.popprof.trend]`` table, parsed."""

    exact: tuple[str, ...] = ()
    noisy: tuple[str, ...] = ()
    limits: tuple[Limit, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping | None) -> TrendSettings:
        """The settings of a loaded configuration (``{}`` or no ``trend`` table: none)."""
        table = Config.of(config).trend
        budgets = table.get("budgets") or {}
        return cls(
            exact=_patterns(table.get("exact")),
            noisy=_patterns(table.get("noisy")),
            limits=tuple(parse_limit(str(p), spec, f"{SECTION}.budgets") for p, spec in budgets.items()),
        )

    def mode_for(self, metric: str, mode: str) -> str:
        """The mode of ``metric``: ``mode`` when forced (exact, noisy), else the configured one, else auto."""
        if mode != "auto":
            return mode
        if any(fnmatch.fnmatchcase(metric, p) for p in self.exact):
            return "exact"
        if any(fnmatch.fnmatchcase(metric, p) for p in self.noisy):
            return "noisy"
        return "auto"

    def budget(self, gate: Budget) -> Budget:
        """``gate`` with trend's own limits looked up first (``gate`` itself when there are none)."""
        if not self.limits:
            return gate
        return TrendBudget(
            limits=list(gate.limits),
            use_defaults=gate.use_defaults,
            strict=gate.strict,
            source=f"{SECTION}.budgets, then {gate.source}",
            first=list(self.limits),
            fallback=gate,
        )


def _patterns(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)  # type: ignore[union-attr]
