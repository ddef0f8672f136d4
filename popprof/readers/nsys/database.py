"""Opening an Nsight Systems SQLite export read-only, checking it is one, and reading its tables."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from ...io.files import GZIP_MAGIC
from ...model.errors import InputError

_HINT = "export the report again with nsys export --type sqlite"
#: tables whose presence marks an nsys export (besides ``StringIds``): at least one must be there
ACTIVITY_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
)


class Export:
    """An open export: its tables, each table's columns, and queries as DataFrames."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self.connection = connection
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.tables = frozenset(r[0] for r in rows)
        self._columns: dict[str, frozenset[str]] = {}
        #: event tables that hold rows but lack a column popprof needs: table -> the missing columns
        self.lacking: dict[str, list[str]] = {}

    def columns(self, table: str) -> frozenset[str]:
        """The columns ``table`` has (``PRAGMA table_info``): the schema differs between nsys versions."""
        if table not in self._columns:
            info = self.connection.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = frozenset(r[1] for r in info)
        return self._columns[table]

    def readable(self, table: str, needed: tuple[str, ...]) -> bool:
        """Whether ``table`` is there with the ``needed`` columns. An export may lack a table it had nothing
        for (not a problem); a table that holds rows without a needed column (a damaged export) is recorded
        in :attr:`lacking`, a read problem, as its rows cannot be read."""
        if table not in self.tables:
            return False
        missing = sorted(set(needed) - self.columns(table))
        if missing and self.count(table):
            self.lacking[table] = missing
        return not missing

    def query(self, sql: str) -> pd.DataFrame:
        """One query's rows as a DataFrame."""
        return pd.read_sql_query(sql, self.connection)

    def count(self, table: str) -> int:
        """The rows of ``table`` (0 when it is absent)."""
        if table not in self.tables:
            return 0
        return int(self.connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])


@contextmanager
def opened(path: Path) -> Iterator[Export]:
    """The export at ``path``, opened read-only; InputError when it is not an nsys SQLite export.

    An SQLite error while reading (a truncated or corrupt file) becomes one InputError naming the file.
    """
    if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block SQLite (and this check)
        raise InputError(path, "not a regular file: an Nsight Systems SQLite export is a file", _HINT)
    with open(path, "rb") as handle:
        if handle.read(2) == GZIP_MAGIC:
            raise InputError(
                path, "a gzip-compressed SQLite database", "gunzip it first; popprof reads it as is"
            )
    uri = f"{Path(path).absolute().as_uri()}?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise InputError(path, f"cannot open the SQLite database ({exc})", _HINT) from None
    try:
        export = Export(path, connection)
        if "StringIds" not in export.tables or not any(t in export.tables for t in ACTIVITY_TABLES):
            raise InputError(
                path,
                "an SQLite database but not an Nsight Systems export (no StringIds and CUPTI_ACTIVITY_KIND_* "
                "or NVTX_EVENTS tables)",
                "popprof reads the SQLite that nsys export --type sqlite writes",
            )
        missing = sorted({"id", "value"} - export.columns("StringIds"))
        if missing:
            raise InputError(
                path, f"table StringIds has no column {', '.join(missing)}: the names cannot be read", _HINT
            )
        yield export
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise InputError(
            path,
            f"unreadable SQLite database ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
            "the file may be truncated or corrupt; " + _HINT,
        ) from None
    finally:
        connection.close()
