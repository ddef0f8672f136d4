"""Redact Poplar text output (a ``printProfileSummary`` summary, or a log holding summaries and
out-of-memory messages) line by line, to text that reads back to the same figures.

The summary's structure stays exactly as it is: every label of the vocabulary
(:mod:`.vocabulary`, ``text_summary_labels.txt``), every number and unit, headings, the
histogram. Names that are values are replaced in place, keeping the column where the rest of the
line starts: vertex types under ``By Type:`` and in ``Cycles by vertex type`` (public ones stay:
``popops::Fill<float>``, ``poplar_rt::ShortMemcpy``), program names (``Programs executed``, a
program type's step), paths. Poplar's own messages (``Out of memory on tile N: ...``) keep their
words and figures. Any other line is ordinary program output and is replaced WHOLE by one
placeholder (``line_3f9a2c1b07de``), never word by word; a line made only of public words and
punctuation stays. Line count and order never change, so line numbers read back the same.
"""

from __future__ import annotations

import re

from .names import EXCEPTIONS
from .names import summary_label as is_label
from .redactor import Redactor
from .vocabulary.builtin import PROGRAM_TYPES

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_LABEL_LINE = re.compile(r"^(?P<indent>\s*)(?P<label>[^:\s](?:[^:]*?[^:\s])?)(?P<sep>\s*:)(?P<rest>.*)$")
_BARE = re.compile(r"^(?P<indent>\s*)(?P<label>[A-Z][A-Za-z0-9 ()#,/.-]*?[A-Za-z)])(?P<tail>\s*)$")
#: A figure: numbers with units, shares, approximations, a tile, or Poplar's "not measured" texts.
_FIGURE = re.compile(
    r"\s*(?:[-+]?\d[\d,]*(?:\.\d+)?\s*(?:[kKMG]?i?B|[kMG]?Hz|K|%)?(?:\s*\([^()]*\))*"
    r"(?:\s+on tile\s+#?\s*[\d,]+)?|Must enable debug\.\w+|Estimated \(must enable debug\.\w+\)|<anonymous>\.?)?\s*"
)
_HISTOGRAM_ROW = re.compile(r"^\s*\d[\d,]*\s*-\s*\d[\d,]*\s+\**\s*\d[\d,]*\s*$")
_TYPE_ROW = re.compile(
    r"^(?P<indent>\s*)(?P<name>\S.*?)(?P<gap>\s{2,}|\s+(?=\d))(?P<value>\d[\d,]*(?:\.\d+)?\s*[kMG]?B)\s*$"
)
_TYPE_TAG = re.compile(r"^(?P<name>.*?)(?P<tag>\s*\((?:c\+\+|asm)\))?$")
_VERTEX_ROW = re.compile(
    r"^(?P<indent>\s*)(?P<name>\S.*?)(?P<gap>\s+)(?P<value>\(\s*\d[\d,]*\s+instances?\s*\)\s*:?\s*\d[\d,]*)\s*$"
)
_PROGRAM_STEP = re.compile(
    r"^(?P<indent>\s*)(?P<type>[A-Z][A-Za-z]+)(?P<sep>\s*:\s*)(?P<name>\S.*?)(?P<tail>\s*)$"
)
#: Poplar's messages (graphcore/tutorials, tutorials/poplar/tut4_profiling/README.rst): their words and
#: figures stay; the path a message names is replaced (its extension kept).
_MESSAGES = re.compile(
    r"Out of memory on tile\s+\d[\d,]*\s*:\s*\d[\d,]*\s+bytes used but tiles? only ha(?:ve|s)\s+\d[\d,]*\s+bytes"
    r"(?: of memory)?"
    r"|Out of memory:\s*Cannot fit[^.\n]*\.(?:[ \t]*Profile saved to:[ \t]*(?P<profile>\S+))?"
    # the other forms of Graphcore's memory guide (docs/readers.md): the exchange's name is replaced
    r"|[Tt]ile\s+\d[\d,]*\s+receives more data than it has total memory in exchange(?:\s+'(?P<exchange>[^'\n]*)')?"
    r"|[Tt]ile\s+\d[\d,]*\s+_poplar_start must be 0 not\s+[\d,]+\s+bytes from the start of memory"
    r"|terminate called after throwing an instance of '(?P<exception>[\w:]+)'"
    r"|what\(\):"
)


_TRAILING_NUMBER = re.compile(r"\s+[-+]?\d[\d,]*(?:\.\d+)?$")


def _aligned(indent: str, name: str, old_name: str, gap: str, rest: str) -> str:
    """``name`` in place of ``old_name`` with ``rest`` starting in the same column when it fits."""
    width = len(old_name) + len(gap)
    pad = max(width - len(name), 2 if len(gap) >= 2 else 1)
    return f"{indent}{name}{' ' * pad}{rest}"


class _TextRedaction:
    """The state of one text's redaction (which block the lines are in)."""

    def __init__(self, redactor: Redactor) -> None:
        self.r = redactor
        self.in_types = False
        self.types_indent = 0
        self.programs_pending = False

    def line(self, body: str) -> str:
        stripped = body.strip()
        if not stripped:  # the list may follow "Programs executed:" after a blank line
            return body
        indent = len(body) - len(body.lstrip())
        if self.in_types and indent <= self.types_indent:
            self.in_types = False
        if stripped.rstrip(":").rstrip().endswith("By Type") and is_label(stripped.rstrip(":").rstrip()):
            self.in_types, self.types_indent = True, indent
            return body
        if stripped.rstrip(":").rstrip() == "Programs executed" and stripped.endswith(":"):
            self.programs_pending = True  # the list follows on the next lines
            return body
        if self.programs_pending and ":" not in stripped:
            self.programs_pending = not stripped.endswith(".")
            return body[:indent] + self._programs(stripped)
        if _HISTOGRAM_ROW.match(body) or self.r.is_public(stripped):
            return body
        if stripped.startswith("Range (") and all(
            is_label(part) for part in re.split(r"\s{2,}|(?<=\)) (?=[A-Z])", stripped)
        ):
            return body
        if self.in_types and (m := _TYPE_ROW.match(body)):
            return self._named_row(m, "vtx")
        if m := _VERTEX_ROW.match(body):
            return self._named_row(m, "vtx")
        if m := _LABEL_LINE.match(body):
            out = self._label_line(m)
            if out is not None:
                return out
        if (m := _BARE.match(body)) and is_label(m["label"]):
            return body
        if (m := _PROGRAM_STEP.match(body)) and m["type"] in PROGRAM_TYPES:
            return m["indent"] + m["type"] + m["sep"] + self._name("prog", m["name"]) + m["tail"]
        return self._ordinary(body)

    def _label_line(self, m: re.Match[str]) -> str | None:
        label, rest = m["label"], m["rest"]
        if not is_label(label):
            return None
        if label == "Programs executed":
            listed = rest.strip()
            if not listed:
                self.programs_pending = True
                return m.group(0)
            lead = rest[: len(rest) - len(rest.lstrip())]
            return m["indent"] + label + m["sep"] + lead + self._programs(listed)
        if _FIGURE.fullmatch(rest):
            return m.group(0)
        value = rest.strip()
        lead = rest[: len(rest) - len(rest.lstrip())]
        tail = rest[len(rest.rstrip()) :]
        return m["indent"] + label + m["sep"] + lead + self._name("arg", value) + tail

    def _named_row(self, m: re.Match[str], kind: str) -> str:
        name = m["name"]
        tagged = _TYPE_TAG.match(name)
        bare, tag = (tagged["name"], tagged["tag"] or "") if tagged else (name, "")
        new = self._name(kind, bare) + tag
        if new == name:
            return m.group(0)
        return _aligned(m["indent"], new, name, m["gap"], m["value"])

    def _programs(self, listed: str) -> str:
        """A ``Programs executed`` list with each non-public program name replaced."""
        names = [n.strip() for n in listed.rstrip(".").split(",")]
        out = [n if not n or n == "<anonymous>" else self._name("prog", n) for n in names]
        return ", ".join(out) + ("." if listed.endswith(".") else "")

    def _name(self, kind: str, value: str) -> str:
        """A name that is a value: kept when public, else one pseudonym of ``kind`` (a path: ``path_``)."""
        if self.r.is_public(value):
            return value
        return self.r.decide(value, kind) if " " not in value else self.r.identifier(kind, value)

    def _ordinary(self, body: str) -> str:
        """A line of ordinary output: Poplar's messages in it stay, everything else is replaced whole."""
        indent = body[: len(body) - len(body.lstrip())]
        text = body[len(indent) :].rstrip()
        tail = body[len(indent) + len(text) :]
        parts: list[str] = []
        pos = 0
        for m in _MESSAGES.finditer(text):
            if m["exception"] is not None and m["exception"] not in EXCEPTIONS:
                continue
            parts.append(self._segment(text[pos : m.start()]))
            message = m.group(0)
            if m["profile"]:
                start = m.start("profile") - m.start()
                message = message[:start] + self.r.scrubber.whole("path", m["profile"])
            if m["exchange"]:
                start, end = m.start("exchange") - m.start(), m.end("exchange") - m.start()
                message = message[:start] + self._name("prog", m["exchange"]) + message[end:]
            parts.append(message)
            pos = m.end()
        parts.append(self._segment(text[pos:]))
        return indent + "".join(parts) + tail

    def _segment(self, segment: str) -> str:
        """Text around (or instead of) a message: kept when public, else one placeholder."""
        core = segment.strip()
        if not core or self.r.is_public(core):
            return segment
        lead = segment[: len(segment) - len(segment.lstrip(" \t.,;:"))]  # a message's closing "." stays
        core = segment[len(lead) :].strip()
        if not core:
            return segment
        trail = segment[len(segment.rstrip()) :]
        figure = _TRAILING_NUMBER.search(core)
        if figure is not None and figure.start() > 0:  # "Attached to IPU 0": the number stays, so the
            core, trail = core[: figure.start()], figure.group(0) + trail  # line still reads as a figure
        return lead + self.r.identifier("line", core) + trail


def redact_text_summary(text: str, redactor: Redactor) -> str:
    """The redacted text of a whole summary or log (same lines, same line endings)."""
    for line in text.splitlines():
        redactor.learn(line)
    state = _TextRedaction(redactor)
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        out.append(state.line(body) + line[len(body) :])
    return "".join(out)
