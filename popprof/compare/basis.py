"""The basis of a comparison: totals, or per profiler step / per run when the two sides ran different numbers.

A trace of 5 profiler steps against one of 2 (or an IPU profile of 5 runs
against one of 2) would compare totals that differ only because one side ran
longer. When both sides have steps (runs) and their numbers differ, the figures
that grow with the number of steps are divided by it on each side; with equal
numbers, totals are like for like and are compared as they are. The basis used
is always reported.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Per family: the metric giving the number of iterations, its unit, and the metrics that add up over them
#: (a name ending in "." is a family prefix).
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "trace": (
        "trace.profiler_step_count",
        "profiler step",
        (
            "trace.span_us",
            "trace.event_count",
            "trace.device_busy_us",
            "trace.device_idle_us",
            "trace.device_time_us.",
        ),
    ),
    "execution": (
        "execution.run_count",
        "run",
        ("execution.total_cycles", "execution.total_time_us", "execution.step_count", "execution.cycles."),
    ),
}


@dataclass(frozen=True)
class Basis:
    """How one family of figures (``trace`` or ``execution``) was compared."""

    family: str
    per: str | None  # "profiler step" / "run", or None for totals
    base_count: int | None
    new_count: int | None

    def divisor(self, side: str) -> int | None:
        """What ``side``'s additive figures are divided by (None: they are compared as totals)."""
        if self.per is None:
            return None
        return self.base_count if side == "base" else self.new_count

    def describe(self) -> str:
        """One line, e.g. ``trace figures per profiler step (base 5 steps, new 2)``."""
        unit = FAMILIES[self.family][1]
        counts = f"base {_count(self.base_count, unit)}, new {_count(self.new_count, unit)}"
        if self.per is not None:
            return (
                f"{self.family} figures per {self.per} ({counts}): totals divided by the {unit}s of each side"
            )
        if self.base_count and self.new_count:
            return f"{self.family} figures as totals (both sides ran {_count(self.base_count, unit)})"
        return f"{self.family} figures as totals ({counts})"

    def to_dict(self) -> dict:
        """JSON-ready: ``{"per": ..., "base": n, "new": n, "text": ...}``."""
        return {
            "per": self.per or "total",
            "base": self.base_count,
            "new": self.new_count,
            "text": self.describe(),
        }


def _count(n: int | None, unit: str) -> str:
    return f"no {unit}s" if not n else f"{n:,} {unit}{'s' if n != 1 else ''}"


def choose(base: dict[str, float | None], new: dict[str, float | None]) -> dict[str, Basis]:
    """The basis of each family that either side has (from the two sides' metric values)."""
    out = {}
    for family, (count_metric, unit, additive) in FAMILIES.items():
        if not any(
            _additive(name, additive) and value is not None
            for values in (base, new)
            for name, value in values.items()
        ):
            continue
        b, n = _whole(base.get(count_metric)), _whole(new.get(count_metric))
        out[family] = Basis(family, unit if b and n and b != n else None, b, n)
    return out


def _whole(value: float | None) -> int | None:
    return None if value is None or value <= 0 else int(value)


def _additive(name: str, additive: tuple[str, ...]) -> bool:
    return any(name.startswith(a) if a.endswith(".") else name == a for a in additive)


def normalise(values: dict[str, float | None], bases: dict[str, Basis], side: str) -> dict[str, float | None]:
    """``values`` with each additive figure divided by its family's divisor for ``side``."""
    out = dict(values)
    for family, basis in bases.items():
        divisor = basis.divisor(side)
        if divisor is None:
            continue
        for name, value in values.items():
            if value is not None and _additive(name, FAMILIES[family][2]):
                out[name] = value / divisor
    return out
