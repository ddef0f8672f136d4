"""Kernel launch overhead: per launch, the delay, the CPU launch cost, short kernels and the idle they cause.

The launches are HolisticTraceAnalysis's (``get_cuda_kernel_launch_stats``, HTA 0.5.0:
:func:`popprof.metrics.devices.launch_delays`): each launch call (``cudaLaunchKernel``, ``cudaMemcpyAsync``,
... and their HIP equivalents) joined with its GPU work through the correlation id. Per launch:

- ``launch_delay_us`` = work start - launch call end, clipped at 0 (HTA's launch delay);
- ``cpu_duration_us``, the launch call's duration (the CPU launch cost), and ``gpu_duration_us``;
- ``short``: HTA's short kernel, ``gpu_duration < cpu_duration`` with ``cpu_duration <= 50 us`` (its
  ``runtime_cutoff``): a kernel that runs for less time than the host takes to launch it, so a stream of them
  leaves the GPU waiting for launches;

The launch-bound idle is the time account's, not a second reckoning of it: :func:`launch_idle` is the
account's ``idle_launch`` of each device gap that ended at launched work (:func:`popprof.metrics.account.launch_gaps`:
the part of the gap after the launch call of the work that ended it started), over every step (HTA's
launch statistics above leave the last out), with that work's name and whether it is a short kernel (the
criterion above, on the trace's own times). So ``launch_idle_us`` is the account's ``idle_launch`` (less its
device sync events' time), and the short kernels' part of it never exceeds it.

What launching short kernels costs the device is more than that part: in a gap before a short kernel the
host had often not yet submitted it (Python, the framework's dispatch, the launch call itself: the
account's ``idle_host``), and a CUDA graph or fusion removes the whole gap. ``short_gaps_us`` is that:
the idle gaps shorter than :data:`SHORT_GAP_US` that ended at a short kernel, whole (host not submitting
and launch or dependency). Longer gaps are ``host.device-gaps``' (its ``min_gap_us`` is the same 1 ms): host
work between device runs, which a graph of the kernels does not remove.

:func:`launch_overview` sums them for the summary and the ``host.launch-overhead`` rule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import gpu_work
from .account import launch_gaps
from .devices import LAUNCH_DELAY_COLUMNS, device_work, launch_pairs

#: HTA's ``runtime_cutoff`` (us): a launch call at most this long can launch a short kernel.
RUNTIME_CUTOFF_US = 50.0
#: HTA's ``launch_delay_cutoff`` (us): a longer launch delay is an outlier.
LAUNCH_DELAY_CUTOFF_US = 100.0

#: Columns of :func:`kernel_launches`.
LAUNCH_COLUMNS = [*LAUNCH_DELAY_COLUMNS, "short"]
#: Columns of :func:`launch_idle`.
LAUNCH_IDLE_COLUMNS = [
    "rank",
    "device",
    "name",
    "launch",
    "short",
    "start_us",
    "end_us",
    "idle_host_us",
    "idle_launch_us",
    "short_gap",
]
#: A device gap shorter than this (us) before a short kernel is launch overhead (``short_gaps_us``); a longer
#: one is host work between device runs (``host.device-gaps``, whose ``min_gap_us`` defaults to it).
SHORT_GAP_US = 1000.0


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
    item_start = start[pairs.item]
    gpu = np.maximum(
        end[pairs.item] - item_start, 0.0
    )  # HTA's rounding ends an item under 1 us before it starts
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
            "short": is_short(pairs.cpu, gpu),
        }
    )


def is_short(cpu_us: np.ndarray, gpu_us: np.ndarray) -> np.ndarray:
    """HTA's short kernel: it runs for less time than its launch call, a call of at most
    :data:`RUNTIME_CUTOFF_US`."""
    return (cpu_us <= RUNTIME_CUTOFF_US) & (gpu_us < cpu_us)


def launch_idle(profile: Profile) -> pd.DataFrame:
    """The account's split of each gap that ended at launched work (:data:`LAUNCH_IDLE_COLUMNS`): ``rank``,
    ``device``, the ``name`` of the work that ended the gap and of its ``launch`` call (the host call of its
    correlation: driver calls such as ``cuLaunchKernel`` too, which HTA's launch statistics leave out), whether
    it is a ``short`` kernel (:func:`is_short` on the trace's own durations of the work and its launch call; a
    device-side sync event, such as the ``Context Sync`` of a ``cudaDeviceSynchronize``, never is),
    the gap (``start_us``, ``end_us``), ``idle_host_us``, ``idle_launch_us`` and ``short_gap`` (under
    :data:`SHORT_GAP_US` and ended by a short kernel: the gaps of ``short_gaps_us``).
    Empty without GPU gaps ended by launched work."""
    return profile.cached("launches.launch_idle", lambda: _launch_idle(profile))


def _launch_idle(profile: Profile) -> pd.DataFrame:
    gaps = launch_gaps(profile)
    events = profile.events if len(gaps) else None
    if events is None:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in LAUNCH_IDLE_COLUMNS})
    row, call = gaps["row"].to_numpy(), gaps["call_row"].to_numpy()
    duration = events["dur_us"].array
    gpu = duration[row].to_numpy(dtype=np.float64, na_value=0.0)
    cpu = duration[call].to_numpy(dtype=np.float64, na_value=0.0)
    # a device-side sync event (Context Sync, Stream Sync: a synchronising call's record on the device) is no
    # kernel: the gap before it is the host synchronising, which no CUDA graph or fusion removes
    sync = np.asarray(events["device_category"].array[row] == "sync", dtype=bool)
    short = is_short(cpu, gpu) & ~sync
    host, launch = gaps["idle_host_us"].to_numpy(), gaps["idle_launch_us"].to_numpy()
    return pd.DataFrame(
        {
            "rank": gaps["rank"].array,
            "device": gaps["device"].array,
            "name": events["name"].array[row].remove_unused_categories(),
            "launch": events["name"].array[call].remove_unused_categories(),
            "short": short,
            "start_us": gaps["start_us"].to_numpy(),
            "end_us": gaps["end_us"].to_numpy(),
            "idle_host_us": host,
            "idle_launch_us": launch,
            "short_gap": short & (host + launch < SHORT_GAP_US),
        }
    )


def launch_overview(profile: Profile) -> dict | None:
    """The run's launches in figures, None without launches: ``count``, ``cpu_us`` (launch calls' time),
    ``delay_median_us``, ``delay_p95_us``, ``delay_outliers`` (over HTA's 100 us), ``short_count``,
    ``short_gpu_us`` (the short kernels' device time), ``short_cpu_us`` (their launch calls' time),
    ``launch_idle_us`` (the launch-bound idle: :func:`launch_idle`, every step), ``short_launch_idle_us``
    (the part before short kernels) and ``short_gaps_us`` (the gaps under :data:`SHORT_GAP_US` before short
    kernels, whole)."""
    overview = profile.cached("launches.overview", lambda: _overview(profile))
    return None if overview is None else dict(overview)


def _overview(profile: Profile) -> dict | None:
    frame = kernel_launches(profile)
    if frame.empty:
        return None
    short = frame["short"].to_numpy(dtype=bool)
    delay = frame["launch_delay_us"].to_numpy(dtype=np.float64)
    idle = launch_idle(profile)
    short_kernel = idle["short"].to_numpy(dtype=bool)
    short_gap = idle["short_gap"].to_numpy(dtype=bool)
    whole = idle["idle_host_us"].to_numpy() + idle["idle_launch_us"].to_numpy()
    return {
        "count": len(frame),
        "cpu_us": float(frame["cpu_duration_us"].sum()),
        "delay_median_us": float(np.nanmedian(delay)),
        "delay_p95_us": float(np.nanpercentile(delay, 95)),
        "delay_outliers": int((delay > LAUNCH_DELAY_CUTOFF_US).sum()),
        "short_count": int(short.sum()),
        "short_gpu_us": float(frame["gpu_duration_us"].to_numpy()[short].sum()),
        "short_cpu_us": float(frame["cpu_duration_us"].to_numpy()[short].sum()),
        "launch_idle_us": float(idle["idle_launch_us"].sum()),
        "short_launch_idle_us": float(idle["idle_launch_us"].to_numpy()[short_kernel].sum()),
        "short_gaps_us": float(whole[short_gap].sum()),
    }


def launches_section(profile: Profile) -> dict | None:
    """The summary's ``launches``: :func:`launch_overview`, HTA's cut-offs it used, and whether HTA's
    statistics left the last profiler step out (``last_step_left_out``; the launch-bound idle never does);
    None without launches."""
    overview = launch_overview(profile)
    if overview is None:
        return None
    return {
        **overview,
        "runtime_cutoff_us": RUNTIME_CUTOFF_US,
        "launch_delay_cutoff_us": LAUNCH_DELAY_CUTOFF_US,
        "last_step_left_out": gpu_work.leaves_last_step_out(profile.events),
    }
