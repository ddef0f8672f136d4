"""Frequent GPU kernel sequences under an operator: fusion candidates, as HolisticTraceAnalysis (HTA) 0.5.0's
``get_frequent_cuda_kernel_sequences`` finds them.

For one rank: the host events whose name **contains** ``operator`` are the candidates; only the shallowest of
them (the least call depth) that launched at least ``min_length`` kernels are kept, so an operator called
inside another of the same name is not counted twice. A kept call's **pattern** is its name then the names of
the kernels launched beneath it (by itself or any descendant, joined through the launch correlation), in
start order. Per pattern: ``count`` (calls), ``gpu_us`` (the summed duration of those kernels: HTA's
``kernel_dur_sum``) and ``cpu_us`` (the summed duration of the calls). Rows are sorted by count (descending)
then pattern text, as HTA's.

HTA's definitions, followed here (docs/traces.md, "Frequent kernel sequences"):

- **Kernels** are the events on a stream whose stream id is above 0 (so Kineto's ``Context Sync`` on stream
  4294967295 and a ``Stream Wait Event`` count, as in HTA) joined to a host call of the rank by correlation (the
  last such call when several share one id).
- **Depth**: popprof's nesting (``parent_id``, ``depth``: containment on each host thread). As HTA's call graph,
  when the rank has exactly one thread naming a ``ProfilerStep#`` and one other naming ``autograd::``, the
  backward thread's top-level calls that lie within a ``## backward ##`` annotation of the main thread (else a
  ``ProfilerStep#``) hang under it: their depth and ancestry continue from it.
- **Last profiler step left out** when the trace names two or more ``ProfilerStep`` s: host events starting at
  or after the rank's last step start are dropped, and so are the kernels they launched
  (:mod:`popprof.trace.gpu_work`'s window).
- A kernel whose own name contains ``operator`` is a candidate too (one kernel, its launch's depth + 1), and
  events HTA's call graph leaves out (stream events not linked to a launch) have depth -1: when such an event
  matches, the least depth is -1 and nothing is found, as HTA.

Vectorised: the kernels reach their candidate by walking up the parent rows one level per step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import gpu_work as gpu_work_module
from ..trace import masks
from . import trace as trace_metrics

#: the columns of :func:`kernel_sequences`
COLUMNS: tuple[str, ...] = ("rank", "pattern", "operator", "kernels", "count", "gpu_us", "cpu_us")
#: HTA joins a pattern's names with this
SEPARATOR = "|"


def _empty() -> pd.DataFrame:
    return pd.DataFrame({column: [] for column in COLUMNS}).astype(
        {"rank": "int64", "pattern": object, "operator": object, "kernels": "int64", "count": "int64"}
    )


def _name_mask(names: pd.Series, rows: np.ndarray, test) -> np.ndarray:
    """Boolean per row of ``rows``: ``test`` (a pandas ``.str`` method's result on an Index of names) holds for
    its name; on a categorical (the readers' dtype) one test per distinct name, not per row."""
    if not rows.size:
        return np.zeros(0, dtype=bool)
    if isinstance(names.dtype, pd.CategoricalDtype):
        hit = np.asarray(test(names.array.categories.astype(str)), dtype=bool)
        codes = np.asarray(names.array.codes)[rows]
        return np.where(codes >= 0, hit[np.maximum(codes, 0)], False)
    return np.asarray(test(pd.Index(names.iloc[rows].astype(str))), dtype=bool)


def _contains(names: pd.Series, text: str, rows: np.ndarray) -> np.ndarray:
    """Boolean per row of ``rows``: its name contains ``text``."""
    return _name_mask(names, rows, lambda index: index.str.contains(text, regex=False))


def _names_starting(names: pd.Series, rows: np.ndarray, prefix: str) -> np.ndarray:
    """Boolean per row of ``rows``: its name starts with ``prefix``."""
    return _name_mask(names, rows, lambda index: index.str.startswith(prefix))


def _top_rows(parent: np.ndarray, rows: np.ndarray, steps: int) -> np.ndarray:
    """The outermost ancestor (or itself) of each of ``rows`` by ``parent`` (-1: none)."""
    top = rows.copy()
    for _ in range(steps + 1):
        up = parent[top]
        going = up >= 0
        if not going.any():
            break
        top[going] = up[going]
    return top


def _link_backward(
    events: pd.DataFrame,
    mine: np.ndarray,
    host: np.ndarray,
    parent: np.ndarray,
    depth: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
) -> None:
    """HTA's link of the backward thread to the main thread, in place on ``parent`` and ``depth``: see the
    module's notes. ``mine``: the rank's rows; ``host``: its kept host rows (boolean over all events)."""
    rows = np.flatnonzero(mine & host)
    if not rows.size:
        return
    names = events["name"]
    pid, tid = events["pid"].to_numpy()[rows], events["tid"].to_numpy()[rows]
    threads = pd.DataFrame({"pid": pid, "tid": tid, "row": rows})
    main_thread = _names_starting(names, rows, "ProfilerStep#")
    backward = _contains(names, "autograd::", rows)
    labels: dict[tuple, str] = {}
    for key, group in threads.groupby(["pid", "tid"], sort=False).indices.items():
        if main_thread[group].any():
            labels[key] = "main"
        elif backward[group].any():
            labels[key] = "bwd"
    if len(labels) != 2 or sorted(labels.values()) != ["bwd", "main"]:
        return
    by_label = {label: key for key, label in labels.items()}
    on_main = (pid == by_label["main"][0]) & (tid == by_label["main"][1])
    on_bwd = (pid == by_label["bwd"][0]) & (tid == by_label["bwd"][1])
    main_rows = rows[on_main]
    annotations = main_rows[_names_starting(names, main_rows, "## backward ##")]
    if not annotations.size:
        annotations = main_rows[_names_starting(names, main_rows, "ProfilerStep#")]
    bwd_rows = rows[on_bwd]
    tops = bwd_rows[parent[bwd_rows] < 0]
    if not (annotations.size and tops.size):
        return
    annotations = annotations[np.argsort(start[annotations], kind="stable")]
    holder = np.full(tops.size, -1, dtype=np.int64)
    for row in annotations.tolist():  # few annotations: one per step
        inside = (holder < 0) & (start[tops] >= start[row]) & (end[tops] <= end[row])
        holder[inside] = row
    linked = holder >= 0
    if not linked.any():
        return
    shift = np.zeros(len(parent), dtype=np.int64)
    shift[tops[linked]] = depth[holder[linked]] + 1
    top_of = _top_rows(parent, bwd_rows, int(depth[bwd_rows].max()))
    depth[bwd_rows] += shift[top_of]
    parent[tops[linked]] = holder[linked]


def kernel_sequences(
    profile: Profile, operator: str, min_length: int = 3, rank: int | None = None
) -> pd.DataFrame:
    """The frequent kernel sequences under the host calls whose name contains ``operator`` (HTA 0.5.0's
    ``get_frequent_cuda_kernel_sequences``; definitions in the module's notes).

    Columns (:data:`COLUMNS`): ``rank``; ``pattern``, the operator's name then its kernels' names joined by
    ``"|"`` (HTA's text); ``operator`` (the calls' name); ``kernels`` (kernels in the pattern); ``count``;
    ``gpu_us``; ``cpu_us``. ``rank`` None: the trace's lowest rank (HTA's default rank 0 on a one-rank run).
    Sorted by count descending, then pattern. Empty when no call matches or none launched enough kernels.
    """
    events = profile.get("events")
    needed = {"correlation", "stream", "depth", "name", "start_us", "dur_us", "pid", "tid"}
    if not operator or events is None or events.empty or not needed <= set(events.columns):
        return _empty()
    rank_of = masks.rank_array(profile)
    if rank is None:
        rank = int(rank_of.min()) if rank_of.size else -1
    mine = rank_of == rank
    if not mine.any():
        return _empty()
    stream_set = masks.stream_mask(profile)
    stream = events["stream"].array.to_numpy(dtype=np.float64, na_value=np.nan)
    start = events["start_us"].to_numpy(dtype=np.float64)
    dur = events["dur_us"].to_numpy(dtype=np.float64)
    dur = np.where(np.isnan(dur), 0.0, dur)
    end = start + dur
    host = ~stream_set & ~masks.bookkeeping_mask(profile) & mine
    if gpu_work_module.leaves_last_step_out(events):
        limit = gpu_work_module.last_step_start(events, np.flatnonzero(mine & ~stream_set))
        if limit is not None:
            host &= ~(start >= limit)
    has_correlation = events["correlation"].notna().to_numpy()
    # kernels: stream above 0, joined to a kept host call by correlation (the last call of an id)
    launch_rows = np.flatnonzero(host & has_correlation)
    launch_keys = pd.Index(masks.correlation_keys(profile, launch_rows))
    if not launch_keys.is_unique:
        keep = ~launch_keys.duplicated(keep="last")
        launch_rows, launch_keys = launch_rows[keep], launch_keys[keep]
    with np.errstate(invalid="ignore"):
        kernel_candidates = np.flatnonzero(mine & stream_set & has_correlation & (stream > 0))
    position = launch_keys.get_indexer(masks.correlation_keys(profile, kernel_candidates))
    kernel_rows = kernel_candidates[position >= 0]
    kernel_launch = launch_rows[position[position >= 0]]
    # HTA's call graph: popprof's parents and depths, the backward thread hung under the main one
    parent = trace_metrics.parent_rows(profile).astype(np.int64, copy=True)
    depth = events["depth"].to_numpy().astype(np.int64, copy=True)
    _link_backward(events, mine, host, parent, depth, start, end)
    names = events["name"]
    # candidates: kept host calls and linked kernels; other stream events of the rank are outside the graph
    kept = host.copy()
    kept[kernel_rows] = True
    hta_depth = np.full(len(events), -1, dtype=np.int64)
    hta_depth[host] = depth[host]
    hta_depth[kernel_rows] = depth[kernel_launch] + 1
    if not gpu_work_module.leaves_last_step_out(events):
        kept |= mine & stream_set  # HTA keeps them (depth -1) when it filters no step
    kept_rows = np.flatnonzero(kept)
    candidates = kept_rows[_contains(names, operator, kept_rows)]
    if not candidates.size:
        return _empty()
    least = hta_depth[candidates].min()
    roots = candidates[hta_depth[candidates] == least]
    # each kernel's root: walk up from its launch (a kernel root owns itself only)
    is_root = np.zeros(len(events), dtype=bool)
    is_root[roots] = True
    owner = np.full(kernel_rows.size, -1, dtype=np.int64)
    own = is_root[kernel_rows]
    owner[own] = kernel_rows[own]
    slot = np.flatnonzero(~own)
    at = kernel_launch[slot]
    for _ in range(int(hta_depth[kernel_launch].max(initial=0)) + 2):
        found = is_root[at]
        owner[slot[found]] = at[found]
        at = parent[at]
        going = ~found & (at >= 0)
        slot, at = slot[going], at[going]
        if not at.size:
            break
    linked = owner >= 0
    work = pd.DataFrame(
        {
            "root": owner[linked],
            "start": start[kernel_rows[linked]],
            "row": kernel_rows[linked],
            "dur": dur[kernel_rows[linked]],
        }
    ).sort_values(["root", "start", "row"], kind="stable")
    kernel_names = names.array[work["row"].to_numpy()].astype(str)
    per_root = (
        pd.DataFrame({"root": work["root"].to_numpy(), "name": np.asarray(kernel_names, dtype=object)})
        .groupby("root", sort=False)["name"]
        .agg(tuple)
    )
    counts = work.groupby("root")["dur"].agg(["size", "sum"])
    counts = counts[counts["size"] >= min_length]
    if counts.empty:
        return _empty()
    root_rows = counts.index.to_numpy()
    op_names = np.asarray(names.array[root_rows].astype(str), dtype=object)
    sequences = per_root.loc[root_rows].to_numpy()
    patterns = [SEPARATOR.join((op, *seq)) for op, seq in zip(op_names, sequences, strict=True)]
    calls = pd.DataFrame(
        {
            "pattern": patterns,
            "operator": op_names,
            "kernels": counts["size"].to_numpy(dtype=np.int64),
            "gpu_us": counts["sum"].to_numpy(dtype=np.float64),
            "cpu_us": dur[root_rows],
        }
    )
    out = (
        calls.groupby(["pattern", "operator", "kernels"], sort=False)
        .agg(count=("gpu_us", "size"), gpu_us=("gpu_us", "sum"), cpu_us=("cpu_us", "sum"))
        .reset_index()
    )
    out.insert(0, "rank", rank)
    out = out[list(COLUMNS)]
    order = sorted(range(len(out)), key=lambda i: (-int(out["count"].iat[i]), out["pattern"].iat[i]))
    return out.iloc[order].reset_index(drop=True)
