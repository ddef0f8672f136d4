"""``pva.openTrace`` of the test double (NOT the SDK): only what the reference facts document.

``trace.processes[i].pid``, ``trace.process(pid)``, ``process.threads[j].tid``,
``process.thread(tid)``, ``thread.events`` (top-level events in time order),
``event.label``, ``event.duration`` (us), ``event.children()`` (a method), and
``event.timestamp`` / ``event.channel`` (likely names, unconfirmed) unless the
stored trace omits them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trace_store import load_trace  # noqa: E402

sys.path.pop(0)


class _List:
    """Indexable, iterable, sized (like pva's lists)."""

    def __init__(self, items: list) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int):
        return self._items[index]

    def __iter__(self):
        return iter(self._items)


class Event:
    __slots__ = ("label", "duration", "_children")

    def children(self) -> _List:
        return _List(self._children)


class TimedEvent(Event):
    __slots__ = ("timestamp",)


class ChannelEvent(Event):
    __slots__ = ("channel",)


class FullEvent(Event):
    __slots__ = ("timestamp", "channel")


def _event_class(omit: set[str]) -> type:
    has_ts, has_ch = "timestamp" not in omit, "channel" not in omit
    if has_ts and has_ch:
        return FullEvent
    return TimedEvent if has_ts else ChannelEvent if has_ch else Event


class Thread:
    def __init__(self, tid: int, events: list) -> None:
        self.tid = tid
        self.events = _List(events)


class Process:
    def __init__(self, pid: int, threads: list[Thread]) -> None:
        self.pid = pid
        self.threads = _List(threads)

    def thread(self, tid: int) -> Thread:
        return _find(self.threads, "tid", tid)


class Trace:
    def __init__(self, processes: list[Process]) -> None:
        self.processes = _List(processes)

    def process(self, pid: int) -> Process:
        return _find(self.processes, "pid", pid)


def _find(items: _List, key: str, value: int):
    """The item whose ``key`` attribute equals ``value`` (``process(pid)`` / ``thread(tid)``)."""
    for item in items:
        if getattr(item, key) == value:
            return item
    raise IndexError(f"no {'process' if key == 'pid' else 'thread'} {value}")


def _build_events(rows: list, cls: type) -> list:
    objects = []
    top = []
    for label, duration, timestamp, channel, parent in rows:
        ev = cls()
        ev.label = label
        ev.duration = duration
        ev._children = []
        if hasattr(cls, "timestamp"):
            ev.timestamp = timestamp
        if hasattr(cls, "channel"):
            ev.channel = channel
        objects.append(ev)
        (top if parent < 0 else objects[parent]._children).append(ev)
    return top


def openTrace(path: str | os.PathLike[str]) -> Trace:  # noqa: N802 - pva's name
    """Open a double trace file written by ``trace_store.write_trace``."""
    doc = load_trace(path)
    cls = _event_class(set(doc.get("omit", [])))
    processes = []
    for p in doc["processes"]:
        threads = [Thread(t["tid"], _build_events(t["events"], cls)) for t in p["threads"]]
        processes.append(Process(p["pid"], threads))
    return Trace(processes)
