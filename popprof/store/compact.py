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
import json
import os
from dataclasses import dataclass

from . import bundles
from .catalogue import damaged, damaged_detail, read_parquet, verify_pages, write_parquet
from .engine_duckdb import raw_sql, readable
from .expansion import check_expansion
from .identity import month_of
from .layout import (
    COMPACT_PREFIX,
    PENDING,
    Location,
    check_month,
    compact_generation,
    ingest_of,
    is_month,
    kind_dir,
    read_descriptor,
    run_file,
    run_key,
)
from .schemas import kinds, schema_of, table_kind
from .views import raw_name, view_sql


def compact(store: str | os.PathLike[str], *, before: str | None = None, migrate: bool = False) -> list[str]:
    """Compact every month before ``before`` (YYYY-MM; default the current month), and with ``migrate`` every
    month with a file of another schema (:func:`outdated`); returns the ``kind/month``s done."""
    from .api import Store

    location = Location.of(store)
    read_descriptor(location)
    before = check_month(before) if before is not None else month_of(dt.datetime.now(dt.UTC))
    con = Store(location).duckdb(verify=False)  # the months compacted are checked page by page below
    done = []
    try:
        with readable(location):
            known = {
                r[0] for r in con.execute(f"SELECT DISTINCT ingest_id FROM {raw_name('runs')}").fetchall()
            }
            # the catalogue last: the other kinds' views read it while they are compacted
            for kind in [*[k for k in kinds() if k != "runs"], "runs"]:
                for month_name in location.dirs(kind_dir(kind)):
                    month = month_name.removeprefix("month=")
                    if not month_name.startswith("month=") or not is_month(month):
                        continue
                    force = migrate and bool(
                        outdated(
                            location, kind, location.files(f"{kind_dir(kind)}/month={month}", "*.parquet")
                        )
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
    import pyarrow as pa

    for rel in inputs:  # compaction reads every column of every file: bounded before it reads any, and
        check_expansion(location, rel)  # never a damaged page rewritten with a fresh checksum
        try:
            verify_pages(location, rel)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise damaged(location, rel, exc) from None
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
    """One thing ``fsck`` found: ``kind`` (orphan, superseded, compacted, temporary, symlink, unreadable,
    damaged, missing, pending), the file and why. ``fixable``: whether ``--fix`` may remove it (an unreadable,
    damaged or missing file is data fsck cannot repair; a pending add's files are not its to remove)."""

    kind: str
    path: str
    detail: str
    fixed: bool = False
    fixable: bool = True


#: An add's pending marker (and a temporary file) younger than this is an add under way: ``fsck --fix``
#: leaves its files alone. Older, the add is taken for dead (a ``kill -9``) and its files are orphans.
PENDING_GRACE = dt.timedelta(hours=1)


def fsck(
    store: str | os.PathLike[str], *, fix: bool = False, grace: dt.timedelta = PENDING_GRACE
) -> list[Problem]:
    """Check a store; with ``fix``, remove what is found that no query sees (never a live run's file, never
    the files of an add under way: its pending marker younger than ``grace``). Symbolic links (removed: the
    link, not its target), files that cannot be read or have a column of another type, damaged files (a page
    failing its CRC-32) and live runs missing a file are reported too; the last three cannot be repaired by
    fsck."""
    import warnings

    from .api import Store

    location = Location.of(store)
    read_descriptor(location)
    now = dt.datetime.now(dt.UTC)
    problems = [
        Problem("symlink", rel, "a symbolic link: never read, compacted or removed through")
        for rel in location.links()
    ]
    pending = _pending(location, now, grace, problems)
    unreadable = _unreadable(location, problems)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the links are reported above
        con = Store(location).duckdb(skip=unreadable, verify=False)  # every page checked above
    try:
        with readable(location):
            # the ingest of an unreadable catalogue file (in its name) owns its files still
            owned = {ingest_of(rel) for rel in unreadable if rel.startswith("runs/")} - {None}
            found = _orphans(con, location, pending, owned)
    finally:
        con.close()
    if any(rel.startswith("runs/") for rel in unreadable):  # its rows may own the files that look orphaned
        for problem in found:
            if problem.kind in ("orphan", "superseded"):
                problem.fixable = False
                problem.detail += "; kept while a catalogue file cannot be read"
    problems += found
    for rel in location.files("", "**/.*.tmp"):
        if location.local and now - _mtime(location, rel) < grace:
            problems.append(Problem("pending", rel, "a write under way", fixable=False))
        else:
            problems.append(Problem("temporary", rel, "a write that did not finish"))
    if fix:
        for problem in problems:
            if not problem.fixable:
                continue
            if problem.kind == "symlink":
                os.unlink(location.path(problem.path))
            elif problem.path.startswith(f"{bundles.ROOT}/"):
                bundles.remove(location, problem.path)
            else:
                location.remove(problem.path)
            problem.fixed = True
    return problems


def _mtime(location: Location, rel: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(os.stat(location.path(rel)).st_mtime, dt.UTC)


def _pending(location: Location, now: dt.datetime, grace: dt.timedelta, problems: list[Problem]) -> set[str]:
    """The ingest ids of adds under way (a pending marker younger than ``grace``); stale markers become
    problems."""
    import json

    under_way = set()
    for rel in location.files(PENDING, "*.json"):
        ingest = rel.rsplit("/", 1)[-1].removesuffix(".json")
        try:
            started = dt.datetime.fromisoformat(json.loads(location.read_bytes(rel))["started"])
        except (OSError, ValueError, KeyError, TypeError):
            started = None
        if started is not None and started.tzinfo is not None and now - started < grace:
            under_way.add(ingest)
            problems.append(
                Problem("pending", rel, f"an add under way since {started.isoformat()}", fixable=False)
            )
        else:
            problems.append(Problem("orphan", rel, "the marker of an add that did not finish"))
    return under_way


#: Columns every file of the catalogue (``runs``) has: ``store add`` writes them all.
CATALOGUE_COLUMNS = ("run_id", "profile", "created", "ingest_id")


def _unreadable(location: Location, problems: list[Problem]) -> set[str]:
    """Store files whose Parquet footer cannot be read, or with a column the declared type cannot take (the
    views cast every column: such a file stops every query of its kind); returns their paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..io.limits import LimitExceeded
    from ..model.errors import InputError

    found = set()
    for kind in kinds():
        declared = schema_of(kind)
        for rel in location.files(kind_dir(kind), "month=*/*.parquet"):
            try:
                if location.local:
                    schema = pq.read_schema(location.path(rel))
                else:
                    with location.fs.open(location._bare(rel), "rb") as handle:  # type: ignore[union-attr]
                        schema = pq.read_schema(handle)
                other = [
                    f.name for f in declared if f.name in schema.names and schema.field(f.name).type != f.type
                ]
                lacking = (
                    [name for name in CATALOGUE_COLUMNS if name not in schema.names] if kind == "runs" else []
                )
                if (
                    lacking
                ):  # another kind's file in the catalogue (a row without a month: fsck's internal error)
                    problems.append(
                        Problem(
                            "unreadable",
                            rel,
                            f"not a catalogue file: no {', '.join(lacking)} column",
                            fixable=False,
                        )
                    )
                    found.add(rel)
                    continue
                check_expansion(location, rel)
                try:  # every page, its CRC-32 checked where the file has them (written since 2026-12-07)
                    verify_pages(location, rel)
                except (OSError, ValueError, pa.ArrowException) as exc:
                    problems.append(Problem("damaged", rel, damaged_detail(exc), fixable=False))
                    found.add(rel)
                    continue
                if other:
                    table = read_parquet(location, rel, columns=other)
                    for name in other:
                        table[name].cast(declared.field(name).type, safe=True)
            except LimitExceeded as exc:
                problems.append(
                    Problem("unreadable", rel, f"too large to read ({exc.detail})", fixable=False)
                )
                found.add(rel)
            except (OSError, ValueError, pa.ArrowException, InputError) as exc:
                reason = " ".join(str(exc).split()) or type(exc).__name__
                problems.append(
                    Problem("unreadable", rel, f"cannot be read as this kind ({reason})", fixable=False)
                )
                found.add(rel)
    return found


def _orphans(
    con, location: Location, pending: set[str], owned: set[str | None] = frozenset()
) -> list[Problem]:
    """Files of ingests no live catalogue row owns, files compacted twice, and live runs missing a file."""
    live = {r[0] for r in con.execute("SELECT ingest_id FROM runs").fetchall()}
    known = {r[0] for r in con.execute(f"SELECT DISTINCT ingest_id FROM {raw_name('runs')}").fetchall()}
    problems = []
    present: dict[str, set[str]] = {}
    compact_months: dict[str, set[str]] = {}
    prefix = location.root.rstrip("/") + "/"
    for kind in kinds():
        if kind == "runs":
            continue
        compacted = {
            (ingest, file.removeprefix(prefix).rsplit("/", 1)[0])
            for ingest, file in con.execute(
                f"SELECT DISTINCT ingest_id, _file FROM {raw_name(kind)} WHERE _file LIKE '%/compact-%'"
            ).fetchall()
        }
        present[kind] = {ingest for ingest, _ in compacted}
        compact_months[kind] = {folder for _, folder in compacted}
        for rel in location.files(kind_dir(kind), "month=*/*.parquet"):
            ingest = ingest_of(rel)
            if ingest is None:
                compact_months[kind].add(rel.rsplit("/", 1)[0])
                continue
            present[kind].add(ingest)
            if ingest in pending:
                problems.append(Problem("pending", rel, "written by an add under way", fixable=False))
            elif ingest in owned:
                continue
            elif ingest not in known:
                problems.append(Problem("orphan", rel, "no catalogue row: an add that did not finish"))
            elif ingest not in live:
                problems.append(Problem("superseded", rel, "the run was replaced"))
            elif (ingest, rel.rsplit("/", 1)[0]) in compacted:
                problems.append(
                    Problem("compacted", rel, "also in a compacted file: a compaction was interrupted")
                )
    for run_id, profile, ingest, created, tables in con.execute(
        "SELECT run_id, profile, ingest_id, created, tables FROM runs"
    ).fetchall():
        month = month_of(created)
        for table in ["metrics", *json.loads(tables or "[]")]:
            kind = table if table == "metrics" else table_kind(table)
            folder = f"{kind_dir(kind)}/month={month}"
            # a table with no rows leaves no trace in a compacted file: only a month never compacted tells
            if ingest not in present.get(kind, set()) and folder not in compact_months.get(kind, set()):
                path = run_file(kind, month, run_key(run_id, profile), ingest)
                problems.append(
                    Problem(
                        "missing",
                        path,
                        f"run {run_id} profile {profile} lacks its {table} file",
                        fixable=False,
                    )
                )
    for rel, ingest in bundles.kept(location).items():
        if ingest in pending:
            problems.append(Problem("pending", rel, "a bundle an add under way keeps", fixable=False))
        elif ingest not in known:
            problems.append(Problem("orphan", rel, "a kept bundle without a catalogue row"))
        elif ingest not in live:
            problems.append(Problem("superseded", rel, "a kept bundle of a replaced run"))
    return problems
