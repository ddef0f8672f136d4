"""Gaps in device activity and the host work in them, and long host events while the device idles.

:func:`device_gaps` gives the holes between one device's busy intervals of at least a length;
:func:`attribute_gaps` intersects them with the host events of the device's rank (vectorised interval
overlap) and says which labels and threads filled them, and for how long the host was blocked waiting for the
device, and which gaps began while the host was blocked in such a call (:func:`gaps_after_waits`: the device
ran out of work with nothing launched ahead of the wait). :func:`long_idle_events` finds the innermost long
host events during which a device sat idle. The ``host.device-gaps`` and ``host.long-events`` rules judge
these figures; they compute none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..io.plural import plural
from ..model.errors import NotEvaluated
from ..model.profile import Profile
from ..trace.intervals import (
    DeviceActivity,
    HostEvents,
    device_activities,
    host_events,
    thread_keys,
    thread_label,
    thread_labels,
    thread_names,
)
from ..trace.spans import busy_within, merge_intervals, overlap_pairs, subtract_intervals, touching
from .account import launch_gaps
from .capture import GraphCapture, graph_capture


def device_gaps(activity: DeviceActivity, min_gap_us: float) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the gaps of at least ``min_gap_us`` between a device's busy intervals (inside its
    active span: leading and trailing idle time is no gap)."""
    gs, ge = activity.busy_end[:-1], activity.busy_start[1:]
    keep = (ge - gs) >= min_gap_us
    return gs[keep], ge[keep]


@dataclass(frozen=True)
class GapAttribution:
    """The gaps of one device and the host work in them.

    ``gaps``: one row per gap (``rank``, ``device``, ``gap``, ``start_us``, ``end_us``, ``dur_us``,
    ``host_thread_us``, ``top_thread``, ``top_label``, ``top_label_us``). ``idle_us``: the gaps' total;
    ``span_us``: the device's active span. ``by_label``: each host label's own time in the gaps (its overlap
    minus its children's), largest first; ``by_thread``: each thread's time in the gaps from its outermost
    events, indexed by (pid, tid), largest first, and ``top_threads`` the display names of the first ``top``.
    ``waited_us``: time the host spent blocked in calls waiting for the device during the gaps;
    ``waited_by``: that time per blocking call (indexed by its ``event_id``), largest first.
    ``drained_us``: the time of the gaps that began while the host was blocked in such a call
    (:func:`gaps_after_waits`; ``gaps["after_wait"]`` names the call, null for the others); ``drained_by``: that gap
    time per blocking call (indexed by its ``event_id``), largest first.
    """

    gaps: pd.DataFrame
    idle_us: float
    span_us: float
    by_label: pd.Series
    by_thread: pd.Series
    top_threads: list[str]
    waited_us: float
    waited_by: pd.Series
    drained_us: float
    drained_by: pd.Series


def attribute_gaps(
    activity: DeviceActivity,
    gs: np.ndarray,
    ge: np.ndarray,
    host: HostEvents,
    labels: dict,
    top: int,
) -> GapAttribution:
    """The gaps ``gs``..``ge`` of one device with the host work (``host``: its rank's events) in them."""
    t0, t1 = activity.span
    work = host.subset(~host.waits)
    ev_idx, gap_idx, overlap = overlap_pairs(work.start, work.start + work.dur, gs, ge)
    pairs = pd.DataFrame(
        {
            "gap": gap_idx,
            "event_id": work.event_id[ev_idx],
            "parent_id": work.parent_id[ev_idx],
            "depth": work.depth[ev_idx],
            "pid": work.pid[ev_idx],
            "tid": work.tid[ev_idx],
            "name": pd.Categorical.from_codes(np.asarray(work.name.codes)[ev_idx], dtype=work.name.dtype),
            "overlap_us": overlap,
        }
    )
    # Labels: each event's own time in the gap (its overlap minus its children's), so an enclosing event
    # counts only while no recorded child runs, and a long event with a few short children (a data loader's
    # __next__ around its copies) is named for the time it spent itself.
    stride = int(max(work.event_id.max(), 0)) + 1 if len(work) else 1
    key = pairs["gap"].to_numpy(np.int64) * stride + pairs["event_id"].to_numpy(np.int64)
    has_parent = pairs["parent_id"].notna().to_numpy()
    parent_key = pairs["gap"].to_numpy(np.int64)[has_parent] * stride + pairs["parent_id"].to_numpy()[
        has_parent
    ].astype(np.int64)
    in_children = pd.Series(overlap[has_parent]).groupby(parent_key).sum()
    own = overlap - in_children.reindex(key, fill_value=0.0).to_numpy()
    leaves = pairs.assign(overlap_us=own)[own > 0]
    # Threads: the outermost events in each gap only, so nested events do not count twice. Outermost among
    # the host work, not depth 0: under a ProfilerStep#N marker (left out of host work) every op has depth 1.
    parent_in_gap = np.zeros(len(pairs), dtype=bool)
    parent_in_gap[has_parent] = np.isin(parent_key, key)
    top_level = pairs[~parent_in_gap]
    by_label = (
        leaves.groupby("name", observed=True)["overlap_us"].sum().sort_values(ascending=False, kind="stable")
    )
    by_thread = (
        top_level.groupby(["pid", "tid"])["overlap_us"].sum().sort_values(ascending=False, kind="stable")
    )
    top_threads = [thread_label(labels, p, t) for p, t in by_thread.index[: int(top)]]
    # Host calls blocking on the device during the gaps (rules/host.py says what their time was).
    waits = host.subset(host.waits)
    wait_idx, _, wait_overlap = overlap_pairs(waits.start, waits.start + waits.dur, gs, ge)
    waited_by = (
        pd.Series(wait_overlap).groupby(np.asarray(waits.event_id)[wait_idx]).sum()
        if len(wait_idx)
        else pd.Series(dtype=np.float64)
    ).sort_values(ascending=False, kind="stable")
    after = gaps_after_waits(
        waits, gs, ge
    )  # per gap: the row in ``waits`` of the call it began in, -1 for none
    ended = after >= 0

    gaps = pd.DataFrame(
        {
            "rank": activity.rank,
            "device": activity.device,
            "gap": np.arange(len(gs)),
            "start_us": gs,
            "end_us": ge,
            "dur_us": ge - gs,
        }
    )
    host_busy = top_level.groupby("gap")["overlap_us"].sum()
    gaps["host_thread_us"] = host_busy.reindex(gaps["gap"], fill_value=0.0).to_numpy()
    gaps["top_thread"] = None
    if len(top_level):
        per_thread = (
            top_level.groupby(["gap", "pid", "tid"], sort=False)["overlap_us"]
            .sum()
            .reset_index()
            .sort_values(["gap", "overlap_us"], ascending=[True, False], kind="stable")
            .drop_duplicates("gap")
        )
        names = pd.Series(
            thread_names(labels, per_thread["pid"].to_numpy(), per_thread["tid"].to_numpy()),
            index=per_thread["gap"].to_numpy(),
        )
        gaps["top_thread"] = names.reindex(gaps["gap"]).to_numpy()
    if len(leaves):
        best = (
            leaves.groupby(["gap", "name"], sort=False, observed=True)["overlap_us"]
            .sum()
            .reset_index()
            .sort_values(["gap", "overlap_us"], ascending=[True, False], kind="stable")
            .drop_duplicates("gap")
        )
        gaps["top_label"] = best.set_index("gap")["name"].reindex(gaps["gap"]).to_numpy()
        gaps["top_label_us"] = best.set_index("gap")["overlap_us"].reindex(gaps["gap"]).fillna(0.0).to_numpy()
    else:
        gaps["top_label"], gaps["top_label_us"] = None, 0.0
    codes = np.full(len(gs), -1, dtype=np.int64)  # the call each gap began in (null: none)
    codes[ended] = np.asarray(waits.name.codes)[after[ended]]
    gaps["after_wait"] = pd.Categorical.from_codes(codes, dtype=waits.name.dtype)
    return GapAttribution(
        gaps=gaps,
        idle_us=float((ge - gs).sum()),
        span_us=float(t1 - t0),
        by_label=by_label,
        by_thread=by_thread,
        top_threads=top_threads,
        waited_us=float(wait_overlap.sum()),
        waited_by=waited_by,
        drained_us=float((ge - gs)[ended].sum()),
        drained_by=pd.Series((ge - gs)[ended])
        .groupby(np.asarray(waits.event_id)[after[ended]])
        .sum()
        .sort_values(ascending=False, kind="stable"),
    )


def gaps_after_waits(waits: HostEvents, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
    """For each gap ``gs``..``ge`` of one device, the index in ``waits`` (its rank's calls blocking on the
    device) of the call the host was blocked in when the device ran out of work: begun at or before the gap's
    start and returned inside the gap (the first begun, when several were). -1 for a gap that began with no
    such call in progress.

    Such a gap is the queue a synchronisation drained: the host waited for the device to finish before it
    launched what came next, so nothing could be queued ahead of the wait (a synchronous copy, ``.item()``,
    ``torch.cuda.synchronize()``). Gaps are disjoint, so each call returns inside at most one of them: the
    work is one sorted search over the calls. A call's return is compared with the gap's start as recorded,
    without a tolerance: one that returned before the device's last work ended did not wait for it.
    """
    out = np.full(len(gs), -1, dtype=np.int64)
    if not len(waits) or not len(gs):
        return out
    start, end = waits.start, waits.start + waits.dur
    gap = np.searchsorted(gs, end, side="right") - 1  # the last gap begun at or before each call's return
    inside = gap >= 0
    inside[inside] = (end[inside] <= ge[gap[inside]]) & (start[inside] <= gs[gap[inside]])
    calls = np.flatnonzero(inside)
    calls = calls[np.argsort(start[calls], kind="stable")]  # the first begun of a gap's calls is taken
    taken, first = np.unique(gap[calls], return_index=True)
    out[taken] = calls[first]
    return out


#: Columns of :func:`host_gap_table` (``GapAttribution.gaps``).
GAP_COLUMNS = [
    "rank",
    "device",
    "gap",
    "start_us",
    "end_us",
    "dur_us",
    "host_thread_us",
    "top_thread",
    "top_label",
    "top_label_us",
    "after_wait",
]


@dataclass(frozen=True)
class HostGaps:
    """One device's gaps as ``host.device-gaps`` judges them (:func:`host_gaps`).

    ``start`` and ``end``: the host's part of each gap of at least the minimum length (from the gap's start
    until the launch call of the work that ended it returned, :func:`split_gaps`), for the gaps whose work had
    a recorded launch (on an IPU, every gap whole); ``share``: their time over the device's window;
    ``waited_us``: the rest of those gaps, the work launched and waiting on a dependency; ``seen``: the gaps
    looked at, ``unknown``: those of them whose work has no recorded launch; ``captured``: the gaps left out
    because the host was capturing a graph in them (count, time), None for none.
    """

    activity: DeviceActivity
    start: np.ndarray
    end: np.ndarray
    share: float
    waited_us: float
    seen: int
    unknown: int
    captured: tuple[int, float] | None


def host_gaps(
    profile: Profile,
    activity: DeviceActivity,
    min_gap_us: float,
    platform: str,
    capture: GraphCapture | None,
) -> HostGaps | None:
    """The gaps of ``activity`` of at least ``min_gap_us`` and the host's part of each (:class:`HostGaps`),
    ``capture`` (:func:`popprof.metrics.capture.graph_capture`) left out; None when the device has no such
    gap. ``platform`` (``gpu`` or ``ipu``): a GPU gap whose work has no recorded launch is nobody's known part
    (the account's "idle, cause unknown"), never the host's; an IPU's gaps are the host's whole."""
    t0, t1 = activity.span
    gs, ge = device_gaps(activity, min_gap_us)
    captured = None
    if capture is not None and len(gs):  # the host was building a graph: not a host stall
        building = capture.in_gaps(activity.rank, gs, ge)
        if building.any():
            captured = (int(building.sum()), float((ge - gs)[building].sum()))
            gs, ge = gs[~building], ge[~building]
    if t1 <= t0 or len(gs) == 0:
        return None
    split = split_gaps(profile, activity, gs, ge)
    launched = split.call_row >= 0 if platform == "gpu" else np.ones(len(gs), dtype=bool)
    hs, he = gs, split.host_end
    mine = (he > hs) & launched
    return HostGaps(
        activity=activity,
        start=hs[mine],
        end=he[mine],
        share=float((he - hs)[mine].sum()) / (t1 - t0),
        waited_us=float(split.waiting_us(ge).sum()),
        seen=len(gs),
        unknown=int((~launched).sum()),
        captured=captured,
    )


def unlaunched_reason(seen: int, unknown: int) -> str | None:
    """Why the host's part of the gaps cannot be told when none of the ``seen`` gaps (``unknown`` of them
    without a recorded launch, :class:`HostGaps`) ends at launched work; None when some does."""
    if not seen or unknown != seen:
        return None
    return (
        f"needs the launches of the device's work: none of the {plural(seen, 'gap')} ends at work with a "
        "recorded launch (a TPU's XLA ops, work launched before the trace began), so whether the host held "
        "the device cannot be told; the time account shows that idle as 'cause unknown'"
    )


def host_gap_table(profile: Profile, min_gap_us: float, platform: str) -> pd.DataFrame:
    """Every device's host gaps (:func:`host_gaps`) with the host work in them (:func:`attribute_gaps`), one
    row per gap (:data:`GAP_COLUMNS`): what ``host.device-gaps`` attributes, on every device (its evidence
    holds the devices over its warning threshold). Empty without such gaps; NotEvaluated
    (:func:`unlaunched_reason`) when no gap ends at launched work."""
    capture = graph_capture(profile)
    host = host_events(profile)
    labels = thread_labels(profile)
    frames = []
    seen = unknown = 0
    for activity in device_activities(profile):
        found = host_gaps(profile, activity, min_gap_us, platform, capture)
        if found is not None:
            seen, unknown = seen + found.seen, unknown + found.unknown
        if found is None or not len(found.start):
            continue
        gaps = attribute_gaps(activity, found.start, found.end, host.of_rank(activity.rank), labels, 1).gaps
        frames.append(gaps.assign(after_wait=gaps["after_wait"].astype(object)))
    reason = unlaunched_reason(seen, unknown)
    if reason is not None:
        raise NotEvaluated(reason)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in GAP_COLUMNS})
    table = pd.concat(frames, ignore_index=True)[GAP_COLUMNS]
    table["after_wait"] = table["after_wait"].astype("category")  # the devices' categories as one
    table["rank"] = pd.array(table["rank"].tolist(), dtype="Int64")  # None on a trace without ranks
    return table


def long_idle_events(
    activity: DeviceActivity,
    host: HostEvents,
    idle_share: float,
    waits: HostEvents | None = None,
    min_us: float = 0.0,
) -> pd.DataFrame | None:
    """The innermost host events during which this device (or rank) sat idle for at least ``idle_share`` of
    each event's host work inside its active span, or None.

    An event's host work is its time less the time its thread spent inside ``waits`` (calls blocking on the
    device, e.g. a synchronous copy) during it: the host waiting for the device is not host work, so an event
    that is mostly such a wait (``aten::copy_`` around a blocking ``cudaMemcpy``) does not qualify, and the
    idle during the waits does not count. Events with less than ``min_us`` of host work do not qualify.

    Columns: ``event_id``, ``name``, ``pid``, ``tid``, ``start_us``, ``dur_us``, ``device_idle_us`` (the idle
    during its host work). Only the innermost qualifying events are given (the data-loader wait, not the
    training step around it).
    """
    t0, t1 = activity.span
    if t1 <= t0 or not len(host):
        return None
    s, d = host.start, host.dur
    e = s + d
    in_span = np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None)
    busy = activity.busy_within(np.maximum(s, t0), np.minimum(e, t1))
    busy = np.where(in_span > 0, busy, 0.0)
    idle = in_span - busy
    work = d
    if waits is not None and len(waits):
        blocked, blocked_idle = _blocked_within(activity, host, waits)
        work, idle = d - blocked, np.clip(idle - blocked_idle, 0.0, None)
    qualifies = (work > 0) & (work >= min_us) & (idle >= idle_share * work)
    # Report only the innermost qualifying events (the cause, e.g. the data-loader wait rather than the
    # training step around it): walk depth levels (not events), deepest first, marking parents of
    # qualifying events. Ancestors of a long event are long too, so they are all candidates.
    parent = pd.Index(host.event_id).get_indexer(host.parent_id)  # -1: no parent among these events
    covers = np.zeros(len(qualifies), dtype=bool)  # has a qualifying descendant
    for level in sorted(np.unique(host.depth).tolist(), reverse=True):
        if level == 0:
            continue
        at = np.flatnonzero(host.depth == level)
        par = parent[at][qualifies[at] | covers[at]]
        covers[par[par >= 0]] = True
    chosen = qualifies & ~covers
    if not chosen.any():
        return None
    return pd.DataFrame(
        {
            "event_id": host.event_id[chosen],
            "name": np.asarray(host.name.astype("str"))[chosen],
            "pid": host.pid[chosen],
            "tid": host.tid[chosen],
            "start_us": s[chosen],
            "dur_us": d[chosen],
            "device_idle_us": idle[chosen],
        }
    )


def _blocked_within(
    activity: DeviceActivity, host: HostEvents, waits: HostEvents
) -> tuple[np.ndarray, np.ndarray]:
    """Per event of ``host``: the time its thread spent in ``waits`` during it, and the device's idle time
    (inside its active span) during those waits. One pass per thread that waits."""
    t0, t1 = activity.span
    blocked = np.zeros(len(host))
    blocked_idle = np.zeros(len(host))
    s, e = host.start, host.start + host.dur
    wkey, hkey = thread_keys(waits.pid, waits.tid), thread_keys(host.pid, host.tid)
    for key in np.unique(wkey).tolist():  # a few threads
        mine = hkey == key
        if not mine.any():
            continue
        ws, we = waits.start[wkey == key], (waits.start + waits.dur)[wkey == key]
        inside = touching(ws, we, *merge_intervals(s[mine], e[mine]))  # only the waits in these events count
        if not inside.any():
            continue
        ws, we = merge_intervals(ws[inside], we[inside])
        blocked[mine] = busy_within(ws, we, s[mine], e[mine])
        a, b = np.maximum(s[mine], t0), np.maximum(np.minimum(e[mine], t1), np.maximum(s[mine], t0))
        # inside the window: the waits' time less the device's busy time during them
        device_busy = _busy_during(activity, ws, we, b) - _busy_during(activity, ws, we, a)
        blocked_idle[mine] = np.clip(busy_within(ws, we, a, b) - device_busy, 0.0, None)
    return blocked, blocked_idle


def _busy_during(activity: DeviceActivity, ws: np.ndarray, we: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The device's busy time during the sorted, disjoint intervals ``ws``..``we`` before each time ``t``
    (prefix sums over the intervals; no interval arithmetic per time)."""
    per = activity.busy_within(ws, we)
    prefix = np.concatenate([[0.0], np.cumsum(per)])
    k = np.searchsorted(ws, t, side="right")  # intervals starting at or before t
    last = np.maximum(k - 1, 0)
    cut = (k > 0) & (we[last] > t)  # t inside interval k - 1: leave out its part after t
    after = np.zeros(len(t))
    if cut.any():
        after[cut] = activity.busy_within(t[cut], we[last[cut]])
    return prefix[k] - after


def work_intervals(
    start: np.ndarray, end: np.ndarray, pid: np.ndarray, tid: np.ndarray, waits: HostEvents
) -> tuple[np.ndarray, np.ndarray]:
    """The union of the events ``start``..``end`` (on threads ``pid``, ``tid``) less the time their threads
    spent in ``waits`` (blocked on the device): the host work in them, sorted and disjoint."""
    us, ue = merge_intervals(start, end)
    if not len(waits):
        return us, ue
    mine = np.isin(thread_keys(waits.pid, waits.tid), thread_keys(pid, tid))
    ws, we = merge_intervals(waits.start[mine], (waits.start + waits.dur)[mine])
    return subtract_intervals(us, ue, ws, we)


def idle_spans_during(
    activity: DeviceActivity, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The device's idle intervals during the union of the intervals ``start``..``end`` inside its active span:
    sorted and disjoint ``(starts, ends)``; their total is :func:`idle_during`."""
    t0, t1 = activity.span
    us, ue = merge_intervals(np.maximum(start, t0), np.minimum(end, t1))
    keep = ue > us
    return subtract_intervals(us[keep], ue[keep], activity.busy_start, activity.busy_end)


def idle_during(activity: DeviceActivity, start: np.ndarray, end: np.ndarray) -> float:
    """The device's idle time during the union of the intervals ``start``..``end`` inside its active span
    (intervals overlapping in time, e.g. on several threads, count once)."""
    t0, t1 = activity.span
    us, ue = merge_intervals(np.maximum(start, t0), np.minimum(end, t1))
    return float((np.clip(ue - us, 0, None) - activity.busy_within(us, np.maximum(ue, us))).sum())


@dataclass(frozen=True)
class GapSplit:
    """Where each gap of one device (:func:`device_gaps`) stops being the host's.

    ``host_end``: per gap, the end of the time the host had not yet finished launching the work that ended
    the gap (the account's ``idle_host`` of it, and the launch call itself): the gap's end when no launch is
    recorded for that work. After it, up to the gap's end, the work had been launched and the device still
    did not run it: waiting on a dependency (an event another stream or the host records, a copy staged by
    the driver, work elsewhere). ``work_row`` and ``call_row``: the events rows of the work that ended the
    gap and of its launch call (-1 without one)."""

    host_end: np.ndarray
    work_row: np.ndarray
    call_row: np.ndarray

    def host_us(self, gs: np.ndarray) -> np.ndarray:
        """Per gap starting at ``gs``: the time before the host had launched its work."""
        return self.host_end - gs

    def waiting_us(self, ge: np.ndarray) -> np.ndarray:
        """Per gap ending at ``ge``: the time its work waited, launched, for a dependency."""
        return ge - self.host_end


def split_gaps(profile: Profile, activity: DeviceActivity, gs: np.ndarray, ge: np.ndarray) -> GapSplit:
    """Each gap ``gs``..``ge`` of ``activity`` split where the launch call of the work that ended it returned
    (:func:`popprof.metrics.account.launch_gaps`, which finds that work and call for every gap of the time
    account; a gap it does not hold, e.g. on a device without launches, is the host's whole)."""
    host_end = np.asarray(ge, dtype=np.float64).copy()
    work = np.full(len(ge), -1, dtype=np.int64)
    call = np.full(len(ge), -1, dtype=np.int64)
    ends, rows, calls, call_end = _launch_index(profile).get(
        (activity.rank, str(activity.device)), _NO_LAUNCHES
    )
    if len(ends) == 0 or len(ge) == 0:
        return GapSplit(host_end, work, call)
    at = np.minimum(np.searchsorted(ends, ge), len(ends) - 1)
    hit = ends[at] == ge
    work[hit], call[hit] = rows[at[hit]], calls[at[hit]]
    host_end[hit] = np.clip(call_end[at[hit]], gs[hit], ge[hit])
    return GapSplit(host_end, work, call)


_NO_LAUNCHES = (np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0))


def _launch_index(profile: Profile) -> dict:
    """Per (rank, device) of the account's launch gaps, sorted by the gap's end: the ends, the work's and the
    launch call's events rows and the call's end (found once per profile scope)."""

    def build() -> dict:
        launched = launch_gaps(profile)
        if launched.empty:
            return {}
        events = profile.events
        call_rows = launched["call_row"].to_numpy(dtype=np.int64)
        call_end = (
            events["start_us"].to_numpy(dtype=np.float64)[call_rows]
            + events["dur_us"].to_numpy(dtype=np.float64, na_value=0.0)[call_rows]
        )
        ranks = launched["rank"].to_numpy(dtype="float64", na_value=np.nan)
        devices = launched["device"].astype("category")
        out = {}
        for code, name in enumerate(devices.cat.categories):  # a handful of devices
            of_device = devices.cat.codes.to_numpy() == code
            for rank in np.unique(ranks[of_device]).tolist():
                mine = of_device & (np.isnan(ranks) if np.isnan(rank) else ranks == rank)
                ends = launched["end_us"].to_numpy(dtype=np.float64)[mine]
                order = np.argsort(ends, kind="stable")
                key = (None if np.isnan(rank) else int(rank), str(name))
                out[key] = (
                    ends[order],
                    launched["row"].to_numpy(dtype=np.int64)[mine][order],
                    call_rows[mine][order],
                    call_end[mine][order],
                )
        return out

    return profile.cached("gaps.launch_index", build)


#: Host calls that make a stream wait on an event (CUDA, HIP): the usual dependency a launched kernel waits on.
STREAM_WAITS = ("cudaStreamWaitEvent", "hipStreamWaitEvent")


def last_stream_wait(profile: Profile, call_row: int) -> tuple[str, float] | None:
    """The last stream-wait call (:data:`STREAM_WAITS`) on the thread of the launch call at events row
    ``call_row`` that started before it, as (name, start); None without one (or without the call)."""
    events = profile.events
    names = events["name"].array
    if call_row < 0 or not isinstance(names, pd.Categorical):
        return None
    codes = [i for i, c in enumerate(names.categories) if str(c) in STREAM_WAITS]
    if not codes:
        return None
    rows = np.flatnonzero(np.isin(np.asarray(names.codes), codes))
    pid, tid = events["pid"].to_numpy(), events["tid"].to_numpy()
    rows = rows[(pid[rows] == pid[call_row]) & (tid[rows] == tid[call_row])]
    starts = events["start_us"].to_numpy(dtype=np.float64)[rows]
    before = starts < float(events["start_us"].iloc[call_row])
    if not before.any():
        return None
    last = int(np.argmax(np.where(before, starts, -np.inf)))
    return str(names[rows[last]]), float(starts[last])
