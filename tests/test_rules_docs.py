"""docs/rules.md documents every rule with its parameters and their defaults."""

from __future__ import annotations

import re
from pathlib import Path

from popprof.rules import RULES

DOC = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def sections() -> dict[str, str]:
    text = DOC.read_text()
    parts = re.split(r"^### `([^`]+)`\s*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_rule_has_a_section_with_its_defaults():
    docs = sections()
    assert set(RULES) <= set(docs), set(RULES) - set(docs)
    for rule_id, r in RULES.items():
        documented = {name: float(value) for name, value in re.findall(r"`(\w+) = ([0-9.]+)`", docs[rule_id])}
        for name, default in r.params.items():
            assert name in documented, f"{rule_id}: parameter {name} not documented"
            assert documented[name] == float(default), (
                f"{rule_id}.{name}: docs {documented[name]} != {default}"
            )


def test_every_rule_documents_its_gain():
    docs = sections()
    for rule_id in RULES:
        assert re.search(r"^- Gain( \((us|bytes)\))?:", docs[rule_id], flags=re.M), f"{rule_id}: no Gain line"
