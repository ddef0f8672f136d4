"""DuckDB over a store: the raw relations with declared types, then the views of :mod:`.views`."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence, Set

import duckdb

from ..io.plural import plural
from ..model.errors import InputError
from .layout import Location, kind_dir
from .schemas import duckdb_type, kinds, schema_of, view_name
from .views import LIVE, columns, glob_escape, live_sql, one_generation, raw_name, view_sql


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def raw_sql(location: Location, kind: str, present: bool, files: list[str] | None = None) -> str:
    """The raw relation of ``kind``: its files (all, or the store-relative ``files``) read by name with
    declared casts (typed and empty without files).

    An empty typed relation is unioned by name with the files, so a column missing from every file (an
    optional one, or one added later) is NULL, and a column the schema does not know is ignored.
    """
    schema = schema_of(kind)
    typed_nulls = ", ".join(f'CAST(NULL AS {duckdb_type(f.type)}) AS "{f.name}"' for f in schema)
    empty = (
        f"SELECT {typed_nulls}, CAST(NULL AS VARCHAR) AS month, CAST(NULL AS VARCHAR) AS _file WHERE false"
    )
    if not present:
        return empty
    if files is None:
        files = location.files(kind_dir(kind), "month=*/*.parquet")
        if not files:
            return empty
    # the files listed, each escaped: never a pattern over the store's own path, and only what
    # ``Location.files`` lists (no symbolic link)
    source = "[" + ", ".join(_literal(glob_escape(location.path(f))) for f in files) + "]"
    files_sql = (
        f"SELECT * FROM read_parquet({source}, "
        "hive_partitioning = true, hive_types = {'month': 'VARCHAR'}, union_by_name = true, filename = true)"
    )
    casts = ", ".join(f'CAST("{f.name}" AS {duckdb_type(f.type)}) AS "{f.name}"' for f in schema)
    return (
        f"SELECT {casts}, CAST(month AS VARCHAR) AS month, CAST(_file AS VARCHAR) AS _file FROM "
        f"({empty} UNION ALL BY NAME SELECT * EXCLUDE (filename), filename AS _file FROM ({files_sql}))"
    )


@contextlib.contextmanager
def readable(location: Location) -> Iterator[None]:
    """DuckDB's (and pyarrow's) errors over the store's files (a truncated Parquet file, a column of another
    type that the declared cast cannot convert) as one InputError line, exit 2, instead of an internal error."""
    import pyarrow as pa

    try:
        yield
    except duckdb.InterruptException:
        raise
    except (duckdb.Error, pa.ArrowException) as exc:
        reason = " ".join(str(exc).split("\n")[0].split()) or type(exc).__name__
        raise InputError(
            location.root,
            f"a store file cannot be read ({reason})",
            "popprof store fsck lists the files it cannot read",
        ) from None


def present_kinds(
    location: Location, only: Sequence[str] | None = None, skip: Set[str] = frozenset()
) -> dict[str, list[str]]:
    """The kinds (of ``only``, default all) that have at least one file in the store (leaving out ``skip``),
    with their files."""
    found = {}
    for kind in only or kinds():
        files = [f for f in location.files(kind_dir(kind), "month=*/*.parquet") if f not in skip]
        if files:
            found[kind] = files
    return found


def create_views(
    con: duckdb.DuckDBPyConnection,
    location: Location,
    only: Sequence[str] | None = None,
    skip: Set[str] = frozenset(),
    verify: bool = True,
) -> list[str]:
    """Create the raw relations and views of every kind (or of ``only``, with ``runs`` always) on ``con``;
    returns the view names. ``skip``: store files left out (``fsck`` reads around the unreadable ones).

    With ``verify`` (the default) the page checksums of the files DuckDB will read are checked first, once per
    file (:mod:`.verified`): a damaged file is one InputError naming it. ``fsck`` and ``compact``, which check
    every page of the files they judge themselves, pass False.

    The catalogue's rows and the live ingests are read once into temporary tables; a kind without files
    gets an empty view of its declared columns (nothing to bind against the files). A file that cannot be
    read is one InputError.
    Symbolic links are never read (:meth:`Location.files`); a warning says how many were left out.
    """
    with readable(location):
        return _create_views(con, location, only, skip, verify)


def _read_catalogue(
    con: duckdb.DuckDBPyConnection,
    location: Location,
    files: list[str],
    verify: Callable[[list[str]], object],
) -> None:
    """The raw catalogue relation as a temporary table: the catalogue is small (a row per ingest) but may be
    thousands of files, read once here for the live ingests, the ``runs`` view and every other view (as a
    view, each of them scanned every catalogue file again). The rows of the files the catalogue cache covers
    come from it (:mod:`.catalogue_cache`); the others are read, and the cache rewritten when they were many
    (or it held many rows of files gone or changed). ``verify`` is called with the catalogue files to be read
    first (the cache's rows were read from files that passed it, and its own pages are checked)."""
    from . import catalogue_cache

    found = catalogue_cache.stats(location, files) if location.local else {}
    hits, stale = catalogue_cache.covered(location, files, found)
    rest = sorted(set(files) - set(hits))
    verify(rest)
    con.execute(f"CREATE TEMP TABLE {raw_name('runs')} AS {raw_sql(location, 'runs', bool(rest), rest)}")
    if hits:
        con.execute(
            f"INSERT INTO {raw_name('runs')} BY NAME {catalogue_cache.cached_sql(location, _literal)}", [hits]
        )
    if location.local and max(len(rest), stale) >= catalogue_cache.REFRESH_AT:
        rows = con.sql(f"SELECT * FROM {raw_name('runs')}").to_arrow_table()
        catalogue_cache.refresh(location, rows, found)


def _create_views(
    con: duckdb.DuckDBPyConnection,
    location: Location,
    only: Sequence[str] | None,
    skip: Set[str],
    verify: bool,
) -> list[str]:
    from . import verified

    wanted = ["runs", *[k for k in (only or kinds()) if k != "runs"]]
    present = present_kinds(location, wanted, skip)
    others = [rel for kind, files in present.items() if kind != "runs" for rel in files]
    if location.skipped:
        warnings.warn(
            f"{location.root}: {plural(len(location.skipped), 'symbolic link')} in the store not read "
            "(popprof store fsck lists them, --fix removes them)",
            stacklevel=3,
        )
    con.execute("SET parquet_metadata_cache = true")  # each view binds the files again: footers read once
    # DuckDB draws a progress bar on stderr for long scans; in Jupyter without ipywidgets it refuses to
    # change the setting (and draws none)
    with contextlib.suppress(duckdb.Error):
        con.execute("SET enable_progress_bar = false")
    # one check (and one write of its record) for the catalogue files read and every other kind's files
    _read_catalogue(
        con,
        location,
        present.get("runs", []),
        lambda rest: verified.check(location, rest + others) if verify else 0,
    )
    con.execute(f"CREATE TEMP TABLE {LIVE} AS {live_sql()}")
    names = []
    for kind in wanted:
        _create_kind_views(con, location, kind, present)
        names.append(view_name(kind))
    return names


def _create_kind_views(
    con: duckdb.DuckDBPyConnection, location: Location, kind: str, present: dict[str, list[str]]
) -> None:
    """The raw relation of ``kind`` (not for ``runs``, whose catalogue view is made apart) and its view of the
    declared columns, over its files ``present`` (none: an empty relation of its schema)."""
    if kind != "runs":
        con.execute(
            f"CREATE VIEW {raw_name(kind)} AS {raw_sql(location, kind, kind in present, present.get(kind))}"
        )
    if kind in present:
        sql = view_sql(kind, single=one_generation(present[kind]))
    else:
        sql = raw_sql(location, kind, False)
    shown = ", ".join(f'"{c}"' for c in columns(kind))
    con.execute(f"CREATE VIEW {view_name(kind)} AS SELECT {shown} FROM ({sql})")


def add_views(
    con: duckdb.DuckDBPyConnection, location: Location, only: Sequence[str], verify: bool = True
) -> None:
    """Create the raw relations and views of the kinds ``only`` on ``con``, a connection :func:`create_views`
    set up without them (its catalogue and live ingests are reused, not read again); their files' page
    checksums checked first with ``verify``, as :func:`create_views` checks them. A kind already there is
    left as it is."""
    from . import verified

    there = {row[0] for row in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    wanted = [k for k in only if k != "runs" and view_name(k) not in there]
    with readable(location):
        present = present_kinds(location, wanted)
        if verify:
            verified.check(location, [rel for files in present.values() for rel in files])
        for kind in wanted:
            _create_kind_views(con, location, kind, present)


__all__ = ["add_views", "columns", "create_views", "present_kinds", "raw_sql", "readable"]
