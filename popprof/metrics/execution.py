"""Execution metrics: cycles, time, and their split by category.

From the steps table (pva, SDK 1.x JSON, bundles) or, for a Poplar text summary that has no
steps, from its Execution section (``execution_totals``): total cycles, the printed time, and
each category's share of the total cycles.
"""

from __future__ import annotations

import math

import pandas as pd

from ..model.profile import Profile
from ..model.schema import STEP_CATEGORIES
from . import metric, metric_family


def has_cycles(profile: Profile) -> bool:
    """Whether any step has known cycles (without them, cycle figures are unknown, not zero)."""
    return bool(profile.steps["cycles"].notna().any())


def ipu_count(profile: Profile) -> int:
    """IPUs the profile ran on: the target's count, else the IPUs its steps name.

    Some sources (SDK 1.x JSON) attribute every step to IPU 0 of a multi-IPU target.
    """
    num_ipus = profile.target_value("num_ipus")
    if num_ipus is not None and not pd.isna(num_ipus) and int(num_ipus) > 0:
        return int(num_ipus)
    return int(profile.steps["ipu"].nunique())


def ipu_cycles_by_category(profile: Profile) -> pd.Series:
    """IPU-cycles (summed over steps and IPUs) per step category, all categories present."""

    def compute() -> pd.Series:
        sums = profile.steps.groupby("category", observed=False)["cycles"].sum()
        return sums.reindex(list(STEP_CATEGORIES), fill_value=0).astype("float64")

    return profile.cached("execution.ipu_cycles_by_category", compute).copy()


#: Summary categories whose share of the total cycles is reported (``execution.summary_share.*``).
SUMMARY_SHARE_CATEGORIES = (
    "compute",
    "compute_excluding_idle",
    "exchange",
    "global_exchange",
    "host_io",
    "shared_structure_copy",
    "sync",
)


def _summary_total_row(profile: Profile) -> pd.Series | None:
    totals = profile.get("execution_totals")
    if totals is None or totals.empty:
        return None
    rows = totals[(totals["category"] == "total") & (totals["basis"] == "total")]
    return None if rows.empty else rows.iloc[0]


def summary_shares(profile: Profile) -> dict[str, float | None]:
    """Each summary category's share of the total cycles (``execution_totals``).

    cycles / total cycles when both are printed (tile averages: the average tile's share, as Poplar's
    "(P% of total)" but unrounded), else the printed share; None when the figure is not printed
    ("Must enable ...") or when the quotient is not a share (SDK 1.x prints host exchange cycles summed
    over tiles, far above the total).
    """
    totals = profile.get("execution_totals")
    if totals is None or totals.empty:
        return {}
    row = _summary_total_row(profile)
    total = None if row is None or pd.isna(row["cycles"]) or not row["cycles"] else float(row["cycles"])
    shares: dict[str, float | None] = {}
    for cat, cycles, printed in zip(
        totals["category"].astype(str), totals["cycles"], totals["share"], strict=True
    ):
        if cat == "total" or cat in shares:
            continue
        value = None
        if total is not None and not math.isnan(cycles):
            value = float(cycles) / total
        elif not math.isnan(printed):
            value = float(printed)
        shares[cat] = value if value is not None and 0.0 <= value <= 1.0 else None
    return shares


@metric(
    "execution.total_cycles",
    "cycles",
    "execution length: the busiest IPU's summed step cycles (a text summary: its Total cycles)",
)
def total_cycles(profile: Profile) -> float | None:
    def compute() -> float | None:
        if not profile.has("steps"):
            row = _summary_total_row(profile)
            return None if row is None or pd.isna(row["cycles"]) else float(row["cycles"])
        if not has_cycles(profile):
            return None
        per_ipu = profile.steps.groupby("ipu", observed=True)["cycles"].sum()
        return float(per_ipu.max()) if len(per_ipu) else None

    return profile.cached("execution.total_cycles", compute)


@metric(
    "execution.total_time_us",
    "us",
    "execution length in time (cycles / clock; a text summary: its printed approximate time)",
)
def total_time_us(profile: Profile) -> float | None:
    clock = profile.target_value("clock_hz")
    cycles = total_cycles(profile)
    if not profile.has("steps") and not clock:
        row = _summary_total_row(profile)
        return None if row is None or pd.isna(row["time_us"]) else float(row["time_us"])
    return None if not clock or cycles is None else cycles / float(clock) * 1e6


@metric("execution.step_count", "steps", "execution steps (over all runs)", needs=("steps",), better=None)
def step_count(profile: Profile) -> float | None:
    return float(profile.steps["step"].nunique())


@metric("execution.run_count", "runs", "execution runs", needs=("runs",), better=None)
def run_count(profile: Profile) -> float | None:
    return float(len(profile.runs))


@metric_family(
    "execution.cycles.", "cycles", "IPU-cycles by step category (summed over IPUs)", needs=("steps",)
)
def cycles_by_category(profile: Profile) -> dict[str, float]:
    if not has_cycles(profile):
        return {}
    return {cat: float(v) for cat, v in ipu_cycles_by_category(profile).items()}


@metric_family(
    "execution.share.", "share", "share of IPU-cycles by step category", needs=("steps",), better=None
)
def share_by_category(profile: Profile) -> dict[str, float]:
    sums = ipu_cycles_by_category(profile)
    total = float(sums.sum())
    if not total:  # no cycles known (or all zero): there is no split to report
        return {}
    return {cat: float(v) / total for cat, v in sums.items()}


@metric_family(
    "execution.summary_share.",
    "share",
    "a text summary's share of the total cycles by category (tile averages for SDK 2.x/3.x)",
    needs=("execution_totals",),
    better=None,
    absent_is_zero=False,  # the lines the summary printed: one it did not print is not in it
)
def summary_share_by_category(profile: Profile) -> dict[str, float]:
    return {cat: v for cat, v in summary_shares(profile).items() if v is not None}


@metric_family(
    "execution.summary_cycles.",
    "cycles",
    "a text summary's cycles by basis and category (total.<cat> or tile_average.<cat>)",
    needs=("execution_totals",),
    absent_is_zero=False,
)
def summary_cycles(profile: Profile) -> dict[str, float]:
    totals = profile.execution_totals
    return {
        f"{b}.{c}": float(v)
        for c, b, v in zip(
            totals["category"].astype(str), totals["basis"].astype(str), totals["cycles"], strict=True
        )
        if not math.isnan(v) and c != "total"
    }  # Total cycles is execution.total_cycles


def summary_exchange_share(profile: Profile) -> float | None:
    """Exchange + global exchange + sync share of a text summary's total cycles (known figures only)."""
    shares = summary_shares(profile)
    known = [shares[c] for c in ("exchange", "global_exchange", "sync") if shares.get(c) is not None]
    return float(sum(known)) if known else None


@metric(
    "execution.exchange_and_sync_share",
    "share",
    "share of IPU-cycles in exchange, global exchange and sync together (a text summary: of its total cycles)",
)
def exchange_share(profile: Profile) -> float | None:
    if not profile.has("steps"):
        return summary_exchange_share(profile)
    sums = ipu_cycles_by_category(profile)
    total = float(sums.sum())
    return None if not total else float(sums[["exchange", "global_exchange", "sync"]].sum()) / total


def host_io_share(profile: Profile) -> float | None:
    """Share of IPU-cycles in host stream copies (the metric ``execution.share.host_io``; a text summary: host
    exchange of its total cycles); None without cycles."""
    if not profile.has("steps"):
        return summary_shares(profile).get("host_io")
    sums = ipu_cycles_by_category(profile)
    total = float(sums.sum())
    return None if not total else float(sums["host_io"]) / total


def category_time_us(profile: Profile, categories: tuple[str, ...]) -> float | None:
    """Time in ``categories`` on the mean IPU: their IPU-cycles over the IPUs the steps name, over the clock.

    A text summary (no steps): the categories' share of its total cycles (the average tile's, SDK 2.x/3.x)
    times its time (:func:`total_time_us`: cycles over the clock when known, else the printed "approx N
    microseconds"); categories not printed count as 0. None without cycles or a time. Never more than
    :func:`total_time_us` (the busiest IPU's), the window a gain on these categories is part of.
    """
    if not profile.has("steps"):
        shares = summary_shares(profile)
        known = [shares[c] for c in categories if shares.get(c) is not None]
        window = total_time_us(profile)
        return None if not known or window is None else min(float(sum(known)), 1.0) * window
    clock = profile.target_value("clock_hz")
    if not clock or not has_cycles(profile):
        return None
    cycles = float(ipu_cycles_by_category(profile)[list(categories)].sum())
    ipus = max(int(profile.steps["ipu"].nunique()), 1)
    return cycles / ipus / float(clock) * 1e6
