"""Per-rank figures of a multi-rank trace: step times, device busy/idle per rank, HTA's late start.

Defined once here and read by the straggler rule (``popprof check``), the pilot and the run store.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.intervals import category_mask, device_activities, rank_codes
from .devices import device_breakdown

#: Iteration markers written by the PyTorch profiler (``ProfilerStep#12``), as HTA reads them.
STEP_MARKER = re.compile(r"^ProfilerStep\s*#\s*\d+$")


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
        table = device_breakdown(profile)
    except (KeyError, ValueError):
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
