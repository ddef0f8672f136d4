"""Vectorised interval arithmetic over trace events (numpy: sorting, searchsorted, bincount).

Used by the trace-based rules. Nothing here loops in Python over events:
every function is a handful of whole-array operations, so 10 million events
take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..profile import Profile
from .base import NotEvaluated

NO_DEVICE = ("needs device activity in the trace: no event has a device_category (map device events "
             "with [tool.popprof.device_map] when reading the trace)")


@dataclass
class DeviceActivity:
    """Device events of a trace and the merged intervals when the device was busy."""

    events: pd.DataFrame      # top-level device events: name, device_category, start_us, end_us
    busy_start: np.ndarray    # merged busy intervals, sorted and disjoint
    busy_end: np.ndarray

    @property
    def span(self) -> tuple[float, float]:
        """First start and last end of device activity."""
        return float(self.busy_start[0]), float(self.busy_end[-1])


def host_mask(events: pd.DataFrame) -> np.ndarray:
    """True for host events (no device_category)."""
    return events["device_category"].isna().to_numpy()


def device_activity(profile: Profile) -> DeviceActivity:
    """The device activity of a profile's trace; raises NotEvaluated when it has none."""
    events = profile.get("events")
    if events is None or events.empty:
        raise NotEvaluated("needs a trace (.pvti or Chrome trace JSON)")
    device = ~host_mask(events)
    if not device.any():
        raise NotEvaluated(NO_DEVICE)
    dev = events.loc[device, ["event_id", "parent_id", "depth", "name", "device_category", "start_us", "dur_us"]]
    nested = dev["depth"].to_numpy() > 0
    if nested.any():  # drop device events inside another device event (they would count twice)
        parents = dev["parent_id"].to_numpy(dtype="float64", na_value=np.nan)
        ids = dev["event_id"].to_numpy()
        inside = nested & np.isin(parents, ids)
        dev = dev.loc[~inside]
    start = dev["start_us"].to_numpy(dtype=np.float64)
    end = start + dev["dur_us"].to_numpy(dtype=np.float64)
    frame = pd.DataFrame({"name": dev["name"].to_numpy(), "device_category": dev["device_category"].to_numpy(),
                          "start_us": start, "end_us": end})
    busy_start, busy_end = merge_intervals(start, end)
    return DeviceActivity(frame, busy_start, busy_end)


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals: sorted, disjoint ``(starts, ends)``. Touching intervals merge."""
    if len(start) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def busy_before(busy_start: np.ndarray, busy_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Busy time of the merged intervals before each time in ``t`` (vectorised)."""
    t = np.asarray(t, dtype=np.float64)
    lengths = busy_end - busy_start
    prefix = np.concatenate([[0.0], np.cumsum(lengths)])
    k = np.searchsorted(busy_start, t, side="right")  # intervals starting at or before t
    total = prefix[k]
    has = k > 0
    last = np.clip(k - 1, 0, None)
    excess = np.where(has, np.clip(busy_end[last] - t, 0, None), 0.0)  # part of interval k-1 after t
    return total - excess


def busy_within(busy_start: np.ndarray, busy_end: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Busy time of the merged intervals inside each ``[a, b]``."""
    return busy_before(busy_start, busy_end, b) - busy_before(busy_start, busy_end, a)


def overlap_pairs(start: np.ndarray, end: np.ndarray, gap_start: np.ndarray,
                  gap_end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (event index, gap index, overlap) for events overlapping sorted, disjoint gaps."""
    first = np.searchsorted(gap_end, start, side="right")   # first gap ending after the event starts
    stop = np.searchsorted(gap_start, end, side="left")     # gaps starting before the event ends
    count = np.clip(stop - first, 0, None)
    total = int(count.sum())
    if total == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, np.empty(0)
    event = np.repeat(np.arange(len(start)), count)
    offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    gap = first[event] + offset
    overlap = np.minimum(end[event], gap_end[gap]) - np.maximum(start[event], gap_start[gap])
    keep = overlap > 0
    return event[keep], gap[keep], overlap[keep]


def window_sums(start: np.ndarray, end: np.ndarray, origin: float, width: float, count: int) -> np.ndarray:
    """Time each of ``count`` windows ``[origin + i*width, origin + (i+1)*width)`` overlaps the intervals.

    Intervals may overlap each other (their times add up). Intervals are
    assumed to lie within the windows' range (they are clipped to it).
    """
    s = np.clip(start, origin, origin + count * width)
    e = np.clip(end, origin, origin + count * width)
    ws = np.clip(np.floor((s - origin) / width).astype(np.int64), 0, count - 1)
    we = np.clip(np.floor((e - origin) / width).astype(np.int64), 0, count - 1)
    same = ws == we
    out = np.bincount(ws[same], weights=(e - s)[same], minlength=count)
    cross = ~same
    if cross.any():
        cs, ce, cws, cwe = s[cross], e[cross], ws[cross], we[cross]
        out += np.bincount(cws, weights=origin + (cws + 1) * width - cs, minlength=count)
        out += np.bincount(cwe, weights=ce - (origin + cwe * width), minlength=count)
        inner = np.bincount(cws + 1, minlength=count + 1) - np.bincount(cwe, minlength=count + 1)
        out += np.cumsum(inner)[:count] * width
    return out


def thread_labels(profile: Profile) -> dict[tuple[int, int], str]:
    """``(pid, tid) -> "thread_name (tid)"`` from the threads table (empty when absent)."""
    threads = profile.get("threads")
    if threads is None or threads.empty:
        return {}
    names = threads["thread_name"].fillna("").astype("str")
    return {(int(p), int(t)): (f"{n} ({t})" if n else f"{p}:{t}")
            for p, t, n in zip(threads["pid"], threads["tid"], names, strict=True)}


def thread_label(labels: dict[tuple[int, int], str], pid: int, tid: int) -> str:
    """The display name of one thread."""
    return labels.get((int(pid), int(tid)), f"{int(pid)}:{int(tid)}")
