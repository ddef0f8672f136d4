"""The XPlane reader's front: a file (or the one a directory holds) into events, threads, target and metadata."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...io import bounded
from ...io.progress import reading
from ...io.sources import source_metadata
from ...model.errors import InputError
from ...model.profile import Profile
from ...trace import frame
from ..chrome.tables import trace_rank
from . import FORMAT, SUFFIX, candidates
from .planes import (
    CHANNELS,
    GPU_PLANE,
    HOST_PLANE,
    MEMCPY,
    STREAM_LINE,
    TPU_OPS_LINE,
    TPU_PLANE,
    Columns,
    OpTimes,
    PlaneNames,
    copy_ops,
    copy_starts,
    op_costs,
    plane_stats,
    read_line,
)
from .proto import parse

#: the host plane's process id (a GPU plane's is its index N)
HOST_PID = 1_000_000
#: a TPU plane's process id and device key: this + N (a GPU's is N), so ``tpu:N`` and ``gpu:N`` stay apart
TPU_BASE = 10_000
_HINT = "write the profile again (jax.profiler.trace / xprof), or name one .xplane.pb file"


def resolve(path: Path) -> Path:
    """The XPlane file to read: ``path`` itself, or the one file a directory holds (InputError for several)."""
    if not path.is_dir():
        return path
    found = candidates(path)
    if len(found) != 1:
        names = ", ".join(str(p.relative_to(path)) for p in found[:3])
        raise InputError(
            path,
            f"holds {len(found)} XPlane files ({names}{', ...' if len(found) > 3 else ''}): "
            "one host or run at a time",
            f"name one {SUFFIX} file",
        )
    return found[0]


def read(
    path: Path,
    *,
    with_args: bool = False,
    device_map: Mapping[str, str | None] | str | None = None,
    **_: object,
) -> Profile:
    """Read an XPlane profile into a Profile: GPU stream lines as device work, host lines as host threads.

    See the package docstring and ``docs/readers.md`` for what is read and what is left out.
    """
    source = resolve(path)
    with reading(source), open(source, "rb") as handle:
        data = bounded.read_limited(handle, source, "text-bytes")
    if not data:
        raise InputError(source, "the file is empty", _HINT)
    space = parse(source, data)
    del data
    found = _Gathered()
    for plane in space.planes:
        found.add(plane, ", ".join(space.hostnames), with_args)
    if not found.parts:
        listed = ", ".join(p["name"] for p in found.planes) or "none"
        raise InputError(source, f"holds no GPU stream, TPU op or host events (planes: {listed})", _HINT)
    return _profile(path, source, space, found, device_map)


@dataclass
class _Gathered:
    """What the planes gave: each line's columns with its track, the names of processes and threads, and what
    the metadata records (every plane, the lines left out, the GPUs' own stats, the profile's start)."""

    parts: list[tuple[Columns, int, int, int]] = field(default_factory=list)  # columns, pid, tid, gpu or -1
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    planes: list[dict] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    gpus: list[dict] = field(default_factory=list)
    tpu_ops: list[dict] = field(default_factory=list)
    start_time: object = None

    def add(self, plane, host: str, with_args: bool) -> None:  # noqa: ANN001 - an XPlane message
        """Read one plane: a GPU's stream lines, a TPU's ``XLA Ops`` line and the host's lines into columns;
        others into metadata."""
        names = PlaneNames.of(plane)
        events = sum(len(line.events) for line in plane.lines)
        self.planes.append({"name": plane.name, "lines": len(plane.lines), "events": events})
        if plane.name == "Task Environment":
            self.start_time = plane_stats(plane, names).get("profile_start_time")
        gpu, tpu = GPU_PLANE.match(plane.name), TPU_PLANE.match(plane.name)
        device = gpu or tpu
        if device is None and plane.name != HOST_PLANE:
            if events:
                self.skipped[plane.name] = events
            return
        index = int(device.group(1)) if device else -1
        pid = (TPU_BASE + index if tpu else index) if device else HOST_PID
        if gpu:
            self.gpus.append({"gpu": index, **plane_stats(plane, names)})
        elif tpu:
            self.gpus.append({"tpu": index, **plane_stats(plane, names)})
        self.process_names[pid] = plane.name if device else (f"{HOST_PLANE} ({host})" if host else HOST_PLANE)
        copies = copy_ops(plane, names) if tpu else {}
        for line in plane.lines:
            stream = STREAM_LINE.match(line.name) if gpu else None
            own = stream is not None or (tpu is not None and line.name == TPU_OPS_LINE)
            # a derived line (a GPU's XLA Ops, XLA Modules, ...): the device's work again
            if device and not own:
                if len(line.events):
                    key = f"{plane.name}/{line.name}"
                    self.skipped[key] = self.skipped.get(key, 0) + len(line.events)
                continue
            if not len(line.events):
                continue
            ops_line = tpu is not None and line.name == TPU_OPS_LINE
            columns = read_line(line, names, device=device is not None, with_args=with_args, tpu_ops=ops_line)
            if columns.op_times is not None:
                self.tpu_ops += tpu_op_records(
                    f"tpu:{index}", columns.op_times, names, op_costs(plane, names), copy_starts(plane, names)
                )
            if copies:
                copied = np.array([label in copies for label in columns.names], dtype=bool)
                if copied.any() and len(columns.name_codes):
                    columns.channel_codes[copied[columns.name_codes]] = CHANNELS.index(MEMCPY)
                    columns.names = [copies.get(label, label) for label in columns.names]
            tid = int(stream.group(1)) if stream else int(line.id)
            self.parts.append((columns, pid, tid, pid if device else -1))
            self.thread_names[(pid, tid)] = line.display_name or line.name


def tpu_op_records(
    device: str,
    times: OpTimes,
    names: PlaneNames,
    costs: dict[int, dict[str, object]],
    starts: dict[int, str] | None = None,
) -> list[dict[str, object]]:
    """One record per op of a TPU's ``XLA Ops`` line: ``device``, ``name`` (the HLO instruction, as its event
    metadata names it), ``count``, ``device_time_ps`` (summed on the device's clock) and the metadata's XLA cost
    analysis (``flops``, ``model_flops``, ``bytes_accessed``, ``hlo_category``, ``deduplicated_name``; a stat
    the metadata lacks is left out); a ``copy-done``'s record also ``copy_start``, the name of the
    ``copy-start`` op it waits for (``starts``, :func:`~.planes.copy_starts`). Kept as the metadata key
    ``xplane.tpu_ops``."""
    records = []
    for key, count, total in zip(
        times.ids.tolist(), times.count.tolist(), times.device_ps.tolist(), strict=True
    ):
        name = names.events.get(key) or f"event {key}"
        record = {
            "device": device,
            "name": name,
            "count": count,
            "device_time_ps": total,
            **costs.get(key, {}),
        }
        if starts and key in starts:
            record["copy_start"] = starts[key]
        records.append(record)
    return records


def _joined(parts: list[tuple[Columns, int, int, int]]) -> dict[str, object]:
    """The parts' columns, concatenated; names as codes into one list."""
    names: list[str] = []
    index: dict[str, int] = {}
    codes, pid, tid, device = [], [], [], []
    for columns, p, t, gpu in parts:
        lut = np.empty(len(columns.names), dtype=np.int32)
        for i, label in enumerate(columns.names):
            lut[i] = index.setdefault(label, len(names))
            if lut[i] == len(names):
                names.append(label)
        n = len(columns.start_us)
        codes.append(lut[columns.name_codes] if n else np.zeros(0, dtype=np.int32))
        pid.append(np.full(n, p, dtype=np.int64))
        tid.append(np.full(n, t, dtype=np.int64))
        device.append(np.full(n, gpu, dtype=np.int64))
    with_args = parts[0][0].args is not None
    return {
        "start": np.concatenate([c.start_us for c, *_ in parts]),
        "dur": np.concatenate([c.dur_us for c, *_ in parts]),
        "names": names,
        "name_codes": np.concatenate(codes),
        "channel_codes": np.concatenate([c.channel_codes for c, *_ in parts]),
        "correlation": np.concatenate([c.correlation for c, *_ in parts]),
        "pid": np.concatenate(pid),
        "tid": np.concatenate(tid),
        "device": np.concatenate(device),
        "args": [a for c, *_ in parts for a in c.args] if with_args else None,  # type: ignore[union-attr]
    }


def _process_label(pid: int) -> str:
    """A track's process label: the host's ``CPU``, else ``GPU N`` or ``TPU N``."""
    if pid == HOST_PID:
        return "CPU"
    return f"TPU {pid - TPU_BASE}" if pid >= TPU_BASE else f"GPU {pid}"


def _profile(
    path: Path,
    source: Path,
    space,  # noqa: ANN001 - the XSpace message
    found: _Gathered,
    device_map: Mapping[str, str | None] | str | None,
) -> Profile:
    """The Profile of the gathered columns: events, threads, target and metadata."""
    cols = _joined(found.parts)
    device = cols["device"]
    on_gpu = device >= 0
    keys = np.unique(device[on_gpu])
    labels = [f"tpu:{k - TPU_BASE}" if k >= TPU_BASE else f"gpu:{k}" for k in keys.tolist()]
    device_codes = np.searchsorted(keys, device).astype(np.int32)
    device_codes[~on_gpu] = -1
    stream = np.where(on_gpu, cols["tid"], 0)
    correlation = cols["correlation"]
    events, built = frame.build_events(
        pid=cols["pid"],
        tid=cols["tid"],
        start=cols["start"],
        dur=cols["dur"],
        name_codes=cols["name_codes"],
        names=cols["names"],
        channel_codes=cols["channel_codes"],
        channels=CHANNELS,
        source_format=FORMAT,
        device_map=device_map,
        args=cols["args"],
        extra=frame.gpu_work_columns(np.where(on_gpu, stream, -1), correlation, device_codes, labels),
    )
    rank = trace_rank({}, source)
    frame.set_rank(events, rank)
    threads = frame.build_threads(events, found.process_names, found.thread_names)
    threads["process_labels"] = pd.array([_process_label(p) for p in threads["pid"].tolist()], dtype="str")
    threads["rank"] = frame.constant_int(len(threads), rank)
    meta: dict[str, object] = dict(source_metadata(FORMAT, [source]))
    meta["xplane.hostnames"] = json.dumps(list(space.hostnames))
    meta["xplane.planes"] = json.dumps(found.planes)
    meta["xplane.gpus"] = json.dumps(found.gpus, default=str)
    if found.skipped:
        meta["xplane.skipped_lines"] = json.dumps(found.skipped)
    if found.tpu_ops:
        meta["xplane.tpu_ops"] = json.dumps(found.tpu_ops)
    if isinstance(found.start_time, int):
        meta["xplane.profile_start_time_ns"] = found.start_time
    for key in ("errors", "warnings"):
        if len(getattr(space, key)):
            meta[f"xplane.{key}"] = json.dumps(list(getattr(space, key))[:20])
    if rank is not None:
        meta["trace.rank"] = rank
    if built.get("partial_overlap"):
        meta["warnings.partial_overlap"] = built["partial_overlap"]
    name = source.name.removesuffix(SUFFIX) or source.stem
    return Profile(
        name,
        {"target": {"source_format": [FORMAT]}, "events": events, "threads": threads},
        source=str(path),
        metadata=meta,
    )
