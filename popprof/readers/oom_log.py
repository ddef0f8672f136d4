"""Reader for logs holding Poplar's out-of-memory messages.

When a graph does not fit, compilation fails with
``poplar::graph_memory_allocation_error`` and the only artefact a user has is
its message in a log::

    Out of memory on tile 1: 674752 bytes used but tiles only have 638976 bytes of memory

or, from SDK 2.1 (where ``debug.allowOutOfMemory`` lets compilation finish and save a profile)::

    Out of memory: Cannot fit all variable data onto one or more tiles. Profile saved to: ./report_OOM/profile.pop

Poplar prints two more forms when memory runs out (Graphcore, "Memory and Performance Optimisation on
the IPU", section 6.1, "Identifying when you've run out of IPU memory")::

    Tile 0 receives more data than it has total memory in exchange 'NAME'
    tile 0 _poplar_start must be 0 not 638976 bytes from the start of memory

(an exchange that cannot fit on its destination tile; code that does not fit in the tile's memory). Each
names a tile but no bytes used: its row keeps the message as printed in ``reason``. A line that looks like a
memory error (``out of memory``, ``_poplar_start``, ``more data than it has total memory``, ``memory
allocation error``) but is none of these forms is listed as unparsed (``oom_log.unparsed``,
``warnings.unparsed_memory_errors``), never dropped silently.

The message may sit anywhere in a line (``what():  ...``, ``Exception: main.cpp:413 ...``,
a Python traceback, poprun's line prefix) among any other program output. Each
message is one failed compilation; a log of retries holds several. The reader
fills the ``out_of_memory`` table (one row per message: compilation index,
tile, bytes used, capacity, overflow, line) and a ``target`` row with the tile
capacity. See ``docs/readers.md``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..io.files import HEAD_BYTES
from ..io.plural import plural
from ..io.sources import source_metadata
from ..model.errors import InputError
from ..model.profile import Profile
from ..model.schema import conform
from . import textload

FORMAT = "oom_log"

#: Largest file scanned beyond its head (as the text summary reader).
SCAN_LIMIT_BYTES = 256 << 20
#: Suffixes of files worth scanning beyond the head (logs).
LOG_SUFFIXES = frozenset({".txt", ".log", ".out", ".err"})
#: Strings that start a message (found with str.find before the regexes check them).
NEEDLES = (
    "Out of memory on tile",
    "Out of memory: Cannot fit",
    "receives more data than it has total memory",
    "_poplar_start must be",
)
NEEDLE = NEEDLES[0]
#: An identical message within this many lines of the previous one is the same failure printed twice
#: (e.g. a C++ ``what():`` line and the Python exception re-raising it).
REPEAT_WINDOW_LINES = 20
#: Figures beyond these are not a real tile (largest IPU tile memory is well under 1 MiB; pods have
#: at most tens of thousands of tiles per graph): the line is corrupt, not a finding.
MAX_TILE_BYTES = 64 << 20
MAX_TILE_INDEX = 10_000_000

_MESSAGE_RE = re.compile(
    r"Out of memory on tile\s+(?P<tile>[-+]?\d[\d,]*)\s*:\s*(?P<used>[-+]?\d[\d,]*)\s+bytes used but tiles? "
    r"only ha(?:ve|s)\s+(?P<capacity>[-+]?\d[\d,]*)\s+bytes(?: of memory)?"
    r"|Out of memory:\s*(?P<reason>Cannot fit[^.\n]*?)\s*(?:\.|$)(?:[ \t]*Profile saved to:[ \t]*(?P<profile>\S+))?"
    r"|(?P<exchange>[Tt]ile\s+(?P<xtile>\d[\d,]*)\s+receives more data than it has total memory in exchange"
    r"(?:\s+'[^'\n]*'|\s+\S+)?)"
    r"|(?P<code>[Tt]ile\s+(?P<ctile>\d[\d,]*)\s+_poplar_start must be 0 not\s+[\d,]+\s+bytes from the start of"
    r" memory)",
    re.M,
)
#: A line that looks like a memory error: one that is none of the forms above is reported as unparsed. Not the
#: text summary's "N tile(s) out of memory" histogram line, nor ``debug.allowOutOfMemory``.
_LOOKS_LIKE_RE = re.compile(
    r"(?i)(?<!tile\(s\) )out of memory|more data than it has total memory|_poplar_start must|memory allocation error"
)
#: Unparsed lines kept in the metadata (the count is always whole).
MAX_UNPARSED_KEPT = 20


@dataclass
class OomMessages:
    """Out-of-memory messages found in a text, in order."""

    rows: list[tuple] = field(
        default_factory=list
    )  # compilation, tile, used, capacity, over, line, reason, path
    repeated: int = 0
    problems: list[str] = field(default_factory=list)
    #: (line, text) of lines that look like a memory error but hold no form the reader knows
    unparsed: list[tuple[int, str]] = field(default_factory=list)

    @property
    def frame(self) -> pd.DataFrame:
        """The ``out_of_memory`` table."""
        frame = pd.DataFrame(
            self.rows,
            columns=[
                "compilation",
                "tile",
                "bytes_used",
                "capacity_bytes",
                "over_bytes",
                "line",
                "reason",
                "profile_path",
            ],
        )
        frame = frame.astype(
            {
                "tile": "Int32",
                "bytes_used": "Int64",
                "capacity_bytes": "Int64",
                "over_bytes": "Int64",
                "line": "Int64",
            }
        )
        return conform("out_of_memory", frame)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def find_messages(text: str, first_line: int = 1) -> OomMessages:
    """Every out-of-memory message in ``text`` (line numbers counted from ``first_line``).

    A message whose figures are negative or absurd is recorded in ``problems``
    (the caller decides whether that is fatal), not in ``rows``.
    """
    found = OomMessages()
    line, pos = first_line, 0
    previous: tuple | None = None
    previous_line = -REPEAT_WINDOW_LINES - 1
    understood: set[int] = set()
    for m in _MESSAGE_RE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        understood.add(line)
        if (
            m["exchange"] is not None or m["code"] is not None
        ):  # a tile named, no bytes: the message is the reason
            printed = " ".join((m["exchange"] or m["code"]).split())
            tile = _int(m["xtile"] or m["ctile"])
            if tile > MAX_TILE_INDEX:
                found.problems.append(
                    f"line {line}: an absurd tile index in an out-of-memory message ({printed!r})"
                )
                continue
            key_text = (printed,)
            if key_text == previous and line - previous_line <= REPEAT_WINDOW_LINES:
                found.repeated += 1
                previous_line = line
                continue
            previous, previous_line = key_text, line
            found.rows.append((len(found.rows), tile, None, None, None, line, printed, None))
            continue
        if m["reason"] is not None:  # SDK 2.1+: no tile named
            key_text = (m["reason"], m["profile"])
            if key_text == previous and line - previous_line <= REPEAT_WINDOW_LINES:
                found.repeated += 1
                previous_line = line
                continue
            previous, previous_line = key_text, line
            found.rows.append(
                (len(found.rows), None, None, None, None, line, m["reason"].strip(), m["profile"])
            )
            continue
        tile, used, capacity = _int(m["tile"]), _int(m["used"]), _int(m["capacity"])
        problem = _problem(tile, used, capacity)
        if problem:
            found.problems.append(f"line {line}: {problem} ({m.group(0)!r})")
            continue
        key = (tile, used, capacity)
        if key == previous and line - previous_line <= REPEAT_WINDOW_LINES:
            found.repeated += 1
            previous_line = line
            continue
        previous, previous_line = key, line
        found.rows.append((len(found.rows), tile, used, capacity, used - capacity, line, None, None))
    found.unparsed = _unparsed(text, first_line, understood)
    return found


def _unparsed(text: str, first_line: int, understood: set[int]) -> list[tuple[int, str]]:
    """Lines that look like a memory error (:data:`_LOOKS_LIKE_RE`) on which no message form was found."""
    out: list[tuple[int, str]] = []
    line, pos, last = first_line, 0, -1
    for m in _LOOKS_LIKE_RE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        if line == last or line in understood:
            continue
        last = line
        begin = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.start())
        out.append((line, " ".join(text[begin : end if end >= 0 else len(text)].split())[:300]))
    return out


def _problem(tile: int, used: int, capacity: int) -> str | None:
    if tile < 0 or used < 0 or capacity < 0:
        return "a negative figure in an out-of-memory message"
    if capacity == 0 or capacity > MAX_TILE_BYTES or used > 1000 * MAX_TILE_BYTES:
        return "an absurd tile memory figure in an out-of-memory message"
    if tile > MAX_TILE_INDEX:
        return "an absurd tile index in an out-of-memory message"
    if used <= capacity:
        return "an out-of-memory message whose bytes used do not exceed the capacity"
    return None


# -- detection ---------------------------------------------------------------------------------------


def sniff(path: Path, head: bytes) -> bool:
    """A text file with an out-of-memory message in its head (or anywhere in a log file)."""
    if not path.is_file() or not head or b"\x00" in head[:4096]:
        return False
    if any(n.encode() in head for n in NEEDLES):
        return True
    if len(head) < HEAD_BYTES or path.suffix.lower() not in LOG_SUFFIXES:
        return False
    if path.stat().st_size > SCAN_LIMIT_BYTES:
        return False
    text = _load_text(path)
    return any(n in text for n in NEEDLES)


def _load_text(path: Path) -> str:
    return textload.load_text(path)


def target_frame(capacities: pd.Series) -> pd.DataFrame:
    """A target row whose ``bytes_per_tile`` is the capacity the messages agree on (missing otherwise)."""
    unique = pd.unique(capacities.dropna())
    per_tile = int(unique[0]) if len(unique) == 1 else None
    return pd.DataFrame({"source_format": [FORMAT], "bytes_per_tile": pd.array([per_tile], dtype="Int64")})


def read(path: Path, **_options: object) -> Profile:
    """Read the out-of-memory messages of a log as one Profile (table ``out_of_memory``).

    Raises :class:`InputError` when the text holds no message, or a message
    with a negative or absurd figure.
    """
    path = Path(path)
    try:
        found = find_messages(_load_text(path))
    finally:
        textload.release()
    return _profile(path, found)


def read_streaming(path: Path, **_options: object) -> Profile | None:
    """:func:`read` for a log of any size: one streaming pass over it, in windows of whole lines, in bounded
    memory (``popprof record`` on a job whose output after the message exceeds ``text-bytes``); ``None``
    when the log holds no message."""
    path = Path(path)
    found = OomMessages()
    for first_line, text in textload.windows(path):
        if not any(n in text for n in NEEDLES) and not _LOOKS_LIKE_RE.search(text):
            continue
        part = find_messages(text, first_line)
        offset = len(found.rows)
        found.rows += [(offset + row[0], *row[1:]) for row in part.rows]
        found.repeated += part.repeated
        found.problems += part.problems
        found.unparsed += part.unparsed
    return _profile(path, found) if found.rows or found.problems else None


def _profile(path: Path, found: OomMessages) -> Profile:
    if found.problems:
        raise InputError(path, found.problems[0], "the log is corrupt or was edited")
    if not found.rows:
        seen = (
            f"; {plural(len(found.unparsed), 'line')} {'looks' if len(found.unparsed) == 1 else 'look'} like a "
            "memory error in no form popprof reads, the first: "
            f"line {found.unparsed[0][0]}: {found.unparsed[0][1]!r}"
            if found.unparsed
            else ""
        )
        raise InputError(
            path,
            "no Poplar out-of-memory message in the text" + seen,
            "expected 'Out of memory on tile N: X bytes used but tiles only have Y bytes of memory' or another "
            "form of docs/readers.md",
        )
    table = found.frame
    target = target_frame(table["capacity_bytes"])
    meta: dict[str, object] = source_metadata(FORMAT, [path])
    meta.update(
        {
            "oom_log.messages": len(table),
            "oom_log.repeated_messages": found.repeated,
            "oom_log.capacities": json.dumps(sorted({int(c) for c in table["capacity_bytes"].dropna()})),
        }
    )
    if (
        found.unparsed
    ):  # never dropped silently: counted, the first lines kept, said on stderr as a read problem
        meta["warnings.unparsed_memory_errors"] = len(found.unparsed)
        meta["oom_log.unparsed"] = json.dumps(
            [f"line {n}: {text}" for n, text in found.unparsed[:MAX_UNPARSED_KEPT]]
        )
    return Profile(
        path.name.split(".")[0] or path.stem,
        {"target": target, "out_of_memory": table},
        source=str(path),
        metadata=meta,
    )
