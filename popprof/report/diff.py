"""Render a :class:`ProfileDiff` (and optionally a :class:`GateResult`) as text, JSON, Markdown or JUnit XML."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ..compare.core import ProfileDiff
from ..compare.device_memory_changed import device_memory_changed
from ..compare.document import liveness_changed, to_dict
from ..compare.gate import GateResult
from ..compare.memory_changed import memory_changed
from ..compare.what_changed import TOP_PARTS, what_changed
from ..io import jsonout, units
from ..io.names import names_apart
from ..io.plural import plural
from . import junit
from . import markdown as md
from .fit import WIDTH, fit_lines

#: Widest program or event name in a diff table (the full name stays in the JSON): a line of its own at 80
#: columns when the figures leave it too little room beside them.
DIFF_NAME_WIDTH = 76


def _on(frame: pd.DataFrame) -> list[str]:
    """The header of the events' host / device column, when the frame has one (programs have none)."""
    return ["on"] if "where" in frame.columns else []


def where_cells(row: object) -> list[str]:
    """An events row's ``host`` / ``device`` / ``both`` cell, none for a program's row."""
    where = getattr(row, "where", None)
    return [] if where is None else [str(where)]


#: the characters a table keeps for its names beside the figures' columns: rows whose figures leave less are
#: stacked (:func:`_table`)
NAME_ROOM = 24


def _table(rows: list[list[str]], header: list[str], right: set[int], width: int = WIDTH) -> list[str]:
    """The rows under ``header``, the first column (a name) left-aligned, those in ``right`` right-aligned, laid
    out for ``width``: a name too long for the room its row's figures leave goes on a line of its own, its
    figures on the next line under the figures' columns. The rows whose figures are too wide for columns that
    fit the width (bytes with their binary unit: ``303,260,018 B (289.2 MiB)``), widest first, and a few more
    (a quarter of the rows at most) when that leaves the names :data:`NAME_ROOM` characters, are stacked: the
    name, then the figures whole, as many to a line as fit; the columns are sized by the other rows
    (``docs/figures.md``, "How text prints"). No figure is cut or split."""
    room = width - 2
    gaps = 2 * (len(header) - 1)
    figure_widths = [sum(len(str(c)) for c in r[1:]) for r in rows]
    widest = sorted(range(len(rows)), key=lambda k: -figure_widths[k])

    def figures_with(stacked: set[int]) -> int:  # the columns' width with these rows stacked
        kept = [header, *(r for j, r in enumerate(rows) if j not in stacked)]
        return sum(max(len(str(r[i])) for r in kept) for i in range(1, len(header))) + gaps

    # the widest rows stacked until the others' columns fit the width (no line wraps a figure) ...
    k = 0
    while k < len(widest) and figures_with(set(widest[:k])) > room:
        k += 1
    # ... and a few more (a quarter of the rows at most) when that leaves the names their room
    name_room = min(NAME_ROOM, max((len(str(r[0])) for r in [header, *rows]), default=0))
    for more in range(k, k + len(rows) // 4 + 1):
        if figures_with(set(widest[:more])) <= room - name_room:
            k = more
            break
    stacked = set(widest[:k])
    table = [header, *(r for j, r in enumerate(rows) if j not in stacked)]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    figures = sum(widths[1:]) + gaps
    widths[0] = max(min(widths[0], room - figures), 0)
    lines = []
    for j, r in enumerate([header, *rows]):
        name = str(r[0])
        if j - 1 in stacked:
            lines.append("  " + name)
            lines += _stacked([str(c) for c in r[1:] if str(c)], room)
            continue
        cells = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        if len(name) > widths[0]:
            lines.append("  " + name)
            cells[0] = " " * widths[0]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _stacked(cells: list[str], room: int) -> list[str]:
    """Figures of one row under its name, indented, whole and in order, as many to a line as ``room`` holds."""
    lines, line = [], ""
    for cell in cells:
        if line and len(line) + 2 + len(cell) > room - 2:
            lines.append("    " + line)
            line = ""
        line = f"{line}  {cell}" if line else cell
    if line:
        lines.append("    " + line)
    return lines


def _text_value(amount: object, unit: str, signed: bool = False) -> str:
    """A figure of the text's tables: bytes in their binary unit to 4 significant figures (``406.3 KiB``,
    ``+16 KiB``: :func:`~popprof.io.units.bytes_figures`) so that a byte row fits 80 columns on one line, any
    other unit as everywhere (:func:`~popprof.io.units.value`); the exact bytes are in the JSON and Markdown."""
    if unit == "bytes":
        return units.bytes_figures(amount, signed=signed, missing="" if signed else units.MISSING)
    return units.change(amount, unit) if signed else units.value(amount, unit)


def metric_rows(result: ProfileDiff, include_unchanged: bool, width: int | None = None) -> list[list[str]]:
    """The metrics table's rows; with ``width`` (the text's), a wider name (a family member named by its source:
    an annotation's, a counter's) shortened as the events' names are, told apart from the others, and bytes to 4
    significant figures (:func:`_text_value`; the JSON and Markdown keep every name and byte count whole)."""
    rows = []
    frame = result.changed_metrics(include_unchanged)
    names = (
        frame["name"].tolist() if width is None else names_apart(frame["name"], result.metrics["name"], width)
    )
    for r, name in zip(frame.itertuples(index=False), names, strict=True):
        if r.status in ("missing_base", "missing_new"):
            mark = "not in base" if r.status == "missing_base" else "not in new"
        else:
            mark = {"added": "added", "removed": "removed"}.get(r.status, "")
            if _truth(r.worse):
                mark = (mark + " worse").strip()
            elif r.worse is not None and not pd.isna(r.worse) and r.status != "unchanged":
                mark = (mark + " better").strip()
        if width is None:
            figures = [
                units.value(r.base, r.unit),
                units.value(r.new, r.unit),
                units.change(r.abs_change, r.unit),
            ]
        else:
            figures = [
                _text_value(r.base, r.unit),
                _text_value(r.new, r.unit),
                _text_value(r.abs_change, r.unit, signed=True),
            ]
        rows.append([name, *figures, units.relative(r.rel_change), mark])
    return rows


def _truth(value: object) -> bool:
    return value is not None and not pd.isna(value) and bool(value)


def named_summary(frame: pd.DataFrame) -> str:
    """A programs or events section's rows counted by status: ``103 grown, 0 shrunk, ...``."""
    counts = frame["status"].value_counts()
    return ", ".join(
        f"{int(counts.get(s, 0)):,} {s}" for s in ("grown", "shrunk", "added", "removed", "unchanged")
    )


def whole_number(value: object) -> str:
    """A tile or IPU number with thousands separators; empty when missing."""
    return "" if value is None or pd.isna(value) else f"{int(value):,}"


def occurrences(value: object) -> str:
    """An occurrence count: whole when it is (totals), else with two decimals (per step / per run)."""
    if value is None or pd.isna(value):
        return ""
    return f"{int(value):,}" if float(value).is_integer() else f"{float(value):,.2f}"


# -- what changed -------------------------------------------------------------


def part_rows(doc: dict) -> tuple[list[list[str]], list[str]]:
    """The parts table of "What changed": the :data:`TOP_PARTS` that moved most, then the others' summed change
    (so that the rows add up to the window's change), with their share of that change when the window moved."""
    shown, more = doc["parts"][:TOP_PARTS], doc["parts"][TOP_PARTS:]
    moved = doc["window_moved"]
    rows = []
    for p in shown:
        share = (
            [units.percent(p["share_of_change"]), "offsetting" if p["offsetting"] else ""] if moved else []
        )
        rows.append([p["words"], units.change(p["change_us"], "us"), *share])
    rest = doc["rest_us"] + sum(p["change_us"] for p in more)
    if units.change(rest, "us") not in ("+0.0 us", "-0.0 us"):
        label = f"{plural(len(more), 'other part')} and the rest" if more else "the other parts"
        share = [units.percent(rest / doc["window"]["change_us"]), ""] if moved else []
        rows.append([label, units.change(rest, "us"), *share])
    header = ["part", "change", *(["of the change", ""] if moved else [])]
    return rows, header


def window_words(doc: dict) -> str:
    """The window's line of a decomposition (:func:`~popprof.compare.what_changed.decompose`): its span and
    change, ``of which:`` (the parts' table follows), or within noise."""
    w = doc["window"]
    span = f"{units.duration(w['base_us'])} -> {units.duration(w['new_us'])}"
    if doc["window_moved"]:
        return f"window {span}: {units.change(w['change_us'], 'us')} ({units.relative(w['rel_change'])}), of which:"
    return f"window {span}: {units.change(w['change_us'], 'us')}, within noise; its parts moved:"


def parts_table(doc: dict, width: int = WIDTH) -> list[str]:
    """The parts' table of a decomposition laid out for ``width`` (:func:`part_rows`), lines indented by 2."""
    rows, header = part_rows(doc)
    return _table(rows, header, {1, 2}, width)


def time_unexplained(doc: dict, arrow: str) -> str | None:
    """The one sentence "What changed" is when the account explains nothing (not on both sides, or no part
    moved beyond noise), its window's two ends joined by ``arrow``; None when it explains a change."""
    if not doc["available"]:
        return f"not explained here: {doc['reason']}"
    if doc["material"]:
        return None
    w = doc["window"]
    return (
        f"no material change in the time account (window {units.duration(w['base_us'])} {arrow} "
        f"{units.duration(w['new_us'])}; no part moved by {units.duration(doc['noise_us'])} or more)"
    )


def time_scope(doc: dict) -> str:
    """What "What changed" reads, with its basis when not totals: ``the time account: device windows summed
    over devices, per run``."""
    per = "" if doc["basis"] == "total" else f", {doc['basis']}"
    return f"the time account: device windows summed over devices{per}"


def render_what_changed(result: ProfileDiff, width: int = WIDTH) -> list[str]:
    """The "What changed" lines that open the text (``compare/what_changed.py``): the window's change, the parts
    that moved most with their share of it, and the events or programs that changed most with the busy part
    that moved most; one line when the account is not on both sides or nothing moved beyond noise."""
    doc = what_changed(result)
    alone = time_unexplained(doc, "->")
    if alone is not None:
        return [f"What changed: {alone}"]
    lines = [f"What changed ({time_scope(doc)})"]
    lines.append(f"  {window_words(doc)}")
    lines += parts_table(doc, width)
    who = doc["contributors"]
    if who is not None and who["unavailable"]:
        part = part_moved(doc, who["part"])
        lines.append(f"  {part}: {who['section']} not compared, so none named (see the note above)")
    elif who is not None and who["rows"]:
        lines += contributor_lines(doc, getattr(result, who["section"])["name"], width)
    return lines


def contributor_lines(doc: dict, others: pd.Series, width: int = WIDTH, what: str | None = None) -> list[str]:
    """The lines naming a "What changed" document's ``contributors`` (its ``rows``: the programs or device work
    that changed most with the busy part that moved most), indented by 2: the part with its change, then each
    row's change, status and name, the name shortened to the room left and kept apart from ``others`` (the
    section's names). ``what``: the rows' words (default: the section's)."""
    who = doc["contributors"]
    if what is None:
        what = "device work (events by name)" if who["section"] == "events" else "programs (IPU-cycles)"
    lines = [f"  {part_moved(doc, who['part'])}: its {what} that changed most:"]
    unit = "" if who["unit"] == "cycles" else "us"
    changes = [units.change(r["change"], unit) for r in who["rows"]]
    size, status = max(len(c) for c in changes), max(len(r["status"]) for r in who["rows"])
    prefixes = [
        f"    {c.rjust(size)}  {r['status'].ljust(status)}  "
        for c, r in zip(changes, who["rows"], strict=True)
    ]
    # each name after its figures, shortened to the room they leave and kept apart from the section's others
    names = names_apart([r["name"] for r in who["rows"]], others, max(width - len(prefixes[0]), 20))
    return lines + [p + n for p, n in zip(prefixes, names, strict=True)]


def markdown_what_changed(result: ProfileDiff) -> list[str]:
    """For a pull-request comment, "What changed": the same document as the text's, as a short list."""
    doc = what_changed(result)
    alone = time_unexplained(doc, "→")
    if alone is not None:
        return [f"**What changed:** {md.cell(alone)}"]
    w = doc["window"]
    span = f"{units.duration(w['base_us'])} → {units.duration(w['new_us'])}"
    moved = doc["window_moved"]
    lines = [
        f"**What changed** ({time_scope(doc)}): window {span}, "
        + (
            f"{units.change(w['change_us'], 'us')} ({units.relative(w['rel_change'])}), of which:"
            if moved
            else f"{units.change(w['change_us'], 'us')}, within noise; its parts moved:"
        ),
        "",
    ]
    rows, _ = part_rows(doc)
    for row in rows:
        share = f" ({row[2]} of the change{', offsetting' if row[3] else ''})" if moved else ""
        lines.append(f"- {row[0]}: {row[1]}{share}")
    who = doc["contributors"]
    if who is not None and who["rows"]:
        named = markdown_contributors(who, getattr(result, who["section"])["name"])
        what = (
            "its device work that changed most" if who["section"] == "events" else "its programs (IPU-cycles)"
        )
        lines.append(f"- {part_moved(doc, who['part'])}, {what}: {named}")
    return lines


def markdown_contributors(who: dict, others: pd.Series) -> str:
    """A "What changed" document's contributors (``who``) in Markdown: each name as code, shortened and kept
    apart from ``others`` (the section's names), with its change."""
    names = names_apart([r["name"] for r in who["rows"]], others, 60)
    unit = "" if who["unit"] == "cycles" else "us"
    return ", ".join(
        f"{md.code(n)} {units.change(r['change'], unit)}" for n, r in zip(names, who["rows"], strict=True)
    )


def part_moved(doc: dict, part: str) -> str:
    """A part of a "What changed" document (one of its ``parts``) in words with its change: ``compute -4.0 us``."""
    row = next(p for p in doc["parts"] if p["part"] == part)
    return f"{row['words']} {units.change(row['change_us'], 'us')}"


# -- what changed in memory --------------------------------------------------


def byte_part_rows(doc: dict, figure: Callable[..., str]) -> tuple[list[list[str]], list[str]]:
    """The parts table of a memory decomposition (:func:`~popprof.compare.memory_changed.decompose_bytes`): the
    :data:`TOP_PARTS` that moved most, then the others' summed change so that the rows add up to the total's
    change, with their share of it when the total moved; bytes written by ``figure(bytes, signed)``."""
    shown, more = doc["parts"][:TOP_PARTS], doc["parts"][TOP_PARTS:]
    moved = doc["total_moved"]
    rows = []
    for p in shown:
        share = (
            [units.percent(p["share_of_change"]), "offsetting" if p["offsetting"] else ""] if moved else []
        )
        rows.append([p["words"], figure(p["change_bytes"], True), *share])
    rest = doc["rest_bytes"] + sum(p["change_bytes"] for p in more)
    if rest:
        label = f"{plural(len(more), 'other part')} and the rest" if more else "the other parts"
        share = [units.percent(rest / doc["total"]["change_bytes"]), ""] if moved else []
        rows.append([label, figure(rest, True), *share])
    header = ["part", "change", *(["of the change", ""] if moved else [])]
    return rows, header


def _short(amount: float, signed: bool = False) -> str:
    """Bytes to 4 significant figures, as the text writes them."""
    return units.bytes_figures(amount, signed=signed)


def exact_bytes(amount: float, signed: bool = False) -> str:
    """Bytes exact, as the Markdown and the HTML write them (``1,638,400 B (1.6 MiB)``)."""
    return units.nbytes(amount, signed=signed)


def memory_span(doc: dict, arrow: str, figure: Callable[..., str]) -> str:
    """``494.9 MiB -> 496.5 MiB: +1.563 MiB (+0.32 %)``: a decomposition's total, both ends and its change."""
    t = doc["total"]
    return (
        f"{figure(t['base_bytes'])} {arrow} {figure(t['new_bytes'])}: {figure(t['change_bytes'], True)}"
        + (
            f" ({units.relative(t['rel_change'])})"
            if t["rel_change"] is not None and t["change_bytes"]
            else ""
        )
    )


def fullest_words(tile: dict, arrow: str, figure: Callable[..., str]) -> str:
    """The fullest tile's line: ``fullest tile 289 (IPU 0): 594.7 KiB -> 594.7 KiB: +0 B`` or, when it moved,
    both tiles."""
    b, n = tile["base"], tile["new"]
    where = f"tile {b['tile']:,} (IPU {b['ipu']})"
    if tile["moved"]:
        where += f" {arrow} tile {n['tile']:,} (IPU {n['ipu']}), the fullest tile moved"
    if not tile["total"]["change_bytes"] and not tile["moved"]:
        return f"fullest tile: {where}: {figure(b['bytes'])}, unchanged"
    quiet = "" if tile["material"] else " (within noise)"
    return f"fullest tile: {where}: {memory_span(tile, arrow, figure)}{quiet}"


def memory_unexplained(doc: dict, figure: Callable[..., str]) -> str | None:
    """The one sentence the memory block is when it explains nothing; None when it explains a change."""
    if not doc["available"]:
        return f"not explained here: {doc['reason']}"
    if doc["material"]:
        return None
    t = doc["total"]
    return (
        f"no material change (all tiles {figure(t['base_bytes'])}; no part moved by "
        f"{units.nbytes(doc['noise_bytes'])} or more)"
    )


MEMORY_SCOPE = "memory of all tiles, including gaps"


def render_memory_changed(result: ProfileDiff, width: int = WIDTH) -> list[str]:
    """The text's "What changed in memory" lines (``compare/memory_changed.py``), after the time block: the
    total's change, the parts that moved most with their share of it, the fullest tile's change split the same
    way, and the variables that changed most; one line when it explains nothing, none when neither profile has
    per-tile memory by category. Bytes to 4 significant figures (the JSON and Markdown have them exact)."""
    doc = memory_changed(result)
    if doc is None:
        return []
    alone = memory_unexplained(doc, _short)
    if alone is not None:
        return [f"What changed in memory: {alone}"]
    lines = [f"What changed in memory ({MEMORY_SCOPE})"]
    moved = "of which:" if doc["total_moved"] else "within noise; its parts moved:"
    lines.append(f"  total {memory_span(doc, '->', _short)}, {moved}")
    lines += _table(*byte_part_rows(doc, _short), {1, 2}, width)
    tile = doc["fullest_tile"]
    if tile is not None:
        quiet = not tile["material"]
        lines.append(f"  {fullest_words(tile, '->', _short)}" + ("" if quiet else ", of which:"))
        if not quiet:
            lines += _table(*byte_part_rows(tile, _short), {1, 2}, width)
    variables = doc["variables"]
    if variables is not None and variables["rows"]:
        way = "grew or appeared" if variables["direction"] == "grew" else "shrank or went"
        lines.append(f"  variables that {way} most ({variables['changed']:,} changed):")
        changes = [_short(r["change_bytes"], True) for r in variables["rows"]]
        size = max(len(c) for c in changes)
        status = max(len(r["status"]) for r in variables["rows"])
        for c, r in zip(changes, variables["rows"], strict=True):
            prefix = f"    {c.rjust(size)}  {r['status'].ljust(status)}  "
            (name,) = names_apart([r["name"]], [r["name"]], max(width - len(prefix), 20))
            lines.append(prefix + name)
    return lines


def tile_rows(result: ProfileDiff, top: int) -> list[list[str]]:
    """The ``top`` tiles whose memory changed most as rows of exact figures (tile, IPU, base, new, change): the
    Markdown's table and the HTML page's."""
    return [
        [
            whole_number(t.tile),
            whole_number(t.ipu),
            units.value(t.base_bytes, "bytes"),
            units.value(t.new_bytes, "bytes"),
            units.change(t.change_bytes, "bytes"),
        ]
        for t in result.top_tiles(top).itertuples(index=False)
    ]


def _markdown_byte_parts(doc: dict, title: str, scope: str, span: str) -> list[str]:
    """The Markdown of a bytes block's headline and its parts that moved (memory, device memory), bytes exact."""
    moved = doc["total_moved"]
    lines = [
        f"**{title}** ({scope}): {span}, " + ("of which:" if moved else "within noise; its parts moved:"),
        "",
    ]
    rows, _ = byte_part_rows(doc, exact_bytes)
    for row in rows:
        share = f" ({row[2]} of the change{', offsetting' if row[3] else ''})" if moved else ""
        lines.append(f"- {md.cell(row[0])}: {row[1]}{share}")
    return lines


def markdown_memory_changed(result: ProfileDiff) -> list[str]:
    """For a pull-request comment, "What changed in memory": the text's block as a short list, bytes exact."""
    doc = memory_changed(result)
    if doc is None:
        return []
    alone = memory_unexplained(doc, exact_bytes)
    if alone is not None:
        return [f"**What changed in memory:** {md.cell(alone)}"]
    lines = _markdown_byte_parts(
        doc, "What changed in memory", MEMORY_SCOPE, memory_span(doc, "→", exact_bytes)
    )
    tile = doc["fullest_tile"]
    if tile is not None:
        parts = byte_part_rows(tile, exact_bytes)[0] if tile["material"] else []
        of = "; of which " + ", ".join(f"{md.cell(r[0])} {r[1]}" for r in parts) if parts else ""
        lines.append(f"- {fullest_words(tile, '→', exact_bytes)}{of}")
    variables = doc["variables"]
    if variables is not None and variables["rows"]:
        way = "grew or appeared" if variables["direction"] == "grew" else "shrank or went"
        named = ", ".join(
            f"{md.code(r['name'])} {exact_bytes(r['change_bytes'], True)} ({r['status']})"
            for r in variables["rows"]
        )
        lines.append(f"- variables that {way} most: {named}")
    return lines


# -- what changed in device memory ---------------------------------------------


def _device(side: dict) -> str:
    return (f"rank {side['rank']} " if side["rank"] is not None else "") + side["device"]


def device_scope(doc: dict, arrow: str) -> str:
    """What a device memory document compares: ``peak allocated on gpu:0``, or both devices and why when each
    side's is another."""
    b, n = _device(doc["base"]), _device(doc["new"])
    return f"peak allocated on {b}" if b == n else f"peak allocated on {b} {arrow} {n}: {doc['chosen']}"


def device_memory_unexplained(doc: dict, figure: Callable[..., str]) -> str | None:
    """The one sentence the device memory block is when it explains nothing; None when it explains a change."""
    if not doc["available"]:
        return f"not explained here: {doc['reason']}"
    if doc["material"]:
        return None
    return (
        f"no material change (peak {figure(doc['total']['base_bytes'])} on {_device(doc['base'])}; no "
        f"part moved by {units.nbytes(doc['noise_bytes'])} or more)"
    )


def peak_at(doc: dict, side: str) -> tuple[str, str | None]:
    """Where a side's peak happened: ``base peak at 4.680 ms`` and the operator it happened in (None outside
    any)."""
    where = doc[side]
    return f"{side} peak at {units.duration(where['peak_at_us'])}", where["peak_op"]


def render_device_memory_changed(result: ProfileDiff, width: int = WIDTH) -> list[str]:
    """The text's "What changed in device memory" lines (``compare/device_memory_changed.py``), after the
    memory block: the peak's change, the operators whose bytes live at the peak moved most with their share of
    it, where each side's peak happened; one line when it explains nothing, none when neither trace has
    allocator events on a GPU. Bytes to 4 significant figures (the JSON and Markdown have them exact)."""
    doc = device_memory_changed(result)
    if doc is None:
        return []
    alone = device_memory_unexplained(doc, _short)
    if alone is not None:
        return [f"What changed in device memory: {alone}"]
    lines = [f"What changed in device memory ({device_scope(doc, '->')})"]
    moved = "of which:" if doc["total_moved"] else "within noise; its parts moved:"
    lines.append(f"  peak {memory_span(doc, '->', _short)}, {moved}")
    lines += _table(*byte_part_rows(doc, _short), {1, 2}, width)
    for side in ("base", "new"):
        prefix, op = peak_at(doc, side)
        if op is None:
            lines.append(f"  {prefix}")
            continue
        (name,) = names_apart([op], [op], max(width - len(prefix) - 6, 20))
        lines.append(f"  {prefix} in {name}")
    if doc["covers"]:
        lines.append(f"  note: {doc['covers']}")
    return lines


def markdown_device_memory_changed(result: ProfileDiff) -> list[str]:
    """For a pull-request comment, "What changed in device memory": the text's block as a short list, bytes
    exact."""
    doc = device_memory_changed(result)
    if doc is None:
        return []
    alone = device_memory_unexplained(doc, exact_bytes)
    if alone is not None:
        return [f"**What changed in device memory:** {md.cell(alone)}"]
    lines = _markdown_byte_parts(
        doc,
        "What changed in device memory",
        device_scope(doc, "→"),
        f"peak {memory_span(doc, '→', exact_bytes)}",
    )
    for side in ("base", "new"):
        prefix, op = peak_at(doc, side)
        lines.append(f"- {prefix}" + (f" in {md.code(op)}" if op is not None else ""))
    if doc["covers"]:
        lines.append(f"- note: {md.cell(doc['covers'])}")
    return lines


# -- text ---------------------------------------------------------------------


def explanation_lines(result: ProfileDiff, width: int = WIDTH) -> list[str]:
    """The two blocks that open the text: "What changed" (:func:`render_what_changed`) and, when either profile
    has per-tile memory by category, a blank line and "What changed in memory" (:func:`render_memory_changed`);
    when either has allocator events on a GPU, a blank line and "What changed in device memory"
    (:func:`render_device_memory_changed`)."""
    memory = render_memory_changed(result, width)
    device = render_device_memory_changed(result, width)
    return [
        *render_what_changed(result, width),
        *(["", *memory] if memory else []),
        *(["", *device] if device else []),
    ]


def render_text(
    result: ProfileDiff,
    gate_result: GateResult | None = None,
    *,
    include_unchanged: bool = False,
    top: int = 10,
    width: int = WIDTH,
) -> str:
    """The terminal report: changed metrics biggest relative change first, then tiles, programs, events; laid
    out for ``width`` columns (``report/fit.py``)."""
    lines = [f"popprof diff: base {result.base_name!r} -> new {result.new_name!r}"]
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"basis: {b.describe()}" for b in result.basis.values()]
    lines.append("")
    lines += [*explanation_lines(result, width), ""]
    rows = metric_rows(result, include_unchanged, width - 2)
    hidden = int((result.metrics["status"] == "unchanged").sum()) if not include_unchanged else 0
    if rows:
        lines += _table(rows, ["metric", "base", "new", "change", "rel", ""], {1, 2, 3, 4}, width)
    else:
        lines.append("  no metric changed")
    if hidden:
        lines.append(f"  ({plural(hidden, 'unchanged metric')} hidden; --all shows them)")

    neither = [k for k, reason in result.unavailable.items() if reason.startswith("neither profile has")]

    def unavailable(section: str) -> list[str]:
        """One profile lacks the section: say which and why (neither: one line at the end says so)."""
        if section in neither:
            return []
        return ["", f"{section}: unavailable: {result.unavailable[section]}"]

    if "tiles" in result.unavailable:
        lines += unavailable("tiles")
    else:
        changed = int((result.tiles["change_bytes"].fillna(0) != 0).sum())
        lines += [
            "",
            f"tiles: {changed:,} of {len(result.tiles):,} compared tiles changed memory (including gaps)",
        ]
        top_tiles = result.top_tiles(top)
        if len(top_tiles):
            lines += _table(
                [
                    [
                        whole_number(t.tile),
                        whole_number(t.ipu),
                        _text_value(t.base_bytes, "bytes"),
                        _text_value(t.new_bytes, "bytes"),
                        _text_value(t.change_bytes, "bytes", signed=True),
                        units.relative(t.rel_change),
                    ]
                    for t in top_tiles.itertuples(index=False)
                ],
                ["tile", "ipu", "base", "new", "change", "rel"],
                {0, 1, 2, 3, 4, 5},
                width,
            )
        if len(result.ipus) > 1 or (len(result.ipus) and result.ipus["change_bytes"].isna().any()):
            lines += ["", "per IPU:"]
            lines += _table(
                [
                    [
                        whole_number(r.ipu),
                        _text_value(_f(r.base_bytes), "bytes"),
                        _text_value(_f(r.new_bytes), "bytes"),
                        _text_value(_f(r.change_bytes), "bytes", signed=True),
                        whole_number(r.base_tiles_out_of_memory),
                        whole_number(r.new_tiles_out_of_memory),
                    ]
                    for r in result.ipus.itertuples(index=False)
                ],
                ["ipu", "base", "new", "change", "base OOM", "new OOM"],
                {0, 1, 2, 3, 4, 5},
                width,
            )

    for section, label, unit in (
        ("programs", "programs (steps by program name, IPU-cycles)", ""),
        ("events", "events (by name, total duration)", "us"),
    ):
        if section in result.unavailable:
            lines += unavailable(section)
            continue
        frame = getattr(result, section)
        lines += ["", f"{label}: {named_summary(frame)} (unchanged within {result.tolerance * 100:g} %)"]
        top_named = result.top_named(section, top)
        if len(top_named):
            lines += _table(
                [
                    [
                        name,
                        occurrences(r.base_count),
                        occurrences(r.new_count),
                        units.value(_f(r.base_total), unit),
                        units.value(_f(r.new_total), unit),
                        units.change(r.change, unit),
                        units.relative(r.rel_change),
                        r.status,
                        *where_cells(r),
                    ]
                    for name, r in zip(
                        names_apart(top_named["name"], frame["name"], DIFF_NAME_WIDTH),
                        top_named.itertuples(index=False),
                        strict=True,
                    )
                ],
                [
                    "name",
                    "base n",
                    "new n",
                    "base total",
                    "new total",
                    "change",
                    "rel",
                    "status",
                    *_on(top_named),
                ],
                {1, 2, 3, 4, 5, 6},
                width,
            )

    if "liveness" in result.unavailable:
        lines += unavailable("liveness")
    else:
        lv = result.liveness
        changed = liveness_changed(lv)
        lines += ["", f"liveness: {changed:,} of {len(lv):,} steps changed not-always-live bytes"]
        if changed:
            worst = lv.loc[lv["change_bytes"].astype("float64").abs().idxmax()]
            lines.append(
                f"  largest change at step {int(worst['step'])} ({worst['program']}): "
                f"{units.change(float(worst['change_bytes']), 'bytes')}"
            )
    if neither:
        lines += ["", f"not in either profile: {', '.join(neither)} (--format json says what each needs)"]
    if gate_result is not None:
        lines += ["", *render_gate_text(gate_result)]
    return "\n".join(fit_lines(lines, width)) + "\n"


def _f(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def render_gate_text(gate_result: GateResult) -> list[str]:
    """The gate's verdict, each violation and each gap, one per line."""
    lines = [gate_result.verdict + f" [{gate_result.budget_source}]"]
    lines += [f"  FAIL {v}" for v in gate_result.violations["message"]]
    lines += [
        f"  GAP  {g.metric}: {g.reason} (budget {g.pattern})"
        for g in gate_result.gaps.itertuples(index=False)
    ]
    if gate_result.unknown_patterns:
        lines.append(
            f"  warning: {'budget patterns' if len(gate_result.unknown_patterns) > 1 else 'a budget pattern'} "
            "matching no known metric (typo?): " + ", ".join(gate_result.unknown_patterns)
        )
    if gate_result.not_applicable:
        lines.append(f"  not applicable (neither profile has them): {', '.join(gate_result.not_applicable)}")
    return lines


# -- JSON ---------------------------------------------------------------------


def render_json(
    result: ProfileDiff, gate_result: GateResult | None = None, *, top: int = 10, **_: object
) -> str:
    """The diff as indented JSON."""
    return jsonout.dumps(to_dict(result, gate_result, top=top))


# -- Markdown -----------------------------------------------------------------


def render_markdown(
    result: ProfileDiff,
    gate_result: GateResult | None = None,
    *,
    include_unchanged: bool = False,
    top: int = 10,
) -> str:
    """A pull-request comment: verdict line, changed metrics table, top tiles and programs."""
    if gate_result is None:
        verdict = "**popprof diff**"
    elif gate_result.passed:
        verdict = "**popprof gate: PASS** :white_check_mark:"
    else:
        verdict = "**popprof gate: FAIL** :x:"
    lines = [f"{verdict} {md.code(result.base_name)} → {md.code(result.new_name)}"]
    if gate_result is not None:
        lines[0] += f" — {gate_result.verdict.split(': ', 1)[1]}"
        lines.append("")
        lines += [f"- :x: {md.cell(m)}" for m in gate_result.violations["message"]]
        lines += [
            f"- :grey_question: gap: {md.code(g.metric)}: {md.cell(g.reason)}"
            for g in gate_result.gaps.itertuples()
        ]
    if result.notes or result.basis:
        lines += [
            "",
            *[f"> note: {md.cell(n)}" for n in result.notes],
            *[f"> basis: {md.cell(b.describe())}" for b in result.basis.values()],
        ]
    lines += ["", *markdown_what_changed(result)]
    memory = markdown_memory_changed(result)
    lines += ["", *memory] if memory else []
    device = markdown_device_memory_changed(result)
    lines += ["", *device] if device else []
    rows = metric_rows(result, include_unchanged)
    lines.append("")
    if rows:
        lines += md.table(
            ["metric", "base", "new", "change", "rel", ""],
            [[md.code(r[0]), *r[1:]] for r in rows],
            right={1, 2, 3, 4},
        )
    else:
        lines.append("No metric changed.")
    if "tiles" not in result.unavailable and len(result.top_tiles(top)):
        lines += ["", f"<details><summary>Top {top} tiles by memory change</summary>", ""]
        lines += md.table(["tile", "ipu", "base", "new", "change"], tile_rows(result, top), right=range(5))
        lines += ["", "</details>"]
    for section, unit in (("programs", ""), ("events", "us")):
        if section in result.unavailable:
            continue
        top_named = result.top_named(section, top)
        if not len(top_named):
            continue
        lines += [
            "",
            f"<details><summary>{section.title()}: {named_summary(getattr(result, section))}</summary>",
            "",
        ]
        lines += md.table(
            ["name", "base n", "new n", "change", "rel", "status", *_on(top_named)],
            [
                [
                    md.code(name),
                    occurrences(r.base_count),
                    occurrences(r.new_count),
                    units.change(r.change, unit),
                    units.relative(r.rel_change),
                    r.status,
                    *where_cells(r),
                ]
                for name, r in zip(
                    names_apart(top_named["name"], getattr(result, section)["name"], DIFF_NAME_WIDTH),
                    top_named.itertuples(index=False),
                    strict=True,
                )
            ],
            right={1, 2, 3, 4},
        )
        lines += ["", "</details>"]
    unavailable = [f"- {section}: {md.cell(reason)}" for section, reason in result.unavailable.items()]
    if unavailable:
        lines += ["", "<details><summary>Not compared</summary>", "", *unavailable, "", "</details>"]
    return "\n".join(lines) + "\n"


# -- JUnit --------------------------------------------------------------------


#: the units of the figures whose gate failure carries "What changed" in its JUnit details (a time, the
#: cycles of an IPU run, a share of the time); a ``memory.`` figure is never one of them
TIME_UNITS = frozenset({"us", "cycles", "share"})
#: the prefix and unit of the figures whose gate failure carries "What changed in memory" (``memory.*_bytes``:
#: all tiles', the fullest tile's, the liveness peaks, a category's)
MEMORY_PREFIX, MEMORY_UNIT = "memory.", "bytes"
#: the figure whose gate failure carries "What changed in device memory"
DEVICE_MEMORY_PEAK = "trace.device_memory_peak_bytes"


def junit_block(name: str, unit: object) -> str | None:
    """Which block a failure of the figure ``name`` (of ``unit``) carries in its JUnit details: ``"time"``,
    ``"memory"``, ``"device memory"`` (the GPU allocator's peak) or None (a count, a tile index, a share of
    memory)."""
    if name == DEVICE_MEMORY_PEAK:
        return "device memory"
    if name.startswith(MEMORY_PREFIX):
        return "memory" if unit == MEMORY_UNIT else None
    return "time" if unit in TIME_UNITS else None


def _what_changed_lines(result: ProfileDiff) -> list[str]:
    """The "What changed" block as text, when the account explains a material change; else none."""
    doc = what_changed(result)
    return render_what_changed(result) if doc["available"] and doc["material"] else []


def _memory_changed_lines(result: ProfileDiff) -> list[str]:
    """The "What changed in memory" block as text (the text output's, at its width), when the tiles explain a
    material change; else none."""
    doc = memory_changed(result)
    return render_memory_changed(result) if doc is not None and doc["available"] and doc["material"] else []


def _device_memory_changed_lines(result: ProfileDiff) -> list[str]:
    """The "What changed in device memory" block as text, when the peak's parts explain a material change."""
    doc = device_memory_changed(result)
    available = doc is not None and doc["available"] and doc["material"]
    return render_device_memory_changed(result) if available else []


def render_junit(result: ProfileDiff, gate_result: GateResult | None = None, **_: object) -> str:
    """JUnit XML document for one diff (see :func:`junit_suite`)."""
    return junit.render([junit_suite(result, gate_result)], _junit_root(gate_result is not None))


def _junit_root(gated: bool) -> str:
    return "popprof gate" if gated else "popprof diff"


def junit_suite(
    result: ProfileDiff, gate_result: GateResult | None = None, engine: str | None = None
) -> junit.Suite:
    """One JUnit suite: a test case per budgeted metric (failure = over budget, skipped = gap).

    Without a gate, one passing test case per metric that changed, for the record.
    """
    suite_name = "popprof.gate" if gate_result is not None else "popprof.diff"
    if engine:
        suite_name += f".{engine}"
    suite = junit.Suite(suite_name)
    if gate_result is not None:
        by_metric: dict[str, list[str]] = {}
        for v in gate_result.violations.itertuples(index=False):
            by_metric.setdefault(v.metric, []).append(v.message)
        units_of = dict(zip(result.metrics["name"], result.metrics["unit"], strict=True))
        # a time figure's failure says where the time went, a memory figure's where the bytes went
        blocks = {
            "time": _what_changed_lines,
            "memory": _memory_changed_lines,
            "device memory": _device_memory_changed_lines,
        }
        why: dict[str, list[str]] = {}
        for c in gate_result.checks.itertuples(index=False):
            case = junit.Case(c.metric, suite_name)
            if c.result == "fail":
                message = "; ".join(by_metric.get(c.metric, []))
                details = message
                block = junit_block(c.metric, units_of.get(c.metric))
                if block is not None:
                    if block not in why:
                        why[block] = blocks[block](result)
                    details = "\n".join([message, "", *why[block]]) if why[block] else message
                case.failure = junit.Failure(message, "budget", details)
            elif c.result == "gap":
                reason = gate_result.gaps.loc[gate_result.gaps["metric"] == c.metric, "reason"]
                text = f"gap: {reason.iloc[0] if len(reason) else 'missing'} (budget {c.budget})"
                if gate_result.strict:
                    case.failure = junit.Failure(text, "gap")
                else:
                    case.skipped = text
            suite.cases.append(case)
    else:
        for r in result.changed_metrics().itertuples(index=False):
            text = (
                f"{units.value(r.base, r.unit)} -> {units.value(r.new, r.unit)} "
                f"{units.relative(r.rel_change)}"
            ).strip()
            suite.cases.append(junit.Case(r.name, suite_name, output=text))
    return suite


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown, "junit": render_junit}


def render(
    result: ProfileDiff,
    gate_result: GateResult | None = None,
    fmt: str = "text",
    *,
    include_unchanged: bool = False,
    top: int = 10,
    width: int = WIDTH,
) -> str:
    """Render in ``fmt`` (text, json, markdown or junit); text laid out for ``width`` columns."""
    if fmt == "json":
        return render_json(result, gate_result, top=top)
    if fmt == "junit":
        return render_junit(result, gate_result)
    if fmt == "text":
        return render_text(result, gate_result, include_unchanged=include_unchanged, top=top, width=width)
    return RENDERERS[fmt](result, gate_result, include_unchanged=include_unchanged, top=top)


def render_many(
    results: list[tuple[str, ProfileDiff, GateResult | None]],
    fmt: str = "text",
    *,
    notes: list[str] = (),
    include_unchanged: bool = False,
    top: int = 10,
    width: int = WIDTH,
) -> str:
    """Render one or several (engine, diff, gate) results; several come from two run directories. Text is
    laid out for ``width`` columns."""
    if len(results) == 1 and not notes:
        _, result, gate_result = results[0]
        return render(result, gate_result, fmt, include_unchanged=include_unchanged, top=top, width=width)
    if fmt == "json":
        doc = {
            "notes": list(notes),
            "passed": all(g.passed for _, _, g in results if g is not None),
            "engines": {name: to_dict(r, g, top=top) for name, r, g in results},
        }
        return jsonout.dumps(doc)
    if fmt == "junit":
        gated = any(g is not None for _, _, g in results)
        return junit.render([junit_suite(r, g, name) for name, r, g in results], _junit_root(gated))
    parts = []
    if fmt == "markdown":
        parts += [f"> note: {md.cell(n)}\n" for n in notes]
        for name, r, g in results:
            parts.append(
                f"#### Engine {md.code(name)}\n\n"
                + render_markdown(r, g, include_unchanged=include_unchanged, top=top)
            )
    else:
        parts += [f"note: {n}\n" for n in notes]
        for name, r, g in results:
            parts.append(
                f"=== engine {name!r} ===\n"
                + render_text(r, g, include_unchanged=include_unchanged, top=top, width=width)
            )
    return "\n".join(parts)
