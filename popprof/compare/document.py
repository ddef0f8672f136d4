"""A :class:`~popprof.compare.core.ProfileDiff` (and a gate result) as a JSON-ready document.

The document is data, not presentation: ``popprof diff --format json`` prints it and the report
writers read their figures from the same diff. Non-finite changes are null. The document depends on
the results (``core``, ``gate``), never the other way round: a ``ProfileDiff`` does not know its JSON.
"""

from __future__ import annotations

import pandas as pd

from ..io import jsonout
from .core import ProfileDiff
from .device_memory_changed import device_memory_changed
from .gate import GateResult
from .memory_changed import memory_changed
from .what_changed import what_changed

#: Most programs / events listed per section in JSON before truncating.
JSON_NAMED_LIMIT = 1000


def liveness_changed(lv: pd.DataFrame) -> int:
    """Liveness steps whose not-always-live bytes changed (a step with unknown bytes is not a change)."""
    change = lv["change_bytes"].astype("float64")
    return int((change.notna() & (change != 0)).sum())


def records(frame: pd.DataFrame) -> list[dict]:
    out = []
    for rec in frame.to_dict(orient="records"):
        out.append(jsonout.plain(rec))
    return out


def jsonable(value: object) -> object:
    """One value JSON-ready (:func:`popprof.io.jsonout.plain`)."""
    return jsonout.plain(value)


def to_dict(result: ProfileDiff, gate_result: GateResult | None = None, *, top: int = 10) -> dict:
    """The diff (and gate) as a JSON-ready dict. All metrics are included; infinite changes are null."""
    doc: dict = {
        "base": {
            "name": result.base_name,
            "target": {k: jsonable(v) for k, v in result.base_target.items()},
        },
        "new": {"name": result.new_name, "target": {k: jsonable(v) for k, v in result.new_target.items()}},
        "notes": list(result.notes),
        "unavailable": dict(result.unavailable),
        "tolerance": result.tolerance,
        "basis": {family: b.to_dict() for family, b in result.basis.items()},
        "what_changed": what_changed(result),
        "metrics": records(result.changed_metrics(include_unchanged=True)),
    }
    memory = memory_changed(result)
    if memory is not None:  # neither side has per-tile memory by category: nothing to say
        doc["memory_changed"] = memory
    device = device_memory_changed(result)
    if device is not None:  # neither side has allocator events on a GPU: nothing to say
        doc["device_memory_changed"] = device
    if "tiles" not in result.unavailable:
        doc["tiles"] = {
            "compared": len(result.tiles),
            "changed": int((result.tiles["change_bytes"].fillna(0) != 0).sum()),
            "top": records(result.top_tiles(top)),
        }
        doc["ipus"] = records(result.ipus)
    for section in ("programs", "events"):
        if section in result.unavailable:
            continue
        frame = getattr(result, section)
        changed = result.top_named(section, JSON_NAMED_LIMIT)
        doc[section] = {
            "counts": {
                s: int((frame["status"] == s).sum())
                for s in ("grown", "shrunk", "added", "removed", "unchanged")
            },
            "changed": records(changed),
            "truncated": bool((frame["status"] != "unchanged").sum() > len(changed)),
        }
    if "liveness" not in result.unavailable:
        lv = result.liveness
        doc["liveness"] = {
            "steps": len(lv),
            "changed": liveness_changed(lv),
            "top": records(
                lv.loc[
                    lv["change_bytes"]
                    .astype("float64")
                    .abs()
                    .sort_values(ascending=False, kind="stable")
                    .index[:top]
                ]
            ),
        }
    if gate_result is not None:
        doc["gate"] = {
            "passed": gate_result.passed,
            "strict": gate_result.strict,
            "budget_source": gate_result.budget_source,
            "violations": records(gate_result.violations),
            "gaps": records(gate_result.gaps),
            "checks": records(gate_result.checks),
            "not_applicable": gate_result.not_applicable,
            "unknown_patterns": gate_result.unknown_patterns,
        }
    return doc
