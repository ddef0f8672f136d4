"""Storage format of the pva test double's traces (``.pvti`` files of the double's own making).

NOT the real .pvti format (which is not public). A double trace file is JSON::

    {"pva_double": "trace", "version": 1, "omit": ["timestamp", "channel"],
     "processes": [{"pid": 4532, "threads": [{"tid": 1,
         "events": [[label, duration_us, timestamp_us, channel, parent_index], ...]}]}]}

Events of a thread are a flat list in depth-first order; ``parent_index`` is the
index of the enclosing event in that list (-1 at top level), so arbitrarily deep
nesting needs no recursion to store or load. ``omit`` lists attributes the
double's events must NOT expose (to exercise the reader's probing path).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MARKER = "trace"


def write_trace(path: str | os.PathLike[str], processes: list[dict], omit: tuple[str, ...] = ()) -> Path:
    """Write a double trace. ``processes``: ``[{"pid", "threads": [{"tid", "events": [...]}]}]``."""
    path = Path(path)
    doc = {"pva_double": MARKER, "version": 1, "omit": list(omit), "processes": processes}
    path.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    return path


def load_trace(path: str | os.PathLike[str]) -> dict:
    """Load a double trace document; raise RuntimeError (as pva would fail) when it is not one."""
    try:
        doc = json.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RuntimeError(f"pva: cannot open trace {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("pva_double") != MARKER:
        raise RuntimeError(f"pva: {path} is not a trace")
    return doc
