"""Execution: cycles by step category over the execution steps, flagged phases shaded.

Each step's cycles are taken from one IPU (``ipu=``) or, by default, from the
busiest IPU of that step (IPUs wait for each other at syncs, so the slowest
sets the pace). Steps are grouped into at most ``max_bins`` equal bins of
consecutive steps; the top panel stacks each category's cycles per bin, the
bottom panel each category's share of the bin, where an exchange-heavy phase
stands out. Phases flagged by the rules (``where["steps"]``) or given as
``phases=[(first, last), ...]`` are shaded on both panels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..io import units, words
from ..metrics import execution as ex
from ..model.profile import Profile
from ..model.schema import STEP_CATEGORIES
from ._common import (
    CATEGORY_COLOURS,
    add_stairs,
    bin_edges,
    finding_items,
    merge_ranges,
    new_figure,
    title_of,
    where_ranges,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Rule-id prefixes whose step ranges are shaded, with their colour.
PHASE_COLOURS: dict[str, str] = {"exchange.": "#ff7f0e"}


def step_cycles(profile: Profile, ipu: int | None = None) -> pd.DataFrame:
    """One row per step: ``step``, ``category`` and ``cycles`` (of ``ipu``, or the busiest IPU)."""
    steps = profile.steps
    if ipu is not None:
        steps = steps[steps["ipu"] == ipu]
    frame = pd.DataFrame(
        {
            "step": steps["step"].to_numpy(),
            "cycles": steps["cycles"].astype("float64").fillna(0).to_numpy(),
            "code": pd.Categorical(steps["category"], categories=list(STEP_CATEGORIES)).codes,
        }
    )
    if ipu is None and steps["ipu"].nunique() > 1:
        frame = (
            frame.groupby("step", sort=True)
            .agg(cycles=("cycles", "max"), code=("code", "first"))
            .reset_index()
        )
    else:
        frame = frame.sort_values("step", kind="stable")
    frame["category"] = pd.Categorical.from_codes(
        frame["code"].clip(lower=0).to_numpy(), categories=list(STEP_CATEGORIES)
    )
    frame.loc[frame["code"] < 0, "category"] = "other"
    return frame[["step", "category", "cycles"]].reset_index(drop=True)


def binned_cycles(per_step: pd.DataFrame, max_bins: int) -> tuple[np.ndarray, pd.DataFrame]:
    """Bin edges (step numbers) and cycles per bin by category (bins as rows, categories as columns)."""
    steps = per_step["step"].to_numpy().astype(np.int64)
    first, last = int(steps.min()), int(steps.max())
    edges = bin_edges(first, last, max_bins)
    width = int(edges[1] - edges[0]) if len(edges) > 1 else 1
    nbins = len(edges) - 1
    index = (steps - first) // width
    codes = pd.Categorical(per_step["category"], categories=list(STEP_CATEGORIES)).codes.astype(np.int64)
    grid = np.bincount(
        codes * nbins + index, weights=per_step["cycles"].to_numpy(), minlength=len(STEP_CATEGORIES) * nbins
    ).reshape(len(STEP_CATEGORIES), nbins)
    return edges, pd.DataFrame(grid.T, columns=list(STEP_CATEGORIES))


def flagged_phases(findings: Any, prefixes: Sequence[str] = tuple(PHASE_COLOURS)) -> dict[str, list]:
    """Step ranges ``(first, last)`` per rule id from findings whose ids start with ``prefixes``."""
    phases: dict[str, list] = {}
    for item in finding_items(findings, prefixes):
        where = getattr(item, "where", None) or {}
        # every phase the finding lists (where["phases"]), else its worst one (where["steps"])
        ranges = where_ranges([item], "phases" if "phases" in where and "steps" in where else "steps")
        if ranges:
            phases.setdefault(str(item.rule_id), []).extend(ranges)
    return phases


def execution(
    profile: Profile,
    findings: Any = None,
    *,
    phases: Iterable[tuple[int, int]] | None = None,
    ipu: int | None = None,
    max_bins: int = 400,
    width: float = 12.0,
    height: float = 6.0,
) -> Figure:
    """Cycles by category over steps (binned), with flagged phases shaded; returns the Figure.

    ``findings`` is a :class:`popprof.rules.Findings` (or a list of findings):
    step ranges of ``exchange.*`` findings (exchange-heavy phases) are shaded.
    ``phases`` adds plain ``(first_step, last_step)`` ranges (labelled
    ``flagged``). Shaded spans cover ``first`` to ``last + 1`` on the step axis.
    """
    if profile.has("steps") and not profile.steps["cycles"].notna().any():  # an all-zero plot would mislead
        from ..model.errors import UsageError

        raise UsageError(f"profile {profile.name!r}: the execution steps have no cycles to plot")
    per_step = step_cycles(profile, ipu)
    if per_step.empty:
        from ..model.errors import MissingTableError

        raise MissingTableError(
            "steps", profile.name, "no execution steps" + (f" on IPU {ipu}" if ipu is not None else "")
        )
    edges, grid = binned_cycles(per_step, max_bins)
    present = [c for c in STEP_CATEGORIES if grid[c].any()]
    fig, (top, bottom) = new_figure(width, height, nrows=2, sharex=True, height_ratios=[3, 2])
    totals = grid.sum(axis=1).to_numpy()
    base = np.zeros(len(totals))
    share_base = np.zeros(len(totals))
    safe = np.where(totals > 0, totals, 1.0)
    for cat in present:
        values = grid[cat].to_numpy()
        add_stairs(
            top,
            base + values,
            edges,
            baseline=base.copy(),
            fill=True,
            color=CATEGORY_COLOURS[cat],
            label=words.category_word(cat, words.IPU),
            lw=0,
            gid=f"cycles:{cat}",
        )
        share = values / safe
        add_stairs(
            bottom,
            share_base + share,
            edges,
            baseline=share_base.copy(),
            fill=True,
            color=CATEGORY_COLOURS[cat],
            lw=0,
            gid=f"share:{cat}",
        )
        base, share_base = base + values, share_base + share
    shaded: dict[str, list] = flagged_phases(findings)
    if phases:
        shaded.setdefault("flagged", []).extend((float(a), float(b)) for a, b in phases)
    for rule_id, ranges in shaded.items():
        colour = next((c for p, c in PHASE_COLOURS.items() if rule_id.startswith(p)), "#d62728")
        for i, (first, last) in enumerate(merge_ranges(ranges)):
            for ax in (top, bottom):
                ax.axvspan(
                    first,
                    last + 1,
                    color=colour,
                    alpha=0.18,
                    lw=0,
                    gid=f"phase:{rule_id}",
                    label=rule_id if (ax is top and i == 0) else None,
                )
    top.set_xlim(edges[0], edges[-1])
    top.set_ylim(0, float(base.max()) * 1.05 if len(base) and base.max() > 0 else 1.0)
    bottom.set_ylim(0, 1)
    width_steps = int(edges[1] - edges[0]) if len(edges) > 1 else 1
    which = f"IPU {ipu}" if ipu is not None else "busiest IPU per step"
    top.set_ylabel(f"cycles per bin\n({which})")
    bottom.set_ylabel("share of cycles")
    bottom.yaxis.set_major_formatter(_percent())
    bottom.set_xlabel(
        "execution step (global index)" + (f"; {width_steps} steps per bin" if width_steps > 1 else "")
    )
    clock = profile.target_value("clock_hz")
    # the run length as summary, baseline and diff define it (execution.total_time_us: the busiest IPU),
    # or the one IPU's time when the plot shows one IPU
    run_us = (
        float(totals.sum()) / float(clock) * 1e6 if ipu is not None and clock else ex.total_time_us(profile)
    )
    run = (
        ""
        if run_us is None
        else f"; run {units.duration(run_us)}"
        + (f" on IPU {ipu}" if ipu is not None else " on the busiest IPU")
    )
    top.set_title(title_of(profile, f"Execution: cycles by category ({len(per_step):,} steps{run})"))
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    return fig


def _percent():
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0)
