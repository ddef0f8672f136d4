"""Redact a Poplar text summary (``printProfileSummary`` output), line by line, to text.

Numbers (tile numbers, sizes, counts) are kept, so the redacted summary reads
back to the same figures. Labels of the summary's own vocabulary are kept;
vertex type names under ``By Type:`` are kept when SDK-public (``poplin::...``)
and pseudonymised (``vtx_``) otherwise; execution step lines
(``OnTileExecute: <name>``) keep the program type and pseudonymise the name;
every other text is scrubbed as free text (paths, hosts, users, ...).
"""

from __future__ import annotations

import re

from ..readers import text_execution as te
from .allowlist import PROGRAM_TYPES
from .redactor import Redactor

_LEAF = re.compile(
    r"^(?P<indent>\s*)(?P<label>[^:\s](?:[^:]*?[^:\s])?)(?P<sep>\s*:\s*)(?P<value>.*?)(?P<tail>\s*)$"
)
_TYPE_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<label>\S.*?)(?P<sep>:?\s+)(?P<value>\d[\d,]*(?:\.\d+)?\s*[kMG]?B)"
    r"(?P<tail>\s*)$"
)
_HEADINGS_WITH_TYPES = ("By Type",)
_NUMERIC_VALUE = re.compile(
    r"[-+]?\d[\d,]*(?:\.\d+)?\s*(?:[kKMG]?B|[kMG]?Hz|K|%)?(?:\s*\([^)]*\))?(?:\s+on tile "
    r"[\d,]+)?"
)


def redact_text_summary(text: str, redactor: Redactor) -> str:
    """The redacted text of a whole summary."""
    for line in text.splitlines():
        redactor.learn(line)
    out: list[str] = []
    in_types = False
    types_indent = 0
    programs_pending = False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        stripped = body.strip()
        indent = len(body) - len(body.lstrip())
        execution = _execution_line(body, stripped, redactor, programs_pending)
        if execution is not None:
            new_body, programs_pending = execution
            out.append(new_body + end)
            continue
        if in_types and (not stripped or indent <= types_indent):
            in_types = False
        if stripped.rstrip(":") in _HEADINGS_WITH_TYPES:
            in_types, types_indent = True, indent
            out.append(line)
            continue
        if in_types:
            m = _TYPE_LINE.match(body)
            if m:
                label = redactor.identifier("vtx", m["label"])
                out.append(m["indent"] + label + m["sep"] + m["value"] + m["tail"] + end)
                continue
        out.append(_line(body, redactor) + end)
    return "".join(out)


def _execution_line(
    body: str, stripped: str, redactor: Redactor, programs_pending: bool
) -> tuple[str, bool] | None:
    """An Execution-section line redacted (figure labels are the format's vocabulary and kept; vertex
    types are kept when SDK-public, else pseudonymised; program names are pseudonymised), with whether a
    ``Programs executed`` list follows; None when the line is not one of those."""
    indent = body[: len(body) - len(body.lstrip())]
    if not stripped:
        return (body, programs_pending)
    if m := te.FIGURE_RE.match(stripped):
        value = m["value"]
        new_value = value if not value or _NUMERIC_VALUE.match(value) else redactor.text(value)
        return (body.replace(value, new_value, 1) if new_value != value else body, False)
    if m := te.VERTEX_RE.match(stripped):
        name = m["type"]
        return (indent + redactor.identifier("vtx", name) + stripped[len(name) :], False)
    if m := te.PROGRAMS_HEADING_RE.match(stripped):
        rest = m["rest"].strip()
        if not rest:
            return (body, True)
        return (indent + "Programs executed: " + _programs(rest, redactor), False)
    if te.VERTEX_HEADING_RE.match(stripped):
        return (body, False)
    if programs_pending and ":" not in stripped:
        return (indent + _programs(stripped, redactor), not stripped.endswith("."))
    return None


def _programs(listed: str, redactor: Redactor) -> str:
    """A ``Programs executed`` list with each program name pseudonymised (``<anonymous>`` kept)."""
    names = [n.strip() for n in listed.rstrip(".").split(",")]
    out = []
    for name in names:
        if not name or name == "<anonymous>":
            out.append(name)
            continue
        out.append(redactor.identifier("prog", name))
    return ", ".join(out) + ("." if listed.endswith(".") else "")


def _line(body: str, redactor: Redactor) -> str:
    if not body.strip():
        return body
    m = _LEAF.match(body)
    if m is None:
        return redactor.text(body)
    label, value = m["label"], m["value"]
    if label in PROGRAM_TYPES and value:
        new_value = redactor.identifier("prog", value)
    elif not value or _NUMERIC_VALUE.fullmatch(value):
        new_value = value
    else:
        new_value = redactor.text(value)
    if label in PROGRAM_TYPES or redactor.is_public(label):
        new_label = label
    else:
        new_label = redactor.decide(label, "label")
    return m["indent"] + new_label + m["sep"] + new_value + m["tail"]
