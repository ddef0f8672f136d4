"""GPU operators against the device's roofline (``popprof plot --kind roofline``).

One point per (operator, input shapes) of :func:`popprof.metrics.operations.operations` that has a FLOPs
model: arithmetic intensity (FLOP per byte, x) against achieved TFLOP/s (y), both logarithmic, the point's
area growing with its device time, coloured by category. Under them, one roofline per dtype the operators
use: ``min(peak TFLOP/s, intensity x memory TB/s)`` of the device matched in ``metrics/peaks.py``; without a
known device the points are drawn alone and the title says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..metrics import operations, peaks
from ..metrics.flops import CATEGORIES, peak_dtype
from ..model.errors import UsageError
from ..model.profile import Profile
from ._common import new_figure, title_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: operators labelled with their name (the largest by device time)
LABELLED = 5
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


def points(profile: Profile):
    """The operators a roofline can place: those with FLOPs, bytes and a device time (a frame of
    :func:`popprof.metrics.operations.operations`); UsageError with one line when there are none."""
    table = operations.operations(profile)
    if table.empty:
        raise UsageError(
            f"{profile.source or profile.name}: no GPU operator launched device work and no TPU op: no roofline"
        )
    known = table["tflops"].notna() & table["intensity"].notna() & (table["tflops"] > 0)
    if not known.any():
        note = operations.operations_note(profile) or "no operator here has a FLOPs model"
        raise UsageError(f"{profile.source or profile.name}: no roofline: {note}")
    return table[known.to_numpy(dtype=bool)].reset_index(drop=True)


def roofline(profile: Profile, **_: Any) -> Figure:
    """Operators as points (intensity, achieved TFLOP/s) under the device's roofline per dtype."""
    table = points(profile)
    name, device = peaks.profile_device(profile)
    fig, ax = new_figure(width=9.0, height=5.5)
    x = table["intensity"].to_numpy(dtype=np.float64)
    y = table["tflops"].to_numpy(dtype=np.float64)
    time = table["device_time_us"].to_numpy(dtype=np.float64)
    sizes = 20 + 280 * np.sqrt(time / time.max())
    for i, category in enumerate(_categories(table)):
        rows = (table["category"] == category).to_numpy()
        if rows.any():
            colour = _COLOURS[i % len(_COLOURS)]
            ax.scatter(
                x[rows], y[rows], s=sizes[rows], color=colour, alpha=0.7, label=category, edgecolors="k"
            )
    low, high = min(x.min(), 0.1) / 2, max(x.max(), 1000.0) * 2
    span = np.geomspace(low, high, 200)
    dtypes = sorted({dtype for dtype in _dtypes(table) if dtype})
    for dtype in dtypes:
        peak = peaks.peak(device, dtype)
        if peak is None:
            continue
        ax.plot(span, np.minimum(peak.tflops, span * peak.tbps), "--", linewidth=1, label=f"{dtype} roofline")
    for row in table.nlargest(LABELLED, "device_time_us").itertuples():
        ax.annotate(
            str(row.name), (row.intensity, row.tflops), fontsize=7, xytext=(4, 4), textcoords="offset points"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(fontsize=8, loc="lower right")
    tpu = "peak_dtype" in table.columns
    where = device or f"{name or ('unnamed TPU' if tpu else 'unnamed GPU')}: peak unknown"
    what = "TPU ops (XLA's cost analysis)" if tpu else "GPU operators"
    ax.set_title(title_of(profile, f"{what} against the roofline ({where})"))
    return fig


def _categories(table) -> list[str]:
    """The categories to colour, in :data:`CATEGORIES` order, then any other the table holds (a TPU op's HLO
    category: ``loop fusion``, ``convolution fusion``) in first-seen order."""
    present = [str(c) for c in dict.fromkeys(table["category"].tolist())]
    return [c for c in CATEGORIES if c in present] + [c for c in present if c not in CATEGORIES]


def _dtypes(table) -> list[str | None]:
    """The peak table's dtype of each operator: a TPU op's ``peak_dtype`` (the chip's bf16 roof), else its first
    input's (its recorded ``Input type``)."""
    if "peak_dtype" in table.columns:
        return [str(d) if isinstance(d, str) else None for d in table["peak_dtype"]]
    return [peak_dtype(types[0]) if types else None for types in table["input_types"]]
