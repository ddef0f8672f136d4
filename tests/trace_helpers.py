"""Independent reference implementations for the trace tests (plain Python, obviously correct, slow)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def sql_rows(path: Path, query: str) -> list[tuple]:
    """The rows of ``query`` on the SQLite file ``path``, opened read-only (an nsys export's own figures)."""
    connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()


def stack_nesting(rows: list[tuple]) -> dict[int, tuple[int | None, int]]:
    """Parent and depth by a stack walk. ``rows``: (key, pid, tid, start, dur), any order.

    Events are visited by (pid, tid, start, longest first); an event's parent is
    the innermost open event of its thread that ends at or after its end.
    """
    out: dict[int, tuple[int | None, int]] = {}
    order = sorted(range(len(rows)), key=lambda i: (rows[i][1], rows[i][2], rows[i][3], -rows[i][4], i))
    stacks: dict[tuple, list[tuple[int, float, int]]] = {}
    for i in order:
        key, pid, tid, start, dur = rows[i]
        end = start + dur
        stack = stacks.setdefault((pid, tid), [])
        while stack and stack[-1][1] < end - 1e-6:
            stack.pop()
        parent = stack[-1] if stack else None
        out[key] = (None if parent is None else parent[0], 0 if parent is None else parent[2] + 1)
        stack.append((key, end, out[key][1]))
    return out
