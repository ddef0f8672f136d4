"""Time by user annotation: HolisticTraceAnalysis 0.5.0's ``get_gpu_user_annotation_breakdown``.

PyTorch's ``record_function`` ranges (and its ``ProfilerStep#N``, ``## forward ##``, ``nccl:*`` markers) are
Kineto ``user_annotation`` events on the host and, projected onto the GPU timeline (first to last work
launched inside the range), ``gpu_user_annotation`` events; popprof keeps an event's Kineto ``cat`` in
``events.channel``. Per rank and annotation name, HTA's figures of the annotations' durations: ``sum``,
``max``, ``min``, ``mean`` and ``std`` (pandas' sample standard deviation, 0 for a single event); popprof adds
``count`` (the events). As HTA takes them:

- HTA's times: a rank whose times have fractions (a ns-resolution trace) in whole microseconds, the start
  rounded up and the end down (HTA's trace loader), the duration their difference;
- HTA's window: when the trace names two or more ``ProfilerStep`` s, the annotations that start at or after
  the start of the rank's last ``ProfilerStep`` (host or GPU marker, its latest start) are left out, as HTA's
  loader leaves out the last step (``docs/traces.md``);
- the tail: when a rank has more than ``num_kernels`` names, those past the ``duration_ratio`` quantile of the
  running sum (names by sum descending) or past the first ``num_kernels`` become one row ``others``, unless
  their name contains one of ``allowlist_patterns`` (HTA matches them as plain text). As in HTA, every row of
  such a rank then holds the figures of its names' sums: a kept name's ``max``, ``min`` and ``mean`` are its
  sum, its ``std`` 0; ``others`` has the statistics of the sums it groups (``count``: their events).

Annotations nest (a ``ProfilerStep`` holds ``forward``, which holds ``nccl:all_reduce``) and the GPU ranges
of concurrent streams overlap: the sums are not parts of the device time and do not add up to it.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import STEP_PREFIX, category_mask, distinct
from ..trace.gpu_work import has_fraction, hta_rounded, leaves_last_step_out

#: Kineto's category of the annotations projected onto the GPU timeline.
GPU_ANNOTATION = "gpu_user_annotation"
#: Kineto's category of the host's ``record_function`` ranges.
CPU_ANNOTATION = "user_annotation"
#: The breakdown's columns, HTA's figures with popprof's names (microseconds).
COLUMNS = ["rank", "name", "count", "sum_us", "max_us", "min_us", "std_us", "mean_us"]
#: HTA's ``duration_ratio`` and ``num_kernels`` defaults.
DURATION_RATIO = 0.8
NUM_KERNELS = 1000
#: The name HTA gives the grouped tail.
OTHERS = "others"
_STATS = ["sum", "max", "min", "mean", "std"]


def _empty() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype="float64") for c in COLUMNS})
    return frame.astype({"rank": "Int64", "name": "object", "count": "int64"})


def _annotation_rows(events: pd.DataFrame, channel: str) -> np.ndarray:
    """Positions of the events of Kineto category ``channel`` that have a duration (HTA drops the others)."""
    channels = events["channel"].array
    if channel not in channels.categories:
        return np.empty(0, dtype=np.int64)
    keep = category_mask(channels, channels.categories == channel)
    if not keep.any():
        return np.empty(0, dtype=np.int64)
    keep &= events["dur_us"].notna().to_numpy()
    if "instant_scope" in events.columns:
        keep &= events["instant_scope"].isna().to_numpy()
    return np.flatnonzero(keep)


def _hta_times(
    start: np.ndarray, dur: np.ndarray, rank: np.ndarray, rounded: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Start and duration in HTA's times: the rows of a rank in ``rounded`` start rounded up, end down."""
    hit = np.isin(rank, rounded)
    if not hit.any():
        return start, dur
    end = start + dur
    start, dur = start.copy(), dur.copy()
    start[hit], rounded_end = hta_rounded(start[hit], end[hit])
    dur[hit] = rounded_end - start[hit]
    return start, dur


def _before_last_step(
    profile: Profile, rank: np.ndarray, start: np.ndarray, rounded: np.ndarray
) -> np.ndarray:
    """Boolean per annotation: it starts before its rank's last ``ProfilerStep`` (HTA's window; all true when
    the trace names fewer than two steps or the rank has none)."""
    keep = np.ones(len(rank), dtype=bool)
    events = profile.events
    if not leaves_last_step_out(events):
        return keep
    names = events["name"].array
    steps = category_mask(names, np.asarray(names.categories.str.contains("ProfilerStep", regex=False), bool))
    step_rows = np.flatnonzero(steps)
    stream = events["stream"].array[step_rows].to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):  # HTA's GPU kernel filter: a stream and a correlation id
        gpu_work = (stream >= 0) & ~np.asarray(events["correlation"].array[step_rows].isna(), dtype=bool)
    step_rows = step_rows[~gpu_work]
    step_rank = masks.rank_array(profile)[step_rows]
    step_start = events["start_us"].to_numpy(dtype=np.float64)[step_rows]
    step_start = np.where(np.isin(step_rank, rounded), np.ceil(step_start), step_start)
    for r in distinct(step_rank).tolist():
        limit = np.fmax.reduce(step_start[step_rank == r])
        mine = rank == r
        keep[mine] = ~(start[mine] >= limit)
    return keep


def _stats(frame: pd.DataFrame, value: str, count: str) -> pd.DataFrame:
    """HTA's ``groupby(name)[value].agg(sum, max, min, mean, std)`` per (rank, name), std NaN -> 0, with
    ``count`` summed (``count`` "size": each row is one event)."""
    groups = frame.groupby(["rank", "name"], sort=True)
    out = groups[value].agg(_STATS)
    out.insert(0, "count", groups.size() if count == "size" else groups[count].sum())
    out["std"] = out["std"].fillna(0.0)
    return out.reset_index()


def _tail(table: pd.DataFrame, duration_ratio: float, num_kernels: int, allowlist: list[str]) -> pd.DataFrame:
    """One rank's rows with HTA's tail grouped into ``others`` (``_aggr_gpu_kernel_time``)."""
    table = table.sort_values("sum", ascending=False, kind="stable", ignore_index=True)
    names = table["name"].astype(str)
    keep = np.zeros(len(table), dtype=bool)
    if allowlist:  # HTA escapes the patterns: plain text, anywhere in the name
        keep = names.str.contains("|".join(re.escape(p) for p in allowlist)).to_numpy(dtype=bool)
    cumsum = table["sum"].cumsum()
    tail = (cumsum > cumsum.quantile(duration_ratio)).to_numpy() | (np.arange(len(table)) >= num_kernels)
    table["name"] = names.where(~(tail & ~keep), OTHERS)
    return _stats(table, "sum", "count")


def annotation_breakdown(
    profile: Profile,
    use_gpu_annotation: bool = True,
    duration_ratio: float = DURATION_RATIO,
    num_kernels: int = NUM_KERNELS,
    allowlist_patterns: list[str] | None = None,
) -> pd.DataFrame:
    """Per rank and name, the annotations' count and HTA's ``sum``, ``max``, ``min``, ``std`` and ``mean`` of
    their durations (HTA 0.5.0's ``get_gpu_user_annotation_breakdown``; the module's notes).

    ``use_gpu_annotation``: the GPU timeline's ``gpu_user_annotation`` events, else the host's
    ``user_annotation`` ones. ``duration_ratio``, ``num_kernels`` and ``allowlist_patterns``: HTA's tail
    grouping, with its defaults. Columns :data:`COLUMNS` (``rank`` missing for a trace without ranks, which
    HTA numbers 0), sorted by rank and name as HTA sorts them. Empty when the trace has no such events.
    """
    events = profile.get("events")
    if events is None or events.empty or "channel" not in events.columns:
        return _empty()
    rows = _annotation_rows(events, GPU_ANNOTATION if use_gpu_annotation else CPU_ANNOTATION)
    if rows.size == 0:
        return _empty()
    rank_of = masks.rank_array(profile)
    all_start = events["start_us"].to_numpy(dtype=np.float64)
    fractional = has_fraction(all_start)
    rounded = distinct(rank_of[fractional]) if fractional.any() else np.empty(0, dtype=np.int64)
    rank = rank_of[rows]
    start, dur = _hta_times(all_start[rows], events["dur_us"].to_numpy(dtype=np.float64)[rows], rank, rounded)
    kept = _before_last_step(profile, rank, start, rounded)
    frame = pd.DataFrame(
        {
            "rank": rank[kept],
            "name": np.asarray(events["name"].array[rows[kept]], dtype=object),
            "dur": dur[kept],
        }
    )
    if frame.empty:
        return _empty()
    table = _stats(frame, "dur", "size")
    per_rank = table.groupby("rank")["name"].transform("size").to_numpy()
    if (per_rank > num_kernels).any():
        parts = [
            _tail(part, duration_ratio, num_kernels, allowlist_patterns or [])
            if len(part) > num_kernels
            else part
            for _, part in table.groupby("rank", sort=True)
        ]
        table = pd.concat(parts, ignore_index=True)
    table = table.rename(columns={s: f"{s}_us" for s in _STATS})
    table["rank"] = table["rank"].astype("Int64").where(table["rank"] >= 0, pd.NA)
    return table.sort_values(["rank", "name"], ignore_index=True)[COLUMNS]


def annotation_records(profile: Profile) -> list[dict]:
    """The summary's ``trace.gpu_annotations``: :func:`annotation_breakdown` of the GPU annotations at HTA's
    defaults as rows ``{rank, name, count, sum_us, mean_us, min_us, max_us, std_us}`` (``rank`` None for a
    trace without ranks), per rank by ``sum_us`` descending (then name); ``[]`` when the trace has none.

    Built once per profile scope (``profile.cached``): the summary's JSON and the registry's
    ``trace.gpu_annotation_us.`` family (:func:`gpu_time_by_name`) read the same rows; read-only."""
    return profile.cached("annotations.records", lambda: _records(profile))


def _records(profile: Profile) -> list[dict]:
    events = profile.get("events")
    if (
        events is None
        or "channel" not in events.columns
        or GPU_ANNOTATION not in events["channel"].array.categories
    ):
        return []  # the usual trace: no table built (an empty frame costs a summary over a millisecond)
    table = annotation_breakdown(profile)
    if table.empty:
        return []
    rank = table["rank"].fillna(-1).to_numpy(dtype=np.int64)
    order = np.lexsort((table["name"].to_numpy(dtype=str), -table["sum_us"].to_numpy(), rank))
    return [
        {
            "rank": None if rank[i] < 0 else int(rank[i]),
            "name": str(table["name"].iat[i]),
            "count": int(table["count"].iat[i]),
            **{k: float(table[k].iat[i]) for k in ("sum_us", "mean_us", "min_us", "max_us", "std_us")},
        }
        for i in order.tolist()
    ]


#: The members of the registry's ``trace.gpu_annotation_us.`` family: the names with the most GPU time.
FAMILY_NAMES = 10
#: The family's one member for PyTorch's ``ProfilerStep#N`` annotations (as the diff's events name them).
STEP_MEMBER = STEP_PREFIX + "*"


def gpu_time_by_name(profile: Profile, names: int = FAMILY_NAMES) -> dict[str, float]:
    """The registry's ``trace.gpu_annotation_us.<name>``: per annotation name, its ``sum_us`` in
    :func:`annotation_records` (the summary's rows, read, never computed again) summed over ranks, for the
    ``names`` names with the most of it (ties by name); ``{}`` when the trace has no GPU annotations.

    The ``ProfilerStep#N`` rows are one member, :data:`STEP_MEMBER` (two runs number their steps differently);
    HTA's tail ``others`` (past 1,000 names of a rank) is a name like any other. Names are kept as the trace
    writes them (spaces, ``#``, ``.``, ``:`` included): a member's name is the prefix and the name."""
    totals: dict[str, float] = {}
    for row in annotation_records(profile):
        name = STEP_MEMBER if row["name"].startswith(STEP_PREFIX) else row["name"]
        totals[name] = totals.get(name, 0.0) + row["sum_us"]
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return dict(ranked[:names])
