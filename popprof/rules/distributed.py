"""Cross-rank rules: a rank that makes the others wait (a straggler).

Anchored to HolisticTraceAnalysis's ``get_potential_stragglers`` (HTA 0.5): HTA ranks the ranks by
when the last long collective of each iteration starts (normalised by the mean iteration time) and
always names its top candidates. A rule must say when a rank *stands out*, so this one compares two
per-rank figures with the other ranks' median and flags only clear outliers:

- **step time**: the median duration of the rank's ``ProfilerStep#N`` events (the iteration markers HTA
  uses; the rank's device-active span when the trace has none);
- **late start**: HTA's own metric (:func:`collective_lateness`): how much later the rank's last long
  collective of each iteration starts than the other ranks', in iterations;
- **idle share**: the share of the rank's device span its devices sat idle, as the per-device table of
  ``popprof summary`` gives it (HTA's temporal breakdown on GPUs). In a synchronous
  run the straggler's own device idles while its host is late, and the others wait inside the
  collective (which is device time for them), so the straggler's idle share stands out.
"""

from __future__ import annotations

import numpy as np

from ..metrics.ranks import collective_lateness, rank_figures
from ..model.profile import Profile
from .base import RULES, Finding, NotEvaluated, band, rule
from .fmt import duration, pct
from .platform import platform_of


@rule(
    "distributed.stragglers",
    "ranks whose step time or device idle share stands out from the other ranks' (the rank the others wait for)",
    needs=["events"],
    params={
        "step_warning": 0.10,
        "step_error": 0.25,
        "idle_warning": 0.10,
        "idle_error": 0.25,
        "late_warning": 0.10,
        "late_error": 0.25,
        "top": 3,
    },
    advice={
        "ipu": "One instance or replica is slower than the others and they wait for it at every "
        "collective: look at what differs on that host (data loading, host load, a slower "
        "link or a different program), balance pipeline stages, and check its host "
        "data pipeline.",
        "gpu": "One rank is slower than the others and they wait for it inside every collective: check "
        "what differs on that rank (its data-loader workers and input pipeline, host CPU load, "
        "extra host-device synchronisations, logging or checkpointing done on rank 0 only, "
        "thermal throttling or a slower GPU/link), and balance the work per rank "
        "(uneven batches or sequence lengths).",
    },
)
def stragglers(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["distributed.stragglers"]
    figures = rank_figures(profile)
    if len(figures) < 2:
        raise NotEvaluated(
            "needs traces of at least two ranks (open a directory of rank traces, or events "
            "with a rank column)"
        )
    # Each rank against the median of the OTHER ranks (with two ranks: the other rank).
    step = figures["step_us"].to_numpy(dtype=np.float64)
    figures["step_excess"] = step / _median_of_others(step) - 1.0
    figures["idle_excess"] = figures["idle_share"].to_numpy(dtype=np.float64) - _median_of_others(
        figures["idle_share"].to_numpy(dtype=np.float64)
    )
    late = collective_lateness(profile)
    figures["late_excess"] = figures["rank"].map(late).astype("float64")
    found = []  # (severity, value, threshold, figure, rank)
    for spec in FIGURES:
        for rank, value in zip(figures["rank"], figures[spec.column], strict=True):
            severity, threshold = band(value, params[f"{spec.key}_warning"], params[f"{spec.key}_error"])
            if severity:
                found.append((severity, float(value), float(threshold), spec, int(rank)))
    if not found:
        return []
    # Severity from the figure the message leads with: the worst band, then the largest excess.
    severity, value, threshold, spec, worst_rank = max(found, key=lambda c: (c[0] == "error", c[1]))
    ranks = list(dict.fromkeys(rank for *_, rank in sorted(found, key=lambda c: (c[0] != "error", -c[1]))))
    n = int(params["top"])
    rows = figures.set_index("rank")
    parts = []
    for rank in ranks[:n]:
        row = rows.loc[rank]
        bits = [f"{s.label} {s.describe(row)}" for s in FIGURES if not np.isnan(row[s.column])]
        parts.append(f"rank {rank}: " + ", ".join(bits))
    message = (
        f"{len(ranks)} of {len(figures)} ranks stand out; worst: rank {worst_rank} {spec.label} "
        f"{spec.excess(value)} ({severity} at >= {spec.excess(threshold, signed=False)}): " + "; ".join(parts)
    )
    if len(ranks) > n:
        message += f"; {len(ranks) - n} more in the evidence"
    return [
        r.finding(
            severity,
            "Straggling rank(s)",
            message,
            value=value,
            threshold=threshold,
            where={"ranks": ranks},
            evidence=figures,
            platform=platform_of(profile),
        )
    ]


class _Figure:
    """One per-rank figure the rule compares: its parameter prefix, column, words and formats."""

    def __init__(self, key: str, column: str, label: str, unit: str) -> None:
        self.key, self.column, self.label, self.unit = key, column, label, unit

    def excess(self, value: float, signed: bool = True) -> str:
        """The figure as shown (``+30.0 %``), or a threshold (``25 %``) when not ``signed``."""
        scaled = value * 100 if self.unit in ("%", "points") else value
        text = (
            f"{scaled:+.1f}"
            if signed and self.unit != "iteration"
            else (f"{scaled:+.2f}" if signed else f"{scaled:.4g}")
        )
        return f"{text} {self.unit}"

    def describe(self, row) -> str:
        if self.key == "step":
            return f"{duration(row['step_us'])} = {self.excess(row[self.column])} vs the other ranks' median"
        if self.key == "idle":
            return f"{pct(row['idle_share'])} = {self.excess(row[self.column])} vs the others"
        return f"{self.excess(row[self.column])} after the others' (HTA's late-start metric)"


#: The figures, as data: step time, device idle share, late start of the last long collective.
FIGURES = (
    _Figure("step", "step_excess", "step time", "%"),
    _Figure("idle", "idle_excess", "device idle", "points"),
    _Figure("late", "late_excess", "last long collective starts", "iteration"),
)


def _signed(ratio: float) -> str:
    return f"{ratio * 100:+.1f} %"


def _median_of_others(values: np.ndarray) -> np.ndarray:
    """For each element, the median of all the other elements (NaN-aware; a handful of ranks)."""
    out = np.empty(len(values))
    for i in range(len(values)):  # loop over ranks, not events
        others = np.delete(values, i)
        others = others[~np.isnan(others)]
        out[i] = np.median(others) if len(others) else np.nan
    return out
