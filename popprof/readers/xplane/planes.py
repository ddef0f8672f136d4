"""One XPlane at a time into numpy columns: which planes and lines are read, event times, names and stats.

A plane is read line by line (the events of one line at a time): times and metadata ids are taken with
``np.fromiter``; only the stats popprof keeps (the correlation id, what marks a copy or a memset, a TPU op's
``device_duration_ps``, and with ``with_args`` every stat as JSON) are visited per event; a TPU op's XLA cost
analysis is read once per event metadata (:func:`op_costs`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np

#: a GPU's plane (CUDA and ROCm alike): ``/device:GPU:0``
GPU_PLANE = re.compile(r"^/device:GPU:(\d+)$")
#: the host's plane: threads as lines
HOST_PLANE = "/host:CPU"
#: a GPU line that is the device's own work (``Stream #17(Kernel)``, ``Stream #8(MemcpyOther)``); every other
#: line of a GPU plane (``XLA Modules``, ``XLA Ops``, ``Framework Ops``, ``Steps``, ...) is derived from these
#: by the profiler and left out, so device busy time is not counted twice
STREAM_LINE = re.compile(r"^Stream #(\d+)")
#: a TPU's plane (``/device:TPU:0``). A TPU has no stream lines: its ``XLA Ops`` line (:data:`TPU_OPS_LINE`) is
#: the core's own work, one HLO op after another (xprof's op profile reads it); ``XLA Modules`` (the programs
#: those ops belong to), ``Async XLA Ops`` (the spans of asynchronous copies in flight, which overlap the ops)
#: and ``XLA TraceMe`` are left out like a GPU's derived lines, so busy time is not counted twice
TPU_PLANE = re.compile(r"^/device:TPU:(\d+)$")
TPU_OPS_LINE = "XLA Ops"
#: the HLO categories (event metadata's ``hlo_category`` stat) of a TPU op that moves data rather than
#: computes: an asynchronous copy's start and the wait for its end (``copy-done``: on a TPU that offloads
#: tensors to host memory, the core stalls there until the DMA ends), read as copies (``gpu_memcpy``)
TPU_COPY_CATEGORIES = frozenset({"copy", "copy-start", "copy-done"})
#: device channels (Kineto's, so the device map's GPU rules hold)
KERNEL, MEMCPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"
#: host channels: a runtime call (it carries a ``correlation_id``), a Python frame (xprof's ``$`` prefix), any
#: other TraceMe annotation of the host (XLA, PjRt, the user's ``jax.profiler.TraceAnnotation``)
RUNTIME, PYTHON, TRACE_ME = "cuda_runtime", "python_function", "trace_me"


@dataclass
class Columns:
    """The events of one line (or several, joined): arrays in input order, names as codes into ``names``."""

    start_us: np.ndarray
    dur_us: np.ndarray
    name_codes: np.ndarray
    names: list[str]
    channel_codes: np.ndarray  # into the channels of :data:`CHANNELS`
    correlation: np.ndarray  # -1 where the event has none
    args: list[str | None] | None = None
    op_times: OpTimes | None = None  # a TPU ``XLA Ops`` line's time per op on the device's clock


@dataclass
class OpTimes:
    """A TPU ``XLA Ops`` line's events per event metadata id (``ids``, ascending): how many (``count``) and their
    summed ``device_duration_ps`` (the device's own clock, which xprof's op profile reads; the event's
    ``duration_ps`` where an event has no such stat), exact integers."""

    ids: np.ndarray
    count: np.ndarray
    device_ps: np.ndarray


#: device event names of copies and memsets (ROCm's, CUPTI's as XLA names them) -> Kineto's, so a copy's
#: direction reads as in a Chrome trace (``host_io`` for host <-> device, ``exchange`` between GPUs) and the
#: summary counts it as memory work; such an event is a copy or memset whatever its stats say
COPY_NAMES: dict[str, str] = {
    "CopyHostToDevice": "Memcpy HtoD",
    "CopyDeviceToHost": "Memcpy DtoH",
    "CopyDeviceToDevice": "Memcpy DtoD",
    "CopyPeerToPeer": "Memcpy PtoP",
    "MemcpyH2D": "Memcpy HtoD",
    "MemcpyD2H": "Memcpy DtoH",
    "MemcpyD2D": "Memcpy DtoD",
    "MemcpyP2P": "Memcpy PtoP",
    "MemcpyOther": "Memcpy Other",
    "FillBuffer": "Memset (Device)",
    "Memset": "Memset (Device)",
}

#: every channel an event can get, in code order
CHANNELS: tuple[str, ...] = (KERNEL, MEMCPY, MEMSET, RUNTIME, PYTHON, TRACE_ME)
_CODE = {c: i for i, c in enumerate(CHANNELS)}


@dataclass
class PlaneNames:
    """A plane's event names (``display_name``, else ``name``) and stat names, by metadata id."""

    events: dict[int, str] = field(default_factory=dict)
    stats: dict[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, plane) -> PlaneNames:  # noqa: ANN001 - an XPlane message
        """The names of ``plane``'s metadata maps."""
        return cls(
            {k: m.display_name or m.name for k, m in plane.event_metadata.items()},
            {k: m.name for k, m in plane.stat_metadata.items()},
        )


def stat_value(stat, names: dict[int, str]) -> object:  # noqa: ANN001 - an XStat message
    """The value an XStat holds: a ``ref_value`` as the stat name it refers to; bytes as their length."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    if kind == "ref_value":
        return names.get(stat.ref_value, "")
    if kind == "bytes_value":
        return f"<{len(stat.bytes_value)} bytes>"
    return getattr(stat, kind)


def plane_stats(plane, names: PlaneNames) -> dict[str, object]:  # noqa: ANN001 - an XPlane message
    """The plane's own stats (a GPU's vendor, clock, core count, memory) by name."""
    return {
        names.stats.get(s.metadata_id, str(s.metadata_id)): stat_value(s, names.stats) for s in plane.stats
    }


#: XLA's memory space of host memory (``Layout::kHostMemorySpace``), ``S(5)`` in an HLO shape's layout
_HOST_SPACE = "S(5)"


def copy_ops(plane, names: PlaneNames) -> dict[str, str]:  # noqa: ANN001 - an XPlane message
    """The event names (as :class:`PlaneNames` gives them) of a TPU plane's ops whose ``hlo_category`` is one of
    :data:`TPU_COPY_CATEGORIES`, each with the name it is read under: ``Memcpy DtoH (<op>)`` or
    ``Memcpy HtoD (<op>)`` where the HLO text (the metadata's ``name``) puts one end in host memory (``S(5)``),
    so the copy reads as host I/O as a Kineto copy of that direction does; the op's own name otherwise.

    A ``copy-done``'s result is the copy's destination: in host memory, device to host, else (its operand there)
    host to device. A ``copy-start``'s operand is the source: in host memory, host to device, else (its result
    tuple holds a host buffer) device to host."""
    found: dict[str, str] = {}
    for key, metadata in plane.event_metadata.items():
        for stat in metadata.stats:
            if names.stats.get(stat.metadata_id) == "hlo_category" and stat.str_value in TPU_COPY_CATEGORIES:
                label = names.events[key]
                found[label] = _copy_name(label, metadata.name, stat.str_value)
    return found


#: the HLO instruction a text defines (``%copy-start.2 = ...``) and the last operand of a ``copy-done``
#: (``copy-done((...) %copy-start.2)``, the first ``%`` name in its parentheses: a type holds none): the
#: ``copy-start`` it waits for
_HLO_NAME = re.compile(r"^%?([^\s=]+) = ")
_DONE_OPERAND = re.compile(r" copy-done\(.*?%([\w.\-]+)", re.DOTALL)


def copy_starts(plane, names: PlaneNames) -> dict[int, str]:  # noqa: ANN001 - an XPlane message
    """Per event metadata id of a TPU plane's ``copy-done`` op (``hlo_category``), the event name (as
    :class:`PlaneNames` gives it) of the ``copy-start`` it waits for: the operand its HLO text names
    (``%copy-done.2 = f32[...] copy-done((...) %copy-start.2)``), resolved to the ``copy-start`` metadata
    of that HLO instruction (the one named as the instruction where several are: the ``Async XLA Ops``
    line's ``async-copy`` spans share the text). XLA's asynchronous copy is the pair: one transfer
    (``metrics/copies.py``). A ``copy-done`` whose text names no operand, or none found, is left out."""
    category: dict[int, str] = {}
    for key, metadata in plane.event_metadata.items():
        for stat in metadata.stats:
            if names.stats.get(stat.metadata_id) == "hlo_category" and stat.str_value in (
                "copy-start",
                "copy-done",
            ):
                category[key] = stat.str_value
    starts: dict[str, str] = {}  # HLO instruction -> event name
    for key in sorted(category):
        if category[key] != "copy-start":
            continue
        found = _HLO_NAME.match(plane.event_metadata[key].name)
        label = names.events.get(key, "")
        if found and (found.group(1) not in starts or label == found.group(1)):
            starts[found.group(1)] = label
    out: dict[int, str] = {}
    for key, kind in category.items():
        operand = _DONE_OPERAND.search(plane.event_metadata[key].name) if kind == "copy-done" else None
        if operand and operand.group(1) in starts:
            out[key] = starts[operand.group(1)]
    return out


#: the stats of a TPU op's event metadata that popprof keeps (XLA's cost analysis of the HLO instruction, and
#: how xprof's op profile groups it): FLOPs, the FLOPs of the model's own arithmetic, bytes read and written
#: from HBM, the HLO category (``loop fusion``, ``copy-done``, ``all-reduce``) and the name shared by identical
#: fusions
OP_COST_STATS: tuple[str, ...] = (
    "flops",
    "model_flops",
    "bytes_accessed",
    "hlo_category",
    "deduplicated_name",
)


def op_costs(plane, names: PlaneNames) -> dict[int, dict[str, object]]:  # noqa: ANN001 - an XPlane message
    """A TPU plane's per-op stats of :data:`OP_COST_STATS` by event metadata id (one visit per metadata, not per
    event): numbers as numbers, names as strings; a stat the metadata lacks is left out."""
    wanted = {k for k, v in names.stats.items() if v in OP_COST_STATS}
    found: dict[int, dict[str, object]] = {}
    for key, metadata in plane.event_metadata.items():
        stats = {
            names.stats[s.metadata_id]: stat_value(s, names.stats)
            for s in metadata.stats
            if s.metadata_id in wanted
        }
        found[key] = {k: v for k, v in stats.items() if isinstance(v, int | float | str)}
    return found


def _copy_name(label: str, text: str, category: str) -> str:
    """``label`` with the direction of a TPU copy between host and device memory, from its HLO ``text``
    (``%copy-done.2 = f32[...]{...S(5)} copy-done(...)``); ``label`` alone when neither end is in host memory."""
    result, _, operand = text.partition(f" {category}(")
    if not operand:
        return label
    to_host = _HOST_SPACE in result.partition(" = ")[2]
    from_host = _HOST_SPACE in operand
    if category == "copy-start":
        direction = "HtoD" if from_host else ("DtoH" if to_host else None)
    else:
        direction = "DtoH" if to_host else ("HtoD" if from_host else None)
    return f"Memcpy {direction} ({label})" if direction else label


def read_line(  # noqa: ANN001 - an XLine
    line, names: PlaneNames, *, device: bool, with_args: bool, tpu_ops: bool = False
) -> Columns:
    """The events of one line: start (line ``timestamp_ns`` + event ``offset_ps``) and duration in microseconds,
    names, channels (device lines: kernel, copy or memset by the stats that mark copies and memsets; host lines:
    runtime call, Python frame or annotation), correlation ids and, with ``with_args``, the stats as JSON.
    ``tpu_ops`` (a TPU's ``XLA Ops`` line): each op's start and duration on the device's own clock (its
    ``device_offset_ps`` and ``device_duration_ps`` stats, where it has them: the core runs one op after
    another there, where the host-synchronised ``offset_ps`` and ``duration_ps`` overlap and shift time between
    neighbours), and each op's count and device time (:class:`OpTimes`): one time per op, in the events and
    the operations alike."""
    events = line.events
    n = len(events)
    offset = np.fromiter((e.offset_ps for e in events), dtype=np.int64, count=n)
    dur = np.fromiter((e.duration_ps for e in events), dtype=np.int64, count=n)
    metadata = np.fromiter((e.metadata_id for e in events), dtype=np.int64, count=n)
    start_us = line.timestamp_ns / 1e3 + offset / 1e6
    correlation = np.full(n, -1, dtype=np.int64)
    channel = np.full(n, _CODE[KERNEL] if device else _CODE[TRACE_ME], dtype=np.int32)
    # an event without the stats keeps its own start and duration
    device_ps = np.stack((offset, dur)) if tpu_ops else None
    args = _stats(events, names.stats, device, correlation, channel, with_args, device_ps)
    if device_ps is not None:
        offset, dur = device_ps
        start_us = line.timestamp_ns / 1e3 + offset / 1e6
        device_ps = dur
    distinct, inverse = np.unique(metadata, return_inverse=True)
    inverse = inverse.reshape(-1)
    op_times = _op_times(distinct, inverse, device_ps) if device_ps is not None else None
    labels = [names.events.get(m) or f"event {m}" for m in distinct.tolist()]
    unique = list(dict.fromkeys(labels))
    position = {label: i for i, label in enumerate(unique)}
    lut = np.array([position[label] for label in labels], dtype=np.int32)
    codes = lut[inverse] if n else np.zeros(0, dtype=np.int32)
    if device:
        renamed = np.array([label in COPY_NAMES for label in unique], dtype=bool)
        if renamed.any():
            memset = np.array(
                [COPY_NAMES.get(label, "").startswith("Memset") for label in unique], dtype=bool
            )
            channel[renamed[codes]] = _CODE[MEMCPY]
            channel[memset[codes]] = _CODE[MEMSET]
            codes, unique = _renamed(codes, unique)
    else:
        channel[correlation >= 0] = _CODE[RUNTIME]
        python = np.array([label.startswith("$") for label in unique], dtype=bool)
        if python.any():
            channel[python[codes] & (correlation < 0)] = _CODE[PYTHON]
    dur_us = dur / 1e6
    dur_us[dur < 0] = np.nan  # a negative duration (a damaged file): the event is kept, without one
    return Columns(start_us, dur_us, codes, unique, channel, correlation, args, op_times)


def _op_times(distinct: np.ndarray, inverse: np.ndarray, device_ps: np.ndarray) -> OpTimes:
    """Per distinct metadata id, the events' count and summed device time (exact: integer sums)."""
    count = np.bincount(inverse, minlength=len(distinct)).astype(np.int64)
    total = np.zeros(len(distinct), dtype=np.int64)
    np.add.at(total, inverse, np.maximum(device_ps, 0))
    return OpTimes(distinct, count, total)


def _renamed(codes: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """``labels`` through :data:`COPY_NAMES`, merged where two become one; ``codes`` into the new labels."""
    new = [COPY_NAMES.get(label, label) for label in labels]
    unique = list(dict.fromkeys(new))
    position = {label: i for i, label in enumerate(unique)}
    lut = np.array([position[label] for label in new], dtype=np.int32)
    return (lut[codes] if len(codes) else codes), unique


#: what a stat marks, by its name: the correlation id, a copy, a memset, a TPU op's start and duration on the
#: device's clock
_CORRELATION, _COPY, _SET, _DEVICE_OFFSET, _DEVICE_DURATION = 0, 1, 2, 3, 4


def _stats(
    events,  # noqa: ANN001 - a repeated XEvent field
    stat_names: dict[int, str],
    device: bool,
    correlation: np.ndarray,
    channel: np.ndarray,
    with_args: bool,
    device_ps: np.ndarray | None = None,
) -> list[str | None] | None:
    """Visit each event's stats once: fill ``correlation``, (on a device line) mark copies and memsets in
    ``channel`` and, when ``device_ps`` is given (a TPU's ops: rows of offsets and durations), put each
    ``device_offset_ps`` and ``device_duration_ps`` there; with ``with_args`` return every event's stats as JSON
    (None where it has none)."""
    marks = {"correlation_id": _CORRELATION}
    if device:
        marks |= {"memcpy_details": _COPY, "memset_details": _SET}
    if device_ps is not None:
        marks |= {"device_offset_ps": _DEVICE_OFFSET, "device_duration_ps": _DEVICE_DURATION}
    wanted = {k: marks[v] for k, v in stat_names.items() if v in marks}
    copy, memset = _CODE[MEMCPY], _CODE[MEMSET]
    args: list[str | None] | None = [None] * len(events) if with_args else None
    for i, event in enumerate(events):
        for stat in event.stats:
            mark = wanted.get(stat.metadata_id)
            if mark is None:
                continue
            if mark == _CORRELATION:
                value = stat_value(stat, stat_names)
                if isinstance(value, int):
                    correlation[i] = value
            elif mark >= _DEVICE_OFFSET:
                value = stat_value(stat, stat_names)
                if isinstance(value, int):
                    device_ps[mark - _DEVICE_OFFSET, i] = value  # type: ignore[index]
            else:
                channel[i] = copy if mark == _COPY else memset
        if args is not None and len(event.stats):
            found = {
                stat_names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, stat_names)
                for s in event.stats
            }
            args[i] = json.dumps(found, default=str)
    return args
