"""Kernel launch overhead: per launch, the delay, the CPU launch cost, short kernels and the idle they cause.

The launches are HolisticTraceAnalysis's (``get_cuda_kernel_launch_stats``, HTA 0.5.0:
:func:`popprof.metrics.devices.launch_delays`): each launch call (``cudaLaunchKernel``, ``cudaMemcpyAsync``,
... and their HIP equivalents) joined with its GPU work through the correlation id. Per launch:

- ``launch_delay_us`` = work start - launch call end, clipped at 0 (HTA's launch delay);
- ``cpu_duration_us``, the launch call's duration (the CPU launch cost), and ``gpu_duration_us``;
- ``short``: HTA's short kernel, ``gpu_duration < cpu_duration`` with ``cpu_duration <= 50 us`` (its
  ``runtime_cutoff``): a kernel that runs for less time than the host takes to launch it, so a stream of them
  leaves the GPU waiting for launches;
- ``launch_idle_us``: the launch-bound idle time before the work, the part of the device's idle gap before
  it (from the end of the device's previous work, any stream) that follows the start of its launch call:
  ``min(gap, start - call start)``, at least 0. That is the time account's ``idle_launch`` of that gap
  (``popprof.metrics.account``), so the short kernels' sum never exceeds the account's part.

:func:`launch_overview` sums them for the summary and the ``host.launch-overhead`` rule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import gpu_work, masks
from .devices import LAUNCH_DELAY_COLUMNS, device_work, launch_pairs

#: HTA's ``runtime_cutoff`` (us): a launch call at most this long can launch a short kernel.
RUNTIME_CUTOFF_US = 50.0
#: HTA's ``launch_delay_cutoff`` (us): a longer launch delay is an outlier.
LAUNCH_DELAY_CUTOFF_US = 100.0

#: Columns of :func:`kernel_launches`.
LAUNCH_COLUMNS = [*LAUNCH_DELAY_COLUMNS, "short", "launch_idle_us"]


def correlation_keys(profile: Profile, rows: np.ndarray) -> np.ndarray:
    """One int64 per row of ``rows`` (positions in ``events``) for its (rank, correlation id), the launch
    correlation that joins a launch call to its GPU work (a missing rank counts as one rank of its own); -1
    where the row has no correlation id (filter on ``correlation`` before looking keys up). Only the rows
    asked for are read: the launch calls and the work a join looks up, not every event."""
    events = profile.events
    if "correlation" not in events.columns:
        return np.full(len(rows), -1, dtype=np.int64)
    correlation = events["correlation"].array[rows].to_numpy(dtype=np.float64, na_value=np.nan)
    return gpu_work.correlation_keys(masks.rank_array(profile)[rows], correlation)


def kernel_launches(profile: Profile) -> pd.DataFrame:
    """Every launch with its GPU work (columns :data:`LAUNCH_COLUMNS`, in the module's docstring), in
    :func:`popprof.metrics.devices.launch_delays`'s order; empty without launches."""
    return profile.cached("launches.kernel_launches", lambda: _kernel_launches(profile))


def _kernel_launches(profile: Profile) -> pd.DataFrame:
    work = device_work(profile)
    pairs = None if work is None else launch_pairs(profile, work)
    if pairs is None or pairs.call.size == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in LAUNCH_COLUMNS})
    start, end = work["start"].to_numpy(), work["end"].to_numpy()
    # the end of the device's previous work (any stream): work comes sorted by (rank, device, start)
    key = work["rank"].to_numpy() * (1 << 20) + np.asarray(work["device"].array.codes)
    reach = pd.Series(end).groupby(key, sort=False).cummax().to_numpy()
    previous = np.full(len(work), np.nan)
    previous[1:] = reach[:-1]
    previous[np.r_[True, key[1:] != key[:-1]]] = np.nan  # the device's first work has no gap before it
    gap = np.clip(np.nan_to_num(start - previous, nan=0.0), 0.0, None)
    call_start = profile.events["start_us"].to_numpy(dtype=np.float64)[pairs.call]
    item_start = start[pairs.item]
    launch_idle = np.clip(np.minimum(gap[pairs.item], item_start - call_start), 0.0, None)
    gpu = end[pairs.item] - item_start
    return pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.where(pairs.rank >= 0, pairs.rank, 0), pairs.rank < 0),
            "device": work["device"].array[pairs.item].remove_unused_categories(),
            "correlation": pairs.correlation.astype("int64"),
            "launch": profile.events["name"].array[pairs.call].remove_unused_categories(),
            "name": work["name"].array[pairs.item].remove_unused_categories(),
            "cpu_duration_us": pairs.cpu,
            "gpu_duration_us": gpu,
            "launch_delay_us": pairs.delay,
            "short": (pairs.cpu <= RUNTIME_CUTOFF_US) & (gpu < pairs.cpu),
            "launch_idle_us": launch_idle,
        }
    )


def launch_overview(profile: Profile) -> dict | None:
    """The run's launches in figures, None without launches: ``count``, ``cpu_us`` (launch calls' time),
    ``delay_median_us``, ``delay_p95_us``, ``delay_outliers`` (over HTA's 100 us), ``short_count``,
    ``short_gpu_us`` (the short kernels' device time), ``short_cpu_us`` (their launch calls' time),
    ``launch_idle_us`` (launch-bound idle before every launch) and ``short_launch_idle_us`` (before the
    short ones)."""
    overview = profile.cached("launches.overview", lambda: _overview(profile))
    return None if overview is None else dict(overview)


def _overview(profile: Profile) -> dict | None:
    frame = kernel_launches(profile)
    if frame.empty:
        return None
    short = frame["short"].to_numpy(dtype=bool)
    delay = frame["launch_delay_us"].to_numpy(dtype=np.float64)
    return {
        "count": len(frame),
        "cpu_us": float(frame["cpu_duration_us"].sum()),
        "delay_median_us": float(np.nanmedian(delay)),
        "delay_p95_us": float(np.nanpercentile(delay, 95)),
        "delay_outliers": int((delay > LAUNCH_DELAY_CUTOFF_US).sum()),
        "short_count": int(short.sum()),
        "short_gpu_us": float(frame["gpu_duration_us"].to_numpy()[short].sum()),
        "short_cpu_us": float(frame["cpu_duration_us"].to_numpy()[short].sum()),
        "launch_idle_us": float(frame["launch_idle_us"].sum()),
        "short_launch_idle_us": float(frame["launch_idle_us"].to_numpy()[short].sum()),
    }


def launches_section(profile: Profile) -> dict | None:
    """The summary's ``launches``: :func:`launch_overview` and HTA's cut-offs it used; None without launches."""
    overview = launch_overview(profile)
    if overview is None:
        return None
    return {
        **overview,
        "runtime_cutoff_us": RUNTIME_CUTOFF_US,
        "launch_delay_cutoff_us": LAUNCH_DELAY_CUTOFF_US,
    }
