"""DuckDB over a store: the raw relations with declared types, then the views of :mod:`.views`."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence

import duckdb

from .layout import Location, kind_dir
from .schemas import kinds, schema_of, view_name
from .views import LIVE, columns, duckdb_type, live_sql, one_generation, raw_name, view_sql


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def glob_escape(path: str) -> str:
    """``path`` as a DuckDB file pattern that matches itself only: ``[``, ``*`` and ``?`` as one-character
    classes (a store ``a[b]`` would otherwise read the files of store ``ab``)."""
    return re.sub(r"([\[*?])", r"[\1]", path)


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


def present_kinds(location: Location, only: Sequence[str] | None = None) -> dict[str, list[str]]:
    """The kinds (of ``only``, default all) that have at least one file in the store, with their files."""
    found = {}
    for kind in only or kinds():
        files = location.files(kind_dir(kind), "month=*/*.parquet")
        if files:
            found[kind] = files
    return found


def create_views(
    con: duckdb.DuckDBPyConnection, location: Location, only: Sequence[str] | None = None
) -> list[str]:
    """Create the raw relations and views of every kind (or of ``only``, with ``runs`` always) on ``con``;
    returns the view names.

    The live ingests are read once into a temporary table; a kind without files gets an empty view of its
    declared columns (nothing to bind against the files).
    """
    wanted = ["runs", *[k for k in (only or kinds()) if k != "runs"]]
    present = present_kinds(location, wanted)
    con.execute("SET parquet_metadata_cache = true")  # each view binds the files again: footers read once
    # DuckDB draws a progress bar on stderr for long scans; in Jupyter without ipywidgets it refuses to
    # change the setting (and draws none)
    with contextlib.suppress(duckdb.Error):
        con.execute("SET enable_progress_bar = false")
    con.execute(
        f"CREATE VIEW {raw_name('runs')} AS "
        f"{raw_sql(location, 'runs', 'runs' in present, present.get('runs'))}"
    )
    con.execute(f"CREATE TEMP TABLE {LIVE} AS {live_sql()}")
    names = []
    for kind in wanted:
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
        names.append(view_name(kind))
    return names


__all__ = ["columns", "create_views", "present_kinds", "raw_sql"]
