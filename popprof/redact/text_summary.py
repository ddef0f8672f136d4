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

from .allowlist import PROGRAM_TYPES
from .redactor import Redactor

_LEAF = re.compile(r"^(?P<indent>\s*)(?P<label>[^:\s](?:[^:]*?[^:\s])?)(?P<sep>\s*:\s*)(?P<value>.*?)(?P<tail>\s*)$")
_TYPE_LINE = re.compile(r"^(?P<indent>\s*)(?P<label>\S.*?)(?P<sep>:?\s+)(?P<value>\d[\d,]*(?:\.\d+)?\s*[kMG]?B)"
                        r"(?P<tail>\s*)$")
_HEADINGS_WITH_TYPES = ("By Type",)
_NUMERIC_VALUE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?\s*(?:[kKMG]?B|[kMG]?Hz|K|%)?(?:\s*\([^)]*\))?(?:\s+on tile "
                            r"[\d,]+)?")


def redact_text_summary(text: str, redactor: Redactor) -> str:
    """The redacted text of a whole summary."""
    for line in text.splitlines():
        redactor.learn(line)
    out: list[str] = []
    in_types = False
    types_indent = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        end = line[len(body):]
        stripped = body.strip()
        indent = len(body) - len(body.lstrip())
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
