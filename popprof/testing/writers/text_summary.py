"""Render a Profile as Poplar's text summary (the shape of ``printProfileSummary``).

The figures come from the profile's tables: per-tile memory (``tiles``,
``tile_memory``) when present, otherwise the ``memory_totals`` and
``tile_histogram`` a text summary was read into. :func:`summary_totals` returns
exactly the memory figures the text shows, as a ``memory_totals`` frame, so a
reader can be checked against the writer.

Derivations the writer makes (documented in ``docs/readers.md``): the data
type ``Variables`` is always-live plus not-always-live bytes; the region
``Interleaved`` is 0 unless the profile's ``memory_totals`` says otherwise (per-tile
sources do not split regions); vertex data by category is derived from the pva
categories ``vertexInstanceState``, ``vertexFieldData``, ``copyDescriptor`` and
``vectorListDescriptor``; vertex data by type is printed only when the profile's
``memory_totals`` has ``vertex_type`` rows.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ...io.atomic import refuse_overwriting_inputs, write_text_atomic
from ...model.profile import Profile
from ...model.schema import conform
from ...readers.poplar_labels import DATA_TYPE_OF_CATEGORY, DATA_TYPES, REGIONS

#: pva category -> vertex-data category label (the writer's approximation of Poplar's split).
VERTEX_CATEGORY_LABELS: dict[str, str] = {
    "vertexInstanceState": "Internal vertex state",
    "vertexFieldData": "Edge pointers",
    "copyDescriptor": "Copy pointers",
    "vectorListDescriptor": "Descriptors",
}

KIB = 1024
MIB = 1024 * 1024


@dataclass
class Layout:
    """How the text is laid out; vary it to exercise a reader's tolerance."""

    indent: int = 2  # spaces per nesting level
    value_column: int = 40  # column values start at (0: one space after the label)
    value_width: int = 15  # values are right-aligned in this many characters
    blank_lines: int = 1  # blank lines between sections
    sections: tuple[str, ...] = ("target", "graph", "memory", "tiles", "blocks", "execution")
    excluding_total_line: bool = True  # print ``Total:`` under ``Excluding Gaps:``
    vertex_type_colon: bool = False  # ``name: N B`` instead of ``name   N B``
    histogram_bins: int = 12  # at most this many histogram bins
    extra_fields: dict[str, str] = field(default_factory=dict)  # extra ``Label: value`` lines in Target
    newline: str = "\n"
    memory_style: str = "sdk1"  # "sdk3": "Total for all IPUs:", data types under "Not Overlapped" + Total
    execution_totals: str = ""  # "sdk1" / "sdk3": an Execution section of cycle totals ("" = none)


def write_text_summary(
    profile: Profile,
    path: str | os.PathLike[str],
    per_tile_blocks: int = 5,
    show_execution_steps: bool = False,
    **layout: object,
) -> Path:
    """Write ``profile`` as a Poplar-style text summary at ``path`` (atomically); returns the path.

    ``per_tile_blocks`` is how many ``Tile # T memory usage:`` blocks to print (the
    most-subscribed tiles); ``show_execution_steps`` adds one `` Type: program`` line per
    execution step of the first IPU. Keyword options are :class:`Layout` fields.
    """
    known = {f.name for f in fields(Layout)}
    unknown = sorted(set(layout) - known)
    if unknown:
        raise TypeError(f"unknown layout options: {', '.join(unknown)}")
    if layout.get("memory_style", "sdk1") not in ("sdk1", "sdk3") or layout.get(
        "execution_totals", ""
    ) not in ("", "sdk1", "sdk3"):
        raise ValueError("memory_style is 'sdk1' or 'sdk3'; execution_totals is '', 'sdk1' or 'sdk3'")
    path = Path(path)
    refuse_overwriting_inputs(path, [profile.source])  # inputs are never modified
    text = render_text_summary(profile, per_tile_blocks, show_execution_steps, Layout(**layout))
    write_text_atomic(path, text)
    return path


def render_text_summary(
    profile: Profile,
    per_tile_blocks: int = 5,
    show_execution_steps: bool = False,
    layout: Layout | None = None,
) -> str:
    """The text summary of ``profile`` as a string (see :func:`write_text_summary`)."""
    lay = layout or Layout()
    totals = summary_totals(profile, per_tile_blocks, lay.memory_style)
    sections: list[list[str]] = []
    if "target" in lay.sections and profile.has("target"):
        sections.append(_target_lines(profile, lay))
    if "graph" in lay.sections:
        graph = _graph_lines(profile, lay)
        if graph:
            sections.append(graph)
    whole = totals[totals["tile"].isna()]
    if "memory" in lay.sections and not whole.empty:
        heading = "Total for all IPUs:" if lay.memory_style == "sdk3" else "Total:"
        lines = ["Memory Usage:", *_tree_lines(whole, lay, 1, heading)]
        if "tiles" in lay.sections:
            lines += _by_tile_lines(profile, totals, lay)
        sections.append(lines)
    if "blocks" in lay.sections:
        for tile in _block_tiles(totals):
            block = totals[totals["tile"] == tile]
            sections.append([f"Tile # {tile:,} memory usage:", *_tree_lines(block, lay, 1)])
    if "execution" in lay.sections:
        execution: list[str] = []
        if lay.execution_totals and not (figures := execution_figures(profile, lay.execution_totals)).empty:
            execution = _execution_totals_lines(profile, figures, lay)
        if show_execution_steps and profile.has("steps"):
            steps = _execution_lines(profile, lay)
            execution = [*execution, "", *steps[1:]] if execution else steps
        if execution:
            sections.append(execution)
    sep = [""] * lay.blank_lines
    out: list[str] = []
    for i, section in enumerate(sections):
        if i:
            out += sep
        out += section
    return lay.newline.join(out) + lay.newline


# -- figures ----------------------------------------------------------------------------------------


def summary_totals(profile: Profile, per_tile_blocks: int = 5, memory_style: str = "sdk1") -> pd.DataFrame:
    """The memory figures the text summary of ``profile`` shows, as a ``memory_totals`` frame.

    Whole-profile rows have ``tile`` missing; ``maximum`` rows carry the tile; the
    per-tile blocks (the ``per_tile_blocks`` most-subscribed tiles) have ``tile`` set.
    Figures derived from per-tile tables come first; rows of the profile's own
    ``memory_totals`` that are not derived are kept (except group ``other``, whose
    heading paths are not reproduced), and its whole-profile ``region`` rows (e.g.
    from SDK 1.x JSON) replace the derived region split. ``memory_style="sdk3"``
    adds a ``data_type_total`` ``Not Overlapped/Total`` per scope where absent.
    """
    frame = _summary_totals(profile, per_tile_blocks)
    frame = frame[frame["group"].astype("str") != "other"].reset_index(drop=True)
    if memory_style == "sdk3":
        frame = _with_not_overlapped_totals(frame)
    return frame


def _with_not_overlapped_totals(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``data_type_total`` / ``Not Overlapped/Total`` (the sum of the non-overlapped data types)."""
    group, category = frame["group"].astype("str"), frame["category"].astype("str")
    plain = frame[(group == "data_type") & ~category.str.contains("/", regex=False)]
    if plain.empty:
        return frame
    have = set(
        frame.loc[(group == "data_type_total") & (category == "Not Overlapped/Total"), "tile"].map(_tile_key)
    )
    sums = plain.assign(key=plain["tile"].map(_tile_key)).groupby("key", sort=False)["bytes"].sum()
    extra = [
        (pd.NA if k == -1 else k, "data_type_total", "Not Overlapped/Total", int(v))
        for k, v in sums.items()
        if k not in have
    ]
    if not extra:
        return frame
    add = pd.DataFrame(extra, columns=["tile", "group", "category", "bytes"]).astype(
        {"tile": "Int32", "bytes": "Int64"}
    )
    return conform(
        "memory_totals",
        pd.concat([frame.astype({"group": "str", "category": "str"}), add], ignore_index=True),
    )


def _summary_totals(profile: Profile, per_tile_blocks: int) -> pd.DataFrame:
    rows: list[tuple[object, str, str, int]] = []
    tiles = profile.get("tiles")
    if tiles is not None and not tiles.empty and tiles["bytes_excl_gaps"].notna().any():
        rows += _derived_rows(profile, tiles, per_tile_blocks)
    derived = pd.DataFrame(rows, columns=["tile", "group", "category", "bytes"])
    existing = profile.get("memory_totals")
    if existing is not None and not existing.empty:
        existing = _limit_blocks(existing, per_tile_blocks, derived)
        whole_regions = existing["tile"].isna() & (existing["group"] == "region")
        if whole_regions.any() and not derived.empty:  # a source's own region split beats "Interleaved = 0"
            derived = derived[~(derived["tile"].isna() & (derived["group"] == "region"))]
        if not derived.empty:
            keys = set(
                zip(derived["tile"].map(_tile_key), derived["group"], derived["category"], strict=True)
            )
            keep = [
                (_tile_key(t), g, c) not in keys
                for t, g, c in zip(existing["tile"], existing["group"], existing["category"], strict=True)
            ]
            existing = existing[keep]
        frames = [f for f in (derived, existing) if not f.empty]
        derived = pd.concat(
            [f.astype({"tile": "Int32", "bytes": "Int64"}) for f in frames], ignore_index=True
        )
    return conform("memory_totals", derived.astype({"tile": "Int32", "bytes": "Int64"}))


def _tile_key(tile: object) -> int:
    return -1 if pd.isna(tile) else int(tile)


def _limit_blocks(existing: pd.DataFrame, per_tile_blocks: int, derived: pd.DataFrame) -> pd.DataFrame:
    """Keep whole-profile rows, maxima and at most ``per_tile_blocks`` per-tile blocks of ``existing``."""
    block = existing["tile"].notna() & (existing["group"] != "maximum")
    if not derived.empty:
        return existing[~block]  # per-tile blocks come from the per-tile tables
    block_tiles = pd.unique(existing.loc[block, "tile"].astype("int64"))[:per_tile_blocks]
    return existing[~block | existing["tile"].isin(block_tiles)]


def _per_tile_categories(profile: Profile, tile_index: np.ndarray) -> pd.DataFrame:
    """Tile x pva category bytes (rows in ``tile_index`` order; missing -> 0)."""
    frame = profile.get("tile_memory")
    if frame is None or frame.empty:
        return pd.DataFrame(index=tile_index)
    wide = frame.pivot_table(index="tile", columns="category", values="bytes", aggfunc="sum", observed=True)
    wide.columns = wide.columns.astype("str")
    return wide.reindex(tile_index).fillna(0).astype("int64")


def _derived_rows(profile: Profile, tiles: pd.DataFrame, per_tile_blocks: int) -> list[tuple]:
    tile_ids = tiles["tile"].to_numpy(dtype=np.int64)
    incl = tiles["bytes_incl_gaps"].fillna(tiles["bytes_excl_gaps"]).to_numpy(dtype=np.int64)
    excl = tiles["bytes_excl_gaps"].fillna(0).to_numpy(dtype=np.int64)
    overflowed = tiles["overflowed_bytes"].fillna(0).to_numpy(dtype=np.int64)
    cats = _per_tile_categories(profile, tile_ids)
    cat_bytes = cats.to_numpy(dtype=np.int64) if cats.shape[1] else np.zeros((len(tile_ids), 0), np.int64)
    cat_names = [str(c) for c in cats.columns]
    if tiles["always_live_bytes"].notna().all() and tiles["not_always_live_bytes"].notna().all():
        variables = (tiles["always_live_bytes"] + tiles["not_always_live_bytes"]).to_numpy(dtype=np.int64)
    else:
        variables = np.clip(excl - cat_bytes.sum(axis=1), 0, None)
    # One matrix of every figure per tile, columns labelled (group, category).
    columns: list[tuple[str, str]] = [("total", "including_gaps"), ("total", "excluding_gaps")]
    values = [incl, excl]
    columns += [("region", r) for r in REGIONS]
    values += [excl - overflowed, np.zeros_like(excl), overflowed]
    labelled: dict[str, np.ndarray] = {"Variables": variables}
    for name, col in zip(cat_names, cat_bytes.T, strict=True):
        label = DATA_TYPE_OF_CATEGORY.get(name, name)
        labelled[label] = labelled.get(label, 0) + col
    for label in _ordered(labelled):
        columns.append(("data_type", label))
        values.append(labelled[label])
    vertex = [
        (VERTEX_CATEGORY_LABELS[n], cat_bytes[:, i])
        for i, n in enumerate(cat_names)
        if n in VERTEX_CATEGORY_LABELS
    ]
    if vertex:
        columns.append(("total", "vertex_data"))
        values.append(np.sum([v for _, v in vertex], axis=0))
        columns += [("vertex_category", label) for label, _ in vertex]
        values += [v for _, v in vertex]
    matrix = np.column_stack(values)
    rows: list[tuple] = [(pd.NA, g, c, int(v)) for (g, c), v in zip(columns, matrix.sum(axis=0), strict=True)]
    for category, column in (("including_gaps", incl), ("excluding_gaps", excl)):
        at = int(np.argmax(column))
        rows.append((int(tile_ids[at]), "maximum", category, int(column[at])))
    order = np.lexsort((tile_ids, -incl))[:per_tile_blocks]
    for at in order:
        rows += [(int(tile_ids[at]), g, c, int(v)) for (g, c), v in zip(columns, matrix[at], strict=True)]
    return rows


def _ordered(labels: Iterable[str]) -> list[str]:
    labels = list(labels)
    known = [label for label in DATA_TYPES if label in labels]
    return known + [label for label in labels if label not in DATA_TYPES]  # Poplar's order, others after


def _block_tiles(totals: pd.DataFrame) -> list[int]:
    rows = totals[totals["tile"].notna() & (totals["group"] != "maximum")]
    return [int(t) for t in pd.unique(rows["tile"].astype("int64"))]


def out_of_memory_count(profile: Profile) -> int | None:
    """Tiles whose memory including gaps exceeds capacity (from tiles, else the metadata)."""
    tiles = profile.get("tiles")
    cap = profile.target_value("bytes_per_tile")
    if tiles is not None and not tiles.empty and tiles["bytes_incl_gaps"].notna().any():
        capacity = tiles["capacity_bytes"].fillna(cap) if cap is not None else tiles["capacity_bytes"]
        return int((tiles["bytes_incl_gaps"] > capacity).fillna(False).sum())
    value = profile.meta.get("tiles_out_of_memory")
    return None if value in (None, "") else int(float(value))


def tile_histogram(profile: Profile, max_bins: int = 12) -> pd.DataFrame:
    """The histogram of per-tile memory (excluding gaps) the summary prints, as a ``tile_histogram`` frame.

    Bins are a round number of KB wide (the narrowest of 1, 2, 4, 8, 16, 32, 50, 64,
    100, 128, 200, 256, 500, 1000, ... giving at most ``max_bins`` bins), from 0 up
    to the fullest tile; a tile of ``b`` bytes is in the bin with
    ``low_bytes <= b < high_bytes``.
    """
    tiles = profile.get("tiles")
    if tiles is None or tiles.empty or not tiles["bytes_excl_gaps"].notna().any():
        existing = profile.get("tile_histogram")
        return existing if existing is not None else conform("tile_histogram", {})
    excl = tiles["bytes_excl_gaps"].dropna().to_numpy(dtype=np.int64)
    top_kb = int(excl.max()) // KIB + 1
    width = next(w for w in _widths() if math.ceil(top_kb / w) <= max_bins)
    counts = np.bincount(excl // (width * KIB))
    low = np.arange(len(counts), dtype=np.int64) * width * KIB
    return conform("tile_histogram", {"low_bytes": low, "high_bytes": low + width * KIB, "num_tiles": counts})


def _widths() -> Iterable[int]:
    yield from (1, 2, 4, 8, 16, 32, 50, 64, 100, 128, 200, 256, 500)
    scale = 1000
    while True:
        yield from (scale, 2 * scale, 5 * scale)
        scale *= 10


# -- rendering --------------------------------------------------------------------------------------


def _kv(lay: Layout, depth: int, label: str, value: str, colon: bool = True) -> str:
    head = " " * (lay.indent * depth) + label + (":" if colon else "")
    value = value.rjust(lay.value_width)
    return f"{head.ljust(lay.value_column - 1)} {value}" if lay.value_column else f"{head} {value.strip()}"


def _bytes(n: int) -> str:
    return f"{int(n):,} B"


def _size(n: int) -> str:
    """Bytes as Poplar prints capacities: MB or kB with one decimal when exact, else bytes."""
    n = int(n)
    if n and (n * 10) % MIB == 0:
        return f"{n / MIB:,.1f} MB"
    if n and (n * 10) % KIB == 0:
        return f"{n / KIB:,.1f} kB"
    return _bytes(n)


def _target_lines(profile: Profile, lay: Layout) -> list[str]:
    t = profile.target_value
    lines = ["Target:"]
    for label, column in (
        ("Number of IPUs", "num_ipus"),
        ("Tiles per IPU", "tiles_per_ipu"),
        ("Total Tiles", "num_tiles"),
    ):
        if t(column) is not None:
            lines.append(_kv(lay, 1, label, f"{int(t(column)):,}"))
    if t("bytes_per_tile") is not None:
        lines.append(_kv(lay, 1, "Memory Per-Tile", _size(t("bytes_per_tile"))))
        if t("num_tiles") is not None:
            lines.append(_kv(lay, 1, "Total Memory", _size(int(t("bytes_per_tile")) * int(t("num_tiles")))))
    if t("clock_hz") is not None:
        lines.append(_kv(lay, 1, "Clock Speed (approx)", f"{float(t('clock_hz')) / 1e6:,.1f} MHz"))
    for label, column in (("Number of Replicas", "num_replicas"), ("IPUs per Replica", "ipus_per_replica")):
        if t(column) is not None:
            lines.append(_kv(lay, 1, label, f"{int(t(column)):,}"))
    lines += [_kv(lay, 1, label, value) for label, value in lay.extra_fields.items()]
    return lines


GRAPH_FIELDS: tuple[tuple[str, str], ...] = (
    ("Number of vertices", "graph.num_vertices"),
    ("Number of edges", "graph.num_edges"),
    ("Number of variables", "graph.num_variables"),
    ("Number of compute sets", "graph.num_compute_sets"),
)


def _graph_lines(profile: Profile, lay: Layout) -> list[str]:
    meta = profile.meta
    lines = [
        _kv(lay, 1, label, f"{int(float(meta[key])):,}")
        for label, key in GRAPH_FIELDS
        if meta.get(key) not in (None, "")
    ]
    return ["Graph:", *lines] if lines else []


def _tree_lines(rows: pd.DataFrame, lay: Layout, depth: int, heading: str = "Total:") -> list[str]:
    """The ``Total:`` tree of one scope (whole profile or one tile)."""

    def figures(group: str) -> list[tuple[str, int]]:
        sel = rows[rows["group"] == group]
        return [(str(c), int(b)) for c, b in zip(sel["category"], sel["bytes"], strict=True) if pd.notna(b)]

    totals = dict(figures("total"))
    lines = [" " * (lay.indent * depth) + heading]
    d = depth + 1
    if "including_gaps" in totals:
        lines.append(_kv(lay, d, "Including Gaps", _bytes(totals["including_gaps"])))
    lines.append(" " * (lay.indent * d) + "Excluding Gaps:")
    regions = figures("region")
    if regions:
        lines.append(" " * (lay.indent * (d + 1)) + "By Memory Region:")
        lines += [_kv(lay, d + 2, label, _bytes(v)) for label, v in regions]
    if "excluding_gaps" in totals and lay.excluding_total_line:
        lines.append(_kv(lay, d + 1, "Total", _bytes(totals["excluding_gaps"])))
    data_types, subtotals = figures("data_type"), figures("data_type_total")
    if data_types or subtotals:
        lines.append(" " * (lay.indent * (d + 1)) + "By Data Type:")
        lines += _data_type_lines(data_types, subtotals, lay, d + 2)
    vcat, vtype = figures("vertex_category"), figures("vertex_type")
    if "vertex_data" in totals or vcat or vtype:
        vertex_total = totals.get("vertex_data", sum(v for _, v in vcat))
        lines.append(" " * (lay.indent * (d + 1)) + f"Vertex Data ({vertex_total:,} B):")
        if vcat:
            lines.append(" " * (lay.indent * (d + 2)) + "By Category:")
            lines += [_kv(lay, d + 3, label, _bytes(v)) for label, v in vcat]
        if vtype:
            lines.append(" " * (lay.indent * (d + 2)) + "By Type:")
            lines += [_kv(lay, d + 3, label, _bytes(v), colon=lay.vertex_type_colon) for label, v in vtype]
    ctype = figures("vertex_code_type")
    if "vertex_code" in totals or ctype:
        code_total = totals.get("vertex_code", sum(v for _, v in ctype))
        lines.append(" " * (lay.indent * (d + 1)) + f"Vertex Code ({code_total:,} B):")
        if ctype:
            lines.append(" " * (lay.indent * (d + 2)) + "By Type:")
            lines += [_kv(lay, d + 3, label, _bytes(v)) for label, v in ctype]
    return lines


def _data_type_lines(
    data_types: list[tuple[str, int]], subtotals: list[tuple[str, int]], lay: Layout, depth: int
) -> list[str]:
    """``By Data Type`` lines: flat (SDK 1.x), or grouped under sub-headings with their totals (SDK 2.x/3.x:
    ``Not Overlapped`` / ``Overlapped``, items two levels deeper, ``Total:`` lines one level deeper)."""
    grouped = bool(subtotals) or any("/" in label for label, _ in data_types)
    if not grouped:
        return [_kv(lay, depth + 1, label, _bytes(v)) for label, v in data_types]
    heads: dict[str, tuple[list[tuple[str, int]], list[tuple[str, int]]]] = {}
    for label, v in data_types:
        head, _, name = label.rpartition("/")
        heads.setdefault(head or "Not Overlapped", ([], []))[0].append((name, v))
    for label, v in subtotals:
        head, _, name = label.rpartition("/")
        heads.setdefault(head, ([], []))[1].append((name, v))
    lines: list[str] = []
    for head, (items, sums) in heads.items():
        pad = " " * (lay.indent * depth)
        if head:
            lines.append(pad + head)
        lines += [_kv(lay, depth + 2, name, _bytes(v)) for name, v in items]
        lines += [_kv(lay, depth + 1, name, _bytes(v)) for name, v in sums]
    return lines


def _by_tile_lines(profile: Profile, totals: pd.DataFrame, lay: Layout) -> list[str]:
    pad1, pad2 = " " * lay.indent, " " * (2 * lay.indent)
    lines: list[str] = []
    hist = tile_histogram(profile, lay.histogram_bins)
    maxima = totals[totals["group"] == "maximum"]
    oom = out_of_memory_count(profile)
    if hist.empty and maxima.empty and oom is None:
        return lines
    lines.append(pad1 + "By Tile (Excluding Gaps):")
    if not hist.empty:
        peak = max(int(hist["num_tiles"].max()), 1)
        lines.append(pad2 + f"{'Range (KB)':<15} {'Histogram (Excluding Gaps)':<40} {'Count (tiles)':>13}")
        for low, high, count in zip(hist["low_bytes"], hist["high_bytes"], hist["num_tiles"], strict=True):
            bar = "*" * math.ceil(40 * int(count) / peak)
            lines.append(pad2 + f"{int(low) // KIB:>6,} - {int(high) // KIB:>6,} {bar:<40} {int(count):>13,}")
    for category, label in (("including_gaps", "Including Gaps"), ("excluding_gaps", "Excluding Gaps")):
        row = maxima[maxima["category"] == category]
        if not row.empty and pd.notna(row["bytes"].iloc[0]):
            value, tile = int(row["bytes"].iloc[0]), row["tile"].iloc[0]
            where = "" if pd.isna(tile) else f" on tile {int(tile):,}"
            lines.append(pad2 + f"Maximum ({label}): {value:,} ({value / KIB:.1f} K){where}")
    if oom is not None:
        lines.append(pad2 + f"{oom:,} tile(s) out of memory")
    return lines


def _execution_lines(profile: Profile, lay: Layout) -> list[str]:
    steps = profile.steps
    first = steps[steps["ipu"] == steps["ipu"].min()].sort_values("step", kind="stable")
    pad = " " * lay.indent
    body = (pad + first["program_type"].astype("str") + ": " + first["program"].astype("str")).tolist()
    return ["Execution:", *body]


# -- execution totals ---------------------------------------------------------------------------------

#: (category, SDK 1.x label, SDK 2.x/3.x label) in the order Poplar prints them.
EXECUTION_LABELS: tuple[tuple[str, str, str], ...] = (
    ("total", "Total cycles", "Total cycles"),
    (
        "compute",
        "Total compute cycles (including idle threads)",
        "Tile average compute cycles (including idle threads)",
    ),
    (
        "compute_excluding_idle",
        "Total compute cycles (excluding idle threads)",
        "Tile average compute cycles (excluding idle threads)",
    ),
    ("exchange", "Total IPU exchange cycles", "Tile average IPU exchange cycles"),
    ("global_exchange", "Total global exchange cycles", "Tile average global exchange cycles"),
    ("host_io", "Total host exchange cycles", "Tile average host exchange cycles"),
    (
        "shared_structure_copy",
        "Total shared structure copy cycles",
        "Tile average shared structure copy cycles",
    ),
    ("sync", "Total sync cycles", "Tile average sync cycles"),
)


def execution_figures(profile: Profile, style: str = "sdk3") -> pd.DataFrame:
    """The Execution figures the summary prints, as an ``execution_totals`` frame (exactly as printed).

    From the profile's own ``execution_totals`` (a read-back summary: its rows and labels as they
    are), else derived from ``steps``: ``Total cycles`` = the busiest IPU's summed cycles and each
    category = that IPU's cycles in the category. For ``style="sdk3"`` those are printed as the
    "Tile average" lines with their share of the total: an approximation (steps give IPU cycles, not
    per-tile averages), good for exercising readers, not a Poplar figure. Empty without either table.
    """
    own = profile.get("execution_totals")
    if own is not None and not own.empty:
        return own
    steps = profile.get("steps")
    if steps is None or steps.empty or not steps["cycles"].notna().any():
        return conform("execution_totals", {})
    per_ipu = steps.groupby("ipu", observed=True)["cycles"].sum()
    busiest = per_ipu.idxmax()
    mine = steps[steps["ipu"] == busiest].groupby("category", observed=True)["cycles"].sum()
    total = float(per_ipu.max())
    clock = profile.target_value("clock_hz")
    basis = "tile_average" if style == "sdk3" else "total"
    rows = [
        {
            "category": "total",
            "basis": "total",
            "cycles": total,
            "share": math.nan,
            "estimated": False,
            "time_us": round(total / float(clock) * 1e6, 1) if clock else math.nan,
            "label": "Total cycles",
        }
    ]
    for category, label1, label3 in EXECUTION_LABELS[1:]:
        if category not in mine.index and category not in (
            "compute",
            "exchange",
            "global_exchange",
            "host_io",
            "sync",
        ):
            continue
        cycles = float(mine.get(category, 0))
        rows.append(
            {
                "category": category,
                "basis": basis,
                "cycles": cycles,
                "share": round(cycles / total * 100, 1) / 100 if style == "sdk3" and total else math.nan,
                "estimated": False,
                "time_us": math.nan,
                "label": label3 if style == "sdk3" else label1,
            }
        )
    return conform("execution_totals", pd.DataFrame(rows))


def _execution_totals_lines(profile: Profile, figures: pd.DataFrame, lay: Layout) -> list[str]:
    """``Execution:`` with the programs executed, the cycle totals and the cycles by vertex type."""
    tile_average = (figures["basis"].astype("str") == "tile_average").any()
    pad = " " * lay.indent if tile_average else ""
    not_printed = json.loads(profile.meta.get("text_summary.execution_not_printed") or "{}")
    width = max(len(str(label)) for label in figures["label"]) + 2
    lines = ["Execution:", ""]
    programs = _programs_executed(profile)
    if programs:
        lines += ["Programs executed:", "", ", ".join(programs) + ".", ""]
    for row in figures.itertuples(index=False):
        label = f"{row.label}:".ljust(width)
        if pd.isna(row.cycles):
            value = not_printed.get(str(row.label)) or "Must enable debug.instrumentExternalExchange"
        elif str(row.basis) == "tile_average":
            value = f"{row.cycles:,.1f}"
        else:
            value = f"{int(row.cycles):,}"
        if pd.notna(row.share):
            value += f" ({row.share * 100:.1f}% of total)"
        if pd.notna(row.time_us):
            value += f" (approx {row.time_us:,.1f} microseconds)"
        if pd.notna(row.estimated) and bool(row.estimated) and pd.notna(row.cycles):
            value += " " + (
                not_printed.get(str(row.label)) or "Estimated (must enable debug.instrumentCompute)"
            )
        lines.append(pad + label + value)
    vertices = profile.get("vertex_cycles")
    if vertices is not None and not vertices.empty:
        names = [str(t) for t in vertices["vertex_type"]]
        name_width = max(len(n) for n in names) + 2
        lines += ["", pad + "Cycles by vertex type:"]
        for name, count, cycles in zip(names, vertices["instances"], vertices["cycles"], strict=True):
            lines.append(
                pad + "    " + f"{name.ljust(name_width)}({int(count)} instances): {int(cycles):>12,}"
            )
    return lines


def _programs_executed(profile: Profile) -> list[str]:
    listed = profile.meta.get("text_summary.programs_executed")
    if listed:
        return [str(p) for p in json.loads(listed)]
    runs = profile.get("runs")
    if runs is not None and not runs.empty:
        return [str(n) for n in runs["name"].fillna("main")]
    return []
