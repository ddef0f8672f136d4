"""The ``ranks`` table: per-rank figures of a trace, from the code ``check``'s straggler rule uses.

Nothing is computed here: ``rank_figures`` (step time, span, idle), ``collective_late_start`` (HTA's late
start, averaged over iterations as the rule does) and ``step_times`` come from :mod:`popprof.metrics.ranks`;
the step-time percentiles from :func:`popprof.metrics.steps.step_stats` over each rank's steps.
"""

from __future__ import annotations

import pandas as pd

from ..metrics.ranks import collective_late_start, rank_figures, step_times
from ..metrics.steps import step_stats
from ..model.profile import Profile

COLUMNS = [
    "rank",
    "host",
    "steps",
    "step_us",
    "step_p50_us",
    "step_p90_us",
    "step_p99_us",
    "span_us",
    "idle_us",
    "idle_share",
    "late_start",
]


def rank_table(profile: Profile, host: str | None = None) -> pd.DataFrame:
    """One row per rank of ``profile`` (empty for a profile without ranks, such as an IPU graph profile)."""
    figures = rank_figures(profile)
    if figures.empty:
        return pd.DataFrame(columns=COLUMNS)
    late_rows = collective_late_start(profile)
    # per rank the mean over iterations, as the straggler rule aggregates it (in mean iterations)
    late = late_rows.groupby("rank")["late_iterations"].mean().to_dict() if len(late_rows) else {}
    steps = step_times(profile)
    rows = []
    for fig in figures.itertuples(index=False):
        mine = steps[steps["rank"] == fig.rank]
        stats = step_stats(mine.assign(source="ProfilerStep"), 0) if len(mine) else None
        rows.append(
            {
                "rank": int(fig.rank),
                "host": host,
                "steps": int(fig.steps),
                "step_us": fig.step_us,
                "step_p50_us": stats["p50_us"] if stats else None,
                "step_p90_us": stats["p90_us"] if stats else None,
                "step_p99_us": stats["p99_us"] if stats else None,
                "span_us": fig.span_us,
                "idle_us": fig.idle_us,
                "idle_share": fig.idle_share,
                "late_start": _finite(late.get(int(fig.rank))),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def _finite(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)
