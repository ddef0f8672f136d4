"""GPU operators: a breakdown category -> operator -> input shapes -> kernels, priced against the roofline.

**Attribution.** Each piece of GPU work (an ``events`` row on a stream: kernel, copy, memset) is joined to
the host call that launched it through the launch correlation (same rank and ``correlation``, as
:func:`popprof.trace.gpu_work.gpu_work` does). Its operator is the innermost enclosing framework operator
(a ``cpu_op`` / ``Operator`` event) that has a FLOPs model (:data:`popprof.metrics.flops.MODELLED`:
``aten::addmm`` inside ``aten::linear`` gets the GEMM's kernels, as TraceLens counts them) or is one of
Inductor's Triton launchers (:data:`TRITON_LAUNCHER`: the ``cpu_op`` named as the kernel it launches, as
TraceLens's ``ops_summary`` names it), else the outermost enclosing operator. GPU work launched outside any
operator is left out. An operator's ``device_time_us`` is the summed duration of the work so attributed (its
own launches and its children's).

**Calls and shapes.** ``count`` is the number of operator calls that launched GPU work; calls are grouped by
(name, ``Input Dims``, ``Input type``) when the trace recorded shapes (``record_shapes=True``, read with
the events' arguments), else by name alone. The FLOPs and bytes of one call come from
:mod:`popprof.metrics.flops`; ``tflops`` = ``flops_per_call x count / device_time``, ``tbps`` likewise;
``bound`` is ``"compute"`` when the call's arithmetic intensity (FLOPs / bytes) is at or above the
device's ridge point (:mod:`popprof.metrics.peaks`), ``"memory"`` below it, and null when the peak or a
figure is unknown. Definitions in ``docs/operations.md``.

**TPUs.** An XPlane profile of TPUs has no launches to attribute: its rows are the TPU's HLO ops with XLA's own
cost analysis (:mod:`popprof.metrics.tpu_operations`), the same columns.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import masks
from ..trace.activity import OPERATOR_CHANNELS, labels_mask
from . import conv_outputs, peaks, tpu_operations
from . import flops as flops_model
from . import trace as trace_metrics

#: Inductor's Triton launchers: under ``torch.compile`` each generated kernel is launched inside a ``cpu_op`` of
#: its own name (``triton_poi_fused_...``, ``triton_red_...``, ``triton_per_...``, ``triton_tem_...``). Such an
#: operator owns its kernel as a modelled one does; the outermost operator would be the whole compiled region
#: (``Torch-Compiled Region: 0/0``), which names no kernel.
TRITON_LAUNCHER = re.compile(r"^triton_(?:poi|red|per|tem)_")
#: the columns of :func:`operations` (and of the summary's ``operations`` rows)
COLUMNS: tuple[str, ...] = (
    "name",
    "category",
    "input_shapes",
    "count",
    "device_time_us",
    "flops_per_call",
    "bytes_per_call",
    "tflops",
    "tbps",
    "bound",
)
#: why a trace's operators carry no FLOPs: its events were read without arguments / recorded no shapes
NOTE_NOT_READ = "input shapes not read: FLOPs need the events' arguments (--shapes, or with_args=True)"
NOTE_NOT_RECORDED = (
    "the trace records no input shapes (profile with record_shapes=True): time per operator only"
)


def _owners(
    parent: np.ndarray, depth: np.ndarray, is_op: np.ndarray, modelled: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """The operator each of ``rows`` belongs to (row positions, -1 when none): the innermost modelled
    operator among the row and its ancestors, else the outermost operator. Walks up from these rows only,
    one vectorised step per level; a row leaves the walk at its first modelled operator or at the top.
    ``depth`` (a row's count of ancestors, as the readers derive it from ``parent_id``) bounds the steps."""
    inner = np.full(rows.size, -1, dtype=np.int64)
    outer = np.full(rows.size, -1, dtype=np.int64)
    slot, at = np.arange(rows.size), rows.astype(np.int64, copy=True)
    steps = int(depth[rows].max()) + 1 if rows.size else 0
    for _ in range(steps):
        op = is_op[at]
        outer[slot[op]] = at[op]  # walking up: the last one written is the outermost
        found = modelled[at]
        inner[slot[found]] = at[found]
        at = parent[at]
        going = ~found & (at >= 0)
        slot, at = slot[going], at[going]
        if not at.size:
            break
    return np.where(inner >= 0, inner, outer)


def _triton_launchers(names: pd.Series) -> np.ndarray:
    """Boolean mask: the name is one of Inductor's Triton kernels (:data:`TRITON_LAUNCHER`); one test per
    distinct name."""
    values = (
        names.array.categories if isinstance(names.dtype, pd.CategoricalDtype) else names.dropna().unique()
    )
    return labels_mask(names, [str(v) for v in values if TRITON_LAUNCHER.match(str(v))])


def attributed_work(profile: Profile) -> pd.DataFrame:
    """Each piece of GPU work with its operator: ``work`` (row of ``events``), ``op`` (row of the operator
    call), ``kernel`` (its name), ``dur_us``. Empty when the trace holds no operators or no linked work."""
    return profile.cached("operations.work", lambda: _attributed_work(profile))


def _attributed_work(profile: Profile) -> pd.DataFrame:
    empty = pd.DataFrame({"work": [], "op": [], "kernel": [], "dur_us": []})
    events = profile.get("events")
    if events is None or events.empty or "correlation" not in events.columns:
        return empty
    stream = masks.stream_mask(profile)
    is_op = labels_mask(events["channel"], OPERATOR_CHANNELS) & ~stream
    if not is_op.any():
        return empty
    bookkeeping = masks.bookkeeping_mask(profile)
    is_op &= ~bookkeeping
    modelled = is_op & (
        labels_mask(events["name"], sorted(flops_model.MODELLED)) | _triton_launchers(events["name"])
    )
    parent = trace_metrics.parent_rows(profile)
    has_correlation = events["correlation"].notna().to_numpy()
    on_stream = stream & ~bookkeeping
    launch_rows = np.flatnonzero(~on_stream & has_correlation)
    owner = _owners(parent, events["depth"].to_numpy(), is_op, modelled, launch_rows)
    launch_rows, owner = launch_rows[owner >= 0], owner[owner >= 0]
    launch_keys = pd.Index(masks.correlation_keys(profile, launch_rows))
    if not launch_keys.is_unique:  # several calls for one correlation: the last one launched the work
        keep = ~launch_keys.duplicated(keep="last")
        launch_rows, launch_keys, owner = launch_rows[keep], launch_keys[keep], owner[keep]
    work_rows = np.flatnonzero(on_stream & has_correlation)
    position = launch_keys.get_indexer(masks.correlation_keys(profile, work_rows))
    found = position >= 0
    work_rows = work_rows[found]
    op = owner[position[found]]
    dur = events["dur_us"].to_numpy(dtype=np.float64)[work_rows]
    return pd.DataFrame(
        {
            "work": work_rows,
            "op": op,
            "kernel": events["name"].array[work_rows],
            "dur_us": np.where(np.isnan(dur), 0.0, dur),
        }
    )


def _loads(text: object) -> dict:
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _shapes(events: pd.DataFrame, ops: np.ndarray) -> dict[str, np.ndarray]:
    """``dims``, ``types``, ``concrete`` (JSON text or None, object arrays) of the operator calls at rows
    ``ops``, each distinct argument text parsed once; when the events hold no arguments, one array of None
    for all three (a frame built without copies reads it three times; copy-on-write keeps them apart)."""
    if "args" not in events.columns:
        missing = np.full(len(ops), None, dtype=object)
        return {"dims": missing, "types": missing, "concrete": missing}
    texts = events["args"].iloc[ops].reset_index(drop=True)
    # only texts with shapes are parsed (a trace without record_shapes has none: no JSON parsed at all)
    texts = texts.where(texts.str.contains('"Input Dims"', regex=False, na=False).to_numpy(dtype=bool))
    codes, uniques = pd.factorize(texts, use_na_sentinel=True)
    parsed = [_loads(t) for t in uniques]

    def field(key: str) -> np.ndarray:
        values = np.array([json.dumps(p[key]) if key in p else None for p in parsed] + [None], dtype=object)
        return values[codes]  # -1 (missing text) takes the trailing None

    return {"dims": field("Input Dims"), "types": field("Input type"), "concrete": field("Concrete Inputs")}


def _costs(groups: pd.DataFrame, device: str | None) -> pd.DataFrame:
    """FLOPs, bytes and the peak of each distinct (name, dims, types, concrete): one model call per group."""
    flops, moved, tflops_peak, tbps_peak = [], [], [], []
    for name, dims, types, concrete, output in zip(
        groups["name"], groups["dims"], groups["types"], groups["concrete"], groups["output"], strict=True
    ):
        cost = None
        if isinstance(dims, str) and isinstance(types, str):
            extra = json.loads(concrete) if isinstance(concrete, str) else None
            shape = json.loads(output) if isinstance(output, str) else None
            cost = flops_model.model(str(name), json.loads(dims), json.loads(types), extra, shape)
        peak = peaks.peak(device, cost.dtype if cost else None)
        flops.append(cost.flops if cost else None)
        moved.append(cost.bytes if cost else None)
        tflops_peak.append(peak.tflops if peak else None)
        tbps_peak.append(peak.tbps if peak else None)
    return groups.assign(
        flops_per_call=pd.array(flops, dtype="Float64"),
        bytes_per_call=pd.array(moved, dtype="Float64"),
        peak_tflops=pd.array(tflops_peak, dtype="Float64"),
        peak_tbps=pd.array(tbps_peak, dtype="Float64"),
    )


def operation_calls(profile: Profile) -> pd.DataFrame:
    """One row per operator call that launched GPU work: ``op`` (row of ``events``), ``name``,
    ``device_time_us``, ``kernels`` (pieces of work), ``dims``, ``types``, ``concrete`` (JSON text or None),
    ``output`` (a convolution's output shape from its backward call, :mod:`.conv_outputs`; JSON or None)."""
    return profile.cached("operations.calls", lambda: _operation_calls(profile))


def _operation_calls(profile: Profile) -> pd.DataFrame:
    work = attributed_work(profile)
    if work.empty:
        return pd.DataFrame(
            {
                "op": [],
                "name": [],
                "device_time_us": [],
                "kernels": [],
                "dims": [],
                "types": [],
                "concrete": [],
                "output": [],
            }
        )
    events = profile.events
    # the distinct operator rows in order, and each piece of work's slot among them: rows are positions
    # of ``events``, so counting per row replaces a sort
    op = work["op"].to_numpy(dtype=np.int64)
    kernels = np.bincount(op, minlength=len(events))
    ops = np.flatnonzero(kernels)
    number = np.empty(len(events), dtype=np.int64)  # read only at the operator rows, set just below
    number[ops] = np.arange(len(ops))
    slot = number[op]
    calls = pd.DataFrame(
        {
            "op": ops,
            "name": events["name"].array[ops],  # categorical: strings only for the groups, later
            "device_time_us": np.bincount(slot, weights=work["dur_us"].to_numpy(), minlength=len(ops)),
            "kernels": kernels[ops],
            **_shapes(events, ops),
        },
        copy=False,  # every column is a new array of this call's
    )
    calls["output"] = conv_outputs.forward_outputs(events, calls)  # the frame is new: no copy
    return calls


def _group_codes(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """One group number per row for the distinct values of ``columns`` (missing values a value of their own)."""
    key = np.zeros(len(frame), dtype=np.int64)
    for column in columns:
        values = frame[column]
        if isinstance(values.dtype, pd.CategoricalDtype):  # its codes already number the values
            codes, distinct = (
                np.asarray(values.array.codes, dtype=np.int64) + 1,
                len(values.cat.categories) + 1,
            )
        elif values.dtype == object and values.isna().all():
            continue  # one value (missing) in every row: the groups stay as they are
        else:
            codes, uniques = pd.factorize(values, use_na_sentinel=False)
            distinct = len(uniques)
        key = pd.factorize(key * (distinct + 1) + codes)[0]
    return key


def _grouped(frame: pd.DataFrame, columns: list[str], sums: list[str]) -> pd.DataFrame:
    """``frame`` grouped by ``columns`` (first-seen order): their values, ``sums`` summed (all-missing -> NA)."""
    key = _group_codes(frame, columns)
    # groups are numbered in first-seen order: a group starts where the running maximum rises
    reach = np.maximum.accumulate(key) if key.size else key
    first = np.flatnonzero(np.r_[True, reach[1:] != reach[:-1]]) if key.size else key
    out = {column: frame[column].iloc[first].reset_index(drop=True) for column in columns}
    for column in sums:
        values = frame[column].to_numpy(dtype=np.float64, na_value=np.nan)
        total = np.bincount(key, weights=np.nan_to_num(values), minlength=len(first))
        missing = np.bincount(key, weights=np.isnan(values), minlength=len(first)) > 0
        out[column] = pd.array(np.where(missing, np.nan, total), dtype="Float64")
    return pd.DataFrame(out)  # one frame built, not a column inserted per sum


def has_shapes(profile: Profile) -> bool:
    """Whether the operator calls carry recorded input shapes."""
    calls = operation_calls(profile)
    return bool(len(calls)) and bool(calls["dims"].notna().any())


def operations_note(profile: Profile) -> str | None:
    """Why the operators carry no FLOPs (:data:`NOTE_NOT_READ`, :data:`NOTE_NOT_RECORDED`); None when they
    carry shapes or there are no operators."""
    calls = operation_calls(profile)
    if calls.empty or has_shapes(profile):
        return None
    return NOTE_NOT_READ if "args" not in profile.events.columns else NOTE_NOT_RECORDED


#: host calls that replay a captured CUDA / HIP graph: its kernels run with no operator around their launch
GRAPH_LAUNCHES: tuple[str, ...] = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")


def coverage(profile: Profile) -> dict | None:
    """How much of the trace's GPU work the operators table holds: ``operators_us`` (the work attributed to an
    operator, the table's total), ``work_us`` (every piece of GPU work on a stream, bookkeeping left out: the
    durations summed, as the table sums them), ``share`` (their ratio) and ``graph_launches`` (host calls that
    replay a captured graph, :data:`GRAPH_LAUNCHES`: the kernels of a replay have no operator in this trace;
    the operators that captured them are in the capture's trace). None without operators or GPU work."""
    events = profile.get("events")
    if events is None or events.empty or operation_calls(profile).empty:
        return None
    on_stream = masks.stream_mask(profile) & ~masks.bookkeeping_mask(profile)
    work_us = float(np.nansum(events["dur_us"].to_numpy(dtype=np.float64)[on_stream]))
    if work_us <= 0:
        return None
    operators_us = float(attributed_work(profile)["dur_us"].sum())
    return {
        "operators_us": operators_us,
        "work_us": work_us,
        "share": min(operators_us / work_us, 1.0),
        "graph_launches": int(labels_mask(events["name"], GRAPH_LAUNCHES).sum()),
    }


def operations(profile: Profile) -> pd.DataFrame:
    """The operator table, one row per (operator, input shapes), by device time (largest first):
    :data:`COLUMNS` plus ``input_types``, ``peak_tflops``, ``peak_tbps``, ``intensity`` (FLOP per byte).
    On an XPlane profile of TPUs (no launches to attribute), the TPU ops from XLA's cost analysis, one row per
    HLO op (:func:`popprof.metrics.tpu_operations.tpu_operations`, which adds ``peak_dtype``,
    ``model_flops_per_call`` and ``deduplicated_name``). Empty when the trace holds neither."""
    return profile.cached("operations.table", lambda: _operations(profile))


def _operations(profile: Profile) -> pd.DataFrame:
    calls = operation_calls(profile)
    if calls.empty:
        # a TPU's ops (an XPlane profile): XLA's cost analysis per HLO op, no launches to attribute
        tpu = tpu_operations.tpu_operations(profile)
        if not tpu.empty:
            return tpu
        return pd.DataFrame(
            {c: [] for c in (*COLUMNS, "input_types", "peak_tflops", "peak_tbps", "intensity")}
        )
    calls = calls.assign(count=1.0)
    keys = ["name", "dims", "types", "concrete"] + (["output"] if calls["output"].notna().any() else [])
    grouped = _grouped(calls, keys, ["count", "device_time_us"])
    if "output" not in grouped.columns:
        grouped["output"] = None
    grouped["name"] = grouped["name"].astype(str)
    # the device's peaks matter only to a call with a cost: one with recorded shapes and types
    pairs = zip(grouped["dims"], grouped["types"], strict=True)
    costly = any(isinstance(d, str) and isinstance(t, str) for d, t in pairs)
    device = peaks.profile_device(profile)[1] if costly else None
    costed = _costs(grouped, device)
    # shapes differing only in Concrete Inputs (scalars, flags) are one row: summed time, calls and FLOPs
    costed["flops_total"] = costed["flops_per_call"] * costed["count"]
    costed["bytes_total"] = costed["bytes_per_call"] * costed["count"]
    table = _grouped(
        costed, ["name", "dims", "types"], ["count", "device_time_us", "flops_total", "bytes_total"]
    )
    first = _group_codes(costed, ["name", "dims", "types"])
    table["peak_tflops"] = costed["peak_tflops"].iloc[np.unique(first, return_index=True)[1]].to_numpy()
    table["peak_tbps"] = costed["peak_tbps"].iloc[np.unique(first, return_index=True)[1]].to_numpy()
    peaks.with_rates(table)
    table["category"] = [flops_model.category(n) for n in table["name"]]
    table["input_shapes"] = [json.loads(d) if isinstance(d, str) else None for d in table["dims"]]
    table["input_types"] = [json.loads(t) if isinstance(t, str) else None for t in table["types"]]
    table = table.sort_values(["device_time_us", "name"], ascending=[False, True], kind="stable")
    return table[[*COLUMNS, "input_types", "peak_tflops", "peak_tbps", "intensity"]].reset_index(drop=True)


def operation_kernels(profile: Profile) -> pd.DataFrame:
    """The last level of the breakdown: per (operator, input shapes, kernel) the pieces of work and their
    time: ``category, name, input_shapes, kernel, count, device_time_us``, by time (largest first)."""
    work = attributed_work(profile)
    if work.empty:
        return pd.DataFrame(
            {c: [] for c in ("category", "name", "input_shapes", "kernel", "count", "device_time_us")}
        )
    calls = operation_calls(profile).set_index("op")
    frame = pd.DataFrame(
        {
            "name": calls["name"].astype(str).reindex(work["op"]).to_numpy(),
            "dims": calls["dims"].reindex(work["op"]).fillna("").to_numpy(),
            "kernel": work["kernel"].astype(str).to_numpy(),
            "dur_us": work["dur_us"].to_numpy(),
        }
    )
    table = (
        frame.groupby(["name", "dims", "kernel"], sort=False)
        .agg(count=("dur_us", "size"), device_time_us=("dur_us", "sum"))
        .reset_index()
    )
    table["category"] = [flops_model.category(n) for n in table["name"]]
    table["input_shapes"] = [json.loads(d) if d else None for d in table["dims"]]
    table = table.sort_values(["device_time_us", "name"], ascending=[False, True], kind="stable")
    return table[["category", "name", "input_shapes", "kernel", "count", "device_time_us"]].reset_index(
        drop=True
    )


def categories(profile: Profile) -> pd.DataFrame:
    """The first level of the breakdown: per category, the operator calls and their device time."""
    table = operations(profile)
    return (
        table.groupby("category", sort=False)
        .agg(count=("count", "sum"), device_time_us=("device_time_us", "sum"))
        .reset_index()
        .sort_values("device_time_us", ascending=False, kind="stable")
        .reset_index(drop=True)
    )


def operation_records(profile: Profile, top: int | None = None) -> list[dict]:
    """The operator table as JSON-ready rows with exactly :data:`COLUMNS` (``top``: the first so many)."""
    table = operations(profile)
    if top is not None:
        table = table.head(top)
    out = []
    for row in table[list(COLUMNS)].itertuples(index=False):
        record = {}
        for key, value in zip(COLUMNS, row, strict=True):
            if value is None or (not isinstance(value, list | str) and pd.isna(value)):
                record[key] = None
            elif key == "count":
                record[key] = int(value)
            elif isinstance(value, list | str):
                record[key] = value
            else:
                record[key] = float(value)
        out.append(record)
    return out
