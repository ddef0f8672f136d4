"""Synthetic run histories written straight into a store (for tests, benchmarks and the notebook).

The files are the ones ``store add`` writes (catalogue rows and ``metrics``), made from given values
instead of profiles, so a 500-run history takes about a second. Never imported by runtime code.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from .. import metrics as registry
from ..store.catalogue import write_parquet
from ..store.identity import month_of
from ..store.layout import COMPACT_PREFIX, Location, read_descriptor, run_file, run_key
from ..store.schemas import FINDINGS, METRICS, RUNS


def shifted_series(
    n: int,
    *,
    seed: int,
    level: float = 1000.0,
    noise: float = 0.02,
    shifts: Mapping[int, float] | None = None,
    spikes: float = 0.0,
    spike_size: float = 0.25,
) -> np.ndarray:
    """``n`` values: ``level`` with lognormal ``noise``, multiplied by ``1 + shift`` from each shift index on,
    and a share ``spikes`` of single runs ``spike_size`` higher. Seeded: the same arguments give the same values."""
    rng = np.random.default_rng(seed)
    values = level * np.exp(rng.normal(0.0, noise, n))
    for at, rel in sorted((shifts or {}).items()):
        values[at:] *= 1 + rel
    if spikes:
        count = max(1, int(round(spikes * n)))
        values[rng.choice(n, count, replace=False)] *= 1 + spike_size
    return values


def write_history(
    store: str | os.PathLike[str],
    series: Mapping[str, Sequence[float]],
    *,
    profile: str = "train",
    branch: str = "main",
    start: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    every: dt.timedelta = dt.timedelta(hours=2),
    run_ids: Sequence[str] | None = None,
    commits: Sequence[str | None] | None = None,
    compacted: bool = False,
    findings: Mapping[str, Sequence[str | None]] | None = None,
) -> list[str]:
    """Write one run per index of the ``series`` (metric name -> values, all the same length); the run ids.

    ``commits``: each run's commit (default: a distinct one per run; the same commit twice is a re-run).
    ``findings``: rule id -> each run's severity (None: not fired); with it every run is judged (its
    manifest's ``judged``, one rule settings hash) and its findings are written too.

    With ``compacted`` the files are written as ``store compact`` leaves them (one per month and kind).
    """
    location = Location.of(store)
    read_descriptor(location)
    n = len(next(iter(series.values())))
    ids = list(run_ids) if run_ids is not None else [f"{i:05d}" for i in range(n)]
    now = dt.datetime.now(dt.UTC)
    runs, metrics, fired = [], [], []
    for i, run_id in enumerate(ids):
        created = start + i * every
        commit = commits[i] if commits is not None else hashlib.sha1(f"commit {i}".encode()).hexdigest()
        ingest = hashlib.sha256(f"{run_id}\0{profile}\0synthetic".encode()).hexdigest()[:16]
        runs.append(
            {
                "run_id": run_id,
                "profile": profile,
                "created": created,
                "commit": commit,
                "branch": branch,
                "labels": "{}",
                "kind": "profile",
                "source_format": "synthetic",
                "format_version": 1,
                "tool_version": "synthetic",
                "redacted": False,
                "tables": "[]",
                "content_sha256": ingest,
                "ingest_id": ingest,
                "ingested_at": now,
                "manifest": "{}"
                if findings is None
                else json.dumps({"judged": {"rules_sha256": "synthetic"}}),
            }
        )
        for position, (rule, severities) in enumerate((findings or {}).items(), 1):
            if severities[i] is not None:
                fired.append(
                    {
                        "run_id": run_id,
                        "profile": profile,
                        "created": created,
                        "position": position,
                        "rule_id": rule,
                        "severity": severities[i],
                        "title": rule,
                        "figure": rule,
                        "value": 1.0,
                        "message": f"{rule} fired",
                        "rules_sha256": "synthetic",
                        "popprof_version": "synthetic",
                        "ingest_id": ingest,
                    }
                )
        for name, values in series.items():
            described = registry.describe(name)
            metrics.append(
                {
                    "run_id": run_id,
                    "profile": profile,
                    "created": created,
                    "name": name,
                    "value": float(values[i]),
                    "unit": described.unit if described else "",
                    "better": described.better if described else None,
                    "ingest_id": ingest,
                }
            )
    _write(location, "metrics", metrics, METRICS, compacted, profile)
    if fired:
        _write(location, "findings", fired, FINDINGS, compacted, profile)
    _write(location, "runs", runs, RUNS, compacted, profile)
    return ids


def _write(
    location: Location, kind: str, rows: list[dict], schema: pa.Schema, compacted: bool, profile: str
) -> None:
    by_month: dict[str, list[dict]] = {}
    for row in rows:
        by_month.setdefault(month_of(row["created"]), []).append(row)
    for month, group in by_month.items():
        if compacted:
            rel = f"{kind}/month={month}/{COMPACT_PREFIX}000001-{hashlib.sha1(month.encode()).hexdigest()[:12]}.parquet"
            write_parquet(location, rel, pa.Table.from_pylist(group, schema=schema))
            continue
        by_run: dict[str, list[dict]] = {}
        for row in group:
            by_run.setdefault(row["run_id"], []).append(row)
        for run_id, mine in by_run.items():
            rel = run_file(kind, month, run_key(run_id, profile), mine[0]["ingest_id"])
            write_parquet(location, rel, pa.Table.from_pylist(mine, schema=schema))


def write_rank_jobs(
    store: str | os.PathLike[str],
    jobs: int,
    ranks: int,
    *,
    seed: int,
    slow: Mapping[int, float] | None = None,
    slow_share: float = 1.0,
    step_us: float = 100_000.0,
    noise: float = 0.01,
    start: dt.datetime = dt.datetime(2026, 3, 1, tzinfo=dt.UTC),
    compacted: bool = False,
    synchronous: bool = False,
) -> list[str]:
    """Write ``jobs`` trace runs with ``ranks`` ranks each into the ``ranks`` table (and the catalogue).

    Each rank's step time is ``step_us`` with ``noise``; a rank in ``slow`` (rank -> relative slowdown) is
    that much slower in a share ``slow_share`` of the jobs, and starts the step's last collective that share
    of an iteration late (``late_start``; every rank is late by ``noise``-sized amounts). ``synchronous``: a
    blocking all-reduce makes every rank's step time the slowest one's (with a tenth of the noise), so only
    ``late_start`` shows the slow rank. Host ``host-<rank // 8>``. Returns the run ids.
    """
    from ..store.schemas import RANKS

    location = Location.of(store)
    read_descriptor(location)
    rng = np.random.default_rng(seed)
    late_rng = np.random.default_rng([seed, 1])  # its own stream: the step times stay what they were
    now = dt.datetime.now(dt.UTC)
    runs, rows = [], []
    ids = [f"job-{i:05d}" for i in range(jobs)]
    for i, run_id in enumerate(ids):
        created = start + i * dt.timedelta(hours=1)
        ingest = hashlib.sha256(f"{run_id}\0ranks\0synthetic".encode()).hexdigest()[:16]
        runs.append(
            dict(
                run_id=run_id,
                profile="trace",
                created=created,
                kind="profile",
                source_format="synthetic",
                labels="{}",
                tables="[]",
                content_sha256=ingest,
                ingest_id=ingest,
                ingested_at=now,
                manifest="{}",
            )
        )
        times = step_us * np.exp(rng.normal(0.0, noise, ranks))
        late = np.abs(late_rng.normal(0.0, noise, ranks))
        for rank, rel in (slow or {}).items():
            if rng.random() < slow_share:
                times[rank] *= 1 + rel
                late[rank] += rel
        if synchronous:
            times = times.max() * np.exp(late_rng.normal(0.0, noise / 10, ranks))
        for rank in range(ranks):
            rows.append(
                dict(
                    run_id=run_id,
                    profile="trace",
                    created=created,
                    rank=rank,
                    host=f"host-{rank // 8}",
                    steps=20,
                    step_us=float(times[rank]),
                    step_p50_us=float(times[rank]),
                    span_us=20 * float(times[rank]),
                    late_start=float(late[rank]),
                    ingest_id=ingest,
                )
            )
    _write(location, "ranks", rows, RANKS, compacted, "trace")
    _write(location, "runs", runs, RUNS, compacted, "trace")
    return ids
