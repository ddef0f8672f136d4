"""A cache of the catalogue's rows for popprof's readers of a local store: ``cache/runs.parquet``.

The catalogue is one small file per ingest (``runs/month=*/<key>--<ingest>.parquet``): append-only, written
last by each add, removed by a withdrawn add, a ``--replace`` or ``store compact``. Reading thousands of them
is what made ``store ls`` slow. The listing of ``runs/`` stays the truth; the cache only saves reading the
files again: it holds each catalogue file's rows with the file's name, size, modification time and inode
when they were read, and a row is used only while a file of that name is listed with the same three (a file
written again is a new file: a rename gives a new inode). A file the cache does not cover is read as before.

popprof's readers write the cache (atomically, replacing it whole) when they had to read at least
:data:`REFRESH_AT` catalogue files it did not cover, or it holds as many rows of files gone or changed; a
store they cannot write is read without it. Outside readers never see it (it is not under ``runs/``);
deleting it is always safe. Object stores get no cache.
"""

from __future__ import annotations

import os

import pyarrow as pa

from .layout import Location
from .schemas import RUNS

#: The store-relative path of the cache.
CACHE = "cache/runs.parquet"
#: Write the cache when a read had to read at least this many catalogue files it does not cover (or the cache
#: holds as many rows of files gone or changed: a compaction's).
REFRESH_AT = 64
#: The columns the cache adds to the catalogue's (and ``month``).
_KEYS = [("_rel", pa.string()), ("_mtime_ns", pa.int64()), ("_size", pa.int64()), ("_ino", pa.int64())]


def schema() -> pa.Schema:
    """The cache file's columns: the catalogue's, ``month``, then the file's name and what identifies it."""
    return pa.schema([*RUNS, pa.field("month", pa.string()), *(pa.field(n, t) for n, t in _KEYS)])


def stats(location: Location, files: list[str]) -> dict[str, tuple[int, int, int]]:
    """(modification time in ns, size, inode) of each store file (a file gone since it was listed: left out)."""
    found = {}
    for rel in files:
        try:
            st = os.stat(location.path(rel), follow_symlinks=False)
        except OSError:
            continue
        found[rel] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return found


def _cache_path(location: Location) -> str | None:
    """The cache's full path when it is a regular file of the store (never through a symbolic link)."""
    path = location.path(CACHE)
    real = os.path.join(os.path.realpath(location.root), *CACHE.split("/"))
    if os.path.realpath(path) != real or not os.path.isfile(path):
        return None
    return path


def covered(
    location: Location, files: list[str], found: dict[str, tuple[int, int, int]]
) -> tuple[list[str], int]:
    """The ``files`` (store-relative, stat'd in ``found``) whose rows the cache holds as they are now, and how
    many of its rows are of files no longer there as they were (a reader rewrites the cache when they are
    many). An unreadable cache, one of other columns or one too large for its size covers nothing."""
    import pyarrow.parquet as pq

    from ..io.limits import LimitExceeded
    from .catalogue import verify_pages
    from .expansion import check_expansion

    if not location.local or not files:
        return [], 0
    path = _cache_path(location)
    if path is None:
        return [], 0
    try:
        if not pq.read_schema(path).remove_metadata().equals(schema()):
            return [], 0
        check_expansion(location, CACHE)
        verify_pages(location, CACHE)  # a page failing its CRC-32 (written since 2026-12-07): covers nothing
        keys = pq.read_table(path, columns=[n for n, _ in _KEYS])
    except (OSError, ValueError, pa.ArrowException, LimitExceeded):
        return [], 0
    wanted = set(files)
    hits, stale = set(), 0
    for rel, mtime, size, ino in zip(*(keys[n].to_pylist() for n, _ in _KEYS), strict=True):
        if rel in wanted and found.get(rel) == (mtime, size, ino):
            hits.add(rel)
        else:
            stale += 1
    return sorted(hits), stale


def cached_sql(location: Location, literal) -> str:
    """The SELECT of the cache's rows of the files in the query's one parameter (a list of store-relative
    names), as the raw catalogue relation's columns (``_file`` the full path, as DuckDB names a file)."""
    from .views import glob_escape

    names = ", ".join(f'"{f.name}"' for f in RUNS)
    return (
        f"SELECT {names}, month, {literal(location.root + '/')} || _rel AS _file "
        f"FROM read_parquet({literal(glob_escape(location.path(CACHE)))}) "
        "WHERE _rel IN (SELECT unnest(CAST(? AS VARCHAR[])))"
    )


def refresh(location: Location, rows: pa.Table, found: dict[str, tuple[int, int, int]]) -> bool:
    """Write the cache from the raw catalogue relation's ``rows`` (``_file`` full paths) of the stat'd files
    ``found``; False when the store cannot be written (a reader of a read-only store)."""
    from .catalogue import write_parquet

    if not location.local:
        return False
    prefix = location.root + "/"
    rels = [f[len(prefix) :] if f.startswith(prefix) else None for f in rows["_file"].to_pylist()]
    keep = [i for i, rel in enumerate(rels) if rel in found]
    table = rows.take(pa.array(keep, pa.int64())) if len(keep) != len(rels) else rows
    rels = [rels[i] for i in keep]
    columns = {f.name: table[f.name].cast(f.type) for f in RUNS}
    columns["month"] = table["month"].cast(pa.string())
    columns["_rel"] = pa.array(rels, pa.string())
    for index, (name, _) in enumerate(_KEYS[1:]):
        columns[name] = pa.array([found[rel][index] for rel in rels], pa.int64())
    try:
        write_parquet(location, CACHE, pa.table(columns, schema=schema()))
    except (OSError, pa.ArrowException):
        return False
    return True
