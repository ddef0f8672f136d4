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


def event_prefix(path: Path) -> str:
    """The ijson-style prefix of the event array: ``item`` for a top-level array, else ``traceEvents.item``."""
    head = strip_bom(read_head(path, 4096))  # as detection read it: a gzip cut off reads as far as it goes
    return "item" if head.startswith(b"[") else "traceEvents.item"
