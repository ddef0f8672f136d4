"""The summary's IPU analyses as terminal text: the fullest tile explained and the pipeline's stage imbalance.

Formats what :func:`popprof.metrics.summary.summarise` holds under ``fullest_tile`` and ``pipeline``; every
line fits 80 columns (long names are shortened).
"""

from __future__ import annotations

from ..io import units, words
from ..io.names import short_names

#: Width of a name in a line of the block (in 80 columns; narrower in fewer).
NAME_WIDTH = 44
#: The fewest columns a name keeps in the block however narrow the width (the line is then wrapped).
MIN_NAME = 16


def render_fullest_tile(doc: dict | None, width: int = 80) -> list[str]:
    """The fullest tile block: what fills it and what each option would free (nothing without a breakdown
    or a known saving). Its names are shortened so that every row, its figure whole (``19,033 B (18.6
    KiB)``), fits ``width`` (at most :data:`NAME_WIDTH` columns of name, at least :data:`MIN_NAME`)."""
    if not doc:
        return []
    savings = doc.get("savings") or {}
    known = any(s.get("bytes") is not None for s in savings.values())
    if not (doc.get("categories") or doc.get("liveness") or known):
        return []
    tile = "" if doc.get("tile") is None else f" {units.count(doc['tile'])}"
    # (indent, heading) or (indent, name, figure) rows; names are laid out once every figure is known
    rows: list[tuple[str, ...]] = []
    categories = (doc.get("categories") or [])[:5]
    rows += [("  ", str(r["category"]), units.nbytes(r["bytes"])) for r in categories]
    live = doc.get("liveness") or {}
    for key, label in (
        ("always_live_bytes", "always-live"),
        ("not_always_live_bytes", "not-always-live peak"),
    ):
        if live.get(key) is not None:
            rows.append(("  ", label, units.nbytes(live[key])))
    if doc.get("gap_bytes"):
        rows.append(("  ", "gaps", units.nbytes(doc["gap_bytes"])))
    vertices = (doc.get("vertices") or [])[:3]
    if vertices:
        rows.append(("  ", "vertex state by type:"))
        rows += [("    ", str(r["type"]), units.nbytes(r["bytes"])) for r in vertices]
    variables = (doc.get("variables") or [])[:3]
    if variables:
        scope = "on it" if doc.get("variables_scope") == "tile" else "of the graph, tile not recorded"
        rows.append(("  ", f"largest variables ({scope}):"))
        rows += [("    ", str(r["name"]), units.nbytes(r["bytes"])) for r in variables]
    rows.append(("  ", "would free at most:"))
    for key, word in words.MEMORY_SAVING_WORDS.items():
        rows.append(("    ", word, _saving_text(savings.get(key) or {})))
    # the name column: as wide as 80 columns give it, narrower when the widest figure would not fit
    figure = max((len(r[2]) for r in rows if len(r) == 3 and not r[2].startswith("unknown")), default=0)
    name_width = max(MIN_NAME, min(NAME_WIDTH, width - 2 - 1 - figure))
    lines = ["", f"Fullest tile{tile}: {units.nbytes(doc['bytes_incl_gaps'])}"]
    at = 0
    while at < len(rows):
        if len(rows[at]) == 2:
            lines.append(rows[at][0] + rows[at][1])
            at += 1
            continue
        group = [rows[at]]
        while (
            at + len(group) < len(rows)
            and len(rows[at + len(group)]) == 3
            and rows[at + len(group)][0] == group[0][0]
        ):
            group.append(rows[at + len(group)])
        lead = group[0][0]
        room = name_width - (len(lead) - 2)
        names = short_names([r[1] for r in group], room)
        lines += [f"{lead}{n:<{room}} {r[2]}" for n, r in zip(names, group, strict=True)]
        at += len(group)
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
