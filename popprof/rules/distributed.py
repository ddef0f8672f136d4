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

import re

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.intervals import category_mask, device_activities, rank_codes
from .base import RULES, Finding, NotEvaluated, band, rule
from .fmt import duration, pct
from .platform import platform_of

#: Iteration markers written by the PyTorch profiler (``ProfilerStep#12``), as HTA reads them.
STEP_MARKER = re.compile(r"^ProfilerStep\s*#\s*\d+$")


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


def rank_figures(profile: Profile) -> pd.DataFrame:
    """Per rank: ``step_us`` (median ProfilerStep duration, else the device-active span), ``steps`` (markers
    counted), ``span_us``, ``idle_us``, ``idle_share``: the per-device table's figures (``device_breakdown``:
    HTA's temporal breakdown on GPUs, what ``popprof summary`` shows) summed over the rank's devices, else
    idle / device-active span. Empty without ranks."""
    events = profile.get("events")
    if events is None or "rank" not in events.columns or events["rank"].isna().all():
        return pd.DataFrame(columns=["rank", "steps", "step_us", "span_us", "idle_us", "idle_share"])
    rows = {}
    for activity in device_activities(profile, by="rank"):
        if activity.rank is None:
            continue
        t0, t1 = activity.span
        busy = float((activity.busy_end - activity.busy_start).sum())
        rows[activity.rank] = {
            "rank": activity.rank,
            "steps": 0,
            "step_us": t1 - t0,
            "span_us": t1 - t0,
            "idle_us": (t1 - t0) - busy,
            "idle_share": 1 - busy / (t1 - t0) if t1 > t0 else np.nan,
        }
    # The idle share the summary shows (HTA's temporal breakdown on GPUs), when the per-device table has it.
    for rank, (span, busy) in _breakdown_by_rank(profile).items():
        if rank in rows and span > 0:
            rows[rank].update(span_us=span, idle_us=span - busy, idle_share=1 - busy / span)
    steps = step_times(profile)
    for rank, group in steps[steps["rank"] >= 0].groupby("rank"):
        row = rows.setdefault(
            int(rank), {"rank": int(rank), "span_us": np.nan, "idle_us": np.nan, "idle_share": np.nan}
        )
        row["steps"] = len(group)
        row["step_us"] = float(group["dur_us"].median())
    frame = pd.DataFrame(
        list(rows.values()), columns=["rank", "steps", "step_us", "span_us", "idle_us", "idle_share"]
    )
    return frame.sort_values("rank").reset_index(drop=True)


def _breakdown_by_rank(profile: Profile) -> dict[int, tuple[float, float]]:
    """``rank -> (span_us, busy_us)`` summed over the rank's devices, from :func:`popprof.metrics.devices.
    device_breakdown` (HTA's definitions on GPUs); empty when that table has no ranked rows."""
    try:
        from ..metrics.devices import device_breakdown

        table = device_breakdown(profile)
    except (ImportError, KeyError, ValueError):
        return {}
    if table.empty or "rank" not in table.columns:
        return {}
    table = table.dropna(subset=["rank", "span_us", "busy_us"])
    sums = table.groupby(table["rank"].astype("int64"))[["span_us", "busy_us"]].sum()
    return {int(r): (float(row.span_us), float(row.busy_us)) for r, row in sums.iterrows()}


def step_times(profile: Profile) -> pd.DataFrame:
    """Every ``ProfilerStep#N`` event: ``rank`` (-1 when unknown), ``step`` (N), ``start_us``, ``dur_us``.

    The durations are HTA's iteration times (``extract_iteration_info``: the ProfilerStep span per rank).
    """
    events = profile.get("events")
    empty = pd.DataFrame(
        {
            "rank": pd.Series(dtype="int64"),
            "step": pd.Series(dtype="int64"),
            "start_us": pd.Series(dtype="float64"),
            "dur_us": pd.Series(dtype="float64"),
        }
    )
    if events is None or events.empty:
        return empty
    names = events["name"].array
    marker_codes = [i for i, c in enumerate(names.categories) if STEP_MARKER.match(str(c))]
    if not marker_codes:
        return empty
    marks = np.isin(np.asarray(names.codes), marker_codes)
    labels = pd.Series(np.asarray(names.astype("str"))[marks])
    out = pd.DataFrame(
        {
            "rank": rank_codes(events)[marks],
            "step": labels.str.extract(r"(\d+)$")[0].astype("int64"),
            "start_us": events["start_us"].to_numpy(dtype=np.float64)[marks],
            "dur_us": events["dur_us"].to_numpy(dtype=np.float64)[marks],
        }
    )
    return out[out["dur_us"].notna()].sort_values(["rank", "step"]).reset_index(drop=True)


def collective_lateness(profile: Profile, min_normalized_duration: float = 0.01) -> dict[int, float]:
    """HTA's late-start metric per rank: how much later (in mean iterations) the rank's last long collective
    of each iteration starts than the other ranks' (their median), averaged over iterations.

    As HTA's ``get_potential_stragglers``: collectives are device work of category ``exchange`` (NCCL/RCCL
    kernels) at least ``min_normalized_duration`` of the mean iteration time long; a kernel belongs to the
    ProfilerStep its launch call (joined by ``correlation``) started in, else the one its own start falls in.
    Empty without ProfilerSteps, collectives or two ranks (HTA names its top candidates; this gives the
    figure so that the rule can say whether a rank stands out).
    """
    events = profile.get("events")
    steps = step_times(profile)
    steps = steps[steps["rank"] >= 0]
    if events is None or steps.empty or "correlation" not in events.columns or steps["rank"].nunique() < 2:
        return {}
    mean_iter = float(steps["dur_us"].mean())
    rank = rank_codes(events)
    comm = category_mask(events["device_category"], ("exchange",)) & events["stream"].notna().to_numpy()
    comm &= events["dur_us"].to_numpy(dtype=np.float64) >= min_normalized_duration * mean_iter
    if not comm.any():
        return {}
    kernels = pd.DataFrame(
        {
            "rank": rank[comm],
            "start": events["start_us"].to_numpy(dtype=np.float64)[comm],
            "correlation": events["correlation"].to_numpy(dtype="float64", na_value=np.nan)[comm],
        }
    )
    host = events["stream"].isna().to_numpy() & events["correlation"].notna().to_numpy()
    launches = pd.DataFrame(
        {
            "rank": rank[host],
            "launch": events["start_us"].to_numpy(dtype=np.float64)[host],
            "correlation": events["correlation"].to_numpy(dtype="float64", na_value=np.nan)[host],
        }
    )
    launches = launches.drop_duplicates(["rank", "correlation"])
    kernels = kernels.merge(launches, on=["rank", "correlation"], how="left")
    kernels["at"] = kernels["launch"].fillna(kernels["start"])
    kernels["iteration"] = -1
    for r, group in steps.groupby("rank"):  # one pass per rank
        mine = (kernels["rank"] == r).to_numpy()
        starts, numbers = group["start_us"].to_numpy(), group["step"].to_numpy()
        idx = np.searchsorted(starts, kernels.loc[mine, "at"].to_numpy(), side="right") - 1
        kernels.loc[mine, "iteration"] = np.where(idx >= 0, numbers[np.clip(idx, 0, None)], -1)
    kernels = kernels[kernels["iteration"] >= 0]
    last = kernels.groupby(["rank", "iteration"])["start"].max().unstack("rank")  # iterations x ranks
    if last.shape[1] < 2:
        return {}
    values = last.to_numpy(dtype=np.float64)
    out = {}
    for j, r in enumerate(last.columns):  # loop over ranks
        others = np.delete(values, j, axis=1)
        with np.errstate(all="ignore"):
            late = (values[:, j] - np.nanmedian(others, axis=1)) / mean_iter
        if np.isfinite(late).any():
            out[int(r)] = float(np.nanmean(late))
    return out
