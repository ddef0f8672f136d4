"""``popprof diff --format html``: the diff as one self-contained HTML page, and the "What changed" blocks as HTML.

The page holds what the Markdown comment holds (the header, the gate's verdict, "What changed", "What changed in
memory" and "What changed in device memory", the metrics with the worse rows marked, the tiles, programs and events
that changed most), rendered from ``templates/diff_page.html.j2`` with autoescaping; the blocks alone are
``templates/what_changed.html.j2``, which :class:`~popprof.report.diff_explain.WhatChanged` shows in a notebook.
Every line of words comes from the text's and Markdown's functions in :mod:`popprof.report.diff` and
:mod:`popprof.report.diff_blocks`; bytes are exact, as in the Markdown.
"""

from __future__ import annotations

from typing import Any

from .._version import __version__
from ..compare.core import ProfileDiff
from ..compare.device_memory_changed import MAX_DEVICES, device_memory_changed
from ..compare.gate import GateResult
from ..compare.memory_changed import memory_changed
from ..compare.what_changed import what_changed
from ..io import units
from ..io.names import names_apart
from .diff import DIFF_NAME_WIDTH, metric_rows, named_summary, occurrences, render_gate_text, where_cells
from .diff_blocks import (
    MEMORY_SCOPE,
    byte_part_rows,
    device_memory_unexplained,
    device_scope,
    exact_bytes,
    fullest_words,
    memory_span,
    memory_unexplained,
    more_devices,
    part_moved,
    part_rows,
    peak_at,
    tile_rows,
    time_scope,
    time_unexplained,
    window_words,
)
from .templating import render_template

__all__ = ["blocks_context", "render_html", "what_changed_html"]


def _time_block(result: ProfileDiff) -> dict:
    """ "What changed" for the template: ``alone`` (the one sentence when it explains nothing) or the scope, the
    window's line, the parts' table and the programs or device work under the part that moved most."""
    doc = what_changed(result)
    alone = time_unexplained(doc, "->")
    block: dict[str, Any] = {"alone": alone, "contributors_note": None, "contributors": None}
    if alone is not None:
        return block
    rows, header = part_rows(doc)
    block |= {"scope": time_scope(doc), "window": window_words(doc), "header": header, "rows": rows}
    who = doc["contributors"]
    if who is not None and who["unavailable"]:
        block["contributors_note"] = (
            f"{part_moved(doc, who['part'])}: {who['section']} not compared, so none named"
        )
    elif who is not None and who["rows"]:
        what = "device work (events by name)" if who["section"] == "events" else "programs (IPU-cycles)"
        unit = "" if who["unit"] == "cycles" else "us"
        names = names_apart([r["name"] for r in who["rows"]], getattr(result, who["section"])["name"], 120)
        block["contributors"] = {
            "title": f"{part_moved(doc, who['part'])}: its {what} that changed most",
            "rows": [
                (units.change(r["change"], unit), r["status"], name, r["name"])
                for r, name in zip(who["rows"], names, strict=True)
            ],
        }
    return block


def _memory_block(result: ProfileDiff) -> dict | None:
    """ "What changed in memory" for the template (bytes exact); None when neither profile has per-tile memory by
    category."""
    doc = memory_changed(result)
    if doc is None:
        return None
    alone = memory_unexplained(doc, exact_bytes)
    block: dict[str, Any] = {"alone": alone, "tile": None, "tile_rows": None, "variables": None}
    if alone is not None:
        return block
    rows, header = byte_part_rows(doc, exact_bytes)
    moved = "of which:" if doc["total_moved"] else "within noise; its parts moved:"
    block |= {
        "scope": MEMORY_SCOPE,
        "total": f"total {memory_span(doc, '->', exact_bytes)}, {moved}",
        "header": header,
        "rows": rows,
    }
    tile = doc["fullest_tile"]
    if tile is not None:
        block["tile"] = fullest_words(tile, "->", exact_bytes)
        if tile["material"]:
            block["tile_rows"], block["tile_header"] = byte_part_rows(tile, exact_bytes)
    variables = doc["variables"]
    if variables is not None and variables["rows"]:
        way = "grew or appeared" if variables["direction"] == "grew" else "shrank or went"
        block["variables"] = {
            "title": f"variables that {way} most ({variables['changed']:,} changed)",
            "rows": [
                (exact_bytes(r["change_bytes"], True), r["status"], r["name"]) for r in variables["rows"]
            ],
        }
    return block


def _device_html(doc: dict) -> dict:
    """One device's block for the template (bytes exact)."""
    rows, header = byte_part_rows(doc, exact_bytes)
    moved = "of which:" if doc["total_moved"] else "within noise; its parts moved:"
    return {
        "scope": device_scope(doc, "->"),
        "total": f"peak {memory_span(doc, '->', exact_bytes)}, {moved}",
        "header": header,
        "rows": rows,
        "peaks": [peak_at(doc, side) for side in ("base", "new")],
        "covers": doc["covers"],
    }


def _device_block(result: ProfileDiff) -> dict | None:
    """ "What changed in device memory" for the template (bytes exact): the first device's block, ``others``
    (the other devices whose peak moved, up to :data:`MAX_DEVICES` in all) and ``more`` (the line counting the
    rest, None without); None when neither trace has allocator events on a GPU."""
    doc = device_memory_changed(result)
    if doc is None:
        return None
    alone = device_memory_unexplained(doc, exact_bytes)
    if alone is not None:
        return {"alone": alone}
    return {
        "alone": None,
        **_device_html(doc),
        "others": [_device_html(d) for d in doc["devices"][1:MAX_DEVICES]],
        "more": more_devices(doc, exact_bytes),
    }


def blocks_context(result: ProfileDiff) -> dict:
    """The blocks for ``what_changed.html.j2``: ``time``, ``memory`` (None without per-tile memory) and
    ``device`` (None without allocator events on a GPU)."""
    return {"time": _time_block(result), "memory": _memory_block(result), "device": _device_block(result)}


def what_changed_html(result: ProfileDiff) -> str:
    """The two "What changed" blocks as an HTML fragment (a notebook's display)."""
    return render_template("what_changed.html.j2", wc=blocks_context(result))


def _metrics(result: ProfileDiff, include_unchanged: bool) -> list[dict]:
    """The metrics table: each row's cells as the Markdown has them, its exact figures (``values``, for the
    cells' ``data-value``) and whether it got worse."""
    frame = result.changed_metrics(include_unchanged)
    out = []
    for r, cells in zip(frame.itertuples(index=False), metric_rows(result, include_unchanged), strict=True):
        values = [r.base, r.new, r.abs_change, r.rel_change]
        out.append(
            {
                "cells": cells,
                "values": ["" if v is None or v != v else repr(float(v)) for v in values],
                "worse": "worse" in cells[-1].split(),
            }
        )
    return out


def _named(result: ProfileDiff, section: str, unit: str, top: int) -> dict | None:
    """A programs or events table as the Markdown's (the ``top`` that changed most), or None."""
    if section in result.unavailable:
        return None
    top_named = result.top_named(section, top)
    if not len(top_named):
        return None
    frame = getattr(result, section)
    names = names_apart(top_named["name"], frame["name"], DIFF_NAME_WIDTH)
    return {
        "title": f"{section.title()}: {named_summary(frame)}",
        "header": [
            "name",
            "base n",
            "new n",
            "change",
            "rel",
            "status",
            *(["on"] if "where" in top_named else []),
        ],
        "rows": [
            [
                name,
                occurrences(r.base_count),
                occurrences(r.new_count),
                units.change(r.change, unit),
                units.relative(r.rel_change),
                r.status,
                *where_cells(r),
            ]
            for name, r in zip(names, top_named.itertuples(index=False), strict=True)
        ],
        "full": list(top_named["name"]),
    }


def _section(
    name: str | None, result: ProfileDiff, gate_result: GateResult | None, include_unchanged: bool, top: int
) -> dict:
    """One diff (one engine of two run directories) for ``diff_page.html.j2``."""
    gate = None
    if gate_result is not None:
        verdict, *lines = render_gate_text(gate_result)
        gate = {"passed": gate_result.passed, "verdict": verdict, "lines": [line.strip() for line in lines]}
    tiles = None
    if "tiles" not in result.unavailable and len(result.top_tiles(top)):
        tiles = tile_rows(result, top)
    return {
        "engine": name,
        "base": result.base_name,
        "new": result.new_name,
        "notes": list(result.notes),
        "basis": [b.describe() for b in result.basis.values()],
        "gate": gate,
        "wc": blocks_context(result),
        "metrics": _metrics(result, include_unchanged),
        "hidden": 0 if include_unchanged else int((result.metrics["status"] == "unchanged").sum()),
        "top": top,
        "tiles": tiles,
        "named": [t for t in (_named(result, "programs", "", top), _named(result, "events", "us", top)) if t],
        "unavailable": list(result.unavailable.items()),
    }


def render_html(
    results: list[tuple[str | None, ProfileDiff, GateResult | None]],
    *,
    notes: list[str] = (),
    include_unchanged: bool = False,
    top: int = 10,
) -> str:
    """One self-contained page for one diff (engine None) or several (two run directories, engine by engine)."""
    sections = [_section(name, r, g, include_unchanged, top) for name, r, g in results]
    first = sections[0]
    title = f"popprof diff: {first['base']} -> {first['new']}" if len(sections) == 1 else "popprof diff"
    return render_template(
        "diff_page.html.j2",
        title=title,
        version=__version__,
        notes=list(notes),
        sections=sections,
        passed=all(g.passed for _, _, g in results if g is not None),
        gated=any(g is not None for _, _, g in results),
    )
