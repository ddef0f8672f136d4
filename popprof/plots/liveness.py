"""Liveness: not-always-live bytes per program step on top of the always-live base, peak marked.

This is Graph Analyser's liveness view: always-live variables occupy memory
for the whole program (a constant base); not-always-live ones come and go as
steps run, and the step where they peak is where out-of-memory errors come
from. Bytes are summed over all tiles. With more steps than ``max_points``
the line shows each bin's maximum, so the peak is never smoothed away.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..io import units
from ..model.errors import MissingTableError
from ..model.profile import Profile
from ._common import bytes_axis, new_figure, rule_params, title_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def always_live_base(profile: Profile) -> float:
    """Always-live bytes of one replica, like the liveness curve (0 when unknown)."""
    from ..metrics.memory import always_live_per_replica_bytes

    value = always_live_per_replica_bytes(profile)
    return 0.0 if value is None else float(value)


def total_memory(profile: Profile) -> float | None:
    """Memory of one replica (tiles x bytes per tile / replicas), or None when the target does not say."""
    from ..metrics.memory import num_replicas, total_capacity

    whole, _ = total_capacity(profile)
    return None if whole is None else whole / num_replicas(profile)


def liveness(
    profile: Profile,
    *,
    max_points: int = 4000,
    label_chars: int = 60,
    width: float = 11.0,
    height: float = 4.5,
) -> Figure:
    """Live memory per liveness step: always-live base plus not-always-live bytes, the peak annotated.

    Artists (for reading back): the ``Line2D`` with gid ``liveness`` has x =
    step and y = base + not-always-live bytes (per-bin maxima when binned);
    the ``always-live`` band has the base as its height; the marker with
    gid ``peak`` sits at the peak step and its annotation names the program.
    When the peak reaches half the total memory, the total (``total-memory``)
    and the ``memory.liveness-peak`` warning line are drawn; otherwise the
    legend gives the peak's share of the total.
    """
    table = profile.liveness.sort_values("step", kind="stable")
    if table.empty:
        raise MissingTableError("liveness", profile.name, "the liveness table is empty")
    steps = table["step"].to_numpy().astype(np.int64)
    live = table["not_always_live_bytes"].astype("float64").fillna(0).to_numpy()
    from ..metrics.memory import always_live_bytes

    known_base = always_live_bytes(profile) is not None  # unknown: drawn as 0 but labelled as unknown
    base = always_live_base(profile)
    peak_pos = int(np.argmax(live))
    peak_step, peak_bytes = int(steps[peak_pos]), float(live[peak_pos])
    binned = len(steps) > max_points
    if binned:
        width_steps = -(-len(steps) // max_points)
        starts = np.arange(0, len(steps), width_steps)
        x = steps[starts]
        y = np.maximum.reduceat(live, starts)
    else:
        x, y = steps, live
    fig, ax = new_figure(width, height)
    ax.fill_between(
        x,
        0,
        base,
        color="#9ecae1",
        step="post" if binned else None,
        lw=0,
        label=f"always-live ({units.nbytes(base)})" if known_base else "always-live: unknown (not drawn)",
        gid="always-live",
    )
    ax.fill_between(
        x,
        base,
        base + y,
        color="#fdae6b",
        alpha=0.8,
        step="post" if binned else None,
        lw=0,
        label="not-always-live",
        gid="not-always-live",
    )
    ax.plot(
        x,
        base + y,
        color="#e6550d",
        lw=1.0,
        drawstyle="steps-post" if binned else "default",
        label="live memory" + (" (max per bin)" if binned else ""),
        gid="liveness",
    )
    ax.plot(
        [peak_step],
        [base + peak_bytes],
        "v",
        color="#a50f15",
        ms=9,
        gid="peak",
        label=f"peak at step {peak_step:,}",
    )
    program = str(table["program"].iloc[peak_pos])
    if len(program) > label_chars:
        program = "…" + program[-(label_chars - 1) :]
    ax.annotate(
        f"peak {units.nbytes(base + peak_bytes)} at step {peak_step:,}\n{program}",
        xy=(peak_step, base + peak_bytes),
        xytext=(0, 14),
        textcoords="offset points",
        ha="center"
        if 0.15 < (peak_pos / max(len(steps) - 1, 1)) < 0.85
        else ("left" if peak_pos < len(steps) / 2 else "right"),
        fontsize="small",
        color="#a50f15",
        gid="peak-label",
    )
    top = (base + peak_bytes) * 1.25
    total = total_memory(profile)
    if total:
        limits = rule_params("memory.liveness-peak")
        warning = float(limits.get("warning", 0.85))
        share = (base + peak_bytes) / total
        if share >= 0.5:  # near enough to be worth the vertical space
            what = "peak" if known_base else "not-always-live peak"
            ax.axhline(
                total,
                color="black",
                lw=1.2,
                gid="total-memory",
                label=f"total memory ({units.nbytes(total)}; {what} = {units.percent(share)})",
            )
            ax.axhline(
                total * warning,
                color="#e6a700",
                ls="--",
                lw=1.0,
                gid="threshold:warning",
                label=f"memory.liveness-peak warning ({units.limit_percent(warning)})",
            )
            top = max(top, total * 1.05)
        else:
            what = "peak" if known_base else "not-always-live peak"
            ax.plot(
                [], [], " ", label=f"{what} = {units.percent(share)} of total memory ({units.nbytes(total)})"
            )
    ax.set_xlim(steps[0], steps[-1])
    ax.set_ylim(0, top)
    ax.set_xlabel("liveness program step" + (f" ({width_steps} steps per bin)" if binned else ""))
    ax.set_ylabel("live memory, all tiles (bytes)")
    bytes_axis(ax.yaxis)
    ax.set_title(title_of(profile, "Liveness"))
    ax.legend(loc="upper left", fontsize="small", frameon=False)
    return fig
