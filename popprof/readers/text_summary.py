"""Reader for Poplar's text summary (``printProfileSummary`` / ``printGraphSummary`` output).

People paste this text into logs, CI output and bug reports, so the reader
finds the summary inside a longer text (also when every line carries a fixed
prefix such as poprun's ``[1,0]<stdout>:``) and parses it by labels and
indentation, not by columns: blank lines, extra fields, other widths, CRLF and
missing sections are fine. Every number is kept; lines it does not recognise
are counted and kept in the metadata (``text_summary.unrecognised``).

Tables: ``target``, ``memory_totals`` (whole-profile figures with ``tile``
missing, per-tile ``Tile # T memory usage:`` blocks with ``tile`` set, the
maxima with their tiles), ``tile_histogram``, ``programs`` (from execution
step lines) and ``metadata`` (graph counts, ``tiles_out_of_memory``, reader
notes). There is no ``tiles`` table: a summary names only a few tiles.
See ``docs/readers.md`` for the format notes.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..io.files import HEAD_BYTES
from ..io.plural import plural
from ..io.sources import source_metadata
from ..model.errors import InputError
from ..model.profile import Profile
from ..model.schema import PROGRAM_TYPE_CATEGORY, conform
from . import oom_log, textload
from . import text_execution as te
from .arch import infer_arch
from .lazy_profile import LazyProfile

FORMAT = "text_summary"

#: Largest file scanned beyond its head when the summary is not in the first 64 KiB.
SCAN_LIMIT_BYTES = 256 << 20
#: Suffixes of files worth scanning beyond the head (logs).
LOG_SUFFIXES = frozenset({".txt", ".log", ".out", ".err", ".summary"})
#: How many unrecognised lines / extra fields the metadata keeps.
KEEP_UNRECOGNISED = 50
KEEP_EXTRA = 200

#: The memory regions Poplar prints (normalised); an excluding-gaps total is derived only from all three.
KNOWN_REGIONS = frozenset({"non-interleaved", "interleaved", "overflowed"})
#: Program types named in execution step lines outside an ``Execution:`` section (reference facts).
PROGRAM_TYPES = frozenset(PROGRAM_TYPE_CATEGORY) | {"Repeat", "Sequence", "OnEveryTileSwitch"}

SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}
FREQ_UNITS: dict[str, float] = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}

#: The first figure of an execution section: pasted without its ``Execution:`` heading (a log of labelled
#: execution summaries, ``float`` / ``float2``), it starts a headerless execution summary.
HEADERLESS_NEEDLE = "Total cycles"
_HEADERLESS_RE = re.compile(r"^(?P<prefix>.*?)[ \t]*Total cycles\s*:\s*\d[\d,]*(?:\.\d+)?\s*(?:\(|$)")
#: Strings that start a summary block (found with str.find before the regex checks the line).
#: ``By Tile (Excluding Gaps):`` starts the tile histogram of a memory section, also pasted on its own.
START_NEEDLES: tuple[str, ...] = (
    "Target:",
    "Graph:",
    "Memory Usage:",
    "memory usage:",
    "Execution:",
    "By Tile (Excluding Gaps):",
    HEADERLESS_NEEDLE,
)
_START_RE = re.compile(
    r"(?:Target|Graph|Memory Usage|Execution|By Tile \(Excluding Gaps\)|Tile\s*#\s*[\d,]+\s+memory usage)"
    r":[ \t]*\r?$",
    re.M,
)
#: Column-0 headings that, seen a second time, start the next summary.
_NEXT_SUMMARY_HEADINGS = frozenset({"Target:", "Graph:", "Execution:"})
_TILE_BLOCK_RE = re.compile(r"^Tile\s*#\s*(?P<tile>[\d,]+)\s+memory usage\s*:?$", re.I)
_HIST_RE = re.compile(r"^(?P<low>\d[\d,]*)\s*-\s*(?P<high>\d[\d,]*)\s+(?P<bar>\**)\s*(?P<count>\d[\d,]*)$")
_MAX_RE = re.compile(
    r"^Maximum\s*\((?P<which>Including|Excluding)\s+Gaps\)\s*:\s*(?P<bytes>\d[\d,]*)"
    r"(?:\s*\([^)]*\))?(?:\s*on\s+tile\s*#?\s*(?P<tile>\d[\d,]*))?\s*$",
    re.I,
)
_OOM_RE = re.compile(r"^(?P<count>\d[\d,]*)\s+tiles?(?:\(s\))?\s+(?:are\s+)?out\s+of\s+memory\.?$", re.I)
_NUM_LEAF_RE = re.compile(
    r"^(?P<label>.*?\S)\s*:?\s+(?P<num>[-+]?\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z]+)?$"
)
_TEXT_LEAF_RE = re.compile(r"^(?P<label>[^:\s][^:]*?)\s*:\s+(?P<text>\S.*)$")
_HEADING_RE = re.compile(r"^(?P<label>[^\s:].*?)\s*:$")
_BARE_HEADING_RE = re.compile(r"^[A-Z][a-z]+(?: [A-Za-z][a-z]+){0,3}$")
_UNKNOWN_HEADING_RE = re.compile(r"^[A-Z][A-Za-z0-9 ()/#,.'_-]{0,60}:$")
_PAREN_VALUE_RE = re.compile(r"\((?P<num>\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z]*)\)")
_PAREN_NUMERIC_RE = re.compile(r"\([^)]*\d[^)]*\)")
_COMPLETE_END_RE = re.compile(r"(?:\d\s*(?:[kKMG]i?B|B|[kMG]?Hz)|out of memory\.?|:)\s*$")
_TYPE_NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9_]*$")

TARGET_FIELDS: dict[str, str] = {
    "number of ipus": "num_ipus",
    "ipus": "num_ipus",
    "tiles per ipu": "tiles_per_ipu",
    "total tiles": "num_tiles",
    "number of tiles": "num_tiles",
    "tiles": "num_tiles",
    "number of replicas": "num_replicas",
    "replicas": "num_replicas",
    "ipus per replica": "ipus_per_replica",
}
TARGET_SIZES: dict[str, str] = {
    "memory per-tile": "bytes_per_tile",
    "memory per tile": "bytes_per_tile",
    "bytes per tile": "bytes_per_tile",
    "total memory": "total_memory_bytes",
}


class TruncatedSummaryWarning(UserWarning):
    """The summary looks cut off; the figures parsed before the cut are returned."""


@dataclass
class _Block:
    """One summary found in a text: its first line number (1-based), line prefix and lines."""

    first_line: int
    prefix: str
    lines: list[str]
    cut_mid_line: bool = False
    offset: int = 0
    label: str | None = None
    headerless: bool = False  # an execution section whose ``Execution:`` heading was not printed or was cut
    #: the line (1-based) that ended the block holding bytes that are not UTF-8 text (a damaged file), else 0
    ends_at_damage: int = 0


#: Largest values the schema's integer columns hold (bytes and cycles Int64, tiles and counts Int32).
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
#: Tile of a ``Tile # T`` block whose index does not fit: its figures are dropped.
DROPPED_TILE = -1


def _fits(value: float, limit: int) -> bool:
    """Whether a parsed figure fits its column (a corrupt line can carry 20 digits)."""
    return 0 <= value <= limit


@dataclass
class _Parsed:
    target: dict[str, float] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    totals: list[tuple[object, str, str, int]] = field(default_factory=list)
    seen: set[tuple[object, str, str]] = field(default_factory=set)
    histogram: list[tuple[int, int, int]] = field(default_factory=list)
    steps: list[tuple[str, str]] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    unrecognised: list[str] = field(default_factory=list)
    unrecognised_count: int = 0
    warnings: list[str] = field(default_factory=list)
    execution: te.ExecutionFigures = field(default_factory=te.ExecutionFigures)
    unparsed_figures: list[str] = field(default_factory=list)

    def add_total(self, tile: int | None, group: str, category: str, value: int, where: str) -> None:
        if tile == DROPPED_TILE:
            return
        if not _fits(value, INT64_MAX) or (tile is not None and not _fits(tile, INT32_MAX)):
            self.unparsed_figures.append(f"{where.rsplit('/', 1)[-1]}: {value:,} (too large)")
            return
        key = (tile, group, category)
        if (
            key in self.seen
        ):  # a repeated figure (e.g. an overlapped breakdown): keep the first, note the rest
            self.note_extra(where, str(value))
            return
        self.seen.add(key)
        self.totals.append((tile, group, category, value))

    def note_extra(self, key: str, value: str) -> None:
        if len(self.extra) < KEEP_EXTRA and key not in self.extra:
            self.extra[key] = value

    def note_unrecognised(self, line_no: int, text: str) -> None:
        self.unrecognised_count += 1
        if len(self.unrecognised) < KEEP_UNRECOGNISED:
            self.unrecognised.append(f"line {line_no}: {text.strip()[:200]}")

    @property
    def usable(self) -> bool:
        return bool(
            self.target
            or self.totals
            or self.histogram
            or self.steps
            or self.execution.any
            or "tiles_out_of_memory" in self.meta
            or any(k.startswith("graph.") for k in self.meta)
        )


# -- detection ---------------------------------------------------------------------------------------


def sniff(path: Path, head: bytes) -> bool:
    """A text (not binary) file holding a Poplar summary block (in its head, or anywhere in a log file)."""
    if not path.is_file() or not head or b"\x00" in head[:4096]:
        return False
    if _first_start(_decode(head)) is not None:
        return True
    if len(head) < HEAD_BYTES or path.suffix.lower() not in LOG_SUFFIXES:
        return False
    if path.stat().st_size > SCAN_LIMIT_BYTES:
        return False
    return _first_start(_load_text(path)) is not None  # bounded: text-bytes (docs/limits.md)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").lstrip("\ufeff")


def _load_text(path: Path) -> str:
    """The whole text, within the ``text-bytes`` and ``line-bytes`` limits (docs/limits.md)."""
    return textload.load_text(path)


def _find(text: str, needle: str, at: int, hits: dict[str, tuple[int, int]] | None) -> int:
    """``text.find(needle, at)``, remembering each needle's last answer so that repeated searches from
    increasing positions (one per summary of a long log) never scan the same text twice."""
    if hits is not None and needle in hits:
        searched_from, hit = hits[needle]
        if searched_from <= at and (hit < 0 or hit >= at):
            return hit
    hit = text.find(needle, at)
    if hits is not None:
        hits[needle] = (at, hit)
    return hit


def _first_start(
    text: str, pos: int = 0, hits: dict[str, tuple[int, int]] | None = None
) -> tuple[int, str] | None:
    """Offset of the first line that starts a summary (and that line's prefix), from ``pos``.

    Candidates are found with ``str.find`` (fast on large logs), then checked
    with :data:`_START_RE` and for an indented line below. ``hits`` carries the
    searches over from one call to the next (see :func:`_find`).
    """
    best: tuple[int, str] | None = None
    for needle in START_NEEDLES:
        at = pos
        while (at := _find(text, needle, at, hits)) >= 0 and (best is None or at < best[0]):
            hit = at
            at += len(needle)
            line_start = text.rfind("\n", 0, hit) + 1
            line_end = text.find("\n", hit)
            line = text[line_start : len(text) if line_end < 0 else line_end]
            if needle == HEADERLESS_NEEDLE:
                if (start := _headerless_start(text, line, line_start, line_end)) is not None:
                    best = start
                    break
                continue
            match = _START_RE.search(line)
            if match is None:
                continue
            prefix = line[: match.start()]
            if match.group(0).startswith("Execution"):
                follows = _followed_by_execution
            elif _TILE_BLOCK_RE.match(match.group(0).strip()):
                follows = _followed_by_memory_heading
            else:
                follows = _followed_by_indented
            if (
                len(prefix) <= 80
                and not prefix.rstrip(" \t")[-1:].isalpha()
                and follows(text, line_start + match.end(), prefix)
            ):
                best = (line_start, prefix)
                break
    return best


def _headerless_start(text: str, line: str, line_start: int, line_end: int) -> tuple[int, str] | None:
    """``(offset, prefix)`` when ``line`` is a ``Total cycles: N`` figure that starts an execution section
    printed without its ``Execution:`` heading: another execution figure follows within a few lines."""
    match = _HEADERLESS_RE.match(line.rstrip("\r"))
    if match is None:
        return None
    prefix = match["prefix"]
    if prefix.strip() and (len(prefix) > 80 or prefix.rstrip(" \t")[-1:].isalpha()):
        return None
    prefix = prefix if prefix.strip() else ""
    if line_end < 0:
        return None
    for following in text[line_end : line_end + 4096].splitlines()[1:4]:
        body = following[len(prefix) :].strip() if following.startswith(prefix) else ""
        if body:
            return (line_start, prefix) if te.FIGURE_RE.match(body) else None
    return None


def _followed_by_indented(text: str, pos: int, prefix: str) -> bool:
    """The next non-blank line (within a few) carries ``prefix`` and is indented."""
    for line in text[pos : pos + 4096].splitlines()[1:8]:
        if not line.strip():
            continue
        if not line.startswith(prefix):
            return False
        body = line[len(prefix) :]
        if not body.strip():
            continue
        return body[:1] in (" ", "\t")
    return False


def _followed_by_memory_heading(text: str, pos: int, prefix: str) -> bool:
    """A ``Tile # T memory usage:`` line starts a summary (of that one tile) when ``Memory Usage:`` follows."""
    for line in text[pos : pos + 4096].splitlines()[1:8]:
        if not line.strip():
            continue
        return line.startswith(prefix) and line[len(prefix) :].strip() == "Memory Usage:"
    return False


def _followed_by_execution(text: str, pos: int, prefix: str) -> bool:
    """An ``Execution:`` heading starts a summary when an execution figure, a vertex-type heading, a
    ``Programs executed`` list or an indented step line follows within a few lines."""
    for line in text[pos : pos + 4096].splitlines()[1:8]:
        if not line.strip():
            continue
        if not line.startswith(prefix):
            return False
        body = line[len(prefix) :].strip()
        if not body:
            continue
        if te.FIGURE_RE.match(body) or te.PROGRAMS_HEADING_RE.match(body) or te.VERTEX_HEADING_RE.match(body):
            return True
        return line[len(prefix) :][:1] in (" ", "\t")
    return False


#: Characters of text split into lines at a time when extracting a block (doubled while the block goes on).
BLOCK_WINDOW_CHARS = 1 << 15


def find_blocks(text: str) -> list[_Block]:
    """Every summary in ``text``, in order (a log can hold several, e.g. one per engine).

    Each block is cut from a window of the text after its start (doubled until the block ends inside
    it), and line numbers are counted incrementally, so a large log with many summaries is read in one
    pass rather than once per summary.
    """
    blocks: list[_Block] = []
    pos = 0
    counted_to, line_no = 0, 1
    hits: dict[str, tuple[int, int]] = {}
    while (start := _first_start(text, pos, hits)) is not None:
        offset, prefix = start
        window = BLOCK_WINDOW_CHARS
        while True:
            end = min(len(text), offset + window)
            if end < len(text):  # never split a line: the window ends after its last full line
                end = text.rfind("\n", offset, end) + 1 or min(len(text), offset + window)
            rest = text[offset:end]
            with_ends = rest.splitlines(keepends=True)
            lines = [line.rstrip("\r\n") for line in with_ends]
            headerless = _HEADERLESS_RE.match(lines[0]) is not None if lines else False
            block_lines, used = _block_lines(lines, prefix, headerless)
            if used < len(lines) or end >= len(text):
                break
            window *= 2
        line_no += text.count("\n", counted_to, offset)
        counted_to = offset
        at_end = end >= len(text)
        cut = at_end and used == len(lines) and not rest.endswith(("\n", "\r")) and _maybe_partial(lines[-1])
        # a line of undecodable bytes (U+FFFD) ends the block like any line that is no summary line: say so
        damaged = line_no + used if used < len(lines) and "\ufffd" in lines[used] else 0
        blocks.append(
            _Block(line_no, prefix, block_lines, cut, offset, headerless=headerless, ends_at_damage=damaged)
        )
        pos = offset + sum(len(line) for line in with_ends[: max(used, 1)])
        if pos >= len(text):
            break
    _label_blocks(text, blocks)
    return blocks


#: A label line above a summary: short, with a letter, not a figure.
MAX_LABEL_CHARS = 100
#: Banner characters around a label (``== Run 2 ==``, ``### eval``), not part of its name.
LABEL_DECORATION = "=-#*~ \t"


def _label_blocks(text: str, blocks: list[_Block]) -> None:
    """Give each block the label line just above it, when there is one (``Run 2 (batch 16):``).

    A label printed as a column-0 heading right before the next summary was taken into the previous
    block as an unknown section: it is moved back out of that block.
    """
    for k, block in enumerate(blocks):
        before = text[max(0, block.offset - 2048) : block.offset].splitlines()
        candidates = [line for line in before[-4:] if line.strip()]
        if not candidates:
            continue
        line = candidates[-1]
        body = line[len(block.prefix) :] if block.prefix and line.startswith(block.prefix) else line
        body = body.strip()
        if (
            not body
            or len(body) > MAX_LABEL_CHARS
            or not any(c.isalpha() for c in body)
            or _NUM_LEAF_RE.match(body)
        ):
            continue
        if k:
            previous = blocks[k - 1]
            trailing = [i for i, ln in enumerate(previous.lines) if ln.strip()]
            if trailing and previous.lines[trailing[-1]].strip() == body:
                if not _UNKNOWN_HEADING_RE.match(body):
                    continue  # the line is a figure of the previous summary, not a label
                del previous.lines[trailing[-1] :]
        block.label = body.strip(LABEL_DECORATION).rstrip(":").strip(LABEL_DECORATION) or None


def label_name(label: str) -> str:
    """A profile name from a label line: word characters, dots and dashes; others become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:60]


def _maybe_partial(line: str) -> bool:
    """Whether a last line without a newline could have been cut (a cut never ends in a unit or a word)."""
    return bool(line.strip()) and _COMPLETE_END_RE.search(line) is None


def _block_lines(lines: list[str], prefix: str, headerless: bool = False) -> tuple[list[str], int]:
    """The lines of the summary starting at ``lines[0]`` (prefix removed), and how many were consumed.

    ``headerless``: the block is an execution section without its heading (it starts at ``Total cycles``);
    it holds execution lines only, at any indent, and a second ``Total cycles`` starts the next one.
    """
    if headerless:
        return _headerless_lines(lines, prefix)
    out: list[str] = []
    content_seen = False
    used = 0
    headings: set[str] = set()
    in_execution = programs_pending = total_seen = False
    for i, raw in enumerate(lines):
        if prefix:
            if raw.startswith(prefix):
                body = raw[len(prefix) :]
            elif not raw.strip():
                body = ""
            else:
                break
        else:
            body = raw
        body = body.expandtabs(8).rstrip()
        if body and not body[0].isspace():
            if (
                i
                and body in _NEXT_SUMMARY_HEADINGS
                and content_seen
                and (body == "Target:" or body in headings)
            ):
                break  # the next summary begins
            headings.add(body)
            if _START_RE.match(body) or _TILE_BLOCK_RE.match(body):
                in_execution, programs_pending = body == "Execution:", False
            execution_line = in_execution and bool(
                te.FIGURE_RE.match(body)
                or te.VERTEX_RE.match(body)
                or te.PROGRAMS_HEADING_RE.match(body)
                or (programs_pending and body.endswith(".") and ":" not in body)
            )
            if in_execution and (m := te.PROGRAMS_HEADING_RE.match(body)):
                programs_pending = not m["rest"].strip()
            elif execution_line:
                programs_pending = False
            if not (
                execution_line
                or _START_RE.match(body)
                or _TILE_BLOCK_RE.match(body)
                or _UNKNOWN_HEADING_RE.match(body)
                or _MAX_RE.match(body)
                or _OOM_RE.match(body)
                or _HIST_RE.match(body)
                or body.startswith("Range (")
            ):
                break
        if in_execution and _is_total_cycles(body):
            if total_seen:  # a second 'Total cycles' in one section: the next (headerless) summary begins
                _drop_label_line(out)
                used = len(out)
                break
            total_seen = True
        if body.strip() and i:
            content_seen = True
        out.append(body)
        used = i + 1
    while out and not out[-1].strip():
        out.pop()
    return out, used


def _is_total_cycles(body: str) -> bool:
    """Whether a line is the ``Total cycles: N`` figure that opens an execution section."""
    figure = te.FIGURE_RE.match(body.strip())
    return figure is not None and te.category_of(figure["label"]) == ("total", "total")


def _drop_label_line(out: list[str]) -> None:
    """Remove a label line (``float2``) printed just before the next summary from the end of ``out``: the
    nearest non-blank line, when it is no execution line (it names the summary that follows)."""
    while out and not out[-1].strip():
        out.pop()
    if out:
        text = out[-1].strip()
        if not (te.FIGURE_RE.match(text) or te.VERTEX_RE.match(text) or text.endswith((".", ":"))):
            out.pop()


def _headerless_lines(lines: list[str], prefix: str) -> tuple[list[str], int]:
    """The lines of a headerless execution section (see :func:`_block_lines`), and how many were consumed."""
    out: list[str] = []
    used = 0
    programs_pending = False
    for i, raw in enumerate(lines):
        if prefix and raw.strip() and not raw.startswith(prefix):
            break
        body = (raw[len(prefix) :] if prefix and raw.startswith(prefix) else raw).expandtabs(8).rstrip()
        text = body.strip()
        if text:
            figure = te.FIGURE_RE.match(text)
            if i and _is_total_cycles(text):
                break  # the next execution summary begins
            execution_line = bool(
                figure
                or te.VERTEX_RE.match(text)
                or te.VERTEX_HEADING_RE.match(text)
                or te.PROGRAMS_HEADING_RE.match(text)
                or (programs_pending and ":" not in text)
            )
            if not execution_line:
                break
            if m := te.PROGRAMS_HEADING_RE.match(text):
                programs_pending = not m["rest"].strip()
            elif programs_pending:
                programs_pending = not text.endswith(".")
        out.append(body)
        used = i + 1
    while out and not out[-1].strip():
        out.pop()
    return out, used


# -- parsing -----------------------------------------------------------------------------------------


def _norm(label: str) -> str:
    return " ".join(_PAREN_NUMERIC_RE.sub(" ", label).lower().split())


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _size_bytes(num: str, unit: str | None) -> int | None:
    mult = SIZE_UNITS.get((unit or "").lower())
    return None if mult is None else round(_number(num) * mult)


def _hz(num: str, unit: str | None) -> float | None:
    value = _number(num)
    if not unit:
        return value * 1e6 if value < 1e5 else value  # bare numbers: MHz as Poplar prints them
    mult = FREQ_UNITS.get(unit.lower())
    return None if mult is None else value * mult


def parse_block(block: _Block) -> _Parsed:
    """Parse the lines of one summary block into figures."""
    parsed = _Parsed()
    section = "execution" if block.headerless else ""
    tile: int | None = None
    tile_heading_pending = False
    stack: list[tuple[int, str, str]] = []  # (indent, normalised label, label as printed)
    empty_heading: str | None = None
    programs_pending = False
    for offset, body in enumerate(block.lines):
        line_no = block.first_line + offset
        text = body.strip()
        if not text:
            continue
        indent = len(body) - len(text)
        if section == "execution":
            handled, programs_pending = _execution_line(parsed.execution, text, programs_pending)
            if handled:
                empty_heading = text if text.endswith(":") else None
                continue
        if indent:  # fast path for execution step lines (there can be hundreds of thousands)
            kind, sep, name = text.partition(": ")
            if (
                sep
                and (kind in PROGRAM_TYPES or (section == "execution" and _TYPE_NAME_RE.match(kind)))
                and name.strip()
            ):
                parsed.steps.append((kind, name.strip()))
                empty_heading = None
                tile_heading_pending = False
                continue
        if indent == 0 and (m := _TILE_BLOCK_RE.match(text)):
            section, tile, tile_heading_pending, stack = "memory", int(_number(m["tile"])), True, []
            if not _fits(tile, INT32_MAX):
                parsed.unparsed_figures.append(f"{text} (tile index too large)")
                tile = DROPPED_TILE  # the block's figures are dropped (not taken as whole-profile ones)
            empty_heading = text
            continue
        if indent == 0 and (m := _HEADING_RE.match(text)) and not _NUM_LEAF_RE.match(text):
            norm = _norm(m["label"])
            if norm == "memory usage":
                tile = tile if tile_heading_pending else None
            else:
                tile, tile_heading_pending = None, False
            section = {
                "target": "target",
                "graph": "graph",
                "memory usage": "memory",
                "by tile (excluding gaps)": "memory",
                "execution": "execution",
            }.get(norm, "other:" + m["label"])
            stack, empty_heading = [], text
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        empty_heading = None
        tile_heading_pending = False
        if _parse_line(parsed, text, indent, section, tile, stack, line_no):
            if text.endswith(":") and stack and stack[-1][2] == text[:-1].strip():
                empty_heading = text
            continue
        parsed.note_unrecognised(line_no, text)
    _derive_excluding_totals(parsed)
    if block.ends_at_damage:
        parsed.warnings.append(
            f"line {block.ends_at_damage:,} holds bytes that are not text (a damaged file?): the summary was read "
            "up to it, its figures after it are missing"
        )
    if block.cut_mid_line:
        parsed.warnings.append("the summary ends mid-line (truncated?); its last line was ignored")
    elif empty_heading is not None:
        parsed.warnings.append(f"the summary ends right after the heading {empty_heading!r} (truncated?)")
    return parsed


def _execution_line(figures: te.ExecutionFigures, text: str, programs_pending: bool) -> tuple[bool, bool]:
    """Record one line of an Execution section: (whether it was one, whether a programs list follows)."""
    if m := te.FIGURE_RE.match(text):
        te.parse_figure(figures, m["label"], m["value"])
        return True, False
    if m := te.VERTEX_RE.match(text):
        instances, cycles = int(_number(m["instances"])), int(_number(m["cycles"]))
        if _fits(instances, INT64_MAX) and _fits(cycles, INT64_MAX):
            figures.vertices.append((m["type"], instances, cycles))
        else:
            figures.unparsed.append(text)
        return True, False
    if m := te.PROGRAMS_HEADING_RE.match(text):
        figures.seen_heading = True
        if m["rest"].strip():
            te.parse_programs(figures, m["rest"])
            return True, False
        return True, True
    if te.VERTEX_HEADING_RE.match(text):
        return True, False
    if programs_pending and ":" not in text:
        te.parse_programs(figures, text)
        return True, not text.endswith(".")
    return False, False


def _parse_line(
    parsed: _Parsed,
    text: str,
    indent: int,
    section: str,
    tile: int | None,
    stack: list[tuple[int, str, str]],
    line_no: int,
) -> bool:
    """Record one non-blank line; False when it is not recognised."""
    path = [n for _, n, _ in stack]
    where = "/".join([section or "top", *[raw for _, _, raw in stack]])
    if tile is not None:
        where = f"tile {tile}/{where}"
    if text.startswith("Range (") and "histogram" in text.lower():
        return True
    if m := _HIST_RE.match(text):
        values = (int(_number(m["low"])) * 1024, int(_number(m["high"])) * 1024, int(_number(m["count"])))
        if not all(_fits(v, INT64_MAX) for v in values):
            parsed.unparsed_figures.append(f"{text} (too large)")
        elif tile is None:
            parsed.histogram.append(values)
        else:
            parsed.note_extra(f"{where}/histogram {m['low']}-{m['high']}", m["count"])
        return True
    if m := _MAX_RE.match(text):
        max_tile = None if m["tile"] is None else int(_number(m["tile"]))
        if max_tile is not None and not _fits(max_tile, INT32_MAX):
            parsed.unparsed_figures.append(f"{text} (tile index too large)")
            return True
        parsed.add_total(
            max_tile, "maximum", f"{m['which'].lower()}_gaps", int(_number(m["bytes"])), f"{where}/{text}"
        )
        return True
    if m := _OOM_RE.match(text):
        parsed.meta.setdefault("tiles_out_of_memory", str(int(_number(m["count"]))))
        return True
    if (m := _HEADING_RE.match(text)) and not _NUM_LEAF_RE.match(text):
        label = m["label"]
        stack.append((indent, _norm(label), label))
        norm = _norm(label)
        if norm.startswith(("vertex data", "vertex code")) and (v := _PAREN_VALUE_RE.search(label)):
            size = _size_bytes(v["num"], v["unit"])
            if size is not None and section == "memory":
                category = "vertex_data" if norm.startswith("vertex data") else "vertex_code"
                parsed.add_total(tile, "total", category, size, where + "/" + label)
        return True
    if section == "memory" and indent and _BARE_HEADING_RE.match(text):
        stack.append((indent, _norm(text), text))  # a sub-heading printed without a colon ("Not Overlapped")
        return True
    if m := _NUM_LEAF_RE.match(text):
        return _numeric_leaf(
            parsed, m["label"].rstrip(":").rstrip(), m["num"], m["unit"], section, tile, path, stack, where
        )
    if m := _TEXT_LEAF_RE.match(text):
        label, value = m["label"], m["text"]
        if label in PROGRAM_TYPES or (section == "execution" and _TYPE_NAME_RE.match(label)):
            parsed.steps.append((label, value))
        else:
            parsed.note_extra(f"{where}/{label}", value)
            if _looks_like_a_broken_figure(section, label, value):
                parsed.unparsed_figures.append(f"{label}: {value}")
        return True
    return False


_BROKEN_FIGURE_RE = re.compile(r"^[-+]?\d[\d,.]*[^\d,.\s]")


def _looks_like_a_broken_figure(section: str, label: str, value: str) -> bool:
    """A memory or target figure whose number does not parse (``12x,000 B``), rather than a text field."""
    if not _BROKEN_FIGURE_RE.match(value):
        return False
    if section == "memory":
        return True
    norm = _norm(label)
    return section == "target" and (norm in TARGET_FIELDS or norm in TARGET_SIZES or norm.startswith("clock"))


def _derive_excluding_totals(parsed: _Parsed) -> None:
    """Where a scope prints all three regions but no excluding-gaps total, the total is their sum."""
    scopes = {tile for tile, group, _, _ in parsed.totals if group == "region"}
    for tile in scopes:
        regions = {_norm(c) for t, g, c, _ in parsed.totals if t == tile and g == "region"}
        if (tile, "total", "excluding_gaps") not in parsed.seen and regions >= KNOWN_REGIONS:
            regions = sum(v for t, g, _, v in parsed.totals if t == tile and g == "region")
            parsed.add_total(tile, "total", "excluding_gaps", regions, "")
            parsed.meta["text_summary.derived"] = "excluding-gaps totals summed from the memory regions"


def _numeric_leaf(
    parsed: _Parsed,
    label: str,
    num: str,
    unit: str | None,
    section: str,
    tile: int | None,
    path: list[str],
    stack: list[tuple[int, str, str]],
    where: str,
) -> bool:
    norm = _norm(label)
    key = f"{where}/{label}"
    raw_value = f"{num} {unit}" if unit else num
    if section == "target":
        if norm in TARGET_FIELDS and not unit:
            if _fits(_number(num), INT32_MAX):
                parsed.target.setdefault(TARGET_FIELDS[norm], _number(num))
            else:
                parsed.unparsed_figures.append(f"{label}: {raw_value} (too large)")
        elif norm in TARGET_SIZES and (size := _size_bytes(num, unit)) is not None:
            if _fits(size, INT64_MAX):
                parsed.target.setdefault(TARGET_SIZES[norm], size)
            else:
                parsed.unparsed_figures.append(f"{label}: {raw_value} (too large)")
        elif norm.startswith("clock") and (hz := _hz(num, unit)) is not None:
            parsed.target.setdefault("clock_hz", hz)
        else:
            parsed.note_extra(key, raw_value)
        return True
    if section == "graph":
        name = norm.removeprefix("number of ").strip().replace(" ", "_").replace("-", "_")
        if "." not in num and not _fits(count := _number(num), INT64_MAX):  # 20 digits, or below 0: corrupt
            parsed.unparsed_figures.append(
                f"{label}: {raw_value} ({'too large' if count > 0 else 'negative'})"
            )
            return True
        parsed.meta.setdefault(f"graph.num_{name}", str(int(_number(num))) if "." not in num else num)
        return True
    size = _size_bytes(num, unit)
    if section != "memory" or size is None:
        parsed.note_extra(key, raw_value)
        return True
    group, category = _memory_figure(label, norm, path, stack)
    if group == "other" and not unit:  # an unknown figure without a size unit need not be bytes
        group = None
    if group is None:
        parsed.note_extra(key, raw_value)
    else:
        parsed.add_total(tile, group, category, size, key)
    return True


def _memory_figure(
    label: str, norm: str, path: list[str], stack: list[tuple[int, str, str]]
) -> tuple[str | None, str]:
    """(group, category) of a figure in the ``Memory Usage:`` tree, or (None, "") when unknown."""
    vertex_at = next((i for i, n in enumerate(path) if n.startswith("vertex data")), None)
    if vertex_at is not None:
        sub = path[vertex_at + 1 :]
        if "by category" in sub:
            return "vertex_category", label
        if "by type" in sub:
            return "vertex_type", label
        return "other", "/".join([raw for (_, _, raw) in stack[vertex_at:]] + [label])
    code_at = next((i for i, n in enumerate(path) if n.startswith("vertex code")), None)
    if code_at is not None:  # SDK 2.x/3.x "Vertex Code (N B):" / "By Type:" (names tagged "(c++)" / "(asm)")
        if "by type" in path[code_at + 1 :]:
            return "vertex_code_type", label
        return "other", "/".join([raw for (_, _, raw) in stack[code_at:]] + [label])
    if "by data type" in path:
        at = path.index("by data type")
        subheads = [raw for (_, n, raw) in stack[at + 1 :] if n != "not overlapped"]
        if norm.startswith("total"):  # "Total:", "Total After Overlapping:" of a sub-heading
            return "data_type_total", "/".join([*[raw for (_, _, raw) in stack[at + 1 :]], label])
        return "data_type", "/".join([*subheads, label])
    if "by memory region" in path:
        return "region", label
    if norm == "including gaps" or (norm == "total" and path and path[-1] == "including gaps"):
        return "total", "including_gaps"
    if norm == "excluding gaps" or (norm == "total" and path and path[-1] == "excluding gaps"):
        return "total", "excluding_gaps"
    # An unknown figure of the memory tree: kept as a row under its path (not dropped).
    return "other", "/".join([raw for (_, _, raw) in stack] + [label])


# -- tables ------------------------------------------------------------------------------------------


def _target_frame(found: dict[str, float]) -> pd.DataFrame:
    frame = pd.DataFrame([_target_row(found)])
    for column in ("num_ipus", "tiles_per_ipu", "num_tiles", "num_replicas", "ipus_per_replica"):
        frame[column] = frame[column].astype("Int32")
    frame["bytes_per_tile"] = frame["bytes_per_tile"].astype("Int64")
    frame["clock_hz"] = frame["clock_hz"].astype("float64")
    return frame


def _target_row(found: dict[str, float]) -> dict[str, object]:
    def whole(key: str) -> int | None:
        value = found.get(key)
        return None if value is None else int(value)

    ipus, per_ipu, tiles = whole("num_ipus"), whole("tiles_per_ipu"), whole("num_tiles")
    if tiles is None and ipus and per_ipu:
        tiles = ipus * per_ipu
    if per_ipu is None and ipus and tiles and tiles % ipus == 0:
        per_ipu = tiles // ipus
    if ipus is None and per_ipu and tiles and tiles % per_ipu == 0:
        ipus = tiles // per_ipu
    per_tile = whole("bytes_per_tile")
    total = whole("total_memory_bytes")
    if per_tile is None and total and tiles and total % tiles == 0:
        per_tile = total // tiles
    clock = found.get("clock_hz")
    row = {
        "source_format": FORMAT,
        "ipu_arch": infer_arch(per_ipu, per_tile, clock),
        "num_ipus": ipus,
        "tiles_per_ipu": per_ipu,
        "num_tiles": tiles,
        "bytes_per_tile": per_tile,
        "clock_hz": clock,
        "num_replicas": whole("num_replicas"),
        "ipus_per_replica": whole("ipus_per_replica"),
    }
    return row


def _programs_frame(steps: list[tuple[str, str]]) -> pd.DataFrame | None:
    if not steps:
        return None
    frame = pd.DataFrame(steps, columns=["type", "name"]).drop_duplicates(ignore_index=True)
    frame.insert(0, "program_id", range(len(frame)))
    frame["category"] = frame["type"].map(PROGRAM_TYPE_CATEGORY).fillna("other")
    return frame


def read(path: Path, summary: int = 0, **_options: object) -> Profile:
    """Read the ``summary``-th Poplar text summary found in ``path`` (0: the first).

    Raises :class:`InputError` when the text holds no summary or nothing usable;
    a summary that looks cut off gives what was parsed plus a
    :class:`TruncatedSummaryWarning` (also recorded in ``text_summary.warnings``).
    """
    path = Path(path)
    try:
        text = _load_text(path)
        blocks = _blocks_or_raise(path, text)
        if not 0 <= summary < len(blocks):
            raise InputError(
                path,
                f"holds {len(blocks)} profile summaries; there is no summary number {summary}",
                f"pick one of 0..{len(blocks) - 1}",
            )
        messages = _messages_by_block(path, text, blocks)
    finally:
        textload.release()
    return _profile(
        path,
        blocks,
        summary,
        path.name.split(".")[0] or path.stem,
        messages[summary],
        source_metadata(FORMAT, [path]),
    )


def read_all(path: Path, summary: int | None = None, **_options: object) -> dict[str, Profile]:
    """Every summary in ``path`` as its own Profile, by name (``summary=N`` keeps only the N-th).

    One summary: named after the file, as :func:`read`. Several (a log of labelled runs): each is
    named from the label line just above it (``Run 2 (batch 16):`` -> ``Run_2_batch_16``), else
    ``run_1``, ``run_2``, ... in order; a repeated name gets ``-2``, ``-3``.
    """
    if summary is not None:
        profile = read(path, summary=int(summary))
        return {profile.name: profile}
    path = Path(path)
    try:
        text = _load_text(path)
        blocks = _blocks_or_raise(path, text)
        messages = _messages_by_block(path, text, blocks)
    finally:
        textload.release()
    del text
    return _profiles_of_blocks(path, blocks, messages, source_metadata(FORMAT, [path]))


#: Lines kept before a summary's first line in a streaming pass (its label: ``Run 2 (batch 16):``).
_LABEL_LINES = 3


def read_all_streaming(path: Path, **_options: object) -> dict[str, Profile]:
    """:func:`read_all` for a log of any size (``popprof record``): one streaming pass in windows of whole
    lines finds where summaries start; each summary (with the lines just above it, for its label) is then
    read from its own text, at most ``text-bytes`` of it, so memory stays bounded whatever the log holds.
    ``{}`` when the log holds no summary."""
    from ..io import limits

    path = Path(path)
    cap = limits.get("text-bytes")
    blocks: list[_Block] = []
    messages: list[pd.DataFrame | None] = []

    def parse(region: list[str]) -> None:  # as soon as a region is complete: only its blocks are kept
        text = "".join(region)
        region.clear()
        found = find_blocks(text)
        blocks.extend(found)
        messages.extend(_messages_by_block(path, text, found) if found else [])

    region: list[str] = []
    size = 0
    before = ""
    for _, text in textload.windows(path):
        pos = 0
        while pos < len(text):
            if not region:  # no summary open: the next one starts a region
                hit = _first_start(text, pos)
                if hit is None:
                    break
                near = (before if hit[0] < 4096 else "") + text[max(0, hit[0] - 4096) : hit[0]]
                label = near.splitlines(keepends=True)
                region.append("".join(label[-_LABEL_LINES:]))
                size = len(region[0])
                pos = hit[0]
            piece = text[pos : pos + cap - size]  # an open region takes text up to text-bytes
            region.append(piece)
            size += len(piece)
            pos += len(piece)
            if size >= cap:
                parse(region)
        before = text[-4096:]
    if region:
        parse(region)
    if not blocks:
        return {}
    return _profiles_of_blocks(path, blocks, messages, source_metadata(FORMAT, [path]))


def _profiles_of_blocks(
    path: Path, blocks: list[_Block], messages: list[pd.DataFrame | None], sources: dict[str, str]
) -> dict[str, Profile]:
    """The Profiles of the summary ``blocks`` found in ``path``, by name (see :func:`read_all`)."""
    if len(blocks) == 1:
        profile = _profile(path, blocks, 0, path.name.split(".")[0] or path.stem, messages[0], sources)
        return {profile.name: profile}
    profiles: dict[str, Profile] = {}
    names: list[str] = []
    taken: set[str] = set()
    parsed_all: list[tuple[_Parsed, dict[str, object]]] = []
    for k, block in enumerate(blocks):
        name = label_name(block.label) if block.label else ""
        name = name or f"run_{k + 1}"
        base, n = name, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        names.append(name)
        parsed_all.append(_parse_summary(path, blocks, k, name, sources))
    tables = _tables_of_all([p for p, _ in parsed_all], messages)
    for k, name in enumerate(names):
        profiles[name] = LazyProfile(
            name, _builder(tables, k, parsed_all[k][1]), source=str(path), conformed=True
        )
    return profiles


def _builder(tables: dict[str, tuple[pd.DataFrame, np.ndarray]], k: int, meta: dict[str, object]):  # noqa: ANN202
    def build() -> tuple[dict[str, pd.DataFrame], dict[str, object]]:
        out = {}
        for table, (frame, bounds) in tables.items():
            if bounds[k + 1] > bounds[k]:
                out[table] = frame.iloc[bounds[k] : bounds[k + 1]].reset_index(drop=True)
        return out, meta

    return build


def _tables_of_all(
    parsed: list[_Parsed], ooms: list[pd.DataFrame | None]
) -> dict[str, tuple[pd.DataFrame, np.ndarray]]:
    """The tables of every summary of a file built at once: per table, one frame conformed once and the
    row bounds of each summary in it (summary k has rows ``bounds[k]:bounds[k + 1]``). Building a few
    frames instead of a few per summary keeps a log of hundreds of summaries fast."""

    def bounds(counts: list[int]) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])

    out: dict[str, tuple[pd.DataFrame, np.ndarray]] = {}
    target = pd.DataFrame([_target_row(p.target) for p in parsed])
    out["target"] = (
        conform(
            "target",
            target.astype(
                {
                    c: "Int32"
                    for c in ("num_ipus", "tiles_per_ipu", "num_tiles", "num_replicas", "ipus_per_replica")
                }
                | {"bytes_per_tile": "Int64", "clock_hz": "float64"}
            ),
        ),
        bounds([1] * len(parsed)),
    )
    rows = [row for p in parsed for row in p.totals]
    if rows:
        frame = pd.DataFrame(rows, columns=["tile", "group", "category", "bytes"]).astype(
            {"tile": "Int32", "bytes": "Int64"}
        )
        out["memory_totals"] = (conform("memory_totals", frame), bounds([len(p.totals) for p in parsed]))
    rows = [row for p in parsed for row in p.histogram]
    if rows:
        frame = pd.DataFrame(rows, columns=["low_bytes", "high_bytes", "num_tiles"])
        out["tile_histogram"] = (conform("tile_histogram", frame), bounds([len(p.histogram) for p in parsed]))
    programs = [_programs_frame(p.steps) for p in parsed]
    if any(f is not None for f in programs):
        frames = [f for f in programs if f is not None]
        out["programs"] = (
            conform("programs", pd.concat(frames, ignore_index=True)),
            bounds([0 if f is None else len(f) for f in programs]),
        )
    rows = [row for p in parsed for row in p.execution.totals]
    if rows:
        frame = pd.DataFrame(
            rows, columns=["category", "basis", "cycles", "share", "estimated", "time_us", "label"]
        ).astype({"estimated": "boolean"})
        out["execution_totals"] = (
            conform("execution_totals", frame),
            bounds([len(p.execution.totals) for p in parsed]),
        )
    rows = [row for p in parsed for row in p.execution.vertices]
    if rows:
        frame = pd.DataFrame(rows, columns=["vertex_type", "instances", "cycles"])
        out["vertex_cycles"] = (
            conform("vertex_cycles", frame),
            bounds([len(p.execution.vertices) for p in parsed]),
        )
    frames = [f for f in ooms if f is not None]
    if frames:
        out["out_of_memory"] = (
            conform("out_of_memory", pd.concat(frames, ignore_index=True)),
            bounds([0 if f is None else len(f) for f in ooms]),
        )
    return out


def _blocks_or_raise(path: Path, text: str) -> list[_Block]:
    blocks = find_blocks(text)
    if not blocks:
        raise InputError(
            path,
            "not a Poplar profile summary",
            "expected printProfileSummary output with 'Target:' / 'Memory Usage:' / 'Execution:' sections",
        )
    return blocks


def _messages_by_block(path: Path, text: str, blocks: list[_Block]) -> list[pd.DataFrame | None]:
    """Out-of-memory messages in the text, each given to the first summary that starts after it (messages
    after the last summary go to the last); compilation indices count within each summary."""
    found = oom_log.find_messages(text) if any(n in text for n in oom_log.NEEDLES) else oom_log.OomMessages()
    if found.problems:
        raise InputError(path, found.problems[0], "the log is corrupt or was edited")
    if found.unparsed:  # never dropped silently (docs/readers.md, out-of-memory logs)
        line, what = found.unparsed[0]
        one = len(found.unparsed) == 1
        warnings.warn(
            f"{path}: {plural(len(found.unparsed), 'line')} {'looks' if one else 'look'} like an out-of-memory "
            f"error but {'is' if one else 'are'} in no form popprof reads (not counted as failures); the first, "
            f"line {line}: {what!r}",
            UserWarning,
            stacklevel=3,
        )
    out: list[pd.DataFrame | None] = [None] * len(blocks)
    if not found.rows:
        return out
    frame = found.frame
    starts = np.array([b.first_line for b in blocks], dtype=np.int64)
    owner = np.minimum(
        np.searchsorted(starts, frame["line"].to_numpy(dtype=np.int64), side="right"), len(blocks) - 1
    )
    for k in np.unique(owner):
        part = frame[owner == k].reset_index(drop=True)
        part["compilation"] = range(len(part))
        out[k] = part
    return out


def _profile(
    path: Path, blocks: list[_Block], index: int, name: str, oom: pd.DataFrame | None, sources: dict[str, str]
) -> Profile:
    """The Profile of one block (``oom``: the out-of-memory messages that belong to it)."""
    parsed, meta = _parse_summary(path, blocks, index, name, sources)
    return Profile(name, _tables(parsed, oom), source=str(path), metadata=meta)


def _parse_summary(
    path: Path, blocks: list[_Block], index: int, name: str, sources: dict[str, str]
) -> tuple[_Parsed, dict[str, object]]:
    """Parse and check one block: its figures and its metadata (warns once when something is missing)."""
    block = blocks[index]
    if block.cut_mid_line and block.lines:
        block.lines.pop()
    parsed = parse_block(block)
    if not parsed.usable:
        raise InputError(
            path,
            "the Poplar profile summary holds no figures",
            "the text may be truncated right after a heading; paste the whole summary",
        )
    parsed.warnings += [
        f"figure does not parse: {line!r} (kept as text in text_summary.extra)"
        for line in parsed.unparsed_figures[:5]
    ]
    parsed.warnings += _execution_warnings(parsed.execution)
    if parsed.warnings:  # once per summary, naming the file
        where = f"{path}" + (f" (summary {name})" if len(blocks) > 1 else "")
        warnings.warn(f"{where}: " + "; ".join(parsed.warnings), TruncatedSummaryWarning, stacklevel=3)
    meta: dict[str, object] = dict(sources)
    meta.update(parsed.meta)
    if "total_memory_bytes" in parsed.target:
        meta["target.total_memory_bytes"] = int(parsed.target["total_memory_bytes"])
    meta.update(
        {
            "text_summary.first_line": block.first_line,
            "text_summary.summaries_in_file": len(blocks),
            "text_summary.summary_index": index,
            "text_summary.unrecognised_count": parsed.unrecognised_count,
            "text_summary.unrecognised": json.dumps(parsed.unrecognised),
            "text_summary.extra": json.dumps(parsed.extra),
            "text_summary.warnings": json.dumps(parsed.warnings),
        }
    )
    if block.label:
        meta["text_summary.label"] = block.label
    if block.prefix:
        meta["text_summary.line_prefix"] = block.prefix
    if parsed.steps:
        meta["text_summary.execution_step_lines"] = len(parsed.steps)
    if parsed.execution.programs or parsed.execution.seen_heading:
        meta["text_summary.programs_executed"] = json.dumps(parsed.execution.programs)
    if parsed.execution.not_printed:
        meta["text_summary.execution_not_printed"] = json.dumps(parsed.execution.not_printed)
    return parsed, meta


def _tables(parsed: _Parsed, oom: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """The tables of one parsed summary."""
    tables: dict[str, pd.DataFrame] = {"target": _target_frame(parsed.target)}
    if parsed.totals:
        tables["memory_totals"] = pd.DataFrame(
            parsed.totals, columns=["tile", "group", "category", "bytes"]
        ).astype({"tile": "Int32", "bytes": "Int64"})
    if parsed.histogram:
        tables["tile_histogram"] = pd.DataFrame(
            parsed.histogram, columns=["low_bytes", "high_bytes", "num_tiles"]
        )
    if (programs := _programs_frame(parsed.steps)) is not None:
        tables["programs"] = programs
    if (totals := parsed.execution.totals_frame()) is not None:
        tables["execution_totals"] = totals
    if (vertices := parsed.execution.vertex_frame()) is not None:
        tables["vertex_cycles"] = vertices
    if oom is not None:
        tables["out_of_memory"] = oom
    return tables


def _execution_warnings(figures: te.ExecutionFigures) -> list[str]:
    """What an Execution section lacked: figures that did not parse, expected figures not printed at all."""
    out = [f"execution figure does not parse: {line!r} (kept as missing)" for line in figures.unparsed[:5]]
    if figures.totals:
        missing = figures.missing_categories()
        if missing:
            out.append("the execution section has no figure for " + ", ".join(missing) + " (cut off?)")
    return out
