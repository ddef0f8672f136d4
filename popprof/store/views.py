"""The views every engine gets over a store, as SQL both DuckDB and Spark run.

Each kind has a raw relation ``_all_<view>`` (its files, declared columns, ``month`` and the file name as
``_file``) registered by the engine; these views are built on top:

- ``runs``: the live catalogue row of each (run_id, profile): the latest ``ingested_at``. A ``--replace``
  or a half-finished add (table files without their row) is thereby invisible.
- every other kind: the rows of live ingests only, each ingest taken from one file generation (a per-run
  file is generation 0, ``compact-<gen>-...`` is ``gen``), the highest present: an interrupted
  compaction, which leaves both, never counts a run twice.
"""

from __future__ import annotations

import re

from .layout import compact_generation
from .schemas import duckdb_type, schema_of, view_name

_GEN = (
    "CASE WHEN _file LIKE '%/compact-%' "
    "THEN CAST(regexp_extract(_file, 'compact-([0-9]+)-', 1) AS INTEGER) ELSE 0 END"
)


def raw_name(kind: str) -> str:
    """The raw relation of ``kind`` (all its rows, before deduplication)."""
    return "_all_" + view_name(kind)


def columns(kind: str) -> list[str]:
    """The columns a view of ``kind`` shows: the declared ones, then ``month``."""
    return [field.name for field in schema_of(kind)] + ["month"]


def _quoted(names: list[str], prefix: str = "", quote: str = '"') -> str:
    return ", ".join(f"{prefix}{quote}{n}{quote}" for n in names)


#: The relation of the live ingests (run_id, profile, ingest_id): a table in DuckDB (the catalogue is read
#: once per connection, not once per view), a view in Spark.
LIVE = "_live"


def live_sql() -> str:
    """The live ingest of each (run_id, profile): the latest ``ingested_at`` in the catalogue."""
    return (
        "SELECT run_id, profile, ingest_id FROM (SELECT run_id, profile, ingest_id, row_number() OVER "
        f"(PARTITION BY run_id, profile ORDER BY ingested_at DESC, ingest_id DESC) AS _rn FROM {raw_name('runs')}) "
        "WHERE _rn = 1"
    )


def one_generation(files: list[str]) -> bool:
    """Whether each month directory of these store files holds a single file generation (so no ingest can
    be in two files and the views need not choose between generations)."""
    seen: dict[str, set[int]] = {}
    for rel in files:
        folder, _, name = rel.rpartition("/")
        seen.setdefault(folder, set()).add(compact_generation(name))
    return all(len(gens) == 1 for gens in seen.values())


def view_sql(kind: str, quote: str = '"', raw: str | None = None, single: bool = False) -> str:
    """The SELECT that defines the view of ``kind`` over its raw relation (``raw``, default the whole kind's;
    ``quote``: the SQL dialect's identifier quote, a backtick for Spark). ``single``: the files are of one
    generation per month (:func:`one_generation`), so the live ingests' rows are read in one pass."""
    raw = raw or raw_name(kind)
    cols = columns(kind)
    if single and kind != "runs":
        return f"SELECT {_quoted(cols, quote=quote)} FROM {raw} WHERE ingest_id IN (SELECT ingest_id FROM {LIVE})"
    if kind == "runs":
        return (
            f"SELECT {_quoted(cols, quote=quote)} FROM (SELECT *, row_number() OVER "
            f"(PARTITION BY run_id, profile ORDER BY ingested_at DESC, ingest_id DESC) AS _rn FROM {raw}) "
            "WHERE _rn = 1"
        )
    return (
        f"SELECT {_quoted(cols, 'f.', quote)} FROM (SELECT *, {_GEN} AS _gen FROM {raw}) f "
        f"JOIN (SELECT ingest_id, max({_GEN}) AS _best FROM {raw} "
        f"WHERE ingest_id IN (SELECT ingest_id FROM {LIVE}) GROUP BY ingest_id) b "
        "ON f.ingest_id = b.ingest_id AND f._gen = b._best"
    )


def portable_sql(kinds_wanted: list[str], store: str = "STORE") -> str:
    """DuckDB statements that create popprof's views over a store's files without popprof: the raw relation
    of each kind (its files by glob, by name), the live ingests, then each view with the same deduplicating
    SQL the engines run (``docs/store.md``, tested against the views). ``store``: the path to put in the
    globs (escape ``[``, ``*`` and ``?`` in it as ``[[]``, ``[*]``, ``[?]``)."""
    from .layout import kind_dir

    out = []
    for kind in ["runs", *[k for k in kinds_wanted if k != "runs"]]:
        pattern = f"{store}/{kind_dir(kind)}/month=*/*.parquet"
        casts = ", ".join(f'CAST("{f.name}" AS {duckdb_type(f.type)}) AS "{f.name}"' for f in schema_of(kind))
        out.append(
            f"CREATE VIEW {raw_name(kind)} AS SELECT {casts}, CAST(month AS VARCHAR) AS month, filename AS _file "
            f"FROM read_parquet('{pattern}', hive_partitioning = true, hive_types = {{'month': 'VARCHAR'}}, "
            "union_by_name = true, filename = true);"
        )
        if kind == "runs":
            out.append(f"CREATE VIEW {LIVE} AS {live_sql()};")
        out.append(f"CREATE VIEW {view_name(kind)} AS {view_sql(kind)};")
    return "\n".join(out) + "\n"


def glob_escape(path: str) -> str:
    """``path`` as a DuckDB file pattern that matches itself only: ``[``, ``*`` and ``?`` as one-character
    classes (a store ``a[b]`` would otherwise read the files of store ``ab``)."""
    return re.sub(r"([\[*?])", r"[\1]", path)
