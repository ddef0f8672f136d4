"""PopVision System Analyser traces (``.pvti``) through the Poplar SDK's ``pva.openTrace``.

Walks processes, threads and nested events (``event.children()``) into the
``events`` and ``threads`` tables, iteratively (an explicit stack: traces nest
deeply and hold millions of events). ``processes``/``pid``, ``threads``/``tid``,
``events``, ``label``, ``duration`` (whole microseconds) and ``children()`` are
what public code reads (graphcore/tutorials reading_pvti_files/walkthrough.py);
only that tutorial's prose says events have a timestamp and a channel, so
``timestamp`` and ``channel`` are probed with ``getattr``. The event attributes
found are recorded once (``pvti.event_attributes``); without a timestamp the
events are laid out from durations and nesting and the metadata says so
(``pvti.missing_attributes``, ``pvti.note``). Thread ids may be 64-bit.
``pva`` is imported only inside :func:`read`; ``openTrace`` needs SDK 3.0 or later.

``.pvti`` is also ParaView's XML image format: such a file is recognised and
rejected with a clear message. The real container is not public (a SQLite
header is plausible), so no schema is guessed: everything goes through pva.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..io.plural import plural
from ..io.sources import source_metadata
from ..model.errors import InputError, SdkMissingError
from ..model.profile import Profile
from ..trace import frame

FORMAT = "pvti"
SQLITE_MAGIC = b"SQLite format 3\x00"
PROBED_ATTRIBUTES = ("timestamp", "channel")
_MISSING = object()


def _is_xml(head: bytes) -> bool:
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:512]
    return text.startswith(b"<?xml") or text.startswith(b"<VTKFile")


def sniff(path: Path, head: bytes) -> bool:
    """Files named ``*.pvti`` (ParaView XML ones too, so that :func:`read` can reject them clearly)."""
    return path.is_file() and path.name.lower().endswith(".pvti")


def read(
    path: Path, *, device_map: Mapping[str, str | None] | str | None = None, **_options: object
) -> Profile:
    """Read a .pvti trace through ``pva.openTrace`` into a Profile (events, threads, target, metadata)."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if _is_xml(head):
        raise InputError(
            path,
            "is a ParaView image (.pvti XML), not a PopVision System Analyser trace",
            'System Analyser traces come from PVTI_OPTIONS=\'{"enable":"true"}\'',
        )
    try:
        import pva
    except (ImportError, RuntimeError):  # RuntimeError: the SDK is there but not usable
        raise SdkMissingError(path) from None
    if not hasattr(pva, "openTrace"):
        raise InputError(
            path,
            "reading .pvti traces needs SDK 3.0 or later (this pva has no openTrace)",
            "enable a Poplar SDK 3.x, or open the trace in the PopVision System Analyser",
        )
    try:
        trace = pva.openTrace(str(path))
    except Exception as exc:  # pva raises its own error types
        raise InputError(
            path,
            f"pva cannot open this trace ({type(exc).__name__}: {exc})",
            "check that it is a complete .pvti written by the same SDK version",
        ) from None
    walk = _walk(trace)
    if not walk.label:
        raise InputError(path, "the trace holds no events")
    names = _Labels()
    channels = _Labels()
    name_codes = np.fromiter((names.code(x) for x in walk.label), dtype=np.int32, count=len(walk.label))
    channel_codes = np.fromiter(
        (channels.code(x) for x in walk.channel), dtype=np.int32, count=len(walk.channel)
    )
    tid, wrapped = np.asarray(walk.tid, dtype=np.int64), walk.tid_wrapped
    dur = np.asarray(walk.dur, dtype=np.float64)
    whole = np.rint(dur)  # pva gives durations in whole microseconds
    fractional = int((np.isfinite(dur) & (whole != dur)).sum())
    events, _ = frame.build_events(
        pid=np.asarray(walk.pid, dtype=np.int64),
        tid=tid,
        start=np.asarray(walk.start, dtype=np.float64),
        dur=whole,
        name_codes=name_codes,
        names=names.labels,
        channel_codes=channel_codes,
        channels=channels.labels,
        source_format=FORMAT,
        device_map=device_map,
        parent=np.asarray(walk.parent, dtype=np.int64),
        depth=np.asarray(walk.depth, dtype=np.int64),
    )
    threads = frame.build_threads(events, {}, {}, extra=walk.threads)
    metadata: dict[str, object] = dict(source_metadata(FORMAT, [path]))
    missing = [attr for attr in PROBED_ATTRIBUTES if walk.missing[attr]]
    metadata["pvti.missing_attributes"] = json.dumps(missing)
    metadata["pvti.event_attributes"] = json.dumps(walk.attributes)
    for attr in missing:
        metadata[f"pvti.events_without_{attr}"] = walk.missing[attr]
    if walk.missing["timestamp"]:
        metadata["pvti.note"] = (
            f"{plural(walk.missing['timestamp'], 'event')} {'carries' if walk.missing['timestamp'] == 1 else 'carry'} "
            "no timestamp attribute: their start_us is laid out from "
            "durations and nesting (each thread from 0, children from their parent's start, siblings back to "
            "back), so gaps between them are unknown; durations, nesting and totals are as recorded"
        )
        metadata["pvti.start_synthesised"] = walk.missing["timestamp"]
    if fractional:
        metadata["pvti.non_integer_durations"] = fractional
    if wrapped:
        metadata["pvti.tid_wrapped"] = wrapped
    if walk.bad_duration:
        metadata["warnings.bad_duration"] = walk.bad_duration
    return Profile(
        path.stem,
        {"target": {"source_format": [FORMAT]}, "events": events, "threads": threads},
        source=str(path),
        metadata=metadata,
    )


class _Labels:
    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.labels: list[str] = []

    def code(self, label: str | None) -> int:
        if label is None:
            return -1
        code = self.index.get(label)
        if code is None:
            code = self.index[label] = len(self.labels)
            self.labels.append(label)
        return code


class _Walk:
    def __init__(self) -> None:
        self.pid: list[int] = []
        self.tid: list[int] = []
        self.parent: list[int] = []
        self.depth: list[int] = []
        self.label: list[str | None] = []
        self.channel: list[str | None] = []
        self.start: list[float] = []
        self.dur: list[float] = []
        self.threads: list[tuple[int, int]] = []
        self.missing = dict.fromkeys(PROBED_ATTRIBUTES, 0)
        self.bad_duration = 0
        self.attributes: list[str] = []  # public attribute names of the first event (recorded once)
        self.tid_wrapped = 0  # threads whose 64-bit unsigned id was stored as its signed int64 bits


def _text(value: object) -> str | None:
    if value is None or value is _MISSING:
        return None
    if isinstance(value, str):
        return value
    name = getattr(value, "name", None)  # a channel object rather than its name
    return name if isinstance(name, str) else str(value)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _walk(trace) -> _Walk:
    """Depth-first walk of every thread's events with an explicit stack (no recursion).

    An event without a timestamp starts where its previous sibling ended (the first child
    at its parent's start, the first top-level event of a thread at 0).
    """
    out = _Walk()
    next_child: list[float] = []  # per row: where its next child without a timestamp starts
    for process in trace.processes:
        pid = int(process.pid)
        for thread in process.threads:
            tid = int(thread.tid)
            if tid >= 1 << 63:  # an unsigned 64-bit id: keep its bits as a signed int64
                tid -= 1 << 64
                out.tid_wrapped += 1
            out.threads.append((pid, tid))
            cursor = 0.0  # where the thread's next top-level event without a timestamp starts
            # stack of (event, parent row, depth); reversed so events come out in time order
            stack = [(ev, -1, 0) for ev in reversed(list(thread.events))]
            while stack:
                event, parent, depth = stack.pop()
                row = len(out.label)
                if not out.attributes:
                    out.attributes = sorted(a for a in dir(event) if not a.startswith("_"))
                out.pid.append(pid)
                out.tid.append(tid)
                out.parent.append(parent)
                out.depth.append(depth)
                out.label.append(_text(getattr(event, "label", None)))
                duration = _number(getattr(event, "duration", None))
                if not duration >= 0:
                    out.bad_duration += 1
                    duration = max(duration, 0.0) if duration == duration else float("nan")
                out.dur.append(duration)
                timestamp = getattr(event, "timestamp", _MISSING)
                if timestamp is _MISSING:
                    out.missing["timestamp"] += 1
                    start = next_child[parent] if parent >= 0 else cursor
                else:
                    start = _number(timestamp)
                out.start.append(start)
                end = start + (duration if duration == duration else 0.0)
                next_child.append(start)
                if parent >= 0:
                    next_child[parent] = end
                else:
                    cursor = end
                channel = getattr(event, "channel", _MISSING)
                if channel is _MISSING:
                    out.missing["channel"] += 1
                out.channel.append(_text(channel))
                children = event.children()
                if len(children):
                    stack.extend((child, row, depth + 1) for child in reversed(list(children)))
    return out
