"""Tile map: each IPU's tiles as a grid, coloured by memory use relative to capacity.

Layout (documented so a reader of the image can find a tile): within an IPU,
tile ``tile_in_ipu`` sits at row ``tile_in_ipu // columns`` and column
``tile_in_ipu % columns``, with ``columns`` from :func:`grid_shape`. IPUs are
laid out left to right, ``ipus_per_row`` to a row, with a one-cell blank
border between them. The whole mosaic is one image, so 64 IPUs draw as fast
as one. Tiles over capacity show in the colour map's "over" colour (red).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..io import units
from ..model.errors import MissingTableError, UsageError
from ..model.profile import Profile
from ._common import headroom_thresholds, new_figure, title_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def grid_shape(tiles_per_ipu: int) -> tuple[int, int]:
    """``(rows, columns)`` of one IPU's grid: about twice as wide as tall (Mk2: 1,472 tiles -> 27 x 55)."""
    columns = max(1, math.ceil(math.sqrt(tiles_per_ipu * 2)))
    rows = math.ceil(tiles_per_ipu / columns)
    return rows, columns


def ipus_per_row(num_ipus: int) -> int:
    """How many IPU grids go side by side: about a square of grids (2 -> 2, 4 -> 2, 16 -> 4, 64 -> 8)."""
    return 1 if num_ipus <= 1 else min(8, max(2, math.ceil(math.sqrt(num_ipus))))


def mosaic(profile: Profile, column: str = "bytes_incl_gaps") -> tuple[np.ndarray, dict[str, int]]:
    """The image array (fill = ``column`` / capacity per tile, NaN for borders) and its layout numbers."""
    tiles = profile.tiles
    if tiles.empty:
        raise MissingTableError("tiles", profile.name, "the tiles table is empty")
    per_ipu = int(profile.target_value("tiles_per_ipu", int(tiles["tile_in_ipu"].max()) + 1))
    num_ipus = int(tiles["ipu"].max()) + 1
    rows, cols = grid_shape(per_ipu)
    across = ipus_per_row(num_ipus)
    down = math.ceil(num_ipus / across)
    image = np.full((down * (rows + 1) - 1, across * (cols + 1) - 1), np.nan)
    capacity = tiles["capacity_bytes"].astype("float64")
    cap = profile.target_value("bytes_per_tile")
    if cap is not None:
        capacity = capacity.fillna(float(cap))
    if capacity.isna().all():  # a blank map titled "0 over capacity" would invent a figure
        raise UsageError(
            f"the tile map shows memory / capacity: profile {profile.name!r} gives no tile capacity "
            "(target bytes_per_tile or tiles.capacity_bytes); plot --kind memory instead"
        )
    fill = (tiles[column].astype("float64") / capacity).to_numpy()
    ipu = tiles["ipu"].to_numpy().astype(np.int64)
    in_ipu = tiles["tile_in_ipu"].to_numpy().astype(np.int64)
    r = (ipu // across) * (rows + 1) + in_ipu // cols
    c = (ipu % across) * (cols + 1) + in_ipu % cols
    image[r, c] = fill
    return image, {"rows": rows, "columns": cols, "ipus_per_row": across, "num_ipus": num_ipus}


def tile_map(
    profile: Profile,
    *,
    column: str = "bytes_incl_gaps",
    thresholds: dict[str, float] | None = None,
    width: float | None = None,
) -> Figure:
    """Heat map of tile memory (``column`` / capacity) with one grid per IPU; returns the Figure.

    The colour scale runs from 0 to 100 % of capacity, with a tick at the
    warning threshold; tiles above capacity are drawn red and counted in the
    title.
    """
    import matplotlib

    image, layout = mosaic(profile, column)
    across, num_ipus = layout["ipus_per_row"], layout["num_ipus"]
    down = math.ceil(num_ipus / across)
    aspect = image.shape[0] / image.shape[1]
    width = width or (10.0 if across > 1 else 8.0)
    fig, ax = new_figure(width, max(2.5, width * aspect * 0.9 + 1.2))
    cmap = matplotlib.colormaps["viridis"].with_extremes(over="#d62728", bad="white")
    shown = ax.imshow(
        image, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal", origin="upper"
    )
    shown.set_gid("tilemap")
    limits = headroom_thresholds(thresholds)
    bar = fig.colorbar(shown, ax=ax, extend="max", shrink=0.9)
    bar.set_label(f"tile memory / capacity ({column.replace('_', ' ')}); red = over capacity")
    bar.ax.axhline(limits["warning"], color="#e6a700", lw=2)
    ticks = sorted({0.0, 0.25, 0.5, 0.75, 1.0, round(limits["warning"], 3)})
    bar.set_ticks(ticks, labels=[units.limit_percent(round(float(t), 4)) for t in ticks])
    rows, cols = layout["rows"], layout["columns"]
    if num_ipus <= 16:
        for ipu in range(num_ipus):
            y = (ipu // across) * (rows + 1)
            x = (ipu % across) * (cols + 1)
            ax.text(x, y - 0.6, f"IPU {ipu}", fontsize="x-small", va="bottom", ha="left")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(
        f"{cols} tiles per row within an IPU ({num_ipus} IPU{'s' if num_ipus > 1 else ''}, "
        f"{across} per row x {down} rows)"
    )
    over = int(np.sum(image > 1.0))
    ax.set_title(title_of(profile, f"Tile map: memory per tile ({over} over capacity)"), pad=12)
    return fig
