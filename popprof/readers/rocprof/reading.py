"""The rocprofiler-sdk reader's front: the tool section into events, threads, target and metadata."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...io.progress import reading
from ...io.sources import source_metadata
from ...model.errors import InputError
from ...model.profile import Profile
from ...trace import frame
from ..chrome.tables import trace_rank
from . import FORMAT
from .agents import Gpu, gpu_of, gpus
from .columns import correlations, integers, names_of, optional_integers, start_end
from .document import json_kind, load, section

#: buffer-record sections of host calls, read onto their thread (the section's name is the event's channel)
HOST_SECTIONS = ("hip_api", "hsa_api", "marker_api", "rccl_api")
#: sections popprof reads; any other that holds records is counted in ``rocprof.unread_sections``
READ_SECTIONS = ("kernel_dispatch", "memory_copy", *HOST_SECTIONS)
#: channel of kernels and of copies: Kineto's, so the device map and the GPU analyses treat them alike
KERNEL_CHANNEL, COPY_CHANNEL = "kernel", "gpu_memcpy"
#: a copy's operation name (``strings.buffer_records``) -> Kineto's name of that direction
COPY_NAMES = {
    "MEMORY_COPY_HOST_TO_DEVICE": "Memcpy HtoD",
    "MEMORY_COPY_DEVICE_TO_HOST": "Memcpy DtoH",
    "MEMORY_COPY_HOST_TO_HOST": "Memcpy HtoH",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "Memcpy DtoD",
}
#: a device-to-device copy between two different GPUs
PEER_COPY = "Memcpy PtoP"
#: the kernel-symbol fields that name a kernel, best first (demangled without the ``.kd`` suffix first)
KERNEL_NAME_FIELDS = ("formatted_kernel_name", "demangled_kernel_name", "kernel_name")


@dataclass
class _Columns:
    """Events gathered section by section, in input order; names and channels as codes into shared lists."""

    names: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    parts: list[dict[str, np.ndarray]] = field(default_factory=list)

    def code(self, labels: list[str], table: list[str]) -> np.ndarray:
        """Codes in ``table`` (extended as needed) of each of ``labels``."""
        index = {label: i for i, label in enumerate(table)}
        out = []
        for label in labels:
            if label not in index:
                index[label] = len(table)
                table.append(label)
            out.append(index[label])
        return np.asarray(out, dtype=np.int32)

    def add(self, channel: str, name_codes: np.ndarray, names: list[str], **columns: np.ndarray) -> None:
        """One section's events: names as ``name_codes`` into ``names``, every other column whole."""
        lut = self.code(names, self.names)
        n = len(name_codes)
        columns["name"] = lut[name_codes] if n else np.zeros(0, dtype=np.int32)
        columns["channel"] = np.full(n, self.code([channel], self.channels)[0], dtype=np.int32)
        self.parts.append(columns)

    def joined(self, key: str, dtype: type) -> np.ndarray:
        """Column ``key`` of every section, concatenated."""
        return np.concatenate([p[key] for p in self.parts]) if self.parts else np.zeros(0, dtype=dtype)


def read(
    path: Path, *, device_map: Mapping[str, str | None] | str | None = None, **_options: object
) -> Profile:
    """Read a rocprofiler-sdk JSON file into a Profile with events, threads, target and metadata.

    Kernels and copies are device work (``stream`` set, ``device`` ``gpu:N``), host calls host work; see the
    package docstring and ``docs/readers.md``.
    """
    with reading(path):
        tool = load(path)
    records = section(path, tool, "buffer_records", dict)
    strings = section(path, tool, "strings", dict)
    operation_names = _operation_names(strings)
    by_handle = gpus(tool["agents"])
    meta = section(path, tool, "metadata", dict)
    host_pid = meta.get("pid") if isinstance(meta.get("pid"), int) else 0
    cols = _Columns()
    counts: dict[str, int] = {}
    kernels = _list(path, records, "kernel_dispatch")
    queues = _kernels(path, tool, kernels, by_handle, cols)
    copy_track = max((q for _, q in queues), default=-1) + 1
    copy_tracks = _copies(
        path, _list(path, records, "memory_copy"), by_handle, operation_names, copy_track, host_pid, cols
    )
    for key in HOST_SECTIONS:
        _host_calls(path, key, _list(path, records, key), operation_names, strings, host_pid, cols)
    for key, value in records.items():
        if isinstance(value, list):
            counts[key] = len(value)
    start_ns, end_ns = cols.joined("start", np.int64), cols.joined("end", np.int64)
    if not len(start_ns):
        raise InputError(
            path,
            "holds no kernel dispatches, copies or API calls (buffer_records are empty)",
            "trace with rocprofv3 --kernel-trace (or --runtime-trace) --output-format json",
        )
    dur_ns = end_ns - start_ns
    backwards = dur_ns < 0
    dur_us = dur_ns / 1000.0
    dur_us[backwards] = np.nan  # an end before its start: kept, without a duration
    stream = cols.joined("stream", np.int64)
    correlation = cols.joined("correlation", np.int64)
    device = cols.joined("device", np.int64)
    labels = np.unique(device[device >= 0])  # the GPU indexes used, sorted
    device_codes = np.searchsorted(labels, device).astype(np.int32)
    device_codes[device < 0] = -1
    events, built = frame.build_events(
        pid=cols.joined("pid", np.int64),
        tid=cols.joined("tid", np.int64),
        start=start_ns / 1000.0,
        dur=dur_us,
        name_codes=cols.joined("name", np.int32),
        names=cols.names,
        channel_codes=cols.joined("channel", np.int32),
        channels=cols.channels,
        source_format=FORMAT,
        device_map=device_map,
        extra=frame.gpu_work_columns(stream, correlation, device_codes, labels),
    )
    rank = trace_rank({}, path)
    frame.set_rank(events, rank)
    threads = _threads(events, by_handle, queues, (copy_track, copy_tracks), host_pid, meta, rank)
    metadata = _metadata(path, meta, by_handle, counts, int(backwards.sum()), built, rank)
    name = path.name.removesuffix(".gz").removesuffix(".json") or path.stem
    return Profile(
        name,
        {"target": {"source_format": [FORMAT]}, "events": events, "threads": threads},
        source=str(path),
        metadata=metadata,
    )


def _list(path: Path, records: dict, key: str) -> list:
    value = records.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(path, f"buffer_records.{key} is {json_kind(value)}, not a list")
    return value


def _operation_names(strings: dict) -> list[list[str]]:
    """``strings.buffer_records``: per buffer-record kind (its position), the names of its operations."""
    out = []
    for entry in strings.get("buffer_records") or []:
        ops = entry.get("operations") if isinstance(entry, dict) else None
        out.append([str(o) for o in ops] if isinstance(ops, list) else [])
    return out


def _operations(
    records: Sequence[dict], names: list[list[str]], fallback: str
) -> tuple[np.ndarray, list[str]]:
    """Name codes of each record's (kind, operation) through ``strings.buffer_records``."""
    kind = optional_integers(records, lambda r: r["kind"])
    operation = optional_integers(records, lambda r: r["operation"])
    pairs = kind * (1 << 32) + (operation & 0xFFFFFFFF)
    distinct, inverse = np.unique(pairs, return_inverse=True)
    labels = []
    for pair in distinct.tolist():
        k, op = pair >> 32, pair & 0xFFFFFFFF
        table = names[k] if 0 <= k < len(names) else []
        labels.append(table[op] if op < len(table) and table[op] else f"{fallback} {op}")
    unique = list(dict.fromkeys(labels))
    lut = np.array([unique.index(label) for label in labels], dtype=np.int32)
    return lut[inverse.reshape(-1)], unique


def _kernel_names(path: Path, tool: dict) -> dict[int, str]:
    """Kernel names by ``kernel_id``, matched on each symbol's own ``kernel_id`` (not its position)."""
    out: dict[int, str] = {}
    for symbol in section(path, tool, "kernel_symbols", list):
        if not isinstance(symbol, dict) or not isinstance(symbol.get("kernel_id"), int):
            continue
        name = next(
            (symbol[f] for f in KERNEL_NAME_FIELDS if isinstance(symbol.get(f), str) and symbol[f]), None
        )
        out[symbol["kernel_id"]] = name or f"kernel {symbol['kernel_id']}"
    return out


def _kernels(
    path: Path, tool: dict, records: list, by_handle: dict[int, Gpu], cols: _Columns
) -> set[tuple[int, int]]:
    """Kernel dispatches onto their (GPU, queue) tracks; returns the tracks."""
    if not records:
        return set()
    where = "buffer_records.kernel_dispatch"
    start, end = start_end(path, where, records)
    agent = integers(
        path, where, records, "dispatch_info.agent_id", lambda r: r["dispatch_info"]["agent_id"]["handle"]
    )
    queue = integers(
        path, where, records, "dispatch_info.queue_id", lambda r: r["dispatch_info"]["queue_id"]["handle"]
    )
    kernel = integers(
        path, where, records, "dispatch_info.kernel_id", lambda r: r["dispatch_info"]["kernel_id"]
    )
    handles, agent_codes = np.unique(agent, return_inverse=True)
    index = np.array([gpu_of(path, by_handle, h, where).index for h in handles.tolist()], dtype=np.int64)
    gpu = index[agent_codes.reshape(-1)]
    known = _kernel_names(path, tool)
    distinct, inverse = np.unique(kernel, return_inverse=True)
    table = [known.get(k, f"kernel {k}") for k in distinct.tolist()]
    codes, names = names_of(inverse.reshape(-1), table, "kernel {}")
    cols.add(
        KERNEL_CHANNEL,
        codes,
        names,
        pid=gpu,
        tid=queue,
        start=start,
        end=end,
        stream=queue,
        correlation=correlations(records),
        device=gpu,
    )
    pairs = np.unique(np.stack([gpu, queue], axis=1), axis=0)
    return {(int(g), int(q)) for g, q in pairs.tolist()}


def _copies(
    path: Path,
    records: list,
    by_handle: dict[int, Gpu],
    names: list[list[str]],
    track: int,
    host_pid: int,
    cols: _Columns,
) -> set[int]:
    """Memory copies: on the ``track`` of the GPU at their device end (the destination of a host-to-device
    copy, else the source), named as Kineto names the direction; a copy between host buffers is host work on
    its thread. Returns the GPUs that hold copies."""
    if not records:
        return set()
    where = "buffer_records.memory_copy"
    start, end = start_end(path, where, records)
    src = optional_integers(records, lambda r: r["src_agent_id"]["handle"])
    dst = optional_integers(records, lambda r: r["dst_agent_id"]["handle"])
    thread = optional_integers(records, lambda r: r["thread_id"], 0)
    op_codes, op_names = _operations(records, names, "copy")
    label = [COPY_NAMES.get(n, n) for n in op_names]
    index = {h: g.index for h, g in by_handle.items()}
    src_gpu = np.array([index.get(h, -1) for h in src.tolist()], dtype=np.int64)
    dst_gpu = np.array([index.get(h, -1) for h in dst.tolist()], dtype=np.int64)
    from_gpu = src_gpu >= 0
    gpu = np.where(from_gpu, src_gpu, dst_gpu)
    peer = from_gpu & (dst_gpu >= 0) & (src_gpu != dst_gpu)
    table = [*label, PEER_COPY]
    codes = np.where(peer, len(label), op_codes).astype(np.int32)
    on_gpu = gpu >= 0
    cols.add(
        COPY_CHANNEL,
        codes,
        table,
        pid=np.where(on_gpu, gpu, host_pid),
        tid=np.where(on_gpu, track, thread),
        start=start,
        end=end,
        stream=np.where(on_gpu, track, -1),
        correlation=correlations(records),
        device=np.where(on_gpu, gpu, -1),
    )
    return set(gpu[on_gpu].tolist())


def _marker_messages(strings: dict) -> dict[int, str]:
    """``strings.marker_api``: the message of each marker (ROCTx range) by its correlation id."""
    out = {}
    for entry in strings.get("marker_api") or []:
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("key"), int)
            and isinstance(entry.get("value"), str)
        ):
            out[entry["key"]] = entry["value"]
    return out


def _host_calls(
    path: Path, key: str, records: list, names: list[list[str]], strings: dict, pid: int, cols: _Columns
) -> None:
    """API calls of one section on their thread of the process; a marker named by its message."""
    if not records:
        return
    where = f"buffer_records.{key}"
    start, end = start_end(path, where, records)
    thread = integers(path, where, records, "thread_id", lambda r: r["thread_id"])
    corr = correlations(records)
    codes, labels = _operations(records, names, key)
    if key == "marker_api":
        messages = _marker_messages(strings)
        if messages:
            text = [messages.get(c) for c in corr.tolist()]
            labels = list(labels)
            extra = {}
            for i, t in enumerate(text):
                if t is not None:
                    codes[i] = extra.setdefault(t, len(labels) + len(extra))
            labels += list(extra)
    cols.add(
        key,
        codes,
        labels,
        pid=np.full(len(records), pid, dtype=np.int64),
        tid=thread,
        start=start,
        end=end,
        stream=np.full(len(records), -1, dtype=np.int64),
        correlation=corr,
        device=np.full(len(records), -1, dtype=np.int64),
    )


def _threads(
    events: pd.DataFrame,
    by_handle: dict[int, Gpu],
    queues: set[tuple[int, int]],
    copies: tuple[int, set[int]],
    host_pid: int,
    meta: dict,
    rank: int | None,
) -> pd.DataFrame:
    """The threads table: a GPU's tracks named ``queue N`` / ``copies`` (``copies``: the copy track and the
    GPUs that have one), its process by the GPU's product."""
    gpu_by_index = {g.index: g for g in by_handle.values()}
    command = meta.get("command")
    program = (
        os.path.basename(command[0])
        if isinstance(command, list) and command and isinstance(command[0], str)
        else ""
    )
    process_names = {g.index: g.label for g in gpu_by_index.values()}
    process_names.setdefault(host_pid, program or f"process {host_pid}")
    copy_track, copy_gpus = copies
    thread_names = {(g, q): f"queue {q}" for g, q in queues}
    thread_names.update({(g, copy_track): "copies" for g in copy_gpus})
    threads = frame.build_threads(events, process_names, thread_names)
    pids = threads["pid"].tolist()
    on_gpu = events.loc[events["device"].notna(), "pid"].unique().tolist()
    threads["process_labels"] = pd.array([f"GPU {p}" if p in on_gpu else "CPU" for p in pids], dtype="str")
    threads["rank"] = frame.constant_int(len(threads), rank)
    return threads


def _metadata(
    path: Path,
    meta: dict,
    by_handle: dict[int, Gpu],
    counts: dict[str, int],
    backwards: int,
    built: dict,
    rank,
) -> dict[str, object]:
    """What the reader read and left: record counts per section, the GPUs, the profiled window."""
    out: dict[str, object] = dict(source_metadata(FORMAT, [path]))
    for key in ("pid", "init_time", "fini_time"):
        if isinstance(meta.get(key), int):
            out[f"rocprof.{key}" + ("_ns" if key != "pid" else "")] = meta[key]
    out["rocprof.records"] = json.dumps({k: v for k, v in sorted(counts.items()) if v})
    unread = {k: v for k, v in sorted(counts.items()) if v and k not in READ_SECTIONS}
    if unread:
        out["rocprof.unread_sections"] = json.dumps(unread)
    out["rocprof.gpus"] = json.dumps(
        [
            {"gpu": g.index, "name": g.name, "product": g.product}
            for g in sorted(by_handle.values(), key=lambda g: g.index)
        ]
    )
    if rank is not None:
        out["trace.rank"] = rank
    if backwards:
        out["warnings.end_before_start"] = backwards
    if built.get("partial_overlap"):
        out["warnings.partial_overlap"] = built["partial_overlap"]
    return out
