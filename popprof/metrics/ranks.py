"""Per-rank figures of a multi-rank trace: step times, device busy/idle per rank, HTA's late start.

Defined once here and read by the straggler rule (``popprof check``), the pilot and the run store.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.activity import STEP_MARKER, category_mask, labels_mask
from ..trace.intervals import device_activities
from ..trace.masks import rank_array, stream_mask
from .devices import device_breakdown


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
    Found once per profile scope (the summary's iterations, its time account and the rules read it); each
    caller gets its own copy.
    """
    return profile.cached("ranks.step_times", lambda: _step_times(profile)).copy()


def _step_times(profile: Profile) -> pd.DataFrame:
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
    codes = np.asarray(names.codes)
    hit = np.zeros(len(names.categories), dtype=bool)
    hit[marker_codes] = True
    marks = category_mask(names, hit)
    # the step number of each marker name, read once per name
    numbers = np.zeros(len(names.categories), dtype=np.int64)
    numbers[marker_codes] = (
        pd.Series(names.categories[marker_codes].astype("str"))
        .str.extract(r"(\d+)$")[0]
        .astype("int64")
        .to_numpy()
    )
    rank, step = rank_array(profile)[marks], numbers[codes[marks]]
    start = events["start_us"].to_numpy(dtype=np.float64)[marks]
    dur = events["dur_us"].to_numpy(dtype=np.float64)[marks]
    timed = np.flatnonzero(~np.isnan(dur))
    order = timed[np.lexsort((step[timed], rank[timed]))]  # stable, as sort_values(["rank", "step"])
    return pd.DataFrame(
        {"rank": rank[order], "step": step[order], "start_us": start[order], "dur_us": dur[order]}
    )


def collective_late_start(profile: Profile, min_normalized_duration: float = 0.01) -> pd.DataFrame:
    """HTA's straggler metric (``get_potential_stragglers``, HTA 0.5), one row per rank and iteration: when the
    last long collective of the iteration starts on that rank, and how much later than the other ranks'.

    As HTA defines it: iterations are the ``ProfilerStep#N`` numbers (N > 0: HTA leaves step 0 out); a device
    kernel belongs to the iteration its launch call (joined by ``correlation``) ran in, else the one its own
    start falls in; the mean iteration time is the span of those iterations over all ranks (first step start to
    the last step or kernel end) divided by their number; collectives are device work of category
    ``exchange`` (NCCL/RCCL kernels; HTA 0.5 matches names starting ``ncclKernel``) lasting at least
    ``min_normalized_duration`` of the mean iteration; the last one per (rank, stream, iteration, name) is kept,
    and of those the (stream, name) whose duration varies most across ranks (standard deviation, averaged over
    iterations) is the one compared. A rank that starts it late is the one the others wait for inside it.

    Columns: ``rank``, ``iteration``, ``start_us``, ``late_us`` (start minus the other ranks' median start in
    that iteration, among the ranks whose instance ends with the others' (within ``min_normalized_duration``
    of an iteration): one collective they waited in; NaN for a rank whose instance does not) and
    ``late_iterations`` (``late_us`` over the mean iteration time, which is in
    ``attrs["mean_iteration_us"]``). Empty without two ranks, ProfilerSteps or long collectives.
    """
    columns = ["rank", "iteration", "start_us", "late_us", "late_iterations"]
    empty = pd.DataFrame(
        {c: pd.Series(dtype="int64" if c in ("rank", "iteration") else "float64") for c in columns}
    )
    events = profile.get("events")
    steps = step_times(profile)
    steps = steps[(steps["rank"] >= 0) & (steps["step"] > 0)]
    if events is None or steps.empty or "stream" not in events.columns or steps["rank"].nunique() < 2:
        return empty
    rank = rank_array(profile)
    on_device = stream_mask(profile)
    starts = events["start_us"].to_numpy(dtype=np.float64)
    durs = events["dur_us"].to_numpy(dtype=np.float64)
    kernels = pd.DataFrame(
        {
            "rank": rank[on_device],
            "stream": events["stream"].to_numpy()[on_device],
            "name": np.asarray(events["name"].astype("str"))[on_device],
            "start": starts[on_device],
            "dur": durs[on_device],
            "comm": labels_mask(events["device_category"], ("exchange",))[on_device],
        }
    )
    if "correlation" in events.columns:
        correlation = events["correlation"].to_numpy(dtype="float64", na_value=np.nan)
        kernels["correlation"] = correlation[on_device]
        host = ~on_device & ~np.isnan(correlation)
        launches = pd.DataFrame(
            {"rank": rank[host], "launch": starts[host], "correlation": correlation[host]}
        )
        launches = launches.drop_duplicates(["rank", "correlation"])
        kernels = kernels.merge(launches, on=["rank", "correlation"], how="left")
        at = kernels["launch"].fillna(kernels["start"]).to_numpy()
    else:
        at = kernels["start"].to_numpy()
    iteration = np.full(len(kernels), -1, dtype=np.int64)
    kernel_rank = kernels["rank"].to_numpy()
    for r, group in steps.groupby("rank"):  # one pass per rank
        mine = kernel_rank == r
        begin, end = group["start_us"].to_numpy(), (group["start_us"] + group["dur_us"]).to_numpy()
        idx = np.clip(np.searchsorted(begin, at[mine], side="right") - 1, 0, None)
        inside = (at[mine] >= begin[idx]) & (at[mine] <= end[idx])
        iteration[mine] = np.where(inside, group["step"].to_numpy()[idx], -1)
    kernels["iteration"] = iteration
    kernels = kernels[kernels["iteration"] > 0]
    t_min = float(steps["start_us"].min())
    t_max = max(
        float((steps["start_us"] + steps["dur_us"]).max()), float((kernels["start"] + kernels["dur"]).max())
    )
    mean_iteration = (t_max - t_min) / steps["step"].nunique()
    comm = kernels[kernels["comm"] & (kernels["dur"] >= min_normalized_duration * mean_iteration)]
    if comm.empty or comm["rank"].nunique() < 2:
        return empty
    last = comm.sort_values("start").groupby(["rank", "stream", "iteration", "name"], as_index=False).last()
    spread = last.groupby(["stream", "iteration", "name"])["dur"].std().groupby(["stream", "name"]).mean()
    if spread.isna().all():
        return empty
    stream, name = spread.idxmax()
    chosen = last[(last["stream"] == stream) & (last["name"] == name)]
    ends = chosen["start"] + chosen["dur"]
    median_end = ends.groupby(chosen["iteration"]).transform("median")
    # Only instances that end with the others' are one collective the others waited in (ranks whose last
    # kernel of that name is an earlier call, or a pipeline stage's unmatched send, are not compared).
    together = ((ends - median_end).abs() <= min_normalized_duration * mean_iteration).to_numpy()
    rows = []
    for it, group in chosen.assign(together=together).groupby("iteration"):  # one pass per iteration
        start = group["start"].to_numpy(dtype=np.float64)
        joint = group["together"].to_numpy()
        for j, r in enumerate(group["rank"]):
            others = np.delete(start[joint], np.flatnonzero(np.flatnonzero(joint) == j))
            lag = start[j] - float(np.median(others)) if joint[j] and len(others) else np.nan
            rows.append((int(r), int(it), float(start[j]), lag, lag / mean_iteration))
    out = pd.DataFrame(rows, columns=columns).sort_values(["iteration", "rank"]).reset_index(drop=True)
    out.attrs["mean_iteration_us"] = mean_iteration
    out.attrs["collective"] = str(name)
    return out


def straggler_candidates(late: pd.DataFrame, k: int = 2) -> list[int]:
    """HTA's ``get_potential_stragglers(num_candidates=k)`` on the metric above: in each iteration the k ranks
    whose collective starts latest (ties at the k-th value all count), counted over iterations; the k ranks
    counted most often, most often first (equal counts: the later mean start first)."""
    if late.empty:
        return []
    k = max(int(k), 1)
    counts: dict[int, int] = {}
    for _, group in late.groupby("iteration"):
        ordered = group["start_us"].sort_values(ascending=False).to_numpy()
        threshold = ordered[min(k, len(ordered)) - 1]
        for r, start in zip(group["rank"], group["start_us"], strict=True):
            counts[int(r)] = counts.get(int(r), 0) + int(start >= threshold)
    mean_late = late.groupby("rank")["late_us"].mean()
    ranked = sorted(counts, key=lambda r: (-counts[r], -float(mean_late[r])))
    return [r for r in ranked if counts[r] > 0][:k]
