"""``popprof.store.open(STORE)``: one store, read by DuckDB (default), pyarrow (Dask, Ray, Polars) or Spark."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence, Set
from typing import TYPE_CHECKING

from .._version import __version__
from ..model.errors import UsageError
from .layout import STORE_FILE, Location, kind_dir, reach, read_descriptor, write_descriptor
from .schemas import DERIVED_SCHEMAS, schema_of, table_kind

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa
    import pyarrow.dataset as ds

    from ..sql import QueryBudget


def init(store: str | os.PathLike[str]) -> Store:
    """Create an empty store at ``store`` (a directory or ``s3://...``); an existing store is kept as it is."""
    location = Location.of(store)
    reach(location)
    if location.exists(STORE_FILE):
        read_descriptor(location)  # refuses a newer or foreign one
        return Store(location)
    if location.local:
        root = os.path.abspath(location.root)
        if os.path.isdir(root) and os.listdir(root):
            raise UsageError(f"{root}: exists and is not empty; a store needs a new or empty directory")
    write_descriptor(location, __version__, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    return Store(location)


def open_store(store: str | os.PathLike[str]) -> Store:
    """The store at ``store``; InputError when it is not one or was written by a newer popprof."""
    location = Location.of(store)
    read_descriptor(location)
    return Store(location)


class Store:
    """A run store. Each reader sees the same deduplicated views: ``runs``, ``metrics``, ``ranks``,
    ``findings``, ``account`` and one per bundle table (``execution_runs`` for the bundle's own ``runs`` table)."""

    def __init__(self, location: Location) -> None:
        self.location = location

    @property
    def root(self) -> str:
        """The store's path or URL."""
        return self.location.root

    def __repr__(self) -> str:
        return f"<popprof store {self.root}>"

    def duckdb(
        self,
        con: duckdb.DuckDBPyConnection | None = None,
        *,
        kinds: Sequence[str] | None = None,
        skip: Set[str] = frozenset(),
        verify: bool = True,
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection (new, or ``con``) with the store's views created on it (of every kind, or of
        ``kinds`` such as ``["metrics"]``; ``runs`` always; ``skip``: store files left out). With ``verify``
        the page checksums of the files read are checked first, once per file (a damaged file: InputError,
        exit 2; :mod:`popprof.store.verified`)."""
        import duckdb

        from .engine_duckdb import create_views

        con = duckdb.connect(":memory:") if con is None else con
        self._attach_filesystem(con)
        create_views(con, self.location, kinds, skip, verify)
        return con

    def frame(
        self,
        sql: str,
        params: Sequence[object] = (),
        *,
        kinds: Sequence[str] | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> pd.DataFrame:
        """The result of trusted ``sql`` (popprof's own, not a user's: :meth:`query` is for those) over the
        views as a DataFrame; a store file DuckDB cannot read is one InputError (exit 2). ``con``: a connection
        of :meth:`duckdb` to run it on (the views of ``kinds`` added when missing; left open), instead of a new
        one closed after it."""
        from .engine_duckdb import add_views, readable

        own = con is None
        if con is None:
            con = self.duckdb(kinds=kinds)
        elif kinds is not None:
            add_views(con, self.location, kinds)
        try:
            with readable(self.location):
                return con.execute(sql, list(params)).fetch_df()
        finally:
            if own:
                con.close()

    def _attach_filesystem(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.location.local:
            con.register_filesystem(self.location.fs)

    def query(
        self,
        sql: str,
        *,
        timeout_s: float | None = None,
        memory_bytes: int | None = None,
        budget: QueryBudget | None = None,
    ) -> pd.DataFrame:
        """Run read-only ``sql`` over the views in the query sandbox, confined to the store's files.

        ``budget`` (instead of the two limits) carries one deadline on to :func:`popprof.sql.format_result`.
        """
        from .. import sql as sandbox
        from .engine_duckdb import create_views

        budget = budget or sandbox.QueryBudget(timeout_s, memory_bytes)
        from .views import glob_escape

        top = self.root.rstrip("/") + "/"
        # the views read the store's files by escaped name (a store 'a[b]'): the escaped form of the path is
        # the same directory, never another one
        allowed = sorted({top, glob_escape(top)})
        con = sandbox.connect(budget.memory_bytes, allowed_directories=allowed)
        try:
            con.execute("SET TimeZone = 'UTC'")
            self._attach_filesystem(con)
            names = create_views(con, self.location)
            sandbox.lock(con)
            return sandbox.execute(con, sql, names, budget=budget)
        finally:
            con.close()

    def metric(
        self,
        name: str | list[str],
        *,
        profile: str | None = None,
        branch: str | None = None,
        last: int | None = None,
        runs: list[str] | None = None,
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> pd.DataFrame:
        """One metric's history (or several metrics' in one query, with a ``name`` column): run_id, profile,
        created, commit, branch, value, unit, better, oldest first; ``last`` keeps the latest N rows, ``runs``
        only the runs of these ids; ``con``: run on this connection (:meth:`frame`)."""
        names = [name] if isinstance(name, str) else list(name)
        where = [f"m.name IN ({', '.join('?' for _ in names)})"]
        params: list[object] = list(names)
        if runs is not None:
            where.append(f"m.run_id IN ({', '.join('?' for _ in runs) or 'NULL'})")
            params += list(runs)
        if profile is not None:
            where.append("m.profile = ?")
            params.append(profile)
        if branch is not None:
            where.append("r.branch = ?")
            params.append(branch)
        sql = (
            "SELECT m.run_id, m.profile, m.created, r.commit, r.branch, m.value, m.unit, m.better"
            + ("" if isinstance(name, str) else ", m.name")
            + " "
            "FROM metrics m JOIN runs r USING (run_id, profile, ingest_id) "
            f"WHERE {' AND '.join(where)} ORDER BY m.created DESC, m.run_id DESC"
        )
        if last is not None:
            sql += f" LIMIT {int(last)}"
        frame = self.frame(
            sql, params, kinds=["metrics"], con=con
        )  # the other kinds' files are not even listed
        return frame.iloc[::-1].reset_index(drop=True)

    def bundle(self, run_id: str, profile: str | None = None) -> str | None:
        """The path of a run's kept bundle (or baseline file: ``store add --keep-bundle``); None when none was
        kept. ``profile`` picks one profile of a run that has several."""
        from .bundles import kept_name
        from .identity import month_of
        from .layout import run_key

        found = self.frame(
            "SELECT profile, created, ingest_id, kind FROM runs WHERE run_id = ?"
            + (" AND profile = ?" if profile is not None else ""),
            [run_id] if profile is None else [run_id, profile],
            kinds=["runs"],
        )
        rows = [tuple(r) for r in found.itertuples(index=False)]
        if len(rows) > 1:
            names = ", ".join(sorted(r[0] for r in rows))
            raise UsageError(f"run {run_id!r} has profiles {names}: name one")
        if not rows:
            return None
        name, created, ingest_id, kind = rows[0]
        rel = kept_name(month_of(created), run_key(run_id, name), ingest_id, kind == "baseline")
        return self.location.path(rel) if self.location.exists(rel) else None

    def arrow_dataset(self, table: str, *, verify: bool = True) -> ds.Dataset:
        """A pyarrow dataset of one kind (``runs``, ``metrics``, ``ranks``, ``findings``, ``account`` or a bundle
        table) with its declared schema and the month partition: the hand-off to Dask, Ray or Polars.

        It reads the files as they are: rows of replaced or half-added runs are there too; keep the rows whose
        ``ingest_id`` is in ``runs`` (as the views do) when that matters. With ``verify`` the page checksums of
        its files are checked first, once per file (a damaged file: InputError, exit 2;
        :mod:`popprof.store.verified`), and every scan of the dataset checks them again as it reads (pyarrow's
        own check, for a file damaged after this call: Arrow's error, not popprof's line).
        """
        import pyarrow as pa
        import pyarrow.dataset as ds

        kind = table if table in DERIVED_SCHEMAS else table_kind(table)
        try:
            schema = schema_of(kind)
        except KeyError:
            raise UsageError(f"no store table {table!r}") from None
        schema = schema.append(pa.field("month", pa.string()))
        partitioning = ds.partitioning(pa.schema([pa.field("month", pa.string())]), flavor="hive")
        files = self.location.files(kind_dir(kind), "month=*/*.parquet")
        fmt = ds.ParquetFileFormat()
        if verify:
            from . import verified

            verified.check(self.location, files)
            scan = ds.ParquetFragmentScanOptions(page_checksum_verification=True)
            fmt = ds.ParquetFileFormat(default_fragment_scan_options=scan)
        paths = [self.location.path(f) if self.location.local else self.location._bare(f) for f in files]
        return ds.dataset(
            paths,
            schema=schema,
            format=fmt,
            partitioning=partitioning,
            partition_base_dir=self.location.path(kind_dir(kind))
            if self.location.local
            else self.location._bare(kind_dir(kind)),
            filesystem=None if self.location.local else self.location.fs,
        )

    def spark(self, session: object, *, verify: bool = True) -> list[str]:
        """Register the store's views as temporary views of a SparkSession; returns their names. With ``verify``
        Spark checks the page checksums of what it reads (:mod:`popprof.store.engine_spark`)."""
        from .engine_spark import register

        return register(session, self.location, verify)

    def spark_table(self, session: object, sql: str) -> pa.Table:
        """The result of ``sql`` over the views :meth:`spark` registered in ``session``, as an Arrow table; a
        data page failing its checksum in Spark's read is one InputError naming the file (exit 2)."""
        from .engine_spark import to_arrow

        return to_arrow(session.sql(sql), self.location)  # type: ignore[attr-defined]
