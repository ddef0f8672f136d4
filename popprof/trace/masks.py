"""The masks and codes of a profile's events that many figures read, each computed once per profile.

A summary reads which events are device time, bookkeeping or host waits, and each event's rank, in a
dozen figures; each array here is :meth:`popprof.model.profile.Profile.cached` under a key named after
what it holds, so inside :func:`popprof.metrics.shared` (``summary``, ``report``) they share one array.
The arrays are read-only: a caller combines them into new ones, never changes them in place.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from . import gpu_work
from .activity import is_bookkeeping, is_device_activity, is_host_wait, is_step_marker


def rank_codes(events: pd.DataFrame) -> np.ndarray:
    """Each event's rank as int64 (-1 when unknown or the trace has no ranks)."""
    if "rank" not in events.columns:
        return np.full(len(events), -1, dtype=np.int64)
    rank = events["rank"]
    if isinstance(rank.array, pd.arrays.IntegerArray):  # the readers' Int64: no conversion to Float64
        codes = rank.array.to_numpy(dtype=np.int64, na_value=-1)  # (can be the array's own buffer)
        if codes.size and (codes.max() > 2**53 or codes.min() < -(2**53)):  # as through float64, rounded
            return rank.array.to_numpy(dtype=np.float64, na_value=-1.0).astype(np.int64)
        return codes.copy()
    return rank.astype("Float64").fillna(-1).to_numpy(dtype=np.float64).astype(np.int64)


def _frozen(values: np.ndarray) -> np.ndarray:
    values.setflags(write=False)
    return values


def device_activity_mask(profile: Profile) -> np.ndarray:
    """:func:`popprof.trace.activity.is_device_activity` of the profile's events."""
    return profile.cached("trace.device_activity_mask", lambda: _frozen(is_device_activity(profile.events)))


def bookkeeping_mask(profile: Profile) -> np.ndarray:
    """:func:`popprof.trace.activity.is_bookkeeping` of the profile's events."""
    return profile.cached("trace.bookkeeping_mask", lambda: _frozen(is_bookkeeping(profile.events)))


def host_wait_mask(profile: Profile) -> np.ndarray:
    """:func:`popprof.trace.activity.is_host_wait` of the profile's events."""
    return profile.cached("trace.host_wait_mask", lambda: _frozen(is_host_wait(profile.events)))


def step_marker_mask(profile: Profile) -> np.ndarray:
    """:func:`popprof.trace.activity.is_step_marker` of the profile's events."""
    return profile.cached("trace.step_marker_mask", lambda: _frozen(is_step_marker(profile.events)))


def stream_mask(profile: Profile) -> np.ndarray:
    """Events on a GPU stream (``events.stream`` set: kernels, copies, their annotations); all false for
    events without a stream column."""

    def build() -> np.ndarray:
        events = profile.events
        if "stream" not in events.columns:
            return _frozen(np.zeros(len(events), dtype=bool))
        return _frozen(events["stream"].notna().to_numpy())

    return profile.cached("trace.stream_mask", build)


def rank_array(profile: Profile) -> np.ndarray:
    """:func:`rank_codes` of the profile's events."""
    return profile.cached("trace.rank_codes", lambda: _frozen(rank_codes(profile.events)))


def correlation_keys(profile: Profile, rows: np.ndarray) -> np.ndarray:
    """One int64 per row of ``rows`` (positions in ``events``) for its (rank, correlation id), the launch
    correlation that joins a launch call to its GPU work (a missing rank counts as one rank of its own); -1
    where the row has no correlation id (filter on ``correlation`` before looking keys up). Only the rows
    asked for are read: the launch calls and the work a join looks up, not every event."""
    events = profile.events
    if "correlation" not in events.columns:
        return np.full(len(rows), -1, dtype=np.int64)
    correlation = events["correlation"].array[rows].to_numpy(dtype=np.float64, na_value=np.nan)
    return gpu_work.correlation_keys(rank_array(profile)[rows], correlation)
