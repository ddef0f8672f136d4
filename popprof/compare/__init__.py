"""Compare two profiles and gate regressions: ``popprof.diff(base, new)``, budgets and baselines.

- :func:`diff` -> :class:`ProfileDiff` (metrics, tiles, IPUs, programs, events, liveness, notes);
- :func:`gate` -> :class:`GateResult` (budgets per metric, gaps, verdict);
- :func:`write_baseline` / :func:`read_baseline`: metrics as small JSON to commit;
- :mod:`popprof.report.diff`: text, JSON, Markdown and JUnit output.

``popprof.compare`` is both this package and a function: the package is callable
(``popprof.diff(base, new)`` works whether or not the package was imported).
"""

from __future__ import annotations

from ..readers.baseline import read_baseline
from .baseline import write_baseline
from .core import DEFAULT_TOLERANCE, ProfileDiff, diff
from .gate import DEFAULT_BUDGET, Budget, GateResult, Limit, gate, load_budget

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_TOLERANCE",
    "Budget",
    "GateResult",
    "Limit",
    "ProfileDiff",
    "diff",
    "gate",
    "load_budget",
    "read_baseline",
    "write_baseline",
]
