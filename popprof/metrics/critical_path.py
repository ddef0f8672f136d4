"""The critical path of a GPU trace: per rank, the longest chain of dependent host and GPU work.

The model is HolisticTraceAnalysis's lightweight critical path (HTA 0.5.0, ``CriticalPathAnalysis``,
documented in its ``lightweight_critical_path_analysis`` page); popprof builds the same graph in its own
code and finds the longest path without networkx:

- **Nodes**: the start and the end of every host operator or runtime call (:data:`HOST_CHANNELS`; longer
  than 0; not a step marker) and of every piece of GPU work (an event on a stream) whose launch call is in
  the trace. As HTA: a ns-resolution rank in whole microseconds, the last ``ProfilerStep`` left out.
- **Host edges**: on each thread the nodes follow one another in call order (start A, start B, end B, end
  A); each step weighs the time between its two nodes, except the step into the end of a blocking call
  (:data:`BLOCKING_CALLS`: the host waits for the GPU there, which the synchronisation edges stand for),
  which weighs 0. Consecutive top-level operators are joined by a dependency of weight 0 (the host's own
  gaps between operators are never on the path).
- **GPU edges**: each piece of work weighs its duration. It waits either for its launch (a *launch
  delay* edge from the launch call's start, when nothing was queued on the stream at the launch and the
  previous work on the stream had ended by then) or for the previous work on its stream (a *kernel gap*
  edge from that work's end).
- **Synchronisation** (Kineto's ``cuda_sync`` events, weight 0): a ``Context Sync`` waits for the last work
  of every stream, a ``Stream Sync`` for its stream's, at the end of the runtime call that made it; an
  ``Event Sync`` for the work launched last on the recorded event's stream before the ``cudaEventRecord``;
  a ``Stream Wait Event`` makes the next work launched onto its stream wait for that work.

The path's length is the sum of its edges' weights. Each weighted edge is one *part*: ``host`` (host
operators), ``compute`` and ``communication`` (GPU work: communication is what the device map puts in
``exchange``, the one classification every command reads), ``launch_delay`` and ``kernel_gap``; HTA names
them ``cpu_bound``, ``gpu_compute_bound``, ``gpu_communication_bound``, ``gpu_kernel_launch_overhead`` and
``gpu_kernel_kernel_overhead``. Where popprof differs (documented in ``docs/traces.md``): GPU work launched by
any launch call counts (HTA's queue counts only the calls it lists); streams are told apart per device; an
edge of negative weight (clocks that disagree) weighs 0, where HTA refuses the graph below -1.

What making some work free would buy (:func:`_saving`) is the length less the heaviest path of the graph with
that work's edges weighing 0: the simulation HTA's documentation proposes (edit the graph, find the path again).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import orjson
import pandas as pd

from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import OPERATOR_CHANNELS, category_mask
from ..trace.gpu_work import has_fraction, hta_rounded, last_step_start
from ..trace.intervals import device_tracks
from .trace import parent_rows

#: Kineto categories of host operators (``Operator``: Kineto before 2022) and of runtime calls, the host
#: nodes of the graph. HTA's are ``cpu_op``, ``cuda_runtime`` and ``cuda_driver``; the older names, HIP's and
#: MTIA's runtime are popprof's additions (on a trace HTA reads, the same nodes).
RUNTIME_CHANNELS = ("cuda_runtime", "cuda_driver", "Runtime", "Driver", "hip_runtime", "mtia_runtime")
HOST_CHANNELS = OPERATOR_CHANNELS + RUNTIME_CHANNELS
#: Host calls that wait for the GPU: their end node is reached through synchronisation, not time. HTA's list
#: (its ``BLOCKING_SYNC_CALLS``: ``cudaMemcpyAsync`` and ``cudaEventQuery`` included, as it has them), with
#: the synchronous copies it lacks and the driver API's, HIP's and MTIA's names added; the device map's
#: ``host_wait`` (what the account and the summary call the host blocked on the device) is another set, for
#: another figure.
BLOCKING_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpyAsync",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventQuery",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuMemcpyDtoH",
    "cuMemcpyHtoD",
    "synchronizeStream",
    "synchronizeDevice",
    "synchronize",
)
#: The parts of a critical path, in the order they are shown.
PARTS = ("host", "compute", "communication", "launch_delay", "kernel_gap")
#: HTA's name of each part (``CPGraph.summary``'s ``bound_by``).
HTA_PARTS = {
    "host": "cpu_bound",
    "compute": "gpu_compute_bound",
    "communication": "gpu_communication_bound",
    "launch_delay": "gpu_kernel_launch_overhead",
    "kernel_gap": "gpu_kernel_kernel_overhead",
}
#: Edge kinds: time inside an event, a dependency, a launch delay, a gap between two kernels, a sync.
OPERATOR, DEPENDENCY, LAUNCH_DELAY, KERNEL_GAP, SYNC = range(5)
#: How many events on the path each rank lists (the longest first).
TOP_EVENTS = 5
#: A window of profiler steps: the first and the last step number, both included.
Steps = tuple[int, int]


def critical_paths(
    profile: Profile, top: int = TOP_EVENTS, steps: Steps | None = None, *, savings: bool = True
) -> list[dict]:
    """Per rank of a GPU trace, its critical path; empty without GPU work.

    ``steps``: ``(first, last)`` profiler step numbers (``ProfilerStep#N``, as the summary's iterations number
    them) to look at only the work of those steps, HTA's ``annotation="ProfilerStep"`` window: the host events
    that start from the first step's start to the last one's end (its host ``ProfilerStep#N`` markers on the
    rank) and the GPU work those launched; a rank without those steps has no path. None: the whole trace.

    Each item: ``rank``, ``length_us`` (the path's weight), ``window_us`` (from the first node to the last of the
    rank), ``parts_us`` and ``shares`` (each of :data:`PARTS`: its time on the path and its share of the length),
    ``events`` (host and GPU events on the path), ``clipped_edges`` (edges of negative weight counted as 0),
    ``sync_events`` (Kineto's ``cuda_sync`` events of the rank, None for a source that is no Chrome trace: without
    them, as in traces from before
    pytorch/pytorch#105187 (2023), no wait of the host on the GPU joins the two, and the path is the longer of the
    host's chain and the GPU's alone), ``unresolved_syncs`` (event synchronisations whose recorded work was not
    found: all of them in a trace read without args) and ``top``: the ``top`` names with the most time on the path
    (``name``, ``part``, ``count`` of its events on the path, ``us``, ``share``), and with ``steps``, ``steps``
    (``[first, last]``). ``savings`` False: without ``savings_us`` and the top names' ``saving_us`` (what
    making work free would buy: a pass over the graph each, about a quarter of the time of a step's path)."""
    events = profile.get("events")
    # only a PyTorch (Kineto) trace can hold cuda_sync events: elsewhere (XPlane, rocprofv3, nsys) their absence
    # says nothing about the trace's age, so ``sync_events`` is None there and the summary makes no note of it
    kineto = profile.source_format == "chrome_trace"
    out = []
    for path in _rank_paths(profile, steps):
        item = {"rank": path.rank, **_describe(events, path, top, savings)}
        item.update(
            window_us=path.window_us,
            clipped_edges=path.clipped,
            sync_events=path.syncs if kineto else None,
            unresolved_syncs=path.unresolved,
        )
        if steps is not None:
            item["steps"] = [int(steps[0]), int(steps[1])]
        out.append(item)
    return out


#: Columns of :func:`critical_path_edges`.
EDGE_COLUMNS = ["rank", "from_event_id", "from_end", "to_event_id", "to_end", "kind", "weight_us", "event_id"]
#: :func:`critical_path_edges`' ``kind`` of each edge kind.
EDGE_KINDS = ("operator", "dependency", "launch_delay", "kernel_gap", "sync")


def critical_path_edges(profile: Profile, steps: Steps | None = None) -> pd.DataFrame:
    """The edges of every rank's critical path, in order (:data:`EDGE_COLUMNS`): from which event's start or
    end (``from_end``) to which, the edge's ``kind`` (:data:`EDGE_KINDS`), its weight, and the event its time
    belongs to (``event_id``; missing for dependencies, syncs, launch delays and kernel gaps). ``steps``: as
    :func:`critical_paths`'."""
    events = profile.get("events")
    frames = []
    for path in _rank_paths(profile, steps):
        src, dst, weight, kind, owner = (column[path.path] for column in path.edges)
        ids = events["event_id"].to_numpy()[path.rows]
        owned = owner >= 0
        frames.append(
            pd.DataFrame(
                {
                    "rank": pd.array([path.rank] * src.size, dtype="Int64"),
                    "from_event_id": ids[path.nodes_of[src // 2]],
                    "from_end": src % 2 == 1,
                    "to_event_id": ids[path.nodes_of[dst // 2]],
                    "to_end": dst % 2 == 1,
                    "kind": pd.Categorical.from_codes(kind, EDGE_KINDS),
                    "weight_us": weight,
                    "event_id": pd.array(np.where(owned, ids[np.maximum(owner, 0)], 0), dtype="Int64"),
                }
            )
        )
        frames[-1].loc[~owned, "event_id"] = pd.NA
    if not frames:
        return pd.DataFrame({c: [] for c in EDGE_COLUMNS})
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class _RankPath:
    """One rank's graph and its heaviest path: ``rows`` (its events' positions), ``nodes_of`` (node event
    number -> position in ``rows``), ``edges`` (:meth:`_Graph.arrays`, negative weights made 0), ``path``
    (edge indices in order), ``on_stream`` (per position: GPU work)."""

    rank: int | None
    rows: np.ndarray
    nodes_of: np.ndarray
    edges: tuple[np.ndarray, ...]
    path: np.ndarray
    on_stream: np.ndarray
    window_us: float
    clipped: int
    syncs: int
    unresolved: int
    order: np.ndarray | None  # the edges in topological order (None: a cycle)


def _rank_paths(profile: Profile, steps: Steps | None = None) -> list[_RankPath]:
    """Every rank's graph and path (in the window of ``steps``), built once per profile scope."""
    key = "critical_path.paths" if steps is None else f"critical_path.paths.{int(steps[0])}-{int(steps[1])}"
    return profile.cached(key, lambda: _build(profile, steps))


def _build(profile: Profile, steps: Steps | None) -> list[_RankPath]:
    events = profile.get("events")
    if events is None or events.empty or not masks.stream_mask(profile).any():
        return []
    rank = masks.rank_array(profile)
    out = []
    for code in np.unique(rank):
        rows = np.flatnonzero(rank == code)
        label = events["rank"].iloc[rows[0]]
        result = _rank_path(profile, events, rows, None if pd.isna(label) else int(label), steps)
        if result is not None:
            out.append(result)
    return out


class _Graph:
    """Nodes (two per event: ``2k`` its start, ``2k + 1`` its end, ``k`` its node number) and weighted edges,
    added one by one (GPU work) or as arrays (host threads); :meth:`arrays` joins them."""

    def __init__(self, times: np.ndarray) -> None:
        self.times = times
        self._blocks: list[tuple[np.ndarray, ...]] = []
        self._one: tuple[list, ...] = ([], [], [], [], [])

    def add(self, src: int, dst: int, kind: int, owner: int = -1) -> None:
        """One edge; its weight is the time between its nodes, or 0 for a dependency or a sync."""
        weight = 0.0 if kind in (DEPENDENCY, SYNC) else float(self.times[dst] - self.times[src])
        for column, value in zip(self._one, (src, dst, weight, kind, owner), strict=True):
            column.append(value)

    def add_many(
        self, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, kind: np.ndarray, owner: np.ndarray
    ) -> None:
        """Many edges, weights given."""
        self._blocks.append((src, dst, weight, kind, owner))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``src``, ``dst``, ``weight``, ``kind``, ``owner`` (the event position an edge's time belongs to,
        -1: none) of every edge."""
        one = tuple(np.asarray(column) for column in self._one)
        dtypes = (np.int64, np.int64, np.float64, np.int64, np.int64)
        return tuple(  # type: ignore[return-value]
            np.concatenate([block[i] for block in self._blocks] + [one[i].astype(dtypes[i])]).astype(
                dtypes[i]
            )
            for i in range(5)
        )


def _rank_path(
    profile: Profile, events: pd.DataFrame, rows: np.ndarray, rank: int | None, steps: Steps | None = None
) -> _RankPath | None:
    """The critical path of one rank (``rows``: its events' positions), in the window of ``steps`` when given;
    None when it has no GPU work there."""
    names = events["name"].array
    channel = events["channel"].array
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    dur = events["dur_us"].to_numpy(dtype=np.float64, na_value=0.0)[rows]
    if has_fraction(start).any():  # a ns-resolution rank: HTA's whole microseconds (start up, end down)
        start, end = hta_rounded(start, start + dur)
        dur = end - start
    stream = events["stream"].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    correlation = events["correlation"].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    name = np.asarray(names[rows], dtype=object)
    is_host_channel = category_mask(channel, channel.categories.isin(HOST_CHANNELS))[rows]
    limit = last_step_start(events, rows)  # HTA leaves the last profiler step out
    kept = np.ones(len(rows), dtype=bool) if limit is None else ~(start >= limit)
    timed = np.isfinite(start) & np.isfinite(dur)  # an event without a time cannot be placed on a path
    # a step marker (``ProfilerStep#N``, an ``Operator`` in Kineto before 2022) spans work, it is none
    marker = masks.step_marker_mask(profile)[rows]
    host = is_host_channel & np.isnan(stream) & (dur > 0) & kept & timed & ~marker
    if steps is not None:  # HTA's window: host events starting inside it (GPU work follows its launch call)
        window = _step_window(events, rows, _host_markers(profile)[rows], start, dur, steps)
        if window is None:
            return None
        host &= (start >= window[0]) & (start <= window[1])
    sync_names = ("Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event")
    is_sync = (np.asarray(channel[rows], dtype=object) == "cuda_sync") & np.isin(name, sync_names)
    on_stream = ~np.isnan(stream) & (stream >= 0) & ~is_sync
    # a host call with the correlation id of GPU work launched it (its "runtime" call)
    call_of = _calls_by_correlation(
        correlation, host & np.isin(np.asarray(channel[rows], dtype=object), RUNTIME_CHANNELS)
    )
    work = on_stream & timed & (dur >= 0) & ~np.isnan(correlation) & np.isin(correlation, list(call_of))
    if not work.any():
        return None
    nodes_of = np.flatnonzero(host | work)  # positions (in rows) of the events that get nodes
    index = np.full(len(rows), -1, dtype=np.int64)
    index[nodes_of] = np.arange(nodes_of.size)
    times = np.empty(2 * nodes_of.size)
    times[0::2] = start[nodes_of]
    times[1::2] = start[nodes_of] + dur[nodes_of]
    graph = _Graph(times)
    blocking = np.isin(name, BLOCKING_CALLS)
    parent = _enclosing(parent_rows(profile), rows, index)
    _host_edges(graph, events, rows, np.flatnonzero(host), index, start, dur, blocking, parent)
    device = np.asarray(events["device"].array[rows], dtype=object)
    sync_args = _sync_args(events, rows, np.flatnonzero(is_sync))
    unresolved = _gpu_edges(
        graph,
        np.flatnonzero(work),
        np.flatnonzero(is_sync & ~np.isnan(correlation)),
        index,
        call_of,
        start,
        dur,
        stream,
        correlation,
        device,
        name,
        sync_args,
    )
    edges = graph.arrays()
    clipped = int((edges[2] < 0).sum())
    edges[2][edges[2] < 0] = 0.0  # clocks that disagree: the edge takes no time
    order = _topological_edges(graph.times, edges[0], edges[1])
    path = np.zeros(0, dtype=np.int64) if order is None else _longest_path(order, graph.times.size, edges)
    window = float(graph.times.max() - graph.times.min())
    syncs = int(is_sync.sum())
    return _RankPath(rank, rows, nodes_of, edges, path, on_stream, window, clipped, syncs, unresolved, order)


def path_steps(profile: Profile) -> list[int]:
    """The profiler step numbers a ``steps`` window of :func:`critical_paths` can name: those of the host
    ``ProfilerStep#N`` markers of any rank, less each rank's last where HTA leaves it out
    (:func:`popprof.trace.gpu_work.last_step_start`)."""
    events = profile.get("events")
    if events is None or events.empty:
        return []
    marker = masks.step_marker_mask(profile)
    if not marker.any():
        return []
    rank = masks.rank_array(profile)
    start = events["start_us"].to_numpy(dtype=np.float64)
    found: set[int] = set()
    host = _host_markers(profile)
    for code in np.unique(rank[marker]):
        rows = np.flatnonzero(rank == code)
        at = rows[np.flatnonzero(host[rows])]
        limit = last_step_start(events, rows)
        if limit is not None:
            at = at[~(start[at] >= limit)]
        found.update(_step_number(n) for n in events["name"].array[at])
    return sorted(found)


def _host_markers(profile: Profile) -> np.ndarray:
    """The host ``ProfilerStep#N`` markers among the profile's events (a marker's GPU-side copy, Kineto's
    ``gpu_user_annotation`` on a stream's track, left out); found once per profile scope."""

    def build() -> np.ndarray:
        device = masks.device_activity_mask(profile)
        return masks.step_marker_mask(profile) & ~device_tracks(profile.events, device=device)

    return profile.cached("critical_path.host_markers", build)


def _step_number(name: object) -> int:
    """N of a ``ProfilerStep#N`` name."""
    return int(str(name).rsplit("#", 1)[1])


def _step_window(
    events: pd.DataFrame,
    rows: np.ndarray,
    host_marker: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    steps: Steps,
) -> tuple[float, float] | None:
    """From the first start to the last end of the rank's host ``ProfilerStep#N`` markers (``host_marker``,
    per position in ``rows``: :func:`_host_markers`) with N in ``steps``; None when it has none."""
    at = np.flatnonzero(host_marker)
    names = np.asarray(events["name"].array[rows[at]], dtype=object)
    numbers = np.array([_step_number(n) for n in names], dtype=np.int64)
    at = at[(numbers >= steps[0]) & (numbers <= steps[1])]
    at = at[np.isfinite(start[at]) & np.isfinite(dur[at])]
    if not at.size:
        return None
    return float(start[at].min()), float((start[at] + dur[at]).max())


def _calls_by_correlation(correlation: np.ndarray, calls: np.ndarray) -> dict[float, int]:
    """Correlation id -> position of the host call that carries it (the first, if several do)."""
    at = np.flatnonzero(calls & ~np.isnan(correlation))
    keys, first = np.unique(correlation[at], return_index=True)
    return dict(zip(keys.tolist(), at[first].tolist(), strict=True))


def _host_edges(
    graph: _Graph,
    events: pd.DataFrame,
    rows: np.ndarray,
    host: np.ndarray,
    index: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    blocking: np.ndarray,
    parent: np.ndarray,
) -> None:
    """Each host thread's nodes in call order, joined as the module's docstring says (vectorised)."""
    if host.size == 0:
        return
    depth = events["depth"].to_numpy()[rows][host].astype(np.int64)
    pid, tid = events["pid"].to_numpy()[rows][host], events["tid"].to_numpy()[rows][host]
    thread = pd.factorize(pd.MultiIndex.from_arrays([pid, tid]))[0]
    node = np.concatenate([2 * index[host], 2 * index[host] + 1])
    time = np.concatenate([start[host], start[host] + dur[host]])
    opens = np.concatenate([np.ones(host.size, bool), np.zeros(host.size, bool)])
    tie = np.concatenate([depth, -depth])  # a parent opens before its child and closes after it
    where = np.concatenate([host, host])
    threads = np.concatenate([thread, thread])
    order = np.lexsort((tie, opens, time, threads))
    node, opens, where, threads, time = node[order], opens[order], where[order], threads[order], time[order]
    open_after = np.cumsum(np.where(opens, 1, -1))  # every thread's count returns to 0: one sum serves all
    same = threads[:-1] == threads[1:]
    src, dst = node[:-1][same], node[1:][same]
    src_opens, dst_opens = opens[:-1][same], opens[1:][same]
    src_at, dst_at = where[:-1][same], where[1:][same]
    between = open_after[:-1][same] == 0  # from a top-level end to the next top-level start
    # the time belongs to: the opening event (into a start or its own end), the closing one (end into end),
    # or between two siblings the event around them
    owner = np.where(src_opens, src_at, np.where(~dst_opens, dst_at, parent[src_at]))
    weight = time[1:][same] - time[:-1][same]
    weight[between | (~dst_opens & blocking[dst_at])] = 0.0  # a blocking call's wait is the sync edge's
    kind = np.where(between, DEPENDENCY, OPERATOR)
    graph.add_many(src, dst, weight, kind, np.where(between, -1, owner))


def _enclosing(parent_rows: np.ndarray, rows: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Per position in ``rows``: the position of the innermost enclosing event that is a node (climbing
    ``parent_rows``, the events' parents as row positions, past annotations); -1 at top level."""
    position = np.full(parent_rows.size, -1, dtype=np.int64)
    position[rows] = np.arange(rows.size)
    parent = parent_rows[rows]
    up = np.where(parent >= 0, position[np.maximum(parent, 0)], -1)
    while True:
        climb = (up >= 0) & (index[np.maximum(up, 0)] < 0)
        if not climb.any():
            return up
        above = parent_rows[rows[up[climb]]]
        up[climb] = np.where(above >= 0, position[np.maximum(above, 0)], -1)


def _sync_args(events: pd.DataFrame, rows: np.ndarray, syncs: np.ndarray) -> dict[int, dict]:
    """The args of the synchronisation events (the recorded event's correlation and stream), by position;
    empty when the trace was read without args."""
    if syncs.size == 0 or "args" not in events.columns:
        return {}
    texts = events["args"].to_numpy()[rows][syncs]
    out = {}
    for k, text in zip(syncs.tolist(), texts.tolist(), strict=True):
        if isinstance(text, str) and text:
            try:
                out[k] = orjson.loads(text)
            except orjson.JSONDecodeError:
                continue
    return out


def _gpu_edges(
    graph: _Graph,
    work: np.ndarray,
    syncs: np.ndarray,
    index: np.ndarray,
    call_of: dict[float, int],
    start: np.ndarray,
    dur: np.ndarray,
    stream: np.ndarray,
    correlation: np.ndarray,
    device: np.ndarray,
    name: np.ndarray,
    sync_args: dict[int, dict],
) -> int:
    """The GPU work's edges and the synchronisation edges, in the order the work ran (a sync event at its end).
    Returns how many event synchronisations (``Event Sync``, ``Stream Wait Event``) named no work found in the
    trace (all of them when it was read without args)."""
    key = {k: (device[k], stream[k]) for k in work.tolist()}
    launch = {k: call_of[correlation[k]] for k in work.tolist()}
    by_stream = _by_stream(work, key)
    queued_at_launch, queued_at_start = _queue_lengths(by_stream, launch, start)
    launches_by_stream = _launches_by_stream(by_stream, launch, start)

    def recorded(at: int) -> int | None:
        return _recorded_work(sync_args.get(at, {}), call_of, start, device, at, launches_by_stream)

    waits = _stream_waits(
        syncs, sync_args, call_of, start, correlation, name, device, stream, launches_by_stream
    )
    event_waits = int(np.isin(name[syncs], ("Stream Wait Event", "Event Sync")).sum())
    resolved = len(waits)
    items = np.concatenate([work, syncs])
    order_time = np.concatenate([start[work], start[syncs] + dur[syncs]])
    last: dict[tuple, int] = {}  # stream -> the end node of its last work so far
    waiting: dict[int, int] = {}  # work position -> end node of the work it waits for (Stream Wait Event)
    for waiter, source in waits:
        waiting[waiter] = 2 * int(index[source]) + 1
    for k in items[np.argsort(order_time, kind="stable")].tolist():
        if k not in key:  # a synchronisation event
            resolved += _sync_edges(
                graph, k, name[k], last, call_of, correlation, index, device, stream, recorded
            )
            continue
        begin, end = 2 * index[k], 2 * index[k] + 1
        graph.add(begin, end, OPERATOR, k)
        previous = last.get(key[k])
        call_start = start[launch[k]]
        wait_end = waiting.get(k)
        if wait_end is not None:
            graph.add(wait_end, begin, SYNC)
        if (
            queued_at_launch[k] == 1
            and queued_at_start[k] == 0
            and (previous is None or graph.times[previous] < call_start)
            and (wait_end is None or graph.times[wait_end] < call_start)
        ):
            graph.add(2 * index[launch[k]], begin, LAUNCH_DELAY)
        elif previous is not None and (wait_end is None or graph.times[wait_end] < graph.times[previous]):
            graph.add(previous, begin, KERNEL_GAP)
        last[key[k]] = end
    return event_waits - resolved


def _by_stream(work: np.ndarray, key: dict[int, tuple]) -> dict[tuple, list[int]]:
    """The work items of each stream (``key``: an item's (device, stream)), in the order of ``work``."""
    out: dict[tuple, list[int]] = {}
    for k in work.tolist():
        out.setdefault(key[k], []).append(k)
    return out


def _queue_lengths(
    by_stream: dict[tuple, list[int]], launch: dict[int, int], start: np.ndarray
) -> tuple[dict[int, int], dict[int, int]]:
    """Per work item, its stream's queue (launched, not yet started) just after its launch and just after
    it started: +1 at each launch call's start, -1 at each item's start, per stream, in time order."""
    at_launch: dict[int, int] = {}
    at_start: dict[int, int] = {}
    for items in by_stream.values():
        arr = np.asarray(items)
        times = np.concatenate([start[[launch[k] for k in items]], start[arr]])
        steps = np.concatenate([np.ones(arr.size, np.int64), -np.ones(arr.size, np.int64)])
        # at the same time a launch counts first (HTA's order there is its unstable sort's: docs/traces.md)
        order = np.argsort(times, kind="stable")
        running = np.empty(times.size, np.int64)
        running[order] = np.cumsum(steps[order])
        at_launch.update(zip(items, running[: arr.size].tolist(), strict=True))
        at_start.update(zip(items, running[arr.size :].tolist(), strict=True))
    return at_launch, at_start


def _launches_by_stream(
    by_stream: dict[tuple, list[int]], launch: dict[int, int], start: np.ndarray
) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """Per stream, its work's launch call start times (sorted) and the work items in that order."""
    sorted_out = {}
    for stream_key, items in by_stream.items():
        arr = np.asarray(items)
        times = start[[launch[k] for k in items]]
        order = np.argsort(times, kind="stable")
        sorted_out[stream_key] = (times[order], arr[order])
    return sorted_out


def _recorded_work(
    args: dict,
    call_of: dict[float, int],
    start: np.ndarray,
    device: np.ndarray,
    at: int,
    launches_by_stream: dict[tuple, tuple[np.ndarray, np.ndarray]],
) -> int | None:
    """The work an event record stands for: the last launched onto the recorded stream before the
    ``cudaEventRecord`` call (its correlation id in the sync event's args); None when not found."""
    record_corr, record_stream = args.get("wait_on_cuda_event_record_corr_id"), args.get("wait_on_stream")
    if record_corr is None or record_stream is None:
        return None
    record = call_of.get(float(record_corr))
    found = launches_by_stream.get((device[at], float(record_stream)))
    if record is None or found is None:
        return None
    times, items = found
    before = np.searchsorted(times, start[record], side="right") - 1
    return int(items[before]) if before >= 0 else None


def _stream_waits(
    syncs: np.ndarray,
    sync_args: dict[int, dict],
    call_of: dict[float, int],
    start: np.ndarray,
    correlation: np.ndarray,
    name: np.ndarray,
    device: np.ndarray,
    stream: np.ndarray,
    launches_by_stream: dict[tuple, tuple[np.ndarray, np.ndarray]],
) -> list[tuple[int, int]]:
    """``(waiting work, end node of the work it waits for)`` of each ``Stream Wait Event``: the next work
    launched onto the waiting stream after the ``cudaStreamWaitEvent`` call waits for the recorded work."""
    out = []
    for k in syncs.tolist():
        if name[k] != "Stream Wait Event" or k not in sync_args:
            continue
        source = _recorded_work(sync_args[k], call_of, start, device, k, launches_by_stream)
        call = call_of.get(correlation[k])
        found = launches_by_stream.get((device[k], stream[k]))
        if source is None or call is None or found is None:
            continue
        times, items = found
        after = np.searchsorted(times, start[call], side="left")
        if after < items.size:
            out.append((int(items[after]), source))
    return out


def _sync_edges(
    graph: _Graph,
    k: int,
    kind: str,
    last: dict[tuple, int],
    call_of: dict[float, int],
    correlation: np.ndarray,
    index: np.ndarray,
    device: np.ndarray,
    stream: np.ndarray,
    recorded,
) -> int:
    """The host call that made synchronisation event ``k`` waits (its end node) for the GPU work it names.
    Returns 1 for an ``Event Sync`` whose recorded work was found, else 0."""
    call = call_of.get(correlation[k])
    if call is None or index[call] < 0:
        return 0
    call_end = 2 * index[call] + 1
    if kind == "Context Sync":
        for end in list(last.values()):
            graph.add(end, call_end, SYNC)
    elif kind == "Stream Sync":
        end = last.get((device[k], stream[k]))
        if end is not None:
            graph.add(end, call_end, SYNC)
    elif kind == "Event Sync":
        source = recorded(k)
        if source is not None:
            graph.add(2 * int(index[source]) + 1, call_end, SYNC)
            return 1
    return 0


def _topological_edges(times: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """The edges (indices) in the order their sources come in a topological order of the nodes (Kahn's, the
    earliest first among those ready); None when the graph has a cycle (clocks so far apart that the events'
    order contradicts itself). One pass of :func:`_heaviest` over them finds the heaviest path."""
    n = times.size
    order_out = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order_out], np.arange(n + 1)).tolist()
    indegree_array = np.bincount(dst, minlength=n)
    first = np.flatnonzero(indegree_array == 0)
    ready = deque(first[np.argsort(times[first], kind="stable")].tolist())
    indegree = indegree_array.tolist()
    out_edges, dsts = order_out.tolist(), dst.tolist()
    order: list[int] = []
    seen = 0
    while ready:
        u = ready.popleft()
        seen += 1
        edges = out_edges[starts[u] : starts[u + 1]]
        order += edges
        for e in edges:
            v = dsts[e]
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    return np.asarray(order, dtype=np.int64) if seen == n else None


def _heaviest(
    order: np.ndarray, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n: int
) -> tuple[list, list]:
    """Per node the weight of the heaviest path ending there and the edge it arrives by (-1: none), from one
    pass over the edges in topological ``order``; ties keep the first edge found."""
    best = [0.0] * n
    via = [-1] * n
    edges = zip(order.tolist(), src[order].tolist(), dst[order].tolist(), weight[order].tolist(), strict=True)
    for e, u, v, w in edges:
        total = best[u] + w
        if total > best[v] or via[v] < 0:
            best[v] = total
            via[v] = e
    return best, via


def _longest_path(order: np.ndarray, n: int, edges: tuple[np.ndarray, ...]) -> np.ndarray:
    """The edges (indices, in order) of the heaviest path through a graph of ``n`` nodes (weights 0 or more),
    its edges in topological ``order`` (:func:`_topological_edges`)."""
    src, dst, weight = edges[0], edges[1], edges[2]
    best, via = _heaviest(order, src, dst, weight, n)
    node = int(np.argmax(best))
    path = []
    sources = src.tolist()
    while via[node] >= 0:
        path.append(via[node])
        node = sources[via[node]]
    return np.asarray(path[::-1], dtype=np.int64)


def _saving(path: _RankPath, free: np.ndarray, length: float) -> float:
    """How much shorter the critical path would be with the edges in ``free`` (a mask) weighing nothing: the
    length less the heaviest path of the changed graph (which may run elsewhere, so at most the freed edges'
    time on the old path)."""
    if path.order is None or not free.any():
        return 0.0
    src, dst, weight = path.edges[0], path.edges[1], path.edges[2]
    best, _ = _heaviest(path.order, src, dst, np.where(free, 0.0, weight), int(2 * path.nodes_of.size))
    return max(length - max(best, default=0.0), 0.0)


def _part_of(on_stream: np.ndarray, exchange: np.ndarray) -> np.ndarray:
    """Per event position: 0 host, 1 compute, 2 communication (:data:`PARTS`' first three)."""
    return np.where(~on_stream, 0, np.where(exchange, 2, 1))


def _describe(events: pd.DataFrame, rp: _RankPath, top: int, savings: bool = True) -> dict:
    """The path's length, its parts and shares, the names with the most time on it, and (``savings``) what
    making each part and each of those names free would take off the path (:func:`_saving`)."""
    all_kind, all_owner = rp.edges[3], rp.edges[4]
    src, dst, weight, kind, owner = (column[rp.path] for column in rp.edges)
    part_of = _part_of(rp.on_stream, _exchange(events, rp.rows))
    codes = np.asarray(events["name"].array.codes)[rp.rows]
    owned = (all_kind == OPERATOR) & (all_owner >= 0)
    edge_part = np.where(owned, part_of[np.maximum(all_owner, 0)], -1)
    edge_part[all_kind == LAUNCH_DELAY] = PARTS.index("launch_delay")
    edge_part[all_kind == KERNEL_GAP] = PARTS.index("kernel_gap")
    on_path = edge_part[rp.path]
    parts = {part: float(weight[on_path == code].sum()) for code, part in enumerate(PARTS)}
    length = float(sum(parts.values()))
    timed = (kind == OPERATOR) & (owner >= 0)
    frame = pd.DataFrame(
        {
            "code": codes[owner[timed]],
            "part": part_of[owner[timed]],
            "event": owner[timed],
            "us": weight[timed],
        }
    )
    grouped = frame.groupby(["code", "part"]).agg(us=("us", "sum"), count=("event", "nunique"))
    grouped = grouped.sort_values("us", ascending=False, kind="stable").head(top)
    edge_code = np.where(owned, codes[np.maximum(all_owner, 0)], -2)
    categories = events["name"].array.categories
    out = {
        "length_us": length,
        "parts_us": parts,
        "shares": {k: (v / length if length > 0 else None) for k, v in parts.items()},
        "events": int(np.unique(np.concatenate([src // 2, dst // 2])).size),
        "top": [
            {
                "name": str(categories[code]) if code >= 0 else "",
                "part": PARTS[part],
                "count": int(count),
                "us": float(us),
                "share": float(us) / length if length > 0 else None,
            }
            for (code, part), us, count in zip(grouped.index, grouped["us"], grouped["count"], strict=True)
        ],
    }
    if savings:
        out["savings_us"] = {
            part: (_saving(rp, edge_part == code, length) if parts[part] else 0.0)
            for code, part in enumerate(PARTS)
        }
        for item, (code, part) in zip(out["top"], grouped.index, strict=True):
            item["saving_us"] = _saving(rp, (edge_code == code) & (edge_part == part), length)
    return out


def _exchange(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """The events the device map puts in ``exchange`` (collectives and peer copies): communication."""
    category = events["device_category"].array
    return category_mask(category, category.categories == "exchange")[rows]
