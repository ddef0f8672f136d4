"""The summary's IPU analyses as terminal text: the fullest tile explained and the pipeline's stage imbalance.

Formats what :func:`popprof.metrics.summary.summarise` holds under ``fullest_tile`` and ``pipeline``; every
line fits 80 columns (long names are shortened).
"""

from __future__ import annotations

from ..io import units, words
from ..io.names import short_names

#: Width of a name in a line of the block.
NAME_WIDTH = 44


def _names(rows: list[dict], key: str, width: int = NAME_WIDTH) -> list[str]:
    return short_names([str(r[key]) for r in rows], width)


def render_fullest_tile(doc: dict | None) -> list[str]:
    """The fullest tile block: what fills it and what each option would free (nothing without a breakdown
    or a known saving)."""
    if not doc:
        return []
    savings = doc.get("savings") or {}
    known = any(s.get("bytes") is not None for s in savings.values())
    if not (doc.get("categories") or doc.get("liveness") or known):
        return []
    tile = "" if doc.get("tile") is None else f" {units.count(doc['tile'])}"
    lines = ["", f"Fullest tile{tile}: {units.nbytes(doc['bytes_incl_gaps'])}"]
    rows = (doc.get("categories") or [])[:5]
    for name, row in zip(_names(rows, "category"), rows, strict=True):
        lines.append(f"  {name:<{NAME_WIDTH}} {units.nbytes(row['bytes'])}")
    live = doc.get("liveness") or {}
    for key, label in (
        ("always_live_bytes", "always-live"),
        ("not_always_live_bytes", "not-always-live peak"),
    ):
        if live.get(key) is not None:
            lines.append(f"  {label:<{NAME_WIDTH}} {units.nbytes(live[key])}")
    if doc.get("gap_bytes"):
        lines.append(f"  {'gaps':<{NAME_WIDTH}} {units.nbytes(doc['gap_bytes'])}")
    vertices = (doc.get("vertices") or [])[:3]
    if vertices:
        lines.append("  vertex state by type:")
        for name, row in zip(_names(vertices, "type", NAME_WIDTH - 2), vertices, strict=True):
            lines.append(f"    {name:<{NAME_WIDTH - 2}} {units.nbytes(row['bytes'])}")
    variables = (doc.get("variables") or [])[:3]
    if variables:
        scope = "on it" if doc.get("variables_scope") == "tile" else "of the graph, tile not recorded"
        lines.append(f"  largest variables ({scope}):")
        for name, row in zip(_names(variables, "name", NAME_WIDTH - 2), variables, strict=True):
            lines.append(f"    {name:<{NAME_WIDTH - 2}} {units.nbytes(row['bytes'])}")
    lines.append("  would free at most:")
    for key, word in words.MEMORY_SAVING_WORDS.items():
        lines.append(f"    {word:<{NAME_WIDTH - 2}} {_saving_text(savings.get(key) or {})}")
    return lines


def _saving_text(saving: dict) -> str:
    """What one saving frees, or why it is unknown (the basis the figure carries, so the text says what the
    profile lacks)."""
    if saving.get("bytes") is not None:
        return units.nbytes(saving["bytes"])
    why = str(saving.get("basis") or "").removeprefix("unknown: ")
    return f"unknown ({why})" if why else "unknown"


def render_pipeline(doc: dict | None) -> list[str]:
    """The pipeline block: the summed stage imbalance and each IPU's stage time."""
    if not doc:
        return []
    share = "" if doc.get("share") is None else f" = {units.percent(doc['share'])} of the run"
    lines = [
        "",
        f"Pipeline: {units.count(doc['steps'])} steps on {units.count(doc['ipus'])} IPUs",
        f"  {words.STAGE_IMBALANCE} {units.duration(doc['imbalance_us'])}{share}",
        "    (per step, the slowest stage minus the mean stage, summed)",
        "  stage time per IPU (slowest in how many steps):",
    ]
    for stage in doc["stages"][:16]:
        lines.append(
            f"    IPU {stage['ipu']:<4} {units.duration(stage['stage_us']):>14}  "
            f"({units.count(stage['slowest_steps'])} steps)"
        )
    if len(doc["stages"]) > 16:
        lines.append(f"    ({len(doc['stages']) - 16} more in --format json)")
    return lines
