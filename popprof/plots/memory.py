"""Tile memory plots: memory per tile stacked by category, and a histogram of tile memory.

Both draw the tile capacity and the headroom thresholds of the memory rules.
With many tiles (more than ``max_bars``) tiles are binned within each IPU: the
stacked areas show each bin's mean per category and a line shows each bin's
fullest tile, so a single over-capacity tile is never averaged away.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..io import units
from ..io.plural import plural
from ..metrics.tile_parts import GAPS, OTHER, tile_parts
from ..model.errors import MissingTableError
from ..model.profile import Profile
from ._common import add_stairs, bytes_axis, finding_items, headroom_thresholds, new_figure, title_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _stack(profile: Profile) -> tuple[pd.DataFrame, dict[str, str]]:
    """The tiles' parts to stack (:func:`popprof.metrics.tile_parts.tile_parts`, the split ``popprof diff``
    reads too; index ``tile``, one float column per part) and each part's legend label: its words, with how
    many tiles it is negative on where it is (categories that overlap; never on popprof's fixtures)."""
    split = tile_parts(profile)
    if split.reason is not None:
        raise MissingTableError("tiles", profile.name, split.reason)
    stack = split.frame[list(split.parts)].astype("float64")
    labels = {}
    for part in split.parts:
        negative = int((stack[part] < 0).sum())
        label = split.words(part)
        labels[part] = label + (f" (negative on {plural(negative, 'tile')})" if negative else "")
    return stack, labels


def _bins(tiles: pd.DataFrame, max_bars: int) -> tuple[np.ndarray, np.ndarray]:
    """Bin id per tile (bins never straddle IPUs) and the left edge (first tile index) of each bin."""
    ipu = tiles["ipu"].to_numpy().astype(np.int64)
    in_ipu = tiles["tile_in_ipu"].to_numpy().astype(np.int64)
    num_ipus = int(ipu.max()) + 1 if len(ipu) else 1
    per_ipu = int(in_ipu.max()) + 1 if len(in_ipu) else 1
    bins_per_ipu = max(1, max_bars // num_ipus)
    width = max(1, -(-per_ipu // bins_per_ipu))
    bins_per_ipu = -(-per_ipu // width)
    bin_id = ipu * bins_per_ipu + in_ipu // width
    index = np.arange(num_ipus * bins_per_ipu)
    left = (index // bins_per_ipu) * per_ipu + (index % bins_per_ipu) * width
    return bin_id, left


def _draw_thresholds(
    ax: Any, capacity: float | None, thresholds: dict[str, float], *, vertical: bool
) -> None:
    if not capacity:
        return
    line = ax.axvline if vertical else ax.axhline
    line(capacity, color="black", lw=1.4, label=f"capacity ({units.nbytes(capacity)})", gid="capacity")
    styles = {"warning": ("#e6a700", "--"), "error": ("#d62728", ":")}
    for name, frac in thresholds.items():
        if frac == 1.0 and name == "error":
            continue  # the capacity line itself
        colour, style = styles.get(name, ("grey", "--"))
        line(
            capacity * frac,
            color=colour,
            ls=style,
            lw=1.1,
            label=f"{name} ({units.limit_percent(frac)} of capacity)",
            gid=f"threshold:{name}",
        )


#: Rules whose ``where["tiles"]`` are marked on the tile memory plot, with their marker colour.
FLAGGED_TILE_RULES: dict[str, str] = {"memory.tile-oom": "#d62728", "memory.headroom": "#e6a700"}


def tile_memory(
    profile: Profile,
    findings: Any = None,
    *,
    max_bars: int = 1500,
    thresholds: dict[str, float] | None = None,
    width: float = 12.0,
    height: float = 5.0,
) -> Figure:
    """Memory per tile stacked by category, with the capacity line and IPU boundaries.

    Each category is one filled step area (``StepPatch`` labelled with the
    category); with more than ``max_bars`` tiles, tiles are binned within each
    IPU, the areas show per-bin means and the black step line (label
    ``fullest tile in bin``) the per-bin maximum of ``bytes_incl_gaps``.
    Horizontal lines: ``capacity`` (bytes per tile) and the headroom
    thresholds (``thresholds`` overrides the rule defaults). Tiles named in
    ``where["tiles"]`` of ``memory.tile-oom`` / ``memory.headroom`` findings
    are marked with a triangle at their memory (gid ``flagged:<rule id>``,
    x = tile + 0.5). Returns the Figure.
    """
    tiles = profile.tiles.sort_values("tile", kind="stable")
    if tiles.empty:
        raise MissingTableError("tiles", profile.name, "the tiles table is empty")
    stack, labels = _stack(profile)
    stack = stack.reindex(tiles["tile"].to_numpy())
    capacity = profile.target_value("bytes_per_tile")
    if capacity is None:  # per-tile capacities, when the target does not say (no line without either)
        known = tiles["capacity_bytes"].max()
        capacity = None if pd.isna(known) else known
    capacity = None if capacity is None else float(capacity)
    fig, ax = new_figure(width, height)
    num_tiles = len(tiles)
    binned = num_tiles > max_bars
    if binned:
        bin_id, left = _bins(tiles, max_bars)
        counts = np.bincount(bin_id, minlength=len(left))
        used = counts > 0
        edges = np.append(left[used], tiles["tile"].max() + 1)
        values = {
            c: (
                np.bincount(bin_id, weights=stack[c].to_numpy(), minlength=len(left)) / np.maximum(counts, 1)
            )[used]
            for c in stack.columns
        }
        total = stack.sum(axis=1).to_numpy()
        peak = np.full(len(left), -np.inf)
        np.maximum.at(peak, bin_id, total)
        peak = peak[used]
    else:
        edges = np.append(tiles["tile"].to_numpy(), tiles["tile"].max() + 1).astype(np.float64)
        values = {c: stack[c].to_numpy() for c in stack.columns}
    cmap = _category_colours(list(values))
    base = np.zeros(len(edges) - 1)
    for cat, val in values.items():
        add_stairs(
            ax, base + val, edges, baseline=base.copy(), fill=True, color=cmap[cat], label=labels[cat], lw=0
        )
        base = base + val
    top = float(base.max()) if len(base) else 0.0
    if binned:
        add_stairs(
            ax, peak, edges, baseline=None, color="black", lw=0.8, label="fullest tile in bin", gid="bin-max"
        )
        top = max(top, float(peak.max()))
    ax.set_ylim(0, max(top, capacity or 0.0, 1.0) * 1.08)
    _draw_thresholds(ax, capacity, headroom_thresholds(thresholds), vertical=False)
    _mark_flagged(ax, tiles, findings)
    _ipu_boundaries(ax, tiles)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel(
        "tile (global index)"
        + (f"; {int(np.diff(edges).max())} tiles per bin, mean by category" if binned else "")
    )
    ax.set_ylabel("memory per tile (bytes, incl. gaps)")
    bytes_axis(ax.yaxis)
    ax.set_title(title_of(profile, "Tile memory by category"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    return fig


def _mark_flagged(ax: Any, tiles: pd.DataFrame, findings: Any) -> None:
    """Triangles over the tiles the memory findings name (a tile is marked once, by the first rule)."""
    used = tiles.set_index("tile")["bytes_incl_gaps"].astype("float64")
    marked: set[int] = set()
    for rule_id, colour in FLAGGED_TILE_RULES.items():
        named = [
            int(t) for f in finding_items(findings, (rule_id,)) for t in (f.where or {}).get("tiles", [])
        ]
        named = [t for t in dict.fromkeys(named) if t in used.index and t not in marked]
        if not named:
            continue
        marked.update(named)
        ax.plot(
            np.array(named) + 0.5,
            used.loc[named].to_numpy(),
            "v",
            ms=5,
            color=colour,
            mec="black",
            mew=0.4,
            ls="none",
            gid=f"flagged:{rule_id}",
            label=f"tiles flagged by {rule_id}",
        )


def _category_colours(names: list[str]) -> dict[str, Any]:
    import matplotlib

    palette = matplotlib.colormaps["tab20"]
    colours: dict[str, Any] = {}
    for i, name in enumerate(names):
        if name == GAPS:
            colours[name] = "#d9d9d9"
        elif name == OTHER:
            colours[name] = "#bcbcbc"
        else:
            colours[name] = palette(i % 20)
    return colours


def _ipu_boundaries(ax: Any, tiles: pd.DataFrame) -> None:
    starts = tiles.groupby("ipu", observed=True)["tile"].min().sort_index()
    if len(starts) < 2:
        return
    for ipu, first in starts.iloc[1:].items():
        ax.axvline(first, color="#444444", lw=0.6, ls="-", alpha=0.6, gid=f"ipu-boundary:{ipu}")
    if len(starts) <= 16:
        for ipu, first in starts.items():
            ax.text(
                first,
                0.99,
                f" IPU {ipu}",
                transform=ax.get_xaxis_transform(),
                va="top",
                ha="left",
                fontsize="x-small",
                color="#444444",
            )


def tile_histogram(
    profile: Profile,
    *,
    bins: int = 60,
    column: str = "bytes_incl_gaps",
    thresholds: dict[str, float] | None = None,
    width: float = 9.0,
    height: float = 4.5,
) -> Figure:
    """Histogram of tile memory (number of tiles per memory range) with capacity and thresholds.

    Uses the tiles table (``column``, default including gaps); for sources
    that only give the text summary's histogram, draws that
    ``tile_histogram`` table (excluding gaps) instead. Tile counts use a log
    scale so a handful of over-capacity tiles stays visible.
    """
    capacity = profile.target_value("bytes_per_tile")
    capacity = None if capacity is None else float(capacity)
    fig, ax = new_figure(width, height)
    tiles = profile.get("tiles")
    if tiles is not None and not tiles.empty and tiles[column].notna().any():
        data = tiles[column].dropna().astype("float64").to_numpy()
        top = max(float(data.max()), capacity or 0.0) * 1.02
        counts, edges = np.histogram(data, bins=bins, range=(0.0, top))
        label = {"bytes_incl_gaps": "incl. gaps", "bytes_excl_gaps": "excl. gaps"}.get(column, column)
    elif profile.has("tile_histogram"):
        hist = profile.tile_histogram.sort_values("low_bytes")
        counts = hist["num_tiles"].astype("float64").to_numpy()
        edges = np.append(hist["low_bytes"].astype("float64").to_numpy(), float(hist["high_bytes"].iloc[-1]))
        label = "excl. gaps, from the text summary"
    else:
        raise MissingTableError(
            "tiles", profile.name, "needs per-tile memory or the text summary's histogram"
        )
    add_stairs(ax, counts, edges, fill=True, color="#4c72b0", label="tiles", gid="histogram")
    ax.set_xlim(0, max(float(edges[-1]), (capacity or 0.0) * 1.02))
    _draw_thresholds(ax, capacity, headroom_thresholds(thresholds), vertical=True)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(0, max(float(np.max(counts)), 1.0) * 1.5)
    ax.set_xlabel(f"memory per tile (bytes, {label})")
    ax.set_ylabel("tiles (count)")
    bytes_axis(ax.xaxis)
    ax.set_title(title_of(profile, "Tile memory histogram"))
    ax.legend(loc="upper left", fontsize="small", frameon=False)
    return fig
