"""A GPU trace's device memory over time: the allocator's bytes in use, reserved, the peak and the steps.

One panel per rank and device (accelerators; the host's ``cpu`` only when the trace has no accelerator
events), drawn from PyTorch's ``[memory]`` events (``profile_memory=True``, the ``allocations`` table):

- allocated bytes after each event as a step line: the allocator's ``Total Allocated``, or for a trace
  without totals (Kineto before about 2022, ``basis: "net"``) the running net of the blocks since the trace
  began, both from :func:`popprof.metrics.device_memory.memory_over_time`, the definition the peak reads;
- reserved bytes (``Total Reserved``, the caching allocator's segments) as a dashed line when given;
- the peak, a marker labelled with its bytes and operator: the record of
  :func:`popprof.metrics.device_memory.device_memory`, never found again here;
- the GPU's capacity (``deviceProperties``) as a line when the curves reach :data:`CAPACITY_DRAWN` of it,
  else only named in the legend, so an 87 MiB curve on an 80 GB GPU is not flattened against the axis;
- ``ProfilerStep#N`` spans of the panel's rank, every other one shaded and each numbered, so memory that
  grows step after step (a leak) shows as a staircase across the shading.

x is milliseconds since the trace's time origin (as the timeline's). Past ``3 * resolution`` events a line
keeps, per pixel column, its lowest, highest and last point (:func:`envelope`): the drawing stays fast and
the peak is drawn exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..io import units
from ..io.names import short_name
from ..metrics.device_memory import NET, device_memory, memory_over_time
from ..metrics.ranks import step_times
from ..metrics.trace import time_origin
from ..model.errors import MissingTableError
from ..model.profile import NEEDS_HINT, Profile
from ..trace.intervals import device_label
from ._common import bytes_axis, new_figure, title_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The capacity line is drawn when the highest curve reaches this share of the GPU's memory.
CAPACITY_DRAWN = 0.25
#: Steps numbered above a panel; with more, they are shaded only.
MAX_STEP_LABELS = 40
ALLOCATED_COLOUR, RESERVED_COLOUR, PEAK_COLOUR = "#3b6a9e", "#8c8c8c", "#a50f15"


def envelope(x: np.ndarray, y: np.ndarray, columns: int) -> np.ndarray:
    """Positions of the points of a step line (``y`` over ascending ``x``) to draw at ``columns`` pixel
    columns, in order: the line's first point and, in each column, its lowest and highest (the first of
    equals) and its last, so no peak or trough is lost and the line holds the right value from one column to
    the next. Every position when there are at most ``3 * columns``. Vectorised: a ``reduceat`` per extreme.
    """
    n = len(x)
    if n <= 3 * columns:
        return np.arange(n)
    span = float(x[-1] - x[0])
    scaled = (x - x[0]) / span * columns if span > 0 else np.zeros(n)
    column = np.minimum(scaled.astype(np.int64), columns - 1)
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    sizes = np.diff(np.r_[starts, n])
    keep = [[0], starts[1:] - 1, [n - 1]]  # the first point, and each column's last
    for extreme in (np.maximum, np.minimum):
        hits = np.flatnonzero(y == np.repeat(extreme.reduceat(y, starts), sizes))
        first = np.r_[True, column[hits][1:] != column[hits][:-1]]
        keep.append(hits[first])
    return np.unique(np.concatenate(keep))


def _panels(profile: Profile, max_panels: int) -> tuple[list[dict], int]:
    """The device_memory records drawn: the accelerators' (the host's when there are none), at most
    ``max_panels``, those with the highest peaks, in the records' order; and how many of them are left out."""
    records = device_memory(profile)
    if not records:
        raise MissingTableError("allocations", profile.name, NEEDS_HINT["allocations"])
    pool = [r for r in records if r["device"] != "cpu"] or records
    highest = {id(r) for r in sorted(pool, key=lambda r: -r["peak_allocated_bytes"])[:max_panels]}
    return [r for r in pool if id(r) in highest], len(pool) - len(highest)


def _rank_steps(steps: pd.DataFrame, rank: int | None) -> pd.DataFrame:
    """``step``, ``start_us``, ``end_us`` (absolute) of one rank's ``ProfilerStep#N`` spans (rank None: those
    with no rank); several markers of one step (threads) pooled from the first start to the last end."""
    key = -1 if rank is None else rank
    mine = steps[steps["rank"] == key]
    if mine.empty:
        mine = steps[steps["rank"] == -1]
    ends = mine["start_us"] + mine["dur_us"]
    grouped = mine.assign(end_us=ends).groupby("step", sort=True)
    return pd.DataFrame(
        {"start_us": grouped["start_us"].min(), "end_us": grouped["end_us"].max()}
    ).reset_index()


def _shade_steps(ax: Any, spans: pd.DataFrame, origin: float) -> None:
    """Shade every other step of ``spans`` and number each (unless there are many)."""
    labelled = len(spans) <= MAX_STEP_LABELS
    for k, (step, start, end) in enumerate(spans[["step", "start_us", "end_us"]].itertuples(index=False)):
        x0, x1 = (start - origin) / 1e3, (end - origin) / 1e3
        if k % 2 == 0:
            ax.axvspan(
                x0,
                x1,
                color="#000000",
                alpha=0.06,
                lw=0,
                gid=f"step:{step}",
                label="profiler step" if k == 0 else None,
            )
        ax.axvline(x0, color="#bdbdbd", lw=0.6, gid="step-start")
        if labelled:
            ax.text(
                (x0 + x1) / 2,
                1.0,
                f"#{step}",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize="x-small",
                color="#636363",
                gid="step-label",
            )


def _draw_panel(ax: Any, record: dict, curve: pd.DataFrame, resolution: int, label_chars: int) -> None:
    """One device's curves, peak and capacity on ``ax``."""
    x = curve["at_us"].to_numpy(np.float64) / 1e3
    allocated = curve["allocated_bytes"].to_numpy(np.float64)
    keep = envelope(x, allocated, resolution)
    net = record["basis"] == NET
    ax.plot(
        x[keep],
        allocated[keep],
        drawstyle="steps-post",
        color=ALLOCATED_COLOUR,
        lw=1.1,
        gid="allocated",
        label="allocated (net of the blocks since the trace began)" if net else "allocated",
    )
    reserved = curve["reserved_bytes"].to_numpy(np.float64)
    given = ~np.isnan(reserved)
    if given.any():
        rx, ry = x[given], reserved[given]
        keep = envelope(rx, ry, resolution)
        ax.plot(
            rx[keep],
            ry[keep],
            drawstyle="steps-post",
            color=RESERVED_COLOUR,
            lw=1.0,
            ls="--",
            gid="reserved",
            label="reserved",
        )
    peak, at = record["peak_allocated_bytes"], record["peak_at_us"] / 1e3
    ax.plot([at], [peak], "v", color=PEAK_COLOUR, ms=8, gid="peak")
    op = short_name(record["peak_op"], label_chars) if record["peak_op"] else "no operator"
    middle = 0.15 < (at - x[0]) / max(x[-1] - x[0], 1e-9) < 0.85
    ax.annotate(
        f"peak {units.bytes_short(peak)}{' (net)' if net else ''} at {units.offset(record['peak_at_us'])}\n{op}",
        xy=(at, peak),
        xytext=(0, 10),
        textcoords="offset points",
        ha="center" if middle else ("left" if at < (x[0] + x[-1]) / 2 else "right"),
        fontsize="small",
        color=PEAK_COLOUR,
        gid="peak-label",
    )
    _capacity(ax, record)
    ax.margins(x=0.01, y=0.25)
    if allocated.min() >= 0 and ax.get_ylim()[0] < 0:  # the margin, not the data, went below zero
        ax.set_ylim(bottom=0)
    bytes_axis(ax.yaxis)
    ax.set_ylabel(device_label(record["rank"], record["device"]), fontsize="small")
    ax.grid(axis="y", alpha=0.3)


def _capacity(ax: Any, record: dict) -> None:
    """The capacity line when the curves reach :data:`CAPACITY_DRAWN` of it, else a legend entry only."""
    capacity = record.get("capacity_bytes")
    if not capacity:
        return
    highest = max(record["peak_allocated_bytes"], record["peak_reserved_bytes"] or 0)
    share = highest / capacity
    if share >= CAPACITY_DRAWN:
        ax.axhline(
            capacity, color="black", lw=1.2, gid="capacity", label=f"capacity ({units.bytes_short(capacity)})"
        )
    else:
        what = "reserved" if record["peak_reserved_bytes"] else "allocated"
        ax.plot(
            [],
            [],
            " ",
            gid="capacity-note",
            label=f"capacity {units.bytes_short(capacity)} (peak {what} {units.percent(share)}; not drawn)",
        )


def device_memory_timeline(
    profile: Profile,
    *,
    max_panels: int = 8,
    resolution: int = 2000,
    label_chars: int = 60,
    width: float = 11.0,
) -> Figure:
    """Each device's memory over time (module docstring): allocated and reserved bytes, the peak named
    with its operator, the capacity, the profiler steps shaded. At most ``max_panels`` devices (the highest
    peaks); lines of more than ``3 * resolution`` events keep each pixel column's extremes.

    Artists (for reading back): per panel, ``Line2D`` gids ``allocated`` and ``reserved`` (x ms from the
    trace's time origin, y bytes), ``peak`` (a marker at device_memory's peak) and ``peak-label`` (its
    annotation), ``capacity`` (a line) or ``capacity-note`` (legend only), ``step:N`` (shaded spans),
    ``step-start`` and ``step-label``; each panel's y label is its device (``rank 1 gpu:0``).
    """
    records, more = _panels(profile, max_panels)
    curves = memory_over_time(profile)
    steps = step_times(profile)
    origin = time_origin(profile) or 0.0
    fig, axes = new_figure(width, 1.4 + 2.6 * len(records), nrows=len(records), sharex=True)
    axes = np.atleast_1d(axes)
    for ax, record in zip(axes, records, strict=True):
        _draw_panel(ax, record, curves[(record["rank"], record["device"])], resolution, label_chars)
        if not steps.empty:
            _shade_steps(ax, _rank_steps(steps, record["rank"]), origin)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="x-small", frameon=False)
    axes[-1].set_xlabel("time since the trace start (ms; the first event that is not profiler bookkeeping)")
    shown = f"{len(records)} device{'s' if len(records) != 1 else ''}"
    what = f"Device memory over time, {shown}" + (f" ({more} more not drawn)" if more else "")
    fig.suptitle(title_of(profile, what))
    return fig
