"""``add_spark(spark, store, sources)``: add many sources as runs of a store on Spark executors.

The sources (paths every executor can read: a shared file system, or the one machine of a local session)
are spread over the session's executors; each executor's Python worker runs :func:`popprof.store.add` on its
share, one source at a time, and sends back what it did. Adds of different runs write disjoint files, so the
executors need no coordination (``docs/store.md``, "Guarantees"); the driver only lists the results.

Every executor imports popprof to do this: its Python environment needs popprof and its dependencies
(``docs/store.md``, "Distributed ingest": ``pip install popprof`` on the nodes, or a packed environment
shipped with ``spark.archives``). A worker that cannot import popprof fails the job with
``ModuleNotFoundError``; :func:`add_spark` turns that into one line saying how to ship it.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..io.plural import plural
from ..model.errors import PopprofError, UsageError
from .ingest import AddResult

SHIP_HINT = (
    "the Spark executors cannot import popprof: install popprof and its dependencies in the executors' "
    "Python (pip install popprof on every node, or ship a packed environment with spark.archives; "
    "docs/store.md, 'Distributed ingest')"
)


class SparkAddError(PopprofError):
    """Some sources could not be added; ``results`` holds what was added, ``failures`` (source, message)."""

    def __init__(self, message: str, results: list[AddResult], failures: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.results = results
        self.failures = failures


def _add_partition(store: str, options: dict, sources: Iterable[str]) -> Iterator[dict]:
    """On an executor: add each source of this partition; one record per result or failure."""
    from . import add

    run_ids = options.pop("run_ids", None) or {}
    for source in sources:
        try:
            done = add(store, [source], run_id=run_ids.get(source), env={}, **options)
        except PopprofError as exc:  # the run's own problem (a conflict, an unreadable source): reported
            yield {"source": source, "error": " ".join(str(exc).split())}
            continue
        for result in done:
            yield {"source": source, "result": result.__dict__}


def add_spark(
    spark: object,
    store: str | os.PathLike[str],
    sources: Sequence[str | os.PathLike[str]],
    *,
    run_ids: Mapping[str, str] | None = None,
    commit: str | None = None,
    branch: str | None = None,
    time: str | dt.datetime | None = None,
    labels: Mapping[str, str] | None = None,
    replace: bool = False,
    keep_bundle: bool = False,
    profile: str | None = None,
    partitions: int | None = None,
    config: Mapping | None = None,
) -> list[AddResult]:
    """Add every source (a path each executor can read) as a run of ``store`` on the executors of the
    SparkSession ``spark``; returns what was added (one :class:`~popprof.store.AddResult` per profile, in the
    order of ``sources``).

    Each source is its own run: its id is ``run_ids[source]`` when given, else the content hash (CI variables
    on the executors are not used: they would give every source one id). ``commit``, ``branch``, ``time``,
    ``labels``, ``replace``, ``keep_bundle`` and ``profile`` apply to every source, as in
    :func:`popprof.store.add`; so does ``config``, whose ``[rules]`` judge each run's findings (default: the
    rules' defaults; no configuration file is read on the executors). ``partitions``: how many tasks
    (default: the session's default parallelism, at most one per source). Sources that cannot be added (a
    conflict, an unreadable file) do not stop the others: after all are done, :class:`SparkAddError` names
    them, with the results of the rest.
    """
    from ..io.config import Config
    from .judged import rules_hash
    from .layout import Location, read_descriptor

    location = Location.of(store)
    read_descriptor(location)  # on the driver: a missing store is one line before any task starts
    rules_hash(config)  # and a bad [rules] table
    # a local store's path as the executors must see it (absolute); a URL as it is
    root = location.root
    paths = [os.fspath(s) if "://" in os.fspath(s) else os.path.abspath(os.fspath(s)) for s in sources]
    if not paths:
        return []
    given = {os.path.abspath(os.fspath(k)): v for k, v in (run_ids or {}).items()}
    options = {
        "commit": commit,
        "branch": branch,
        "time": time,
        "labels": dict(labels or {}),
        "replace": replace,
        "keep_bundle": keep_bundle,
        "profile": profile,
        "config": {"rules": dict(Config.of(config).rules)},  # a plain table: pickled to the executors
        "run_ids": {p: given[p] for p in paths if p in given},
    }
    context = spark.sparkContext  # type: ignore[attr-defined]
    slices = max(1, min(len(paths), partitions or context.defaultParallelism))
    try:
        records = (
            context.parallelize(paths, slices)
            .mapPartitions(lambda part: _add_partition(root, dict(options), part))
            .collect()
        )
    except Exception as exc:  # Py4J / PySpark wrap the executors' errors in their own exceptions
        if "ModuleNotFoundError" in str(exc) and "popprof" in str(exc):
            raise UsageError(SHIP_HINT) from None
        raise
    order = {p: i for i, p in enumerate(paths)}
    records.sort(key=lambda r: order[r["source"]])
    results = [AddResult(**r["result"]) for r in records if "result" in r]
    failures = [(r["source"], r["error"]) for r in records if "error" in r]
    if failures:
        source, message = failures[0]
        raise SparkAddError(
            f"{len(failures)} of {plural(len(paths), 'source')} not added (first: {source}: {message}); "
            f"{plural(len(results), 'run')} added",
            results,
            failures,
        )
    return results
