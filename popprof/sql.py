"""DuckDB SQL over a profile's tables, in a sandbox: ``popprof.query(profile, sql)`` and ``popprof query``.

The connection is in memory, reads nothing but the registered tables, runs only read-only statements
and is bounded in time and memory (the ``query-seconds`` and ``query-memory`` limits). ``popprof store
query`` uses the same sandbox with read access to one store's directory (:func:`connect`, :func:`lock`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .io import limits, units
from .io.plural import plural
from .model.errors import UsageError

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .model.profile import Profile


#: Statement types a query may run: it reads the profile's tables and nothing else. EXPLAIN only of one of
#: these (``EXPLAIN ANALYZE`` runs its statement).
READ_ONLY_STATEMENTS = frozenset({"SELECT"})

#: ``EXPLAIN``, ``EXPLAIN ANALYZE`` or ``EXPLAIN (options)`` at the start of a statement (after comments).
_EXPLAIN = re.compile(
    r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*EXPLAIN(?:\s+ANALY[SZ]E\b|\s*\((?:[^()'\"]|'[^']*')*\))?",
    re.I | re.S,
)


@dataclass
class QueryBudget:
    """The time and memory one query may take, from its start to its formatted result.

    The clock starts when the budget is made; :meth:`check` raises the one-line error of the
    ``query-seconds`` limit once the deadline has passed, :meth:`over_memory` that of ``query-memory``.
    """

    timeout_s: float | None = None
    memory_bytes: int | None = None
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.timeout_s = float(limits.get("query-seconds")) if self.timeout_s is None else self.timeout_s
        self.memory_bytes = limits.get("query-memory") if self.memory_bytes is None else self.memory_bytes

    @property
    def left_s(self) -> float:
        """Seconds left before the deadline (at least a millisecond, for a timer)."""
        return max(0.001, self.started + self.timeout_s - time.monotonic())

    def check(self) -> None:
        """Raise the timeout error when the deadline has passed."""
        if time.monotonic() > self.started + self.timeout_s:
            raise self.timed_out()

    def timed_out(self) -> UsageError:
        """The one-line error of the ``query-seconds`` limit."""
        return UsageError(
            f"query stopped after {self.timeout_s:g} s: over the limit query-seconds "
            f"(raise it with --timeout SECONDS or {limits.LIMITS['query-seconds'].env})"
        )

    def over_memory(self) -> UsageError:
        """The one-line error of the ``query-memory`` limit."""
        return UsageError(
            f"query needs more than {units.nbytes(self.memory_bytes)} of memory: over the "
            f"limit query-memory (raise it with --memory-limit SIZE or {limits.LIMITS['query-memory'].env})"
        )


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
    """UsageError unless every statement of ``sql`` is read-only (``names``: the tables, for the message):
    a SELECT, or EXPLAIN (ANALYZE) of one SELECT; never a CREATE (table, view, macro), DROP or write."""
    for statement in _statements(con, sql, names):
        kind = str(statement.type).rsplit(".", 1)[-1]
        if kind == "EXPLAIN":
            match = _EXPLAIN.match(statement.query)
            try:
                inner = _statements(con, statement.query[match.end() :], names) if match else []
            except UsageError:
                inner = []
            kinds = [str(s.type).rsplit(".", 1)[-1] for s in inner]
            if len(kinds) == 1 and kinds[0] in READ_ONLY_STATEMENTS:
                continue
            kind = f"EXPLAIN of a {kinds[0] if len(kinds) == 1 else 'non-SELECT'}"
        elif kind in READ_ONLY_STATEMENTS:
            continue
        raise UsageError(
            f"SQL error: query runs read-only SQL (SELECT, WITH, DESCRIBE, SUMMARIZE, SHOW and EXPLAIN "
            f"of those); a {kind} statement is not allowed"
        )


def _statements(con: duckdb.DuckDBPyConnection, sql: str, names: Sequence[str]) -> list:
    import duckdb

    try:
        return con.extract_statements(sql)
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {_first_line(exc)} (tables: {', '.join(names)})") from None


def execute(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    names: Sequence[str],
    *,
    timeout_s: float | None = None,
    memory_bytes: int | None = None,
    budget: QueryBudget | None = None,
) -> pd.DataFrame:
    """Run read-only ``sql`` on a sandboxed ``con`` within the time and memory limits; a DataFrame.

    ``budget`` (instead of the two limits) carries one deadline on to :func:`format_result`; fetching
    the result counts against it. Every error is a one-line UsageError naming ``names`` (the tables
    the query can see).
    """
    import threading

    import duckdb

    budget = budget or QueryBudget(timeout_s, memory_bytes)
    check_read_only(con, sql, names)
    timer = threading.Timer(budget.left_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        return _fetch(con.execute(sql), budget)
    except duckdb.InterruptException:
        raise budget.timed_out() from None
    except (duckdb.OutOfMemoryException, MemoryError, _ResultTooLarge):
        raise budget.over_memory() from None
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {_first_line(exc)} (tables: {', '.join(names)})") from None
    finally:
        timer.cancel()


def run_query(
    profile: Profile,
    sql: str,
    *,
    timeout_s: float | None = None,
    memory_bytes: int | None = None,
    budget: QueryBudget | None = None,
    config: Mapping | None = None,
) -> pd.DataFrame:
    """Run DuckDB ``sql`` with every table of ``profile`` registered under its name; returns a DataFrame.

    The analysis tables the SQL names (``account``, ``gaps``, ``launches``, ``operators``, ``findings``:
    :mod:`popprof.analysis_tables`, with ``config``'s rule settings) are computed first and registered too;
    a query naming none computes none. The connection is an in-memory sandbox: read-only statements (SELECT,
    DESCRIBE/SUMMARIZE/SHOW, which are SELECTs, and EXPLAIN of those), no file-system access at all
    (``allowed_directories`` is empty), no tables, views or macros created or dropped, at most
    ``memory_bytes`` of memory and ``timeout_s`` seconds (defaults: the ``query-memory`` and
    ``query-seconds`` limits), the analyses and fetching included. ``budget`` (instead of the two) carries
    one deadline on to :func:`format_result`.
    """
    import duckdb

    from . import analysis_tables

    budget = budget or QueryBudget(timeout_s, memory_bytes)
    names = [*profile.table_names, *analysis_tables.NAMES]
    con = connect(budget.memory_bytes)
    try:
        check_read_only(con, sql, names)
        try:
            for name, frame in profile.tables.items():
                register_as_text(con, name, frame)
        except duckdb.Error as exc:
            raise UsageError(f"cannot load the tables into DuckDB: {_first_line(exc)}") from None
        for name in analysis_tables.referenced(con, sql):
            budget.check()  # an analysis runs to its end: the deadline is looked at between them
            frame = analysis_tables.build(profile, name, config)
            budget.check()
            try:
                register_as_text(con, name, frame)
            except duckdb.Error as exc:
                raise UsageError(
                    f"cannot load the analysis table {name} into DuckDB: {_first_line(exc)}"
                ) from None
        return execute(con, sql, names, budget=budget)
    finally:
        con.close()


def analysis_tables_named(sql: str) -> list[str]:
    """The analysis tables ``sql`` reads (:func:`popprof.analysis_tables.referenced`, on a sandboxed connection
    of its own), for a command deciding how to read the profile before it runs the query; DuckDB is not even
    imported when no analysis table's name is among the SQL's words."""
    from . import analysis_tables

    if not analysis_tables.mentioned(sql):
        return []
    con = connect()
    try:
        return analysis_tables.referenced(con, sql)
    finally:
        con.close()


#: The prefix of the name a table with categorical columns is registered under; the table's own name is a view.
RAW_PREFIX = "__popprof_raw_"


def _quoted(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def register_as_text(con: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame) -> None:
    """Register ``frame`` as table ``name``, its categorical columns as text (VARCHAR).

    DuckDB reads a pandas categorical as an ENUM, on which string functions and slicing
    (``name[1:30]``, ``length(name)``) fail with a Binder Error until the user casts; ``LIKE`` works.
    The frame is registered under a hidden name and ``name`` is a view casting those columns, so
    nothing is copied and every other column keeps its type.
    """
    import pandas as pd

    categorical = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    if not categorical:
        con.register(name, frame)
        return
    raw = RAW_PREFIX + name
    con.register(raw, frame)
    casts = ", ".join(f"CAST({_quoted(c)} AS VARCHAR) AS {_quoted(c)}" for c in categorical)
    con.execute(f"CREATE TEMP VIEW {_quoted(name)} AS SELECT * REPLACE ({casts}) FROM {_quoted(raw)}")


def _fetch(result, budget: QueryBudget) -> pd.DataFrame:
    """The result as a DataFrame, fetched in chunks: pandas memory is held to the budget, and its deadline."""
    import pandas as pd

    chunks = []
    used = 0
    while True:
        budget.check()
        chunk = result.fetch_df_chunk(vectors_per_chunk=16)
        if not chunks or len(chunk):
            chunks.append(chunk)
        if not len(chunk):
            break
        used += int(chunk.memory_usage(deep=True).sum())
        if used > budget.memory_bytes:
            raise _ResultTooLarge
    if len(chunks) == 1:
        return _whole_numbers(chunks[0], result.description or [])
    if 2 * used > budget.memory_bytes:  # concatenating holds the chunks and the whole at once
        raise _ResultTooLarge
    budget.check()
    return _whole_numbers(pd.concat(chunks, ignore_index=True), result.description or [])


#: Rows formatted at a time: the deadline and the memory budget are checked between blocks.
FORMAT_ROWS = 50_000


def format_result(
    frame: pd.DataFrame, fmt: str, *, limit: int, budget: QueryBudget, width: int | None = None
) -> str:
    """``frame`` as ``popprof query`` prints it (``table``, ``csv`` or ``json``), within ``budget``.

    The table is laid out for ``width`` columns (none: every value whole): text values are cut to fit,
    never a number (:func:`_format_table`). The text is made a block of rows at a time; past the deadline
    or once the text would take more than the memory budget, the query's one-line limit error is raised
    instead of printing.
    """
    if fmt == "table":
        return _format_table(frame, limit, budget, width)
    pieces: list[str] = []
    size = 0
    for start in range(0, max(len(frame), 1), FORMAT_ROWS):
        budget.check()
        block = frame.iloc[start : start + FORMAT_ROWS]
        piece = block.to_csv(index=False, header=start == 0) if fmt == "csv" else _json_block(block)
        size += len(piece)
        if size + frame.memory_usage(deep=True).sum() > budget.memory_bytes:
            raise budget.over_memory()
        pieces.append(piece)
    budget.check()
    if fmt == "csv":
        return "".join(pieces)
    body = ",\n".join(p for p in pieces if p)
    return "[\n" + body + "\n]\n" if body else "[]\n"


def _json_block(block: pd.DataFrame) -> str:
    """The records of ``block`` as JSON objects, two-space indented, without the enclosing brackets."""
    import json

    if not len(block):
        return ""
    try:
        text = block.to_json(orient="records", indent=2)
    except (OverflowError, ValueError):  # integers beyond 64 bits: Python's json has no such limit
        text = json.dumps(block.to_dict("records"), indent=2, default=str, allow_nan=False)
    return text.strip()[1:-1].strip("\n")


def _format_table(frame: pd.DataFrame, limit: int, budget: QueryBudget, width: int | None = None) -> str:
    """pandas' table of the first ``limit`` rows (its number formats, numbers right-aligned) with text
    columns left-aligned as a SQL shell has them and, when the table would be wider than ``width``, cut to
    share what the numbers leave (a short column whole, the longer ones an equal part, at least
    ``io/texttable.py`` ``MIN_TEXT``), each cut value ending in ``CUT`` (``...``); a note under the table says so.
    Numbers are never cut: a table of more figures than the width holds is wider than it (docs/figures.md)."""
    import pandas as pd

    from .io.texttable import cut_note, text_table

    lines: list[str] = []
    cut = False
    if frame.empty or limit == 0:  # pandas would print "Empty DataFrame ..." here
        lines.append("  ".join(map(str, frame.columns)))
    else:
        shown = frame.head(limit)
        widths = sum(_widest(shown[column]) + 2 for column in shown.columns)
        if widths * (len(shown) + 1) > budget.memory_bytes:
            raise budget.over_memory()
        budget.check()
        with pd.option_context("display.max_rows", limit, "display.max_columns", 50, "display.width", 200):
            text, cut = text_table(shown, width, budget.check, na_rep="NULL")  # SQL says NULL
            lines.append(text)
    if cut:
        lines += cut_note(width)
    if not len(frame):
        lines.append("(no rows)")
    elif len(frame) > limit:
        lines.append(f"... {plural(len(frame) - limit, 'more row')} (use --rows N or --format csv)")
    budget.check()
    return "\n".join(lines) + "\n"


def _widest(column: pd.Series) -> int:
    """The widest cell of ``column`` in characters, without formatting any cell (strings: their length)."""
    if column.dtype == object or str(column.dtype).startswith("str"):
        lengths = [len(v) if isinstance(v, str | bytes) else 32 for v in column]
        return max(lengths, default=0)
    return 32


#: DuckDB result types pandas gets as float64 although every value is whole (a SUM of integers is HUGEINT).
_WHOLE_TYPES = ("HUGEINT", "UHUGEINT", "INT128")


def _whole_numbers(frame: pd.DataFrame, description: Sequence) -> pd.DataFrame:
    """Integer columns stay integers: a SUM of bytes or cycles is ``23878396``, never ``23878396.0``.

    DuckDB widens integer sums to HUGEINT (and exact DECIMAL(p, 0)), which pandas receives as float64;
    such a column becomes nullable Int64 when its values fit (docs/figures.md: counts are integers).
    """
    for name, type_code, *_ in description:
        kind = str(type_code).upper()
        whole = kind in _WHOLE_TYPES or (kind.startswith("DECIMAL") and kind.replace(" ", "").endswith(",0)"))
        if whole and name in frame.columns and frame[name].dtype.kind == "f":
            values = frame[name]
            finite = values.dropna()
            if finite.abs().max() < 2**63 if len(finite) else True:
                frame[name] = values.astype("Int64")
    return frame


class _ResultTooLarge(Exception):
    pass


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
