"""The tables a parse turns into: Kineto's columns and bookkeeping, flows, counters, thread metadata."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ...trace import frame
from ...trace.activity import category_mask
from ...trace.device import DEVICE_CHANNELS
from .columns import json_text
from .events import THREAD_METADATA

#: Kineto's bookkeeping pseudo-processes (string pids): never attributed, never a busiest thread or top event.
BOOKKEEPING_PROCESSES = ("Spans", "Traces")
#: The channel of kernels recorded by CUPTI's range profiler (``cuda_profiler_range``): one X event per kernel
#: on the GPU's pid, without ``args.stream``; read as device work with the event's tid as its stream.
RANGE_PROFILER_CHANNEL = "cuda_profiler_range"
_BOOKKEEPING_NAME = re.compile(
    r"^(?:PyTorch Profiler \(\d+\)|Iteration Start: PyTorch Profiler|Record Window End)$"
)
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


#: Largest rank a trace may name (a 32-bit MPI rank): beyond it, or below 0, ``distributedInfo.rank`` is no rank.
MAX_RANK = (1 << 31) - 1


def trace_rank(top: Mapping, path: Path) -> int | None:
    """The rank of a trace: ``distributedInfo.rank`` (from 0 to :data:`MAX_RANK`: a negative one ended the
    long-events rule in an internal error), else ``rank-N`` / ``rank_N`` in the file name."""
    info = top.get("distributedInfo")
    if isinstance(info, dict):
        value = info.get("rank")
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RANK:
            return value
        if isinstance(value, str) and value.isdigit() and int(value) <= MAX_RANK:
            return int(value)
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def kineto_columns(
    stream: np.ndarray,
    corr: np.ndarray,
    device: np.ndarray,
    pid: np.ndarray,
    unstreamed: np.ndarray | None = None,
) -> dict:
    """``stream``, ``correlation`` (Int64) and ``device`` (``gpu:N``) from Kineto's args, in input order.

    An event on a stream is device work; its device is ``args.device``, else its pid (Kineto puts each
    GPU in its own pid). ``unstreamed`` (:func:`unstreamed_device_mask`) marks device work without a stream
    (MTIA's ``DMA_REQUEST`` track): it gets its device the same way and keeps no stream.
    """
    on_stream = ~np.isnan(stream)
    on_device = on_stream if unstreamed is None else on_stream | unstreamed
    codes = np.full(len(stream), -1, dtype=np.int32)
    labels: list[str] = []
    if on_device.any():
        dev = device[on_device]  # a copy: filled in place
        no_device = np.isnan(dev)
        if no_device.any():
            dev[no_device] = pid[on_device][no_device]
        if dev.min() == dev.max():  # one GPU (the usual trace): np.unique without its sort or its codes
            labels = [f"gpu:{int(dev[0])}"]
            codes[on_device] = 0
        else:
            uniq, inverse = np.unique(dev, return_inverse=True)
            labels = [f"gpu:{int(v)}" for v in uniq]
            codes[on_device] = inverse.astype(np.int32)
    return {"stream": _int64(stream), "correlation": _int64(corr), "device": (codes, labels)}


def unstreamed_device_mask(cat_codes: np.ndarray, cats: list, stream: np.ndarray) -> np.ndarray | None:
    """Events in a device category (:data:`popprof.trace.device.DEVICE_CHANNELS`) without ``args.stream``, or
    None when there are none: device work all the same (MTIA's ``dma_request`` events on its ``DMA_REQUEST``
    track carry no stream), whose device is that of its pid. Without it, such an event was device activity of
    no device: a second, always idle device of its rank in the time account and the idle rules."""
    ids = [i for i, c in enumerate(cats) if c in DEVICE_CHANNELS]
    if not ids:
        return None
    mask = np.isin(cat_codes, ids) & np.isnan(stream)
    return mask if mask.any() else None


def host_stream_mask(cat_codes: np.ndarray, cats: list, pid: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """Events that carry ``args.stream`` but are host work: not in a device category and on a pid that holds no
    event of one (Inductor records each Triton launch as a ``cpu_op`` with ``args.stream`` on the host thread).

    Only a device category (:data:`popprof.trace.device.DEVICE_CHANNELS`) or a device pid makes a device.
    """
    on_stream = ~np.isnan(stream)
    if not on_stream.any():
        return on_stream
    device_cat = np.isin(np.arange(len(cats)), [i for i, c in enumerate(cats) if c in DEVICE_CHANNELS])
    valid = (cat_codes >= 0) & (cat_codes < len(cats))
    is_device = np.zeros(len(cat_codes), dtype=bool)
    is_device[valid] = device_cat[cat_codes[valid]]
    candidates = on_stream & ~is_device
    if not candidates.any():
        return candidates
    device_pids = np.unique(pid[is_device])
    return candidates & ~np.isin(pid, device_pids)


def _int64(values: np.ndarray) -> pd.arrays.IntegerArray:
    missing = np.isnan(values)
    data = np.zeros(len(values), dtype=np.int64)  # one pass into one new array (no float temporary)
    np.copyto(data, values, casting="unsafe", where=~missing)
    return pd.arrays.IntegerArray(data, missing)


def bookkeeping_mask(events: pd.DataFrame, pids: list[int]) -> np.ndarray:
    """Kineto's own bookkeeping: channel ``Trace``, the ``PyTorch Profiler (N)`` span and its global instants
    (``Iteration Start: PyTorch Profiler``, ``Record Window End``), the Spans/Traces pseudo-processes, and the
    profiler's own overhead (channel ``overhead``, e.g. CUPTI's ``Activity Buffer Request``, on pid -1)."""
    names = events["name"].array
    mask = category_mask(names, [bool(_BOOKKEEPING_NAME.match(str(c))) for c in names.categories])
    channels = events["channel"].array
    mask |= category_mask(channels, channels.categories.isin(("Trace", "overhead")))
    mask |= events["pid"].to_numpy() == -1
    if pids:
        mask |= np.isin(events["pid"].to_numpy(), pids)
    return mask


def flow_frame(flows: dict[str, np.ndarray], labels: list[str], rank: int | None) -> pd.DataFrame | None:
    if not flows or not len(flows["ts"]):
        return None

    def categorical(codes: np.ndarray) -> pd.Categorical:
        """Codes into ``labels`` as a categorical of the labels used, sorted (-1: missing)."""
        present = np.bincount(codes + 1, minlength=len(labels) + 1)[1:] > 0  # O(n): no sort of the codes
        used = sorted(np.flatnonzero(present).tolist(), key=labels.__getitem__)
        lut = np.full(len(labels) + 1, -1, dtype=np.int32)  # index -1 (missing) stays -1
        lut[used] = np.arange(len(used), dtype=np.int32)
        # every code is -1 or a used label's: valid by construction
        return pd.Categorical.from_codes(lut[codes], categories=[labels[i] for i in used], validate=False)

    return pd.DataFrame(
        {
            "rank": frame.constant_int(len(flows["ts"]), rank),
            "pid": flows["pid"],
            "tid": flows["tid"],
            "ts_us": flows["ts"],
            "phase": categorical(flows["phase"]),
            "id": pd.array(flows["id"], dtype="str"),
            "name": categorical(flows["name"]),
            "channel": categorical(flows["cat"]),
            "binding": categorical(flows["bp"]),
        },
        copy=False,  # the parse's arrays are this table's alone
    )


def merge_args(begin: str | None, end: str | None) -> str | None:
    if not end or end == "{}":
        return begin
    if not begin or begin == "{}":
        return end
    try:
        merged = json.loads(begin)
        merged.update(json.loads(end))
        return json_text(merged)
    except (ValueError, AttributeError):
        return begin


def counter_frame(rows: list[tuple]) -> pd.DataFrame | None:
    if not rows:
        return None
    pid, name, series, ts, value = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "pid": np.asarray(pid, dtype=np.int64),
            "name": pd.Categorical(name),
            "series": pd.Categorical(series),
            "ts_us": np.asarray(ts, dtype=np.float64),
            "value": np.asarray(value, dtype=np.float64),
        }
    )


def thread_metadata(threads: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """``process_labels``, ``process_sort_index``, ``thread_sort_index`` columns from the metadata events."""
    if not meta:
        return threads
    threads = threads.copy()
    pids, tids = threads["pid"].tolist(), threads["tid"].tolist()
    for kind, (_, process_wide) in THREAD_METADATA.items():
        values = [
            meta.get((kind, p) if process_wide else (kind, p, t)) for p, t in zip(pids, tids, strict=True)
        ]
        if kind == "process_labels":
            threads[kind] = pd.array([None if v is None else str(v) for v in values], dtype="str")
        else:
            threads[kind] = pd.array(
                [v if isinstance(v, int) and not isinstance(v, bool) else None for v in values], dtype="Int64"
            )
    return threads
