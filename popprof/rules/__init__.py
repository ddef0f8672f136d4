"""Rule checks: memory peaks, exchange-heavy phases and host-CPU stalls.

``check(profile)`` runs every registered rule (see :data:`RULES`, or
``popprof rules``) and returns :class:`Findings`. Adding a rule is one
function decorated with :func:`rule` in a module imported below.
"""

from __future__ import annotations

from . import (  # noqa: F401  (register the built-in rules)
    copies,
    dependency,
    device_memory,
    distributed,
    exchange,
    host,
    launches,
    memory,
    operations,
    pipeline,
    tiles,
)
from .base import (
    RULES,
    SEVERITIES,
    Finding,
    Findings,
    Gain,
    NotEvaluated,
    Rule,
    RuleContext,
    check,
    parse_set,
    plan,
    resolve_params,
    rule,
    select_rules,
    severity_rank,
)

__all__ = [
    "RULES",
    "SEVERITIES",
    "Finding",
    "Findings",
    "Gain",
    "NotEvaluated",
    "Rule",
    "RuleContext",
    "check",
    "parse_set",
    "plan",
    "resolve_params",
    "rule",
    "select_rules",
    "severity_rank",
]
