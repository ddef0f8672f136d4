"""The diff's explanation blocks as text and Markdown: "What changed" (the time account), "What changed in memory"
(IPU tiles) and "What changed in device memory" (a GPU allocator's peak).

Each block renders one document of :mod:`popprof.compare` (:func:`~popprof.compare.what_changed.what_changed`,
:func:`~popprof.compare.memory_changed.memory_changed`,
:func:`~popprof.compare.device_memory_changed.device_memory_changed`); the diff's text, Markdown, JUnit and HTML
(:mod:`.diff`, :mod:`.diff_html`) and ``popprof trend`` (:mod:`popprof.store.trend_report`) read the same lines.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ..compare.core import ProfileDiff
from ..compare.device_memory_changed import MAX_DEVICES, device_memory_changed
from ..compare.memory_changed import memory_changed
from ..compare.what_changed import TOP_PARTS, what_changed
from ..io import units
from ..io.names import names_apart
from ..io.plural import plural
from . import markdown as md
from .findings import wrap_text
from .fit import WIDTH
from .text_table import table


def whole_number(value: object) -> str:
    """A tile or IPU number with thousands separators; empty when missing."""
    return "" if value is None or pd.isna(value) else f"{int(value):,}"


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


def limit_words(change: dict, arrow: str) -> str:
    """The run's limit on both sides (``what_changed.limit``) in a line: ``limit: device compute 76.0 % -> host
    41.7 % (the limit changed)``, or ``limit: device compute, 76.0 % -> 72.3 % of the window(s)``."""
    base, new = change["base"], change["new"]
    if change["changed"]:
        return (
            f"limit: {base['limit']} {units.percent(base['share'])} {arrow} {new['limit']} "
            f"{units.percent(new['share'])} (the run's limit changed)"
        )
    return f"limit: {base['limit']}, {units.percent(base['share'])} {arrow} {units.percent(new['share'])}"


def parts_table(doc: dict, width: int = WIDTH) -> list[str]:
    """The parts' table of a decomposition laid out for ``width`` (:func:`part_rows`), lines indented by 2."""
    rows, header = part_rows(doc)
    return table(rows, header, {1, 2}, width)


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
    if doc.get("limit"):
        lines += wrap_text(limit_words(doc["limit"], "->"), width, "  ", "    ")
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
    if doc.get("limit"):
        lines.append(f"- {md.cell(limit_words(doc['limit'], '→'))}")
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
    lines += table(*byte_part_rows(doc, _short), {1, 2}, width)
    tile = doc["fullest_tile"]
    if tile is not None:
        quiet = not tile["material"]
        lines.append(f"  {fullest_words(tile, '->', _short)}" + ("" if quiet else ", of which:"))
        if not quiet:
            lines += table(*byte_part_rows(tile, _short), {1, 2}, width)
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


def more_devices(doc: dict, figure: Callable[..., str]) -> str | None:
    """The line that counts the devices whose peak moved beyond the :data:`MAX_DEVICES` explained in blocks,
    with the largest of their changes: ``2 more devices' peaks changed, largest rank 3 gpu:0 +8 MiB`` (one:
    ``1 more device's peak changed: gpu:4 +8 MiB``); None when there are none."""
    more = doc["devices"][MAX_DEVICES:]
    if not more:
        return None
    top = more[0]
    change = f"{_device(top['base'])} {figure(top['total']['change_bytes'], True)}"
    if len(more) == 1:
        return f"1 more device's peak changed: {change}"
    return f"{len(more)} more devices' peaks changed, largest {change}"


def _text_device(doc: dict, width: int) -> list[str]:
    """One device's text block: the peak's change, its parts that moved most (names shortened to the line),
    where each side's peak happened."""
    lines = [f"What changed in device memory ({device_scope(doc, '->')})"]
    moved = "of which:" if doc["total_moved"] else "within noise; its parts moved:"
    lines.append(f"  peak {memory_span(doc, '->', _short)}, {moved}")
    rows, header = byte_part_rows(doc, _short)
    # a name wider than the line (a Python function's, after "before the trace, freed in") is shortened
    names = names_apart([r[0] for r in rows], [p["words"] for p in doc["parts"]], width - 2)
    lines += table([[name, *r[1:]] for name, r in zip(names, rows, strict=True)], header, {1, 2}, width)
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


def render_device_memory_changed(result: ProfileDiff, width: int = WIDTH) -> list[str]:
    """The text's "What changed in device memory" lines (``compare/device_memory_changed.py``), after the
    memory block: the peak's change, the operators whose bytes live at the peak moved most with their share of
    it, where each side's peak happened; the same for each other device whose peak moved (up to
    :data:`MAX_DEVICES` blocks, then one line); one line when it explains nothing, none when neither trace has
    allocator events on a GPU. Bytes to 4 significant figures (the JSON and Markdown have them exact)."""
    doc = device_memory_changed(result)
    if doc is None:
        return []
    alone = device_memory_unexplained(doc, _short)
    if alone is not None:
        return [f"What changed in device memory: {alone}"]
    lines = _text_device(doc, width)
    for device in doc["devices"][1:MAX_DEVICES]:
        lines += ["", *_text_device(device, width)]
    more = more_devices(doc, _short)
    return [*lines, "", more] if more else lines


def _markdown_device(doc: dict) -> list[str]:
    """One device's Markdown block, bytes exact."""
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


def markdown_device_memory_changed(result: ProfileDiff) -> list[str]:
    """For a pull-request comment, "What changed in device memory": the text's blocks as short lists, bytes
    exact."""
    doc = device_memory_changed(result)
    if doc is None:
        return []
    alone = device_memory_unexplained(doc, exact_bytes)
    if alone is not None:
        return [f"**What changed in device memory:** {md.cell(alone)}"]
    lines = _markdown_device(doc)
    for device in doc["devices"][1:MAX_DEVICES]:
        lines += ["", *_markdown_device(device)]
    more = more_devices(doc, exact_bytes)
    return [*lines, "", md.cell(more)] if more else lines


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


# -- the blocks a gate failure carries (JUnit) -----------------------------------


def what_changed_material(result: ProfileDiff) -> list[str]:
    """The "What changed" block as text, when the account explains a material change; else none."""
    doc = what_changed(result)
    return render_what_changed(result) if doc["available"] and doc["material"] else []


def memory_changed_material(result: ProfileDiff) -> list[str]:
    """The "What changed in memory" block as text (the text output's, at its width), when the tiles explain a
    material change; else none."""
    doc = memory_changed(result)
    return render_memory_changed(result) if doc is not None and doc["available"] and doc["material"] else []


def device_memory_changed_material(result: ProfileDiff) -> list[str]:
    """The "What changed in device memory" block as text, when the peak's parts explain a material change."""
    doc = device_memory_changed(result)
    available = doc is not None and doc["available"] and doc["material"]
    return render_device_memory_changed(result) if available else []
