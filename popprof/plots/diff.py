"""Diff plots: the metrics that changed most, and the memory change per tile.

Both take a :class:`popprof.compare.ProfileDiff` (anything with ``metrics`` /
``tiles`` DataFrames in its columns works).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..io import units
from ..model.errors import UsageError
from ._common import add_stairs, bytes_axis, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WORSE, BETTER, NEUTRAL = "#d62728", "#2ca02c", "#7f7f7f"


def top_changes(diff: Any, top: int = 15) -> pd.DataFrame:
    """Changed metrics with a relative change, largest ``|rel_change|`` first (at most ``top``)."""
    metrics = diff.metrics
    changed = metrics[
        (metrics["status"] == "changed")
        & metrics["rel_change"].notna()
        & np.isfinite(metrics["rel_change"].astype("float64"))
    ]
    order = changed["rel_change"].astype("float64").abs().sort_values(ascending=False, kind="stable").index
    return changed.loc[order].head(top).reset_index(drop=True)


def _direction(row: pd.Series) -> str:
    worse = row.get("worse")
    if isinstance(worse, bool | np.bool_) and not pd.isna(worse):
        return WORSE if worse else BETTER
    better = row.get("better")
    if better not in ("lower", "higher"):
        return NEUTRAL
    up = float(row["rel_change"]) > 0
    return WORSE if (up and better == "lower") or (not up and better == "higher") else BETTER


def diff_metrics(diff: Any, *, top: int = 15, width: float = 10.0) -> Figure:
    """Horizontal bars of the ``top`` metrics that changed most, in percent (red worse, green better).

    Each bar's width is ``rel_change x 100``; its label gives base -> new in
    the metric's unit. Returns the Figure (a note when nothing changed).
    """
    rows = top_changes(diff, top)
    fig, ax = new_figure(width, 1.4 + 0.36 * max(len(rows), 2))
    base_name, new_name = getattr(diff, "base_name", "base"), getattr(diff, "new_name", "new")
    ax.set_title(f"Metrics that changed most: {base_name} → {new_name}")
    if rows.empty:
        ax.text(0.5, 0.5, "no metric changed", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    y = np.arange(len(rows))
    pct = rows["rel_change"].astype("float64").to_numpy() * 100
    colours = [_direction(r) for _, r in rows.iterrows()]
    bars = ax.barh(y, pct, color=colours, gid="metric-change")
    for bar, (_, row) in zip(bars, rows.iterrows(), strict=True):
        text = (
            f" {units.value(row['base'], row['unit'], missing='—')} → "
            f"{units.value(row['new'], row['unit'], missing='—')} "
        )
        inside = bar.get_width() < 0
        ax.text(
            bar.get_width(),
            bar.get_y() + bar.get_height() / 2,
            text,
            va="center",
            ha="right" if inside else "left",
            fontsize="x-small",
        )
    ax.set_yticks(y, [str(n) for n in rows["name"]], fontsize="small")
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    lim = float(np.abs(pct).max()) * 1.6 or 1.0
    ax.set_xlim(-lim if (pct < 0).any() else -lim * 0.05, lim if (pct > 0).any() else lim * 0.05)
    ax.set_xlabel("relative change, new vs base (%)  —  red: worse, green: better, grey: neutral")
    return fig


def diff_tiles(diff: Any, *, max_bars: int = 1500, width: float = 12.0, height: float = 4.0) -> Figure:
    """Memory change per tile (new minus base, bytes incl. gaps), binned when there are many tiles.

    Per tile, a filled step area of ``change_bytes`` (gid ``tile-change``);
    with more than ``max_bars`` tiles, two areas per bin give the largest
    increase and the largest decrease in the bin, so no single grown tile
    disappears. IPU boundaries are drawn. Returns the Figure.
    """
    tiles = diff.tiles
    if tiles is None or tiles.empty:
        reason = getattr(diff, "unavailable", {}).get("tiles", "no per-tile memory on both sides")
        raise UsageError(f"no per-tile memory change to plot: {reason}")
    tiles = tiles.sort_values("tile", kind="stable")
    tile = tiles["tile"].to_numpy().astype(np.int64)
    change = tiles["change_bytes"].astype("float64").fillna(0).to_numpy()
    fig, ax = new_figure(width, height)
    if len(tile) > max_bars:
        span = int(tile.max() - tile.min() + 1)
        step = -(-span // max_bars)
        index = (tile - tile.min()) // step
        nbins = int(index.max()) + 1
        grow = np.zeros(nbins)
        shrink = np.zeros(nbins)
        np.maximum.at(grow, index, np.clip(change, 0, None))
        np.minimum.at(shrink, index, np.clip(change, None, 0))
        edges = tile.min() + np.arange(nbins + 1) * step
        add_stairs(
            ax, grow, edges, fill=True, color=WORSE, lw=0, label="largest growth in bin", gid="tile-growth"
        )
        add_stairs(
            ax, shrink, edges, fill=True, color=BETTER, lw=0, label="largest shrink in bin", gid="tile-shrink"
        )
        low, high = float(shrink.min()), float(grow.max())
        xlabel = f"tile (global index); {step} tiles per bin"
    else:
        edges = np.append(tile, tile.max() + 1)
        add_stairs(
            ax, change, edges, fill=True, color="#4c72b0", lw=0, label="change per tile", gid="tile-change"
        )
        low, high = float(change.min()), float(change.max())
        xlabel = "tile (global index)"
    ax.axhline(0, color="black", lw=0.7)
    if "ipu" in tiles.columns:
        starts = tiles.groupby("ipu")["tile"].min().sort_index()
        for first in starts.iloc[1:]:
            ax.axvline(first, color="#444444", lw=0.6, alpha=0.6)
    pad = max(abs(low), abs(high), 1.0) * 0.1
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(min(low, 0) - pad, max(high, 0) + pad)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("memory change per tile\n(bytes incl. gaps, new − base)")
    bytes_axis(ax.yaxis)
    grown = int((change > 0).sum())
    shrunk = int((change < 0).sum())
    ax.set_title(
        f"Tile memory change: {grown:,} tiles grew, {shrunk:,} shrank "
        f"(largest {units.bytes_short(max(high, 0), signed=True)} / {units.bytes_short(min(low, 0))})"
    )
    ax.legend(loc="upper right", fontsize="small", frameon=False)
    return fig
