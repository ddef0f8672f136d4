"""The limiting factor of one side of a pilot: its memory, then the time account's limit (docs/pilot.md).

1. **does not fit (memory)**: a failed compilation (out-of-memory messages), a tile out of
   memory, or the fullest tile at or above ``does_not_fit_utilisation`` of its capacity;
2. else the run's limit, the one summary's "What limits this run" states
   (:func:`popprof.metrics.limit.limit_of`: the largest of device compute, data movement, load imbalance,
   host, and launch or dependency, pooled over devices; undetermined when time of no recorded cause
   is larger, or without a time account).

``does_not_fit_utilisation`` comes from the default, then ``[tool.popprof.pilot]``, then ``--set NAME=VALUE``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..io import units
from ..io.config import Config
from ..metrics.limit import UNDETERMINED
from ..model.errors import UsageError
from ..report.limit_words import limit_text

DEFAULT_THRESHOLDS: dict[str, float] = {"does_not_fit_utilisation": 1.0}

#: Thresholds renamed: old name -> (new name, why); a file or ``--set`` with the old name is told the new one.
RENAMED = {
    "host_wait_pct": (
        "idle_host_pct",
        "the figure is the device idle with the host not submitting (the time account's idle_host), not the "
        "host blocked on device, which the old name read as",
    ),
}

#: Thresholds retired (schema version 3): the diagnosis names the time account's largest limit, as summary does.
RETIRED = ("idle_host_pct", "idle_pct", "data_movement_pct", "compute_pct")


def thresholds_from(
    config: Mapping[str, object], overrides: Mapping[str, object] | None = None
) -> dict[str, float]:
    """The thresholds: defaults, then the config's ``pilot`` table, then ``overrides``; UsageError on a bad one."""
    out = dict(DEFAULT_THRESHOLDS)
    table = Config.of(config).pilot
    if not isinstance(table, Mapping):
        raise UsageError("the [pilot] configuration must be a table: name = number")
    for source, values in (("[tool.popprof.pilot]", table), ("--set", overrides or {})):
        for name, value in values.items():
            if name in RETIRED:
                raise UsageError(
                    f"{source}: pilot threshold {name!r} is retired: the diagnosis now names the largest part of "
                    "the time account, as summary's 'What limits this run' does (docs/pilot.md); remove it"
                )
            if name in RENAMED:
                new, why = RENAMED[name]
                raise UsageError(f"{source}: pilot threshold {name!r} is now {new!r}: {why}")
            if name not in DEFAULT_THRESHOLDS:
                raise UsageError(
                    f"{source}: unknown pilot threshold {name!r}; known: {', '.join(DEFAULT_THRESHOLDS)}"
                )
            try:
                number = float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise UsageError(
                    f"{source}: pilot threshold {name} must be a number, not {value!r}"
                ) from None
            if number != number or number < 0:
                raise UsageError(f"{source}: pilot threshold {name} must be a number >= 0, not {value!r}")
            out[name] = number
    return out


def _value(figures: Mapping[str, dict], key: str) -> float | None:
    entry = figures.get(key) or {}
    return entry.get("value")


def diagnose(
    figures: Mapping[str, dict],
    failed_compilations: int = 0,
    thresholds: Mapping[str, float] | None = None,
    limit: Mapping | None = None,
) -> dict:
    """``{"limit": ..., "text": ..., "deciding": {figure: value}, "thresholds": {name: value}}``: does not fit
    from ``figures`` (the pilot's) and ``failed_compilations``, else ``limit`` (``what_limits.limit`` of the
    side)."""
    t = dict(DEFAULT_THRESHOLDS, **(thresholds or {}))
    util, oom = _value(figures, "memory_utilisation"), _value(figures, "tiles_out_of_memory")
    if (
        failed_compilations
        or (oom is not None and oom > 0)
        or (util is not None and util >= t["does_not_fit_utilisation"])
    ):
        deciding = {
            "failed_compilations": failed_compilations or None,
            "tiles_out_of_memory": oom,
            "memory_utilisation": util,
        }
        deciding = {k: v for k, v in deciding.items() if v is not None}
        shown = ", ".join(f"{k} {units.number(v)}" for k, v in deciding.items())
        used = units.number(t["does_not_fit_utilisation"])
        return {
            "limit": "does not fit (memory)",
            "text": f"does not fit (memory): {shown} (threshold: does_not_fit_utilisation >= {used})",
            "deciding": deciding,
            "thresholds": {"does_not_fit_utilisation": t["does_not_fit_utilisation"]},
        }
    if not limit:
        return {
            "limit": UNDETERMINED,
            "text": f"{UNDETERMINED}: no time account (the profile records no device time)",
            "deciding": {},
            "thresholds": {},
        }
    return {
        "limit": limit["limit"],
        "text": limit_text(dict(limit), lead=""),
        "deciding": {"share": limit["share"], "groups": dict(limit["groups"])},
        "thresholds": {},
    }
