"""Execution metrics from the steps table: cycles, time, and their split by category."""

from __future__ import annotations

import pandas as pd

from ..profile import Profile
from ..schema import STEP_CATEGORIES
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


@metric("execution.total_cycles", "cycles",
        "execution length: the busiest IPU's summed step cycles", needs=("steps",))
def total_cycles(profile: Profile) -> float | None:
    def compute() -> float | None:
        if not has_cycles(profile):
            return None
        per_ipu = profile.steps.groupby("ipu", observed=True)["cycles"].sum()
        return float(per_ipu.max()) if len(per_ipu) else None
    return profile.cached("execution.total_cycles", compute)


@metric("execution.total_time_us", "us", "execution length in time (cycles / clock)", needs=("steps",))
def total_time_us(profile: Profile) -> float | None:
    clock = profile.target_value("clock_hz")
    cycles = total_cycles(profile)
    return None if not clock or cycles is None else cycles / float(clock) * 1e6


@metric("execution.step_count", "steps", "execution steps (over all runs)", needs=("steps",), better=None)
def step_count(profile: Profile) -> float | None:
    return float(profile.steps["step"].nunique())


@metric("execution.run_count", "runs", "execution runs", needs=("runs",), better=None)
def run_count(profile: Profile) -> float | None:
    return float(len(profile.runs))


@metric_family("execution.cycles.", "cycles", "IPU-cycles by step category (summed over IPUs)",
               needs=("steps",))
def cycles_by_category(profile: Profile) -> dict[str, float]:
    if not has_cycles(profile):
        return {}
    return {cat: float(v) for cat, v in ipu_cycles_by_category(profile).items()}


@metric_family("execution.share.", "ratio", "share of IPU-cycles by step category", needs=("steps",),
               better=None)
def share_by_category(profile: Profile) -> dict[str, float]:
    sums = ipu_cycles_by_category(profile)
    total = float(sums.sum())
    if not total:  # no cycles known (or all zero): there is no split to report
        return {}
    return {cat: float(v) / total for cat, v in sums.items()}


@metric("execution.exchange_and_sync_share", "ratio",
        "share of IPU-cycles in exchange, global exchange and sync together", needs=("steps",))
def exchange_share(profile: Profile) -> float | None:
    sums = ipu_cycles_by_category(profile)
    total = float(sums.sum())
    return None if not total else float(sums[["exchange", "global_exchange", "sync"]].sum()) / total


def host_io_share(profile: Profile) -> float | None:
    """Share of IPU-cycles in host stream copies (the metric ``execution.share.host_io``); None without cycles."""
    sums = ipu_cycles_by_category(profile)
    total = float(sums.sum())
    return None if not total else float(sums["host_io"]) / total
