"""Device activity over time: union of device intervals, idle gaps inside the active span.

Device activity is every event with a ``device_category`` (as in the rules of
:mod:`popprof.rules`): on an IPU, syncs are device time; on a GPU, a sync call is
the host waiting for device work that it overlaps. The *device-active span* runs
from the first device event's start to the last one's end; gaps inside it, when
no device event runs, are time the device sat idle while the host was busy
elsewhere: host stalls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

BUSY_CATEGORIES: tuple[str, ...] = ("compute", "exchange", "host_io", "sync", "other")


@dataclass(frozen=True)
class Union:
    """The union of a set of intervals."""

    first_start: float
    last_end: float
    busy: float           # total covered time
    gaps: np.ndarray       # lengths of the uncovered gaps between first_start and last_end

    @property
    def span(self) -> float:
        return self.last_end - self.first_start

    @property
    def idle(self) -> float:
        return float(self.gaps.sum())


def interval_union(start: np.ndarray, dur: np.ndarray) -> Union | None:
    """Union of intervals ``[start, start + dur)``, vectorised; ``None`` when there are none."""
    start = np.asarray(start, dtype=np.float64)
    dur = np.nan_to_num(np.asarray(dur, dtype=np.float64), nan=0.0)
    keep = ~np.isnan(start)
    start, dur = start[keep], dur[keep]
    if start.size == 0:
        return None
    order = np.argsort(start, kind="stable")
    start = start[order]
    end = start + np.maximum(dur[order], 0.0)
    reach = np.maximum.accumulate(end)
    gaps = start[1:] - reach[:-1]
    gaps = gaps[gaps > 0]
    first, last = float(start[0]), float(reach[-1])
    return Union(first, last, last - first - float(gaps.sum()), gaps)


def device_events(events: pd.DataFrame, categories: tuple[str, ...] = BUSY_CATEGORIES) -> pd.DataFrame:
    """Events whose device category is one of ``categories``."""
    return events[events["device_category"].isin(categories)]


def device_union(events: pd.DataFrame) -> Union | None:
    """Union of the device-busy events (see the module docstring)."""
    dev = device_events(events)
    return interval_union(dev["start_us"].to_numpy(), dev["dur_us"].to_numpy())
