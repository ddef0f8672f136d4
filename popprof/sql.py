"""DuckDB SQL over a profile's tables, in a sandbox: ``popprof.query(profile, sql)`` and ``popprof query``.

The connection is in memory, reads nothing but the registered tables, runs only read-only statements
and is bounded in time and memory (the ``query-seconds`` and ``query-memory`` limits). ``popprof store
query`` uses the same sandbox with read access to one store's directory (:func:`connect`, :func:`lock`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .io import limits, units
from .model.errors import UsageError

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .model.profile import Profile


#: Statement types a query may run: it reads the profile's tables and nothing else.
READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN"})


def sandbox_config(memory_bytes: int) -> dict[str, object]:
    """DuckDB settings of the query sandbox: no file system (not even a temp directory), bounded memory, locked."""
    return {
        "enable_external_access": False,  # no reading or writing files, no ATTACH of files
        "temp_directory": "",  # else DuckDB keeps ./.tmp in allowed_directories, open to COPY, ATTACH, read_text
        "max_temp_directory_size": "0B",
        "memory_limit": f"{max(memory_bytes >> 20, 16)}MB",
        "threads": 2,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "lock_configuration": True,  # SET cannot undo any of this
    }


def connect(
    memory_bytes: int | None = None, allowed_directories: Sequence[str] = ()
) -> duckdb.DuckDBPyConnection:
    """A sandboxed in-memory connection; ``allowed_directories`` (each ending in ``/``) may be read (a store).

    With directories the settings go in the order DuckDB needs: ``temp_directory`` empty at connect, then
    ``allowed_directories``; the connection comes back *unlocked* so the caller can create its views: call
    :func:`lock` (no other file access, no SET) before running user SQL.
    """
    import duckdb

    memory_bytes = limits.get("query-memory") if memory_bytes is None else memory_bytes
    config = sandbox_config(memory_bytes)
    if allowed_directories:
        del config["enable_external_access"], config["lock_configuration"]
    try:
        con = duckdb.connect(":memory:", config=config)
        if allowed_directories:
            con.execute("SET allowed_directories = ?", [list(allowed_directories)])
    except duckdb.Error as exc:
        raise UsageError(f"cannot start DuckDB for the query: {_first_line(exc)}") from None
    return con


def lock(con: duckdb.DuckDBPyConnection) -> None:
    """No file access beyond the allowed directories from now on, and no SET that could undo it."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str, names: Sequence[str]) -> None:
    """UsageError unless every statement of ``sql`` is read-only (``names``: the tables, for the message)."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {_first_line(exc)} (tables: {', '.join(names)})") from None
    for statement in statements:
        kind = str(statement.type).rsplit(".", 1)[-1]
        if kind not in READ_ONLY_STATEMENTS:
            raise UsageError(
                f"SQL error: query runs read-only SQL (SELECT, WITH, EXPLAIN, DESCRIBE, "
                f"SUMMARIZE, SHOW); a {kind} statement is not allowed"
            )


def execute(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    names: Sequence[str],
    *,
    timeout_s: float | None = None,
    memory_bytes: int | None = None,
) -> pd.DataFrame:
    """Run read-only ``sql`` on a sandboxed ``con`` within the time and memory limits; a DataFrame.

    Every error is a one-line UsageError naming ``names`` (the tables the query can see).
    """
    import threading

    import duckdb

    timeout_s = float(limits.get("query-seconds")) if timeout_s is None else timeout_s
    memory_bytes = limits.get("query-memory") if memory_bytes is None else memory_bytes
    check_read_only(con, sql, names)
    timer = threading.Timer(timeout_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        return _fetch(con.execute(sql), memory_bytes)
    except duckdb.InterruptException:
        raise UsageError(
            f"query stopped after {timeout_s:g} s: over the limit query-seconds "
            f"(raise it with --timeout SECONDS or {limits.LIMITS['query-seconds'].env})"
        ) from None
    except (duckdb.OutOfMemoryException, _ResultTooLarge):
        raise UsageError(
            f"query needs more than {units.nbytes(memory_bytes)} of memory: over the "
            f"limit query-memory (raise it with --memory-limit SIZE or "
            f"{limits.LIMITS['query-memory'].env})"
        ) from None
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {_first_line(exc)} (tables: {', '.join(names)})") from None
    finally:
        timer.cancel()


def run_query(
    profile: Profile, sql: str, *, timeout_s: float | None = None, memory_bytes: int | None = None
) -> pd.DataFrame:
    """Run DuckDB ``sql`` with every table of ``profile`` registered under its name; returns a DataFrame.

    The connection is an in-memory sandbox: read-only statements (SELECT, EXPLAIN, and
    DESCRIBE/SUMMARIZE/SHOW, which are SELECTs), no file-system access at all
    (``allowed_directories`` is empty), at most ``memory_bytes`` of memory and
    ``timeout_s`` seconds (defaults: the ``query-memory`` and ``query-seconds`` limits).
    """
    import duckdb

    memory_bytes = limits.get("query-memory") if memory_bytes is None else memory_bytes
    con = connect(memory_bytes)
    try:
        check_read_only(con, sql, profile.table_names)
        try:
            for name, frame in profile.tables.items():
                con.register(name, frame)
        except duckdb.Error as exc:
            raise UsageError(f"cannot load the tables into DuckDB: {_first_line(exc)}") from None
        return execute(con, sql, profile.table_names, timeout_s=timeout_s, memory_bytes=memory_bytes)
    finally:
        con.close()


def _fetch(result, memory_bytes: int) -> pd.DataFrame:
    """The result as a DataFrame, fetched in chunks: pandas memory is held to ``memory_bytes`` too."""
    import pandas as pd

    chunks = []
    used = 0
    while True:
        chunk = result.fetch_df_chunk(vectors_per_chunk=16)
        if not chunks or len(chunk):
            chunks.append(chunk)
        if not len(chunk):
            break
        used += int(chunk.memory_usage(deep=True).sum())
        if used > memory_bytes:
            raise _ResultTooLarge
    return chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)


class _ResultTooLarge(Exception):
    pass


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
