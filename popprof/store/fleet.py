"""``popprof fleet ranks``: ranks (and hosts) that straggle again and again across the jobs of a store.

Per job (one run and profile of the ``ranks`` table) each rank's figure gets a robust z-score,
``(x - median) / (1.4826 * MAD)`` over that job's ranks (at least 3 ranks, MAD > 0); a rank straggles in
a job when its z is above the threshold. Across jobs, a rank (with its host when known) is reported with
how often it straggled. The figures are those ``check``'s straggler rule uses (``metrics.ranks``); the default
is ``late_start``, the one that finds a late rank of a synchronous data-parallel job (:data:`DEFAULT_FIGURE`).
"""

from __future__ import annotations

import os

import pandas as pd

from ..model.errors import UsageError
from .api import Store, open_store

#: Figures of the ``ranks`` table where a higher value means a slower rank.
FIGURES = ("step_us", "step_p90_us", "late_start", "idle_share")
#: The default: with a blocking all-reduce (synchronous data parallelism) every rank's step time is the same,
#: the late rank's included, so step times cannot find it; how late a rank starts the collective the others
#: wait in can (issue 45: the planted late rank in 669 of 2,000 jobs by late_start, 28 by step_us).
DEFAULT_FIGURE = "late_start"
#: What each figure is, for the line that says which one a result rests on.
FIGURE_TEXT = {
    "step_us": "median ProfilerStep time (equal on every rank of a synchronous job)",
    "step_p90_us": "90th percentile ProfilerStep time",
    "late_start": "how late the rank starts the last long collective, in mean iterations",
    "idle_share": "share of the rank's window its device is idle",
}


def job_scores(store: Store, figure: str = DEFAULT_FIGURE, last: int | None = None) -> pd.DataFrame:
    """One row per (job, rank): run_id, profile, created, rank, host, value, z (NaN when undefined)."""
    if figure not in FIGURES:
        raise UsageError(f"--figure {figure!r}: choose one of {', '.join(FIGURES)}")
    recent = ""
    if last is not None:
        recent = (
            "JOIN (SELECT DISTINCT run_id, profile, created FROM ranks "
            f"ORDER BY created DESC, run_id DESC LIMIT {int(last)}) USING (run_id, profile, created)"
        )
    sql = f"""
        WITH r AS (SELECT run_id, profile, created, rank, host, "{figure}" AS value FROM ranks {recent}
                   WHERE "{figure}" IS NOT NULL),
        j AS (SELECT run_id, profile, median(value) AS med, count(*) AS n FROM r GROUP BY run_id, profile),
        d AS (SELECT r.*, j.med, j.n, abs(r.value - j.med) AS dev FROM r JOIN j USING (run_id, profile)),
        m AS (SELECT run_id, profile, median(dev) AS mad FROM d GROUP BY run_id, profile)
        SELECT d.run_id, d.profile, d.created, d.rank, d.host, d.value,
               CASE WHEN d.n >= 3 AND m.mad > 0 THEN (d.value - d.med) / (1.4826 * m.mad) END AS z
        FROM d JOIN m USING (run_id, profile)
        ORDER BY d.created, d.run_id, d.rank
    """
    return store.frame(sql, kinds=["ranks"])


def straggling_ranks(
    store: str | os.PathLike[str] | Store,
    *,
    figure: str = DEFAULT_FIGURE,
    z: float = 3.5,
    last: int | None = None,
) -> pd.DataFrame:
    """Per (rank, host): jobs seen, jobs it straggled in (z > ``z``), that share, median and max z; the
    ranks that straggled at least once, most often first."""
    handle = store if isinstance(store, Store) else open_store(store)
    scores = job_scores(handle, figure, last)
    columns = ["rank", "host", "jobs", "straggled", "share", "median_z", "max_z"]
    if scores.empty:
        return pd.DataFrame(columns=columns)
    scores["host"] = scores["host"].fillna("")
    scores["slow"] = scores["z"] > z
    grouped = scores.groupby(["rank", "host"], sort=True)
    out = pd.DataFrame(
        {
            "jobs": grouped.size(),
            "straggled": grouped["slow"].sum().astype("int64"),
            "median_z": grouped["z"].median(),
            "max_z": grouped["z"].max(),
        }
    ).reset_index()
    out["share"] = out["straggled"] / out["jobs"]
    out = out[out["straggled"] > 0].sort_values(["straggled", "max_z"], ascending=[False, False])
    return out[columns].reset_index(drop=True)
