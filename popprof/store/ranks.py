"""The ``ranks`` table: per-rank figures of a trace, from the code ``check``'s straggler rule uses.

Nothing is computed here: ``rank_figures`` (step time, span, idle), ``collective_late_start`` (HTA's late
start, averaged over iterations as the rule does) and ``step_times`` come from :mod:`popprof.metrics.ranks`;
the step-time percentiles from :func:`popprof.metrics.steps.step_stats` over each rank's steps.

``host``: the trace's own record of it when there is one (:func:`rank_hosts`), else the run's ``host``
label (``store add --label host=...``), else empty.
"""

from __future__ import annotations

import json
import re

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


#: PyTorch's ``tensorboard_trace_handler`` names a trace ``<worker>.<time>.pt.trace.json[.gz]``, its worker
#: by default ``<hostname>_<pid>``.
_WORKER_FILE = re.compile(r"^(?P<host>[^/\\]+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
#: Top-level trace keys (kept in the profile's metadata as ``chrome.top.<key>``) that name the host.
_HOST_KEYS = ("hostname", "host", "host_name")


def rank_hosts(profile: Profile) -> tuple[dict[int, str], str | None]:
    """The hosts the trace records: per rank, the ``<hostname>_<pid>`` worker name of a PyTorch profiler file
    (``tensorboard_trace_handler``'s default); for a trace of one file, also its top-level ``hostname`` key
    or its file's worker name, as the host of every rank."""
    meta = profile.meta
    try:
        files = {
            int(rank): str(name) for rank, name in json.loads(meta.get("trace.rank_files", "{}")).items()
        }
        sources = [str(f.get("name", "")) for f in json.loads(meta.get("source_files", "[]"))]
    except (ValueError, TypeError, AttributeError):
        return {}, None
    per_rank = {rank: host for rank, name in files.items() if (host := _worker_host(name))}
    whole = None
    if len(sources) == 1:
        whole = next((str(meta[f"chrome.top.{k}"]) for k in _HOST_KEYS if meta.get(f"chrome.top.{k}")), None)
        whole = whole or _worker_host(sources[0])
    return per_rank, whole


def _worker_host(name: str) -> str | None:
    found = _WORKER_FILE.match(name.replace("\\", "/").rsplit("/", 1)[-1])
    return found.group("host") if found else None


def rank_table(profile: Profile, host: str | None = None) -> pd.DataFrame:
    """One row per rank of ``profile`` (empty for a profile without ranks, such as an IPU graph profile);
    ``host`` for the ranks whose trace does not name theirs (:func:`rank_hosts`)."""
    figures = rank_figures(profile)
    if figures.empty:
        return pd.DataFrame(columns=COLUMNS)
    per_rank, whole = rank_hosts(profile)
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
                "host": per_rank.get(int(fig.rank), whole or host),
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
