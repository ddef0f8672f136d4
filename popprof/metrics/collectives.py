"""Collectives across ranks: each rank's collective time split into synchronisation skew and transfer.

A collective kernel (device work of category ``exchange`` in Kineto's ``kernel`` category: NCCL / RCCL
kernels, torch symmetric-memory collectives; not peer-to-peer copies) is matched with the same collective
on the other ranks of the run by its order: the k-th kernel of one name (and process group, where the
kernel's args name it) on one rank is the k-th on every other. Of one matched collective, every rank waits
inside it until the last rank arrives:

- ``skew_us`` = ``max(start over the ranks) - own start``, clipped to ``[0, dur]``: the synchronisation
  wait, time the rank spends in the kernel before the last rank has started it;
- ``transfer_us`` = ``dur - skew_us``: the time the data moves with every rank present.

A single-rank trace, or a collective no other rank of the trace holds, has no skew to measure: its whole
duration counts as transfer (``matched_ranks`` is 1), and the bandwidths it gives are lower bounds.

Message sizes come from Kineto's args (:mod:`popprof.metrics.collective_sizes`: the kernel's own, PyTorch
2.2 and later, else the ``nccl:*`` host op around its launch), present when the trace was read with its
args (``popprof.open(path, with_args=True)``); without them the bytes and bandwidths are missing.
``bytes`` is the larger of the input and output element counts times the element size: nccl-tests' size S
(the whole buffer, for all_gather the output, for reduce_scatter the input).
Algorithm bandwidth = bytes / transfer time; bus bandwidth = algorithm bandwidth x NCCL's factor for the
collective and the group size n (nccl-tests ``doc/PERFORMANCE.md``): all_reduce 2(n-1)/n, all_gather,
reduce_scatter and all_to_all (n-1)/n, broadcast, reduce and send/recv 1. ``docs/collectives.md`` has the
definitions and their limits.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..io import jsonout
from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import labels_mask
from ..trace.intervals import device_activities
from ..trace.masks import rank_array
from ..trace.spans import intersect_intervals, merge_intervals
from .collective_sizes import DTYPE_BYTES, args_fields, collective_kind, host_op_sizes

__all__ = [
    "CALL_COLUMNS",
    "DTYPE_BYTES",
    "EQUAL_SIZE",
    "TABLE_COLUMNS",
    "bus_factor",
    "collective_calls",
    "collective_kind",
    "collective_skew_by_rank",
    "collective_table",
    "collectives_section",
    "skew_spans",
    "waits_for_rank",
    "world_size_unseen",
]

#: Columns of :func:`collective_calls`.
CALL_COLUMNS = [
    "rank",
    "collective",
    "name",
    "group",
    "seq",
    "start_us",
    "dur_us",
    "skew_us",
    "transfer_us",
    "matched_ranks",
    "group_size",
    "bytes",
    "row",
]
#: Columns of :func:`collective_table`.
TABLE_COLUMNS = [
    "collective",
    "bytes_per_call",
    "count",
    "time_us",
    "skew_us",
    "transfer_us",
    "bytes",
    "algbw_gbps",
    "busbw_gbps",
]

#: Kineto's categories of kernels (a collective is a kernel; peer-to-peer copies are ``gpu_memcpy``).
COLLECTIVE_CHANNELS: tuple[str, ...] = ("kernel", "Kernel")

#: The collectives whose size is the same on every rank of one call (all_to_all and send/recv may differ).
EQUAL_SIZE: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")


def bus_factor(collective: str, n: float) -> float:
    """NCCL's bus-bandwidth factor (nccl-tests ``doc/PERFORMANCE.md``) for ``n`` ranks; NaN when unknown."""
    if not n or np.isnan(n) or n < 1:
        return np.nan
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce", "send_recv"):
        return 1.0
    return np.nan


def collective_calls(profile: Profile) -> pd.DataFrame:
    """Every collective kernel of the run, one row per rank and call (columns :data:`CALL_COLUMNS`).

    ``seq`` is the call's order among the rank's kernels of that name and group; calls with the same
    (``name``, ``group``, ``seq``) on different ranks are one collective, unless their types differ, or
    their sizes where the type fixes it (:data:`EQUAL_SIZE`): then each stands alone. ``skew_us`` and ``transfer_us``
    are defined in the module's docstring; ``matched_ranks`` is how many ranks hold that collective (1: no
    skew measured). ``group`` is the args' process group name ("" without args), ``group_size`` the args'
    group size, else the matched ranks when more than one; ``row`` the kernel's row in the events table.
    Empty without collectives."""
    return profile.cached("collectives.calls", lambda: _calls(profile))


def _no_calls() -> pd.DataFrame:
    """The empty table of :func:`collective_calls`."""
    return pd.DataFrame(
        {
            c: pd.Series(
                dtype="object"
                if c in ("collective", "name", "group")
                else "int64"
                if c == "row"
                else "float64"
            )
            for c in CALL_COLUMNS
        }
    )


def _calls(profile: Profile) -> pd.DataFrame:
    events = profile.get("events")
    if events is None or events.empty or "device_category" not in events.columns:
        return _no_calls()
    # the categories are tested on the rows on a stream only (a GPU trace's device work), not on every event
    candidates = np.flatnonzero(masks.stream_mask(profile)) if "stream" in events.columns else None
    comm = labels_mask(events["device_category"], ("exchange",), candidates)
    if "channel" in events.columns:  # GPU kernels: not peer copies, nor IPU exchange programs
        comm &= labels_mask(events["channel"], COLLECTIVE_CHANNELS, candidates)
    rows = np.flatnonzero(comm) if candidates is None else candidates[comm]
    if rows.size == 0:
        return _no_calls()
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    dur = events["dur_us"].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    names = events["name"].array[rows].astype("str")
    frame = pd.DataFrame(
        {
            "rank": rank_array(profile)[rows],
            "name": np.asarray(names, dtype=object),
            "start_us": start,
            "dur_us": np.nan_to_num(dur, nan=0.0),
            "row": rows,
        }
    )
    if "args" in events.columns:
        fields = args_fields(events["args"].iloc[rows].reset_index(drop=True))
    else:
        fields = pd.DataFrame(
            {"collective": None, "group": None, "bytes": np.nan, "group_size": np.nan}, index=frame.index
        )
    kinds = {n: collective_kind(n) for n in pd.unique(frame["name"])}
    named = [c if isinstance(c, str) else None for c in fields["collective"]]
    named_kinds = {c: collective_kind(c) for c in set(named) - {None}}
    frame["collective"] = [
        named_kinds[c] if c is not None and named_kinds[c] != "other" else kinds[n]
        for c, n in zip(named, frame["name"], strict=True)
    ]
    frame["group"] = [str(g) if isinstance(g, (str, int)) else "" for g in fields["group"]]
    frame["bytes"] = fields["bytes"].to_numpy()
    frame["args_group_size"] = fields["group_size"].to_numpy()
    frame["per_rank_input"] = False
    if "args" in events.columns and frame["bytes"].isna().any():
        host = host_op_sizes(profile, rows)
        fill = frame["bytes"].isna().to_numpy() & ~np.isnan(host["bytes"].to_numpy())
        frame.loc[fill, "bytes"] = host["bytes"].to_numpy()[fill]
        frame.loc[fill, "per_rank_input"] = host["per_rank_input"].to_numpy()[fill]
        named = host["collective"].to_numpy()
        known = fill & np.array([k not in (None, "other") for k in named], dtype=bool)
        frame.loc[known, "collective"] = named[known]
    frame = frame.sort_values(["rank", "start_us"], kind="stable").reset_index(drop=True)
    seq, ranks, last = _instances(frame)
    frame["seq"] = seq
    # one collective has one type on every rank, and (but for all_to_all and send/recv) one size: calls
    # paired by order that differ are not one collective (a trace that leaves kernels out: not compared)
    frame["matched_ranks"] = ranks
    matched = frame["matched_ranks"].to_numpy() > 1
    skew = np.clip(last - frame["start_us"].to_numpy(), 0.0, frame["dur_us"].to_numpy())
    frame["skew_us"] = np.where(matched, skew, 0.0)
    frame["transfer_us"] = frame["dur_us"] - frame["skew_us"]
    group_size = frame["args_group_size"].to_numpy(dtype=np.float64)
    frame["group_size"] = np.where(
        np.isnan(group_size), np.where(matched, frame["matched_ranks"], np.nan), group_size
    )
    # an all_gather's host op records the rank's input: the gathered size is n times it
    scale = np.where(frame["per_rank_input"].to_numpy(dtype=bool), frame["group_size"].to_numpy(), 1.0)
    frame["bytes"] = frame["bytes"].to_numpy(dtype=np.float64) * scale
    return frame[CALL_COLUMNS]


def _instances(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For calls sorted by (rank, start): each call's ``seq`` (its order among its rank's calls of that name
    and group), the ranks its collective (the calls of one name, group and seq) is matched on (1 where the
    calls' types, or sizes where the type fixes them, differ) and the collective's last start (pandas'
    groupby: calls with a missing name or group are in no collective)."""
    frame = frame.assign(seq=frame.groupby(["rank", "name", "group"], sort=False).cumcount())
    instance = frame.groupby(["name", "group", "seq"], sort=False)
    differ = instance["collective"].transform("nunique").to_numpy() > 1
    sized = frame["collective"].isin(EQUAL_SIZE).to_numpy()
    differ |= sized & (instance["bytes"].transform("nunique").to_numpy() > 1)
    ranks = np.where(differ, 1, instance["rank"].transform("nunique").to_numpy())
    return frame["seq"].to_numpy(), ranks, instance["start_us"].transform("max").to_numpy()


def collective_table(profile: Profile) -> pd.DataFrame:
    """Per collective type and message size (``bytes_per_call``, missing without args): ``count`` (calls
    over all ranks), ``time_us``, ``skew_us``, ``transfer_us``, ``bytes`` (summed over calls), ``algbw_gbps``
    (bytes / transfer time, GB/s = 1e9 bytes per second) and ``busbw_gbps`` (the algorithm bandwidth times
    NCCL's factor; missing where the group size is unknown). Largest time first; ``attrs["ranks"]`` holds
    the number of ranks and ``attrs["matched"]`` whether any collective was matched across ranks."""
    calls = collective_calls(profile)
    if calls.empty:
        out = pd.DataFrame(columns=TABLE_COLUMNS)
        out.attrs.update(ranks=0, matched=False)
        return out
    factor = np.array(
        [bus_factor(c, n) for c, n in zip(calls["collective"], calls["group_size"], strict=True)],
        dtype=np.float64,
    )
    work = calls.assign(
        bytes_per_call=calls["bytes"],
        busbytes=calls["bytes"] * factor,
        count=1,
    )
    grouped = work.groupby(["collective", "bytes_per_call"], dropna=False, sort=False)
    # two sums, no per-group Python: the byte sums missing where no call of the group has a size
    out = pd.concat(
        [
            grouped[["count", "dur_us", "skew_us", "transfer_us"]].sum(),
            grouped[["bytes", "busbytes"]].sum(min_count=1),
        ],
        axis=1,
    )
    out = out.rename(columns={"dur_us": "time_us"}).reset_index()
    transfer = out["transfer_us"].where(out["transfer_us"] > 0)
    out["algbw_gbps"] = out["bytes"] / transfer / 1e3  # bytes per us / 1e3 = GB/s
    out["busbw_gbps"] = out["busbytes"] / transfer / 1e3
    out = out.sort_values("time_us", ascending=False, kind="stable").reset_index(drop=True)[TABLE_COLUMNS]
    out.attrs.update(ranks=int(calls["rank"].nunique()), matched=bool((calls["matched_ranks"] > 1).any()))
    return out


def collective_skew_by_rank(profile: Profile) -> pd.DataFrame:
    """Per rank: ``time_us``, ``skew_us`` and ``transfer_us`` of its collectives matched across ranks, and
    ``skew_share`` (skew / time). Empty when no collective is matched across ranks. Found once per profile
    scope (the rules on exchange and on distributed runs both read it); each caller gets its own copy."""
    return profile.cached("collectives.skew_by_rank", lambda: _skew_by_rank(profile)).copy()


def _skew_by_rank(profile: Profile) -> pd.DataFrame:
    calls = collective_calls(profile)
    calls = calls[calls["matched_ranks"] > 1]
    columns = ["rank", "time_us", "skew_us", "transfer_us", "skew_share"]
    if calls.empty:
        return pd.DataFrame(columns=columns)
    out = calls.groupby("rank")[["dur_us", "skew_us", "transfer_us"]].sum().reset_index()
    out = out.rename(columns={"dur_us": "time_us"})
    out["skew_share"] = out["skew_us"] / out["time_us"].where(out["time_us"] > 0)
    return out[columns]


def world_size_unseen(profile: Profile) -> int | None:
    """The run's number of ranks when the trace holds fewer of them (Kineto's ``distributedInfo.world_size``
    against the ranks read: one rank's file of an 8-rank job gives 8), else None. With ranks unseen, a
    collective's wait for the last rank cannot be measured: its whole time counts as transfer."""
    text = profile.meta.get("chrome.top.distributedInfo")
    if not text:
        return None
    try:
        world = int(json.loads(text).get("world_size") or 0)
    except (TypeError, ValueError, AttributeError):
        return None
    seen = len(pd.unique(rank_array(profile)[rank_array(profile) >= 0])) if profile.has("events") else 0
    return world if world > max(seen, 1) else None


def skew_spans(profile: Profile) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per device (its label as the time account names it: ``rank 1 gpu:1``), when it waited inside its
    collectives for the last rank to arrive and ran no compute meanwhile: each matched call's ``[start,
    start + skew_us]``, merged, less the device's compute. The time account holds this time in
    ``communication``; ``distributed.collective-skew`` prices it, and the exchange rules leave it out of what
    hiding communication behind compute would buy (hidden, a rank would still wait for the last one). Sorted,
    disjoint, read-only arrays; empty when no collective is matched across ranks."""
    return profile.cached("collectives.skew_spans", lambda: _skew_spans(profile))


def _skew_spans(profile: Profile) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    calls = collective_calls(profile)
    waited = calls[(calls["matched_ranks"] > 1) & (calls["skew_us"] > 0)]
    if waited.empty:
        return {}
    rows = waited["row"].to_numpy(dtype=np.int64)
    start = waited["start_us"].to_numpy(dtype=np.float64)
    end = start + waited["skew_us"].to_numpy(dtype=np.float64)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for activity in device_activities(profile):  # a handful of devices
        mine = np.isin(rows, activity.rows)
        if not mine.any():
            continue
        s, e = activity.without(*merge_intervals(start[mine], end[mine]), ("compute",))
        s, e = s[e > s], e[e > s]
        if s.size:
            s.setflags(write=False)
            e.setflags(write=False)
            out[activity.label] = (s, e)
    return out


def waits_for_rank(
    profile: Profile, late: pd.DataFrame, rank: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per device of the other ranks (labelled as :func:`skew_spans`), when it waited for ``rank`` to arrive at
    the collective of ``late`` (:func:`popprof.metrics.ranks.collective_late_start`): in each iteration, from
    the device's own start of it to ``rank``'s, where that is skew with no compute beside it (inside
    :func:`skew_spans`). Empty when no other rank started before it."""
    skew = skew_spans(profile)
    theirs = late[late["rank"] == rank].set_index("iteration")["start_us"]
    others = late[(late["rank"] != rank) & late["late_us"].notna() & late["iteration"].isin(theirs.index)]
    until = theirs.reindex(others["iteration"]).to_numpy(dtype=np.float64)
    start = others["start_us"].to_numpy(dtype=np.float64)
    waited = start < until
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for r in pd.unique(others["rank"][waited]):
        mine = waited & (others["rank"].to_numpy() == r)
        s, e = merge_intervals(start[mine], until[mine])
        for label, spans in skew.items():
            if label == f"rank {int(r)}" or label.startswith(f"rank {int(r)} "):
                ws, we = intersect_intervals(s, e, *spans)
                if ws.size:
                    out[label] = (ws, we)
    return out


def collectives_section(profile: Profile) -> dict | None:
    """The summary's ``collectives``: per collective type ``count``, ``time_us``, ``skew_us``,
    ``transfer_us``, ``bytes``, ``algbw_gbps``, ``busbw_gbps`` (``by_type``), the same per message size
    (``by_size``), how many ranks, and whether skew was measured; None without collectives."""
    table = collective_table(profile)
    if table.empty:
        return None
    # one grouping by type for every sum: the sums over the sizes known are those of the rows with bytes,
    # the others missing there (a sum skips them, as if the rows were left out)
    has_bytes = table["bytes"].notna().to_numpy()
    work = table.assign(
        sized_transfer_us=table["transfer_us"].where(has_bytes),
        busbytes=table["bytes"] * (table["busbw_gbps"] / table["algbw_gbps"]),
        sized_rows=has_bytes.astype(np.int64),
    )
    grouped = work.groupby("collective", sort=False)
    sums = grouped[["count", "time_us", "skew_us", "transfer_us", "sized_rows"]].sum()
    sized_sums = grouped[["bytes", "sized_transfer_us", "busbytes"]].sum(min_count=1)
    sized_sums = sized_sums[sums["sized_rows"].to_numpy() > 0]  # the types with a size known
    moved, timed, busmoved = sized_sums["bytes"], sized_sums["sized_transfer_us"], sized_sums["busbytes"]
    by_type = []
    for kind, row in sums.iterrows():
        transfer = float(timed.get(kind, np.nan))
        ok = kind in moved.index and transfer > 0
        by_type.append(
            {
                "collective": str(kind),
                "count": int(row["count"]),
                "time_us": float(row["time_us"]),
                "skew_us": float(row["skew_us"]),
                "transfer_us": float(row["transfer_us"]),
                "bytes": float(moved[kind]) if kind in moved.index else None,
                "algbw_gbps": float(moved[kind]) / transfer / 1e3 if ok else None,
                "busbw_gbps": _finite(float(busmoved[kind]) / transfer / 1e3) if ok else None,
            }
        )
    by_size = jsonout.plain(table)  # the values as computed (to_json rounds to 10 decimals)
    matched = bool(table.attrs["matched"])
    world = world_size_unseen(profile)
    unmeasured = "not measured: one rank's collectives (their whole time counts as transfer)"
    if world is not None:
        unmeasured += f"; the run had {world} ranks (distributedInfo): open every rank's trace together"
    out: dict = {
        "ranks": int(table.attrs["ranks"]),
        "skew": "measured across ranks" if matched else unmeasured,
        "by_type": by_type,
        "by_size": by_size,
    }
    if table["bytes"].isna().all():
        out["bytes"] = "not recorded: the collectives' args (message sizes) were not read or are absent"
    return out


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None
