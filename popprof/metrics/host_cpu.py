"""Were the host threads computing or waiting while a device idled: on CPU or off CPU in its gaps.

From the ``cpu_slices`` table (each host thread's on-CPU intervals: Nsight Systems' context switches) and,
when there, ``cpu_samples`` (CPU samples named by their leaf function). For each device (``device_activities``)
and each host thread of its rank with context switches, inside the device's window (its first to last
activity, the time account's ``device_span``) clipped to the thread's life (its first sched-in to its last
sched-out):

- ``on_cpu_us``: the thread's on-CPU time; ``off_cpu_us`` the rest of the window (waiting on I/O, a lock, a
  blocking call, or runnable but preempted);
- ``gaps_us``: the device's idle gaps (between its busy intervals, :func:`popprof.metrics.gaps.device_gaps`,
  the account's idle time) inside that window; ``gaps_on_cpu_us`` the thread's on-CPU time in them,
  ``gaps_off_cpu_us`` the rest;
- ``launches``: how many of the device's items the thread launched (launch calls joined by correlation);
  the thread that launched most comes first, the one whose stalls idle the device;
- ``functions`` / ``gap_functions``: the leaf functions of its CPU samples in the window / in the gaps, most
  sampled first, with their counts;
- with CPU samples in the gaps, their on-CPU time split by the call each sample was inside (``cpu_samples.call``,
  :mod:`popprof.trace.host_calls`; the reader sets it, a traced MPI call deciding the samples inside it):
  ``gaps_host_wait_us`` (spinning in a call blocking on the device), ``gaps_communication_us`` (polling in MPI,
  NCCL or a network library) and ``gaps_computing_us`` (the rest), each ``gaps_on_cpu_us`` times its share of
  the samples in the gaps (samples are taken on CPU); None without.

The headline, ``trace.host_gap_off_cpu_share``: of the devices' gaps, the share the thread that launched most of
each device's work spent off CPU, pooled over devices. ``docs/figures.md`` defines it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import units, words
from ..model.errors import NotEvaluated
from ..model.profile import Profile
from ..trace import masks
from ..trace.host_calls import COMMUNICATION, HOST_WAIT
from ..trace.intervals import DeviceActivity, device_activities, thread_label, thread_labels
from ..trace.spans import intersect_intervals, merge_intervals
from . import metric
from .gaps import device_gaps

#: functions listed per thread (the JSON and the text)
TOP_FUNCTIONS = 3


def host_cpu(profile: Profile, top: int = TOP_FUNCTIONS) -> list[dict]:
    """Per device and host thread, on CPU and off CPU in the device's window and in its idle gaps (see the
    module); ``[]`` without ``cpu_slices`` or device activity. Computed once per profile."""
    return profile.cached(f"host_cpu:{top}", lambda: _host_cpu(profile, top))


#: what a launching thread mostly did in its device's gaps: computing when at least half of the gaps, else the
#: largest of the ways it waited
GAP_VERDICTS = {
    "computing": "mostly computing, not waiting",
    "off_cpu": "mostly waiting off CPU (I/O, a lock, a sleeping call, or preempted), not computing",
    COMMUNICATION: "mostly waiting on CPU in communication calls (MPI, NCCL: polling), not computing",
    HOST_WAIT: "mostly waiting on CPU in calls blocking on the device (spinning), not computing",
}
#: the on-CPU parts in words, in the order they are named (``launchers_in_gaps``' ``on_cpu_parts``)
ON_CPU_PARTS = {
    "computing": "computing",
    COMMUNICATION: "in communication calls",
    HOST_WAIT: "in calls blocking on the device",
}


def launchers_in_gaps(profile: Profile) -> dict[tuple, dict]:
    """Per ``(rank, device)`` with idle gaps, the thread that launched most of its work (:func:`host_cpu`'s
    first row) with ``on_cpu_share`` (its on-CPU share of the gaps), ``on_cpu_parts`` (with the samples' calls, the
    on-CPU shares of the gaps computing, in communication calls and in calls blocking on the device; else None)
    and ``verdict`` (:data:`GAP_VERDICTS`, its key ``verdict_key``): what the summary's "What limits this run"
    and the rule ``host.device-gaps`` both say."""
    out: dict[tuple, dict] = {}
    for row in host_cpu(profile):
        key = (row["rank"], row["device"])
        if key in out or not row["gaps_us"]:
            continue
        parts = on_cpu_parts(row)
        on = row["gaps_on_cpu_us"] / row["gaps_us"]
        computing = on if parts is None else parts["computing"]
        waits = {
            "off_cpu": 1.0 - on,
            **({} if parts is None else {k: parts[k] for k in (COMMUNICATION, HOST_WAIT)}),
        }
        verdict = "computing" if computing >= 0.5 else max(waits, key=lambda k: waits[k])
        out[key] = {
            **row,
            "on_cpu_share": on,
            "on_cpu_parts": parts,
            "verdict_key": verdict,
            "verdict": GAP_VERDICTS[verdict],
        }
    return out


def on_cpu_parts(row: dict) -> dict[str, float] | None:
    """A :func:`host_cpu` row's on-CPU time in the gaps as shares of the gaps: ``computing``, ``communication``,
    ``host_wait`` (from its CPU samples' calls); None without samples with a call stack in the gaps."""
    gaps = row["gaps_us"]
    if row.get("gaps_computing_us") is None or not gaps:
        return None
    return {
        "computing": row["gaps_computing_us"] / gaps,
        COMMUNICATION: row["gaps_communication_us"] / gaps,
        HOST_WAIT: row["gaps_host_wait_us"] / gaps,
    }


def on_cpu_words(on_cpu_share: float, parts: dict[str, float] | None) -> str:
    """``on CPU 100.0 % (computing 77.0 %, in communication calls 23.0 %)``: a thread's on-CPU share of the
    gaps and its parts (:func:`parts_words`)."""
    text = f"{words.ON_CPU} {units.percent(on_cpu_share)}"
    named = parts_words(parts) if on_cpu_share else ""
    return f"{text} ({named})" if named else text


def parts_words(parts: dict[str, float] | None) -> str:
    """``computing 77.0 %, in communication calls 23.0 %``: the on-CPU parts (``on_cpu_parts``) of 0.05 % or
    more, each a share of the gaps; ``""`` without them."""
    if not parts:
        return ""
    return ", ".join(
        f"{name} {units.percent(parts[key])}" for key, name in ON_CPU_PARTS.items() if parts[key] >= 0.0005
    )


def _host_cpu(profile: Profile, top: int) -> list[dict]:
    slices = profile.get("cpu_slices")
    if slices is None or slices.empty:
        return []
    try:
        activities = device_activities(profile, by="device")
    except NotEvaluated:
        return []
    samples = _by_thread(profile.get("cpu_samples"))
    by_thread = _by_thread(slices)
    labels = thread_labels(profile)
    rows: list[dict] = []
    for act in activities:  # a handful of devices
        rank = -1 if act.rank is None else act.rank
        mine = [key for key in by_thread if key[0] == rank]
        if not mine:
            continue
        launched = _launches(profile, act)
        gaps = device_gaps(act, 0.0)
        threads = []
        for key in mine:  # one pass per thread (a few), each over its own rows
            _, pid, tid = key
            figures = _thread_row(act, gaps, by_thread[key], samples.get(key), top)
            if figures is None:
                continue
            threads.append(
                {
                    "rank": act.rank,
                    "device": act.device,
                    "pid": pid,
                    "tid": tid,
                    "thread": thread_label(labels, pid, tid),
                    "launches": int(launched.get((pid, tid), 0)),
                    **figures,
                }
            )
        # the thread that launched most first, then those that ran longest in the gaps
        threads.sort(key=lambda r: (-r["launches"], -r["gaps_on_cpu_us"], r["pid"], r["tid"]))
        rows += threads
    return rows


def _launches(profile: Profile, act: DeviceActivity) -> dict[tuple[int, int], int]:
    """How many of the device's items each host thread launched: its calls whose (rank, correlation) is one
    of the device's items'."""
    events = profile.events
    if act.rows is None or "correlation" not in events.columns:
        return {}
    host = np.flatnonzero(events["device"].isna().to_numpy() & events["correlation"].notna().to_numpy())
    if host.size == 0:
        return {}
    device_keys = masks.correlation_keys(profile, act.rows)
    keys = masks.correlation_keys(profile, host)
    calls = host[np.isin(keys, device_keys[device_keys >= 0]) & (keys >= 0)]
    counts = pd.DataFrame({"pid": events["pid"].to_numpy()[calls], "tid": events["tid"].to_numpy()[calls]})
    return {(int(p), int(t)): int(n) for (p, t), n in counts.value_counts().items()}


def _by_thread(table: pd.DataFrame | None) -> dict[tuple[int, int, int], pd.DataFrame]:
    """A per-thread table's rows by (rank, pid, tid), a missing rank -1, in one grouping (``{}`` when absent)."""
    if table is None or table.empty:
        return {}
    rank = table["rank"].fillna(-1).astype(np.int64)
    groups = table.groupby([rank, table["pid"], table["tid"]], sort=True).indices
    return {(int(r), int(p), int(t)): table.iloc[rows] for (r, p, t), rows in groups.items()}


def _thread_row(
    act: DeviceActivity,
    gaps: tuple[np.ndarray, np.ndarray],
    part: pd.DataFrame,
    samples: pd.DataFrame | None,
    top: int,
) -> dict | None:
    """One thread's figures in the device's window clipped to the thread's life (None when they miss);
    ``gaps`` the device's (:func:`popprof.metrics.gaps.device_gaps`)."""
    start = part["start_us"].to_numpy(dtype=np.float64)
    on_s, on_e = merge_intervals(start, start + part["dur_us"].to_numpy(dtype=np.float64))
    first, last = act.span
    lo, hi = max(first, float(on_s[0])), min(last, float(on_e[-1]))
    if hi <= lo:
        return None
    window = (np.array([lo]), np.array([hi]))
    on_us = _length(*intersect_intervals(*window, on_s, on_e))
    gs, ge = np.clip(gaps[0], lo, hi), np.clip(gaps[1], lo, hi)
    keep = ge > gs
    gs, ge = gs[keep], ge[keep]
    gaps_us = float((ge - gs).sum())
    gaps_on = _length(*intersect_intervals(gs, ge, on_s, on_e))
    row = {
        "window_us": hi - lo,
        "on_cpu_us": on_us,
        "off_cpu_us": max(hi - lo - on_us, 0.0),
        "gaps": int(gs.size),
        "gaps_us": gaps_us,
        "gaps_on_cpu_us": gaps_on,
        "gaps_off_cpu_us": max(gaps_us - gaps_on, 0.0),
        "gaps_off_cpu_share": (gaps_us - gaps_on) / gaps_us if gaps_us > 0 else None,
        "samples": 0,
        "functions": [],
        "gap_samples": 0,
        "gap_functions": [],
        "gaps_computing_us": None,
        "gaps_communication_us": None,
        "gaps_host_wait_us": None,
    }
    if samples is not None:
        ts = samples["ts_us"].to_numpy(dtype=np.float64)
        inside = (ts >= lo) & (ts <= hi)
        at = np.searchsorted(gs, ts, side="right") - 1
        in_gap = (at >= 0) & (ts < ge[np.maximum(at, 0)]) if gs.size else np.zeros(ts.size, dtype=bool)
        function = samples["function"]
        row.update(
            samples=int(inside.sum()),
            functions=_top_functions(function[inside], top),
            gap_samples=int(in_gap.sum()),
            gap_functions=_top_functions(function[in_gap], top),
        )
        if "call" in samples.columns:
            row.update(_split_by_calls(samples["call"][in_gap], row["gaps_on_cpu_us"]))
    return row


def _split_by_calls(call: pd.Series, on_cpu_us: float) -> dict[str, float]:
    """The gaps' on-CPU time split by the share of the gaps' samples inside each call (samples are taken on CPU,
    so each share estimates the on-CPU time in that call), of the samples with a call stack; the rest is
    computing. ``{}`` when no sample has a stack."""
    counts = call.value_counts(sort=False)
    n = int(counts.sum())
    if not n:
        return {}
    host_wait = on_cpu_us * int(counts.get(HOST_WAIT, 0)) / n
    communication = on_cpu_us * int(counts.get(COMMUNICATION, 0)) / n
    return {
        "gaps_host_wait_us": host_wait,
        "gaps_communication_us": communication,
        "gaps_computing_us": max(on_cpu_us - host_wait - communication, 0.0),
    }


def _length(start: np.ndarray, end: np.ndarray) -> float:
    return float((end - start).sum())


def _top_functions(functions: pd.Series, top: int) -> list[dict]:
    """The ``top`` most sampled functions with their sample counts (ties by name)."""
    counts = functions.value_counts(sort=False)
    counts = counts[counts > 0]
    order = sorted(counts.items(), key=lambda kv: (-int(kv[1]), str(kv[0])))[:top]
    return [{"function": str(f), "samples": int(n)} for f, n in order]


@metric(
    "trace.host_gap_off_cpu_share",
    "share",
    "share of the devices' idle gaps (inside each device's window) that the host thread launching most of "
    "each device's work spent off CPU (waiting: I/O, a lock, a blocking call, preempted), pooled over devices; "
    "from Nsight Systems' context switches",
    needs=("cpu_slices", "events"),
    better=None,
)
def gap_off_cpu_share(profile: Profile) -> float | None:
    firsts: dict[tuple, dict] = {}
    for row in host_cpu(profile):
        firsts.setdefault((row["rank"], row["device"]), row)  # the thread that launched most comes first
    gaps = sum(r["gaps_us"] for r in firsts.values())
    return sum(r["gaps_off_cpu_us"] for r in firsts.values()) / gaps if gaps > 0 else None
