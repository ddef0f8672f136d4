"""The limiting factor of one side of a pilot, from its figures and documented thresholds (docs/pilot.md).

Tested in this order; the first that holds decides:

1. **does not fit (memory)**: a failed compilation (out-of-memory messages), a tile out of
   memory, or the fullest tile at or above ``does_not_fit_utilisation`` of its capacity;
2. **host**: the device idle with the host not submitting its next work (the time account's ``idle_host``,
   figure ``idle_host_pct``) >= ``idle_host_pct`` of the window, or device idle share (100 - busy) >=
   ``idle_pct``;
3. **data movement**: communication (GPU) or all exchange (IPU) + copies (GPU) or stream copies (IPU) +
   sync >= ``data_movement_pct`` of the device time;
4. **device compute**: compute share >= ``compute_pct``;
5. **undetermined**: none of these holds, or the figures they need are missing.

Thresholds come from the defaults, then ``[tool.popprof.pilot]``, then ``--set NAME=VALUE``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..io import units
from ..io.config import Config
from ..model.errors import UsageError

DEFAULT_THRESHOLDS: dict[str, float] = {
    "does_not_fit_utilisation": 1.0,
    "idle_host_pct": 20.0,
    "idle_pct": 30.0,
    "data_movement_pct": 40.0,
    "compute_pct": 50.0,
}

DESCRIPTIONS: dict[str, str] = {
    "does_not_fit_utilisation": "fullest tile / capacity at or above this: does not fit",
    "idle_host_pct": "device idle with the host not submitting (the time account's idle_host), share of the "
    "window (%) at or above this: host-bound",
    "idle_pct": "device idle share (%) at or above this: host-bound",
    "data_movement_pct": "communication or all exchange + copies or stream copies + sync share (%) at or above this: "
    "data movement",
    "compute_pct": "compute share (%) at or above this: device compute",
}

#: Thresholds renamed: old name -> (new name, why); a file or ``--set`` with the old name is told the new one.
RENAMED = {
    "host_wait_pct": (
        "idle_host_pct",
        "the figure is the device idle with the host not submitting (the time account's idle_host), not the "
        "host blocked on device, which the old name read as",
    ),
}


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
    figures: Mapping[str, dict], failed_compilations: int = 0, thresholds: Mapping[str, float] | None = None
) -> dict:
    """``{"limit": ..., "text": ..., "deciding": {figure: value}, "thresholds": {name: value}}``."""
    t = dict(DEFAULT_THRESHOLDS, **(thresholds or {}))
    util, oom = _value(figures, "memory_utilisation"), _value(figures, "tiles_out_of_memory")
    if (
        failed_compilations
        or (oom is not None and oom > 0)
        or (util is not None and util >= t["does_not_fit_utilisation"])
    ):
        return _result(
            "does not fit (memory)",
            {
                "failed_compilations": failed_compilations or None,
                "tiles_out_of_memory": oom,
                "memory_utilisation": util,
            },
            {"does_not_fit_utilisation": t["does_not_fit_utilisation"]},
        )
    waiting, busy = _value(figures, "idle_host_pct"), _value(figures, "busy_pct")
    idle = None if busy is None else 100.0 - busy
    if (waiting is not None and waiting >= t["idle_host_pct"]) or (
        idle is not None and idle >= t["idle_pct"]
    ):
        return _result(
            "host",
            {"idle_host_pct": waiting, "idle_pct": idle},
            {"idle_host_pct": t["idle_host_pct"], "idle_pct": t["idle_pct"]},
        )
    parts = {k: _value(figures, k) for k in ("communication_pct", "memory_pct", "sync_pct")}
    known = [v for v in parts.values() if v is not None]
    movement = sum(known) if known else None
    if movement is not None and movement >= t["data_movement_pct"]:
        return _result(
            "data movement",
            {**parts, "data_movement_pct": movement},
            {"data_movement_pct": t["data_movement_pct"]},
        )
    compute = _value(figures, "compute_pct")
    if compute is not None and compute >= t["compute_pct"]:
        return _result("device compute", {"compute_pct": compute}, {"compute_pct": t["compute_pct"]})
    deciding = {
        "compute_pct": compute,
        "data_movement_pct": movement,
        "idle_host_pct": waiting,
        "idle_pct": idle,
        "memory_utilisation": util,
    }
    return _result("undetermined", deciding, t)


def _result(limit: str, deciding: dict, used: dict) -> dict:
    deciding = {k: v for k, v in deciding.items() if v is not None}
    shown = ", ".join(f"{k} {units.number(v)}" for k, v in deciding.items()) or "no figure to decide on"
    limits = ", ".join(f"{k} >= {units.number(v)}" for k, v in used.items())
    return {
        "limit": limit,
        "text": f"{limit}: {shown} (thresholds: {limits})",
        "deciding": deciding,
        "thresholds": dict(used),
    }
