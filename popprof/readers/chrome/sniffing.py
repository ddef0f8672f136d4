"""What the Chrome reader knows of a file before reading it: ``FORMAT``, ``sniff`` and where the event array is.

Imports no pandas: the early start of the parse worker (:mod:`.early`) uses it before the rest of popprof is
imported.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...io.files import read_head
from ...io.jsonbytes import WS, member
from .framing import TRACE_EVENTS, strip_bom

FORMAT = "chrome_trace"


_ARRAY_START = re.compile(rb"^" + WS + rb"\[" + WS + rb"(\{|\]|$)")
_PH_KEY = re.compile(member(b"ph", b'"'))


def sniff(path: Path, head: bytes) -> bool:
    """A JSON array of trace events, or an object with ``traceEvents``."""
    if path.is_dir():
        return False
    head = strip_bom(head)
    if head.startswith(b"{"):
        return TRACE_EVENTS.search(head) is not None
    if head.startswith(b"["):
        if head.rstrip() in (b"[", b"[]"):
            return path.name.endswith((".json", ".json.gz"))
        return _ARRAY_START.match(head) is not None and _PH_KEY.search(head) is not None
    return False


#: What a Kineto trace's events hold in their arguments when the profiler recorded input shapes
#: (``record_shapes=True``: ``cpu_op`` events' ``Input Dims``) or collectives' sizes (NCCL kernels'
#: ``In msg nelems``); the analyses of ``docs/operations.md`` and ``docs/collectives.md`` need them: the commands
#: read the arguments when a trace has them (``--shapes`` decides otherwise).
ARGUMENT_MARKERS = (b'"Input Dims"', b'"In msg nelems"')
#: The marker of a CUPTI range-profiler trace, whose ``cuda_profiler_range`` kernels hold their hardware counters
#: in their arguments (``metrics/counters.py``): the reader reads such a trace's arguments whatever it was asked,
#: so every figure of it (``counters.*``) is the same from Python, ``summary``, ``baseline``, ``diff`` and the store.
COUNTER_MARKERS = (b'"cuda_profiler_range"',)

#: How far into a trace :func:`records_arguments` looks: Kineto writes the host operators (and so their shapes)
#: first; on every real trace of ``fixtures/real/traces`` the first marker is within 20 kB.
ARGUMENT_HEAD_BYTES = 1 << 20


def records_arguments(path: Path, markers: tuple[bytes, ...] = ARGUMENT_MARKERS) -> bool:
    """Whether the trace at ``path`` records operators' input shapes, collectives' sizes or hardware counters
    (``markers``) in its first :data:`ARGUMENT_HEAD_BYTES` (decompressed): the cue for reading the events'
    arguments, which the operator, collective and counter analyses need and which cost a slower parse
    (``docs/traces.md``)."""
    head = read_head(path, ARGUMENT_HEAD_BYTES)
    return any(marker in head for marker in markers)


def source_records(path: Path, markers: tuple[bytes, ...] = ARGUMENT_MARKERS) -> bool:
    """Whether the source at ``path`` is a Chrome trace (a file, or the first trace file of a directory) that
    holds one of ``markers`` in its head (:func:`records_arguments`): what ``check``, ``summary`` and ``store
    add`` look at to read the events' arguments. False for other formats, and for a file that cannot be read
    (the read itself says what is wrong with it)."""
    from ...model.errors import InputError

    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")) and p.is_file())
        path = found[0] if found else path
    try:
        return path.is_file() and sniff(path, read_head(path)) and records_arguments(path, markers)
    except (OSError, InputError):
        return False


def event_prefix(path: Path) -> str:
    """The ijson-style prefix of the event array: ``item`` for a top-level array, else ``traceEvents.item``."""
    head = strip_bom(read_head(path, 4096))  # as detection read it: a gzip cut off reads as far as it goes
    return "item" if head.startswith(b"[") else "traceEvents.item"


def reads_args(path: Path, with_args: bool) -> bool:
    """Whether a read of ``path`` keeps the events' arguments: as asked, and always for a CUPTI range-profiler
    trace (:data:`COUNTER_MARKERS`), whose counters are there. The one rule the read and the worker a command
    starts early both follow."""
    return with_args or records_arguments(path, COUNTER_MARKERS)
