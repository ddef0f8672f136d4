"""``store compact`` (one file per closed month and table) and ``store fsck`` (what a crash or a replace left).

Compaction writes ``compact-<gen>-<hash>.parquet`` with the month's live rows, then deletes the files it
replaced. The views take each ingest from its highest generation, so an interrupted compaction (new file
written, old ones not yet deleted) never counts a run twice; running compact again finishes the job.
Files of ingests the catalogue does not know (an add still writing) are left alone.

``migrate`` also rewrites every month, closed or not, that holds a file whose Parquet schema is not the
declared one (a column missing, one this popprof does not know, another type: files of an older or newer
popprof), so that every file has the current columns and types. The views read such files already (by
name, with casts); migrating makes them plain for engines that read the files without popprof.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from dataclasses import dataclass

from . import bundles
from .catalogue import write_parquet
from .engine_duckdb import raw_sql
from .identity import month_of
from .layout import (
    COMPACT_PREFIX,
    Location,
    check_month,
    compact_generation,
    ingest_of,
    is_month,
    kind_dir,
    read_descriptor,
)
from .schemas import kinds, schema_of
from .views import raw_name, view_sql


def compact(store: str | os.PathLike[str], *, before: str | None = None, migrate: bool = False) -> list[str]:
    """Compact every month before ``before`` (YYYY-MM; default the current month), and with ``migrate`` every
    month with a file of another schema (:func:`outdated`); returns the ``kind/month``s done."""
    from .api import Store

    location = Location.of(store)
    read_descriptor(location)
    before = check_month(before) if before is not None else month_of(dt.datetime.now(dt.UTC))
    con = Store(location).duckdb()
    done = []
    try:
        known = {r[0] for r in con.execute(f"SELECT DISTINCT ingest_id FROM {raw_name('runs')}").fetchall()}
        # the catalogue last: the other kinds' views read it while they are compacted
        for kind in [*[k for k in kinds() if k != "runs"], "runs"]:
            for month_name in location.dirs(kind_dir(kind)):
                month = month_name.removeprefix("month=")
                if not month_name.startswith("month=") or not is_month(month):
                    continue
                force = migrate and bool(
                    outdated(location, kind, location.files(f"{kind_dir(kind)}/month={month}", "*.parquet"))
                )
                if (month < before or force) and _compact_month(con, location, kind, month, known, force):
                    done.append(f"{kind}/{month}")
    finally:
        con.close()
    return done


def outdated(location: Location, kind: str, files: list[str]) -> list[str]:
    """The ``files`` of ``kind`` whose Parquet schema (names and types, in order) is not the declared one."""
    import pyarrow.parquet as pq

    declared = schema_of(kind)
    found = []
    for rel in files:
        if location.local:
            schema = pq.read_schema(location.path(rel))
        else:
            with location.fs.open(location._bare(rel), "rb") as handle:  # type: ignore[union-attr]
                schema = pq.read_schema(handle)
        if not schema.remove_metadata().equals(declared):
            found.append(rel)
    return found


def _compact_month(
    con, location: Location, kind: str, month: str, known: set[str], force: bool = False
) -> bool:
    folder = f"{kind_dir(kind)}/month={month}"
    inputs = location.files(folder, "*.parquet")
    one = len(inputs) == 1 and inputs[0].rsplit("/", 1)[-1].startswith(COMPACT_PREFIX)
    if not inputs or (one and not force):
        return False
    names = [f'"{f.name}"' for f in schema_of(kind)]
    order = "created, run_id, profile" if "created" in schema_of(kind).names else "run_id, profile"
    # only this month's files: the view's rules (live ingests, highest generation) applied to them
    con.execute(f"CREATE OR REPLACE TEMP VIEW _month AS {raw_sql(location, kind, True, inputs)}")
    table = con.sql(
        f"SELECT {', '.join(names)} FROM ({view_sql(kind, raw='_month')}) ORDER BY {order}"
    ).to_arrow_table()
    table = table.cast(schema_of(kind))
    generation = 1 + max(compact_generation(f) for f in inputs)
    digest = hashlib.sha1("\n".join(sorted(set(table["ingest_id"].to_pylist()))).encode()).hexdigest()[:12]
    write_parquet(location, f"{folder}/{COMPACT_PREFIX}{generation:06d}-{digest}.parquet", table)
    for rel in inputs:
        ingest = ingest_of(rel)
        if kind == "runs" or ingest is None or ingest in known:  # never an add still under way
            location.remove(rel)
    return True


@dataclass
class Problem:
    """One thing ``fsck`` found: ``kind`` (orphan, superseded, compacted, temporary), the file and why."""

    kind: str
    path: str
    detail: str
    fixed: bool = False


def fsck(store: str | os.PathLike[str], *, fix: bool = False) -> list[Problem]:
    """Check a store; with ``fix``, remove what is found (files no query sees). Do not fix while adds run."""
    from .api import Store

    location = Location.of(store)
    read_descriptor(location)
    con = Store(location).duckdb()
    try:
        live = {r[0] for r in con.execute("SELECT ingest_id FROM runs").fetchall()}
        known = {r[0] for r in con.execute(f"SELECT DISTINCT ingest_id FROM {raw_name('runs')}").fetchall()}
        problems = []
        for kind in kinds():
            if kind == "runs":
                continue
            prefix = location.root.rstrip("/") + "/"
            compacted = {
                (ingest, file.removeprefix(prefix).rsplit("/", 1)[0])
                for ingest, file in con.execute(
                    f"SELECT DISTINCT ingest_id, _file FROM {raw_name(kind)} WHERE _file LIKE '%/compact-%'"
                ).fetchall()
            }
            for rel in location.files(kind_dir(kind), "month=*/*.parquet"):
                ingest = ingest_of(rel)
                if ingest is None:
                    continue
                if ingest not in known:
                    problems.append(Problem("orphan", rel, "no catalogue row: an add that did not finish"))
                elif ingest not in live:
                    problems.append(Problem("superseded", rel, "the run was replaced"))
                elif (ingest, rel.rsplit("/", 1)[0]) in compacted:
                    problems.append(
                        Problem("compacted", rel, "also in a compacted file: a compaction was interrupted")
                    )
    finally:
        con.close()
    for rel, ingest in bundles.kept(location).items():
        if ingest not in known:
            problems.append(Problem("orphan", rel, "a kept bundle without a catalogue row"))
        elif ingest not in live:
            problems.append(Problem("superseded", rel, "a kept bundle of a replaced run"))
    for rel in location.files("", "**/.*.tmp"):
        problems.append(Problem("temporary", rel, "a write that did not finish"))
    if fix:
        for problem in problems:
            if problem.path.startswith(f"{bundles.ROOT}/"):
                bundles.remove(location, problem.path)
            else:
                location.remove(problem.path)
            problem.fixed = True
    return problems
