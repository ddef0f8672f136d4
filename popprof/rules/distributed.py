"""Cross-rank rules: a rank that makes the others wait (a straggler).

Anchored to HolisticTraceAnalysis's ``get_potential_stragglers`` (HTA 0.5): HTA ranks the ranks by
when the last long collective of each iteration starts (normalised by the mean iteration time) and
always names its top candidates. A rule must say when a rank *stands out*, so this one compares two
per-rank figures with the other ranks' median and flags only clear outliers:

- **step time**: the median duration of the rank's ``ProfilerStep#N`` events (the iteration markers HTA
  uses; the rank's device-active span when the trace has none);
- **idle share**: the share of the rank's device-active span its devices sat idle. In a synchronous
  run the straggler's own device idles while its host is late, and the others wait inside the
  collective (which is device time for them), so the straggler's idle share stands out.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..profile import Profile
from .base import RULES, Finding, NotEvaluated, band, rule
from .fmt import duration, pct, threshold_pct
from .intervals import device_activities, rank_codes
from .platform import platform_of

#: Iteration markers written by the PyTorch profiler (``ProfilerStep#12``), as HTA reads them.
STEP_MARKER = re.compile(r"^ProfilerStep\s*#\s*\d+$")


@rule("distributed.stragglers",
      "ranks whose step time or device idle share stands out from the other ranks' (the rank the others wait for)",
      needs=["events"],
      params={"step_warning": 0.10, "step_error": 0.25, "idle_warning": 0.10, "idle_error": 0.25, "top": 3},
      advice={"ipu": "One instance or replica is slower than the others and they wait for it at every "
                     "collective: look at what differs on that host (data loading, host load, a slower "
                     "link or a different program), balance pipeline stages, and check its host "
                     "data pipeline.",
              "gpu": "One rank is slower than the others and they wait for it inside every collective: check "
                     "what differs on that rank (its data-loader workers and input pipeline, host CPU load, "
                     "extra host-device synchronisations, logging or checkpointing done on rank 0 only, "
                     "thermal throttling or a slower GPU/link), and balance the work per rank "
                     "(uneven batches or sequence lengths)."})
def stragglers(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["distributed.stragglers"]
    figures = rank_figures(profile)
    if len(figures) < 2:
        raise NotEvaluated("needs traces of at least two ranks (open a directory of rank traces, or events "
                           "with a rank column)")
    # Each rank against the median of the OTHER ranks (with two ranks: the other rank).
    step = figures["step_us"].to_numpy(dtype=np.float64)
    idle = figures["idle_share"].to_numpy(dtype=np.float64)
    figures["step_excess"] = step / _median_of_others(step) - 1.0
    figures["idle_excess"] = idle - _median_of_others(idle)
    step_sev = [band(x, params["step_warning"], params["step_error"])[0] for x in figures["step_excess"]]
    idle_sev = [band(x, params["idle_warning"], params["idle_error"])[0] for x in figures["idle_excess"]]
    figures["flagged"] = [a is not None or b is not None for a, b in zip(step_sev, idle_sev, strict=True)]
    flagged = figures[figures["flagged"]]
    if flagged.empty:
        return []
    # Severity from the figure the message leads with: the larger of the two excesses, each in its own band.
    candidates = []
    for row in flagged.itertuples():
        for kind, value, warn, err in (("step", row.step_excess, params["step_warning"], params["step_error"]),
                                       ("idle", row.idle_excess, params["idle_warning"], params["idle_error"])):
            severity, threshold = band(value, warn, err)
            if severity:
                candidates.append((severity, value, threshold, kind, int(row.rank)))
    severity, value, threshold, kind, worst_rank = max(candidates, key=lambda c: (c[0] == "error", c[1]))
    n = int(params["top"])
    order = flagged.assign(key=np.maximum(flagged["step_excess"].fillna(-np.inf),
                                          flagged["idle_excess"].fillna(-np.inf)))
    order = order.sort_values("key", ascending=False, kind="stable")
    parts = []
    for row in order.head(n).itertuples():
        bits = []
        if not np.isnan(row.step_excess):
            bits.append(f"step {duration(row.step_us)} = {_signed(row.step_excess)} vs the other ranks' median")
        if not np.isnan(row.idle_excess):
            bits.append(f"device idle {pct(row.idle_share)} = {row.idle_excess * 100:+.1f} points vs the others")
        parts.append(f"rank {int(row.rank)}: " + ", ".join(bits))
    what = "step time" if kind == "step" else "device idle share"
    shown = _signed(value) if kind == "step" else f"{value * 100:+.1f} points"
    message = (f"{len(flagged)} of {len(figures)} ranks stand out; worst: rank {worst_rank} {what} {shown} "
               f"({severity} at >= {threshold_pct(threshold) if kind == 'step' else f'{threshold * 100:g} points'}"
               f"): " + "; ".join(parts))
    if len(order) > n:
        message += f"; {len(order) - n} more in the evidence"
    evidence = figures.drop(columns="flagged")
    return [r.finding(severity, "Straggling rank(s)", message, value=float(value), threshold=float(threshold),
                      where={"ranks": [int(x) for x in order["rank"]]}, evidence=evidence,
                      platform=platform_of(profile))]


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
    counted), ``span_us``, ``idle_us``, ``idle_share`` (idle / device-active span). Empty without ranks."""
    events = profile.get("events")
    if events is None or "rank" not in events.columns or events["rank"].isna().all():
        return pd.DataFrame(columns=["rank", "steps", "step_us", "span_us", "idle_us", "idle_share"])
    rows = {}
    for activity in device_activities(profile, by="rank"):
        if activity.rank is None:
            continue
        t0, t1 = activity.span
        busy = float((activity.busy_end - activity.busy_start).sum())
        rows[activity.rank] = {"rank": activity.rank, "steps": 0, "step_us": t1 - t0, "span_us": t1 - t0,
                               "idle_us": (t1 - t0) - busy, "idle_share": 1 - busy / (t1 - t0) if t1 > t0 else np.nan}
    steps = step_times(profile)
    for rank, group in steps[steps["rank"] >= 0].groupby("rank"):
        row = rows.setdefault(int(rank), {"rank": int(rank), "span_us": np.nan, "idle_us": np.nan,
                                          "idle_share": np.nan})
        row["steps"] = len(group)
        row["step_us"] = float(group["dur_us"].median())
    frame = pd.DataFrame(list(rows.values()), columns=["rank", "steps", "step_us", "span_us", "idle_us",
                                                       "idle_share"])
    return frame.sort_values("rank").reset_index(drop=True)


def step_times(profile: Profile) -> pd.DataFrame:
    """Every ``ProfilerStep#N`` event: ``rank`` (-1 when unknown), ``step`` (N), ``start_us``, ``dur_us``.

    The durations are HTA's iteration times (``extract_iteration_info``: the ProfilerStep span per rank).
    """
    events = profile.get("events")
    empty = pd.DataFrame({"rank": pd.Series(dtype="int64"), "step": pd.Series(dtype="int64"),
                          "start_us": pd.Series(dtype="float64"), "dur_us": pd.Series(dtype="float64")})
    if events is None or events.empty:
        return empty
    names = events["name"].array
    marker_codes = [i for i, c in enumerate(names.categories) if STEP_MARKER.match(str(c))]
    if not marker_codes:
        return empty
    marks = np.isin(np.asarray(names.codes), marker_codes)
    labels = pd.Series(np.asarray(names.astype("str"))[marks])
    out = pd.DataFrame({"rank": rank_codes(events)[marks], "step": labels.str.extract(r"(\d+)$")[0].astype("int64"),
                        "start_us": events["start_us"].to_numpy(dtype=np.float64)[marks],
                        "dur_us": events["dur_us"].to_numpy(dtype=np.float64)[marks]})
    return out[out["dur_us"].notna()].sort_values(["rank", "step"]).reset_index(drop=True)
