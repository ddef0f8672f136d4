"""CUDA / HIP graph capture in a GPU trace: launches recorded into a graph, not run.

While a stream captures (``cudaStreamBeginCapture`` ... ``cudaStreamEndCapture``, what ``torch.cuda.graph``,
vLLM's and SGLang's graph runners and Inductor's cudagraph trees do once, before the graph's replays), each
launch call on it adds a node to a graph: the kernel does not run, so the trace holds the call and its
correlation id but no device work with that id. The device is idle meanwhile because the host is building
the graph, not because the host is slow to submit work: a one-off cost of CUDA graphs, which the idle rules
leave out (``docs/rules.md``, "Graph capture").

A trace records capture when it holds a stream-capture or graph-instantiation call (:data:`CAPTURE_CALLS`);
then a kernel launch call (:data:`KERNEL_LAUNCHES`) whose (rank, correlation id) has no device work is a
*captured launch*. Without those calls, launches without work are not counted as captured (a trace cut
before its last kernels ran has them too).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import category_mask
from ..trace.intervals import DeviceActivity

#: Host calls only stream capture and graph building make (CUDA runtime and driver, HIP): a stream's capture
#: begins and ends, a graph is instantiated. (``*StreamIsCapturing`` and ``*StreamGetCaptureInfo`` are not
#: among them: frameworks ask them of streams that do not capture too.)
CAPTURE_CALLS = (
    "cudaStreamBeginCapture",
    "cudaStreamBeginCapture_v2",
    "cudaStreamEndCapture",
    "cudaGraphInstantiate",
    "cudaGraphInstantiateWithFlags",
    "cuStreamBeginCapture",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiate",
    "cuGraphInstantiateWithFlags",
    "hipStreamBeginCapture",
    "hipStreamEndCapture",
    "hipGraphInstantiate",
    "hipGraphInstantiateWithFlags",
)
#: Kernel launch calls (runtime, driver, HIP). Copies and memsets are left out: a trace outside capture often
#: holds a ``cudaMemsetAsync`` with no device work (nothing to set), so only kernels count as captured.
KERNEL_LAUNCHES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
    "hipExtModuleLaunchKernel",
)


@dataclass(frozen=True)
class GraphCapture:
    """What a trace shows of graph capture: the capture calls by name, the kernel launch calls, and the captured
    ones (rows in ``events``, with their start and rank code, sorted by start)."""

    calls: dict[str, int]
    launches: int
    rows: np.ndarray
    start: np.ndarray
    rank: np.ndarray

    @property
    def captured(self) -> int:
        """How many kernel launch calls were captured (recorded into a graph, not run)."""
        return len(self.rows)

    def of_rank(self, rank: int | None) -> np.ndarray:
        """The captured launches' starts of one rank (all of them for a trace without ranks), sorted."""
        if rank is None or not (self.rank >= 0).any():
            return self.start
        return self.start[self.rank == rank]

    def in_gaps(self, rank: int | None, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
        """Per device gap ``[gs, ge)``: whether a captured launch of ``rank`` was called inside it."""
        starts = self.of_rank(rank)
        return np.searchsorted(starts, ge, side="left") > np.searchsorted(starts, gs, side="left")


def graph_capture(profile: Profile) -> GraphCapture | None:
    """The trace's graph capture (:class:`GraphCapture`), or None when it records none (no capture call, or
    no launch call without device work). Built once per profile scope."""
    return profile.cached("capture.graph_capture", lambda: _graph_capture(profile))


def _graph_capture(profile: Profile) -> GraphCapture | None:
    events = profile.get("events")
    if events is None or events.empty or "correlation" not in events.columns:
        return None
    names = events["name"].array
    host = ~masks.stream_mask(profile)
    capture = category_mask(names, names.categories.isin(CAPTURE_CALLS)) & host
    if not capture.any():
        return None
    launch_rows = np.flatnonzero(
        category_mask(names, names.categories.isin(KERNEL_LAUNCHES))
        & host
        & events["correlation"].notna().to_numpy()
    )
    work_rows = np.flatnonzero(masks.stream_mask(profile) & events["correlation"].notna().to_numpy())
    ran = np.isin(masks.correlation_keys(profile, launch_rows), masks.correlation_keys(profile, work_rows))
    rows = launch_rows[~ran]
    if rows.size == 0:
        return None
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    order = np.argsort(start, kind="stable")
    rows, start = rows[order], start[order]
    calls = pd.Series(np.asarray(names[capture], dtype=object)).value_counts()
    return GraphCapture(
        calls={str(k): int(v) for k, v in calls.items()},
        launches=len(launch_rows),
        rows=rows,
        start=start,
        rank=masks.rank_array(profile)[rows],
    )


def capture_section(profile: Profile) -> dict | None:
    """The summary's ``graph_capture``: the capture calls by name, the kernel launch calls and how many of them
    were captured (recorded into a graph, not run); None without capture."""
    found = graph_capture(profile)
    if found is None:
        return None
    return {"calls": dict(found.calls), "launches": found.launches, "captured_launches": found.captured}


def capture_as_busy(activity: DeviceActivity, found: GraphCapture | None) -> DeviceActivity:
    """``activity`` with each gap in which its rank's host captured a graph counted as busy: the device's idle
    as the idle rules judge it (a graph being built is not a host stall). The same activity when there is
    none."""
    if found is None or len(activity.busy_start) < 2:
        return activity
    building = found.in_gaps(activity.rank, activity.busy_end[:-1], activity.busy_start[1:])
    if not building.any():
        return activity
    return replace(
        activity,
        busy_start=np.concatenate((activity.busy_start[:1], activity.busy_start[1:][~building])),
        busy_end=np.concatenate((activity.busy_end[:-1][~building], activity.busy_end[-1:])),
    )
