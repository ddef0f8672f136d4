"""Named scalar metrics of a Profile, defined once and shared by summary, diff, gate and baselines.

A metric is a function ``Profile -> float | None`` registered with
:func:`metric`; a family (``memory.category.<cat>_bytes``) is a function
returning ``{name: value}`` registered with :func:`metric_family`. ``None``
means the profile lacks what the metric needs; it is never reported as 0.

``better`` says which direction is an improvement (``"lower"``, ``"higher"``
or ``None`` for neutral figures such as counts of steps), which the gate uses
to know what a regression is.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pandas as pd

from ..model.profile import Profile
from ..readers.baseline import STORED_PREFIX


@dataclass(frozen=True)
class Metric:
    """A named metric (or a family of them, when ``family`` is true)."""

    name: str
    unit: str
    description: str
    needs: tuple[str, ...]
    better: str | None
    func: Callable[[Profile], object]
    family: bool = False
    #: a family member one profile lacks is 0 there (a category with no bytes is left out), when both sides
    #: hold the family and come from the same format; False: a member is what the source printed, and one it
    #: did not print is "not in" that side, never 0 (a text summary's lines: hardware prints no "excluding
    #: idle threads" line)
    absent_is_zero: bool = True


METRICS: dict[str, Metric] = {}


MetricFunc = Callable[[Profile], float | None]
FamilyFunc = Callable[[Profile], dict[str, float]]


def _document(func: Callable, name: str, unit: str, description: str, missing: str) -> None:
    """Give a registered function the registry's description as its docstring (for ``help()``)."""
    if not func.__doc__:
        func.__doc__ = f"``{name}`` ({unit}): {description}; {missing} when the profile lacks what it needs."


def metric(
    name: str, unit: str, description: str, *, needs: Iterable[str] = (), better: str | None = "lower"
) -> Callable[[MetricFunc], MetricFunc]:
    """Register a scalar metric function ``Profile -> float | None``."""

    def register(func: MetricFunc) -> MetricFunc:
        METRICS[name] = Metric(name, unit, description, tuple(needs), better, func)
        _document(func, name, unit, description, "None")
        return func

    return register


def metric_family(
    prefix: str,
    unit: str,
    description: str,
    *,
    needs: Iterable[str] = (),
    better: str | None = "lower",
    absent_is_zero: bool = True,
) -> Callable[[FamilyFunc], FamilyFunc]:
    """Register a family: a function returning ``{suffix: value}``; names become ``prefix + suffix``.

    ``absent_is_zero``: whether a member one profile lacks is 0 there (see :class:`Metric`)."""

    def register(func: FamilyFunc) -> FamilyFunc:
        METRICS[prefix] = Metric(
            prefix, unit, description, tuple(needs), better, func, family=True, absent_is_zero=absent_is_zero
        )
        _document(func, prefix + "*", unit, description, "no members")
        return func

    return register


def _clean(value: object) -> float | None:
    if value is None or value is pd.NA:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


#: Old metric names, still accepted in budgets (with a deprecation warning) and in stored baselines,
#: mapped to the one name each figure has now (docs/diff.md, "Renamed metrics").
RENAMED: dict[str, str] = {
    "execution.exchange_share": "execution.exchange_and_sync_share",  # read as the exchange category's share
    "execution.host_io_share": "execution.share.host_io",  # the same figure under two names
    "trace.host_stall_us": "trace.device_idle_us",  # device idle time; the trace cannot tell it is the host's
}


def current_name(name: str) -> str:
    """Today's name of a metric (``name`` itself unless it is an old name in :data:`RENAMED`)."""
    return RENAMED.get(name, name)


def stored_values(profile: Profile) -> dict[str, float | None]:
    """Metric values stored in the profile's metadata (a baseline has no tables to compute them from).

    Values stored under an old name (a baseline written before a rename) come back under today's name.
    """
    return {
        current_name(key[len(STORED_PREFIX) :]): _clean(text)
        for key, text in profile.meta.items()
        if key.startswith(STORED_PREFIX)
    }


def compute(profile: Profile, names: Iterable[str] | None = None) -> dict[str, float | None]:
    """Evaluate metrics (all by default). Families expand to one entry per member.

    A baseline profile carries its values in metadata; those are returned as stored.
    """
    wanted = set(names) if names is not None else None
    stored = stored_values(profile)
    if stored:
        return {k: v for k, v in stored.items() if wanted is None or k in wanted}
    values: dict[str, float | None] = {}
    if SCOPE in profile._cache:  # inside shared(profile): the caller's intermediates stand
        _evaluate(profile, wanted, values)
        return values
    # Derived intermediates are shared between metrics within this call only: tables are mutable.
    profile._cache.clear()
    try:
        _evaluate(profile, wanted, values)
    finally:
        profile._cache.clear()
    return values


#: The cache key :func:`shared` sets while its block runs.
SCOPE = "metrics.shared"


@contextlib.contextmanager
def shared(profile: Profile) -> Iterator[None]:
    """Share derived intermediates (GPU work, the per-device table, unions) across every figure computed in
    the block, :func:`compute` calls included; the tables must not change inside it. Cleared on both ends."""
    if SCOPE in profile._cache:
        yield
        return
    profile._cache.clear()
    profile._cache[SCOPE] = True
    try:
        yield
    finally:
        profile._cache.clear()


def _evaluate(profile: Profile, wanted: set[str] | None, values: dict[str, float | None]) -> None:
    for m in METRICS.values():
        if m.family:
            if wanted is not None and not any(w.startswith(m.name) for w in wanted):
                continue
            result = m.func(profile) if not profile.missing(m.needs) else {}
            for suffix, value in (result or {}).items():
                full = m.name + suffix
                if wanted is None or full in wanted:
                    values[full] = _clean(value)
        elif wanted is None or m.name in wanted:
            values[m.name] = _clean(m.func(profile)) if not profile.missing(m.needs) else None


def describe(name: str) -> Metric | None:
    """The metric (or family) a full metric name belongs to."""
    if name in METRICS:
        return METRICS[name]
    for m in METRICS.values():
        if m.family and name.startswith(m.name):
            return m
    return None


def metrics_frame(profile: Profile, names: Iterable[str] | None = None) -> pd.DataFrame:
    """Metrics as a DataFrame: name, value, unit, better, description."""
    rows = []
    for name, value in compute(profile, names).items():
        m = describe(name)
        rows.append(
            {
                "name": name,
                "value": value,
                "unit": m.unit if m else "",
                "better": m.better if m else None,
                "description": m.description if m else "",
            }
        )
    return pd.DataFrame(rows, columns=["name", "value", "unit", "better", "description"])


# Register the built-in metrics.
from . import execution, memory  # noqa: E402,F401

__all__ = [
    "METRICS",
    "RENAMED",
    "Metric",
    "compute",
    "current_name",
    "describe",
    "metric",
    "metric_family",
    "metrics_frame",
    "shared",
]
from . import account, analyses, counters, device_memory, host_cpu, trace  # noqa: E402,F401
