"""The critical path drawn on the timeline (``popprof timeline --critical-path``), like HTA's overlay.

From :func:`popprof.metrics.critical_path.critical_path_edges`, never a path of its own:

- the events on the path: every event an edge of it starts or ends at;
- one flow (an arrow: a ``s`` / ``f`` pair, ``cat`` and ``name`` :data:`FLOW_NAME`) per edge whose two
  events are on different threads or streams: in this model launch delays (call to work) and
  synchronisations (work to the host call that waited, or to work on another stream); an edge within one
  thread or stream (time in an event, a dependency, a kernel gap) is already in view as its slices.

An arrow starts (ends) at the edge's node: its event's start or end. The viewer binds the ``s`` to the
slice open at its time and the ``f`` (binding point ``e``) to the one enclosing its time; a node at an
event's end is therefore drawn :data:`NUDGE_US` before it (or the closest time before it a float holds: at
epoch microseconds, 1 ns is below a float's step), never before the event's start.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace.timeline import Overlay
from .critical_path import Steps, critical_path_edges

#: The arg that marks an event on the critical path, and the flows' ``cat`` and ``name``.
MARK = FLOW_NAME = "critical_path"
#: How far before an event's end an arrow at that end is drawn (1 ns: the finest a viewer keeps).
NUDGE_US = 0.001


def critical_path_overlay(profile: Profile, steps: Steps | None = None) -> Overlay | None:
    """The critical path of every rank (of the work of ``steps`` only, when given: first and last profiler
    step) as an :class:`~popprof.trace.timeline.Overlay`: the events on it marked, an arrow per edge across
    threads or streams; None without a critical path (no GPU work launched in the trace)."""
    edges = critical_path_edges(profile, steps)
    if edges.empty:
        return None
    events = profile.get("events")
    assert events is not None  # a path has events
    on_path = np.unique(np.concatenate([edges["from_event_id"], edges["to_event_id"]]).astype(np.int64))
    flows = _flows(events, edges, _first_id(profile.get("flows")))
    return Overlay(mark=MARK, event_ids=on_path, flows=flows)


def _node(events: pd.DataFrame, ids: np.ndarray, at_end: np.ndarray) -> pd.DataFrame:
    """Each node's event's ``pid``, ``tid`` and time (``ts_us``: its start, or just before its
    end, inside the event)."""
    position = pd.Index(events["event_id"]).get_indexer(ids)
    rows = events.iloc[position]
    start = rows["start_us"].to_numpy(dtype=np.float64)
    dur = rows["dur_us"].to_numpy(dtype=np.float64, na_value=0.0)
    end = start + dur
    inside = np.maximum(np.minimum(end - NUDGE_US, np.nextafter(end, -np.inf)), start)
    return pd.DataFrame(
        {
            "pid": rows["pid"].to_numpy(),
            "tid": rows["tid"].to_numpy(),
            "ts_us": np.where(at_end, inside, start),
        }
    )


def _flows(events: pd.DataFrame, edges: pd.DataFrame, first: int) -> pd.DataFrame:
    """An ``s`` / ``f`` pair per edge across threads or streams, in the flows table's columns, pair by pair
    in path order; ids ``first`` and up."""
    tail = _node(events, edges["from_event_id"].to_numpy(), edges["from_end"].to_numpy(dtype=bool))
    head = _node(events, edges["to_event_id"].to_numpy(), edges["to_end"].to_numpy(dtype=bool))
    across = (tail["pid"] != head["pid"]).to_numpy() | (tail["tid"] != head["tid"]).to_numpy()
    tail, head = tail[across].reset_index(drop=True), head[across].reset_index(drop=True)
    ids = [str(n) for n in range(first, first + len(tail))]
    tail = tail.assign(phase="s", id=ids, binding=None)
    head = head.assign(phase="f", id=ids, binding="e")
    both = pd.concat([tail, head]).sort_index(kind="stable").reset_index(drop=True)  # s, f, s, f, ...
    return both.assign(name=FLOW_NAME, channel=FLOW_NAME)


def _first_id(flows: pd.DataFrame | None) -> int:
    """One above the largest numeric flow id of the trace (1 without one): the path's arrows never share
    an id with the trace's own."""
    if flows is None or flows.empty:
        return 1
    numbers = pd.to_numeric(flows["id"].astype(object), errors="coerce")
    return 1 if numbers.isna().all() else int(numbers.max()) + 1
