"""The programs (IPU) or device work (GPU) under a change of ``popprof trend``, read from the store's tables.

A change of a time metric is explained by the time account (:mod:`.trend_explain`); when a busy part moved
(:func:`~popprof.compare.what_changed.busy_part`), this names what changed most in it, as ``popprof diff``
does for two profiles: each level's **mean** per name over its runs (a name a run lacks counts 0 there; each
run divided by its own steps or runs first when the account is, :func:`~popprof.compare.basis.run_divisors`),
compared by :func:`~popprof.compare.core.compare_named` (the diff's programs and events sections) and the
rows chosen by :func:`~popprof.compare.what_changed.top_contributors` (the diff's). The store keeps each run's
bundle tables (``tables/steps``, ``tables/events``); one DuckDB query per table reads, through the store's
checked read path (:meth:`~popprof.store.api.Store.duckdb`), only the columns the totals need, of those runs
only, summed per run and name in DuckDB. A run without the table (one added from a baseline JSON) leaves the
names unknown, and the document says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..compare.core import DEFAULT_TOLERANCE, compare_named, event_totals, program_totals
from ..compare.what_changed import NAMED_SECTIONS, categories_of, top_contributors
from ..io.plural import plural
from ..metrics.account import CATEGORY_PARTS
from .schemas import table_kind

if TYPE_CHECKING:
    import duckdb

    from .api import Store

#: How many runs a reason names before "and N more".
NAMED_RUNS = 3

#: Per section, the bundle table its rows come from, its name and category columns, the count whose 0 leaves a
#: run's totals unknown (steps: those with cycles) and the query summing its rows per run and name (only the
#: columns the totals read; ``{rows}``: the runs and profiles wanted, ``{names}``: the names read).
_SQL = {
    "programs": (
        "steps",
        "program",
        "category",
        "count(cycles)",
        "SELECT profile, run_id, program, category, count(DISTINCT step) AS steps, "
        "CAST(sum(cycles) AS DOUBLE) AS cycles FROM steps WHERE {rows} AND program IN ({names}) "
        "GROUP BY profile, run_id, program, category",
    ),
    "events": (
        "events",
        "name",
        "device_category",
        "count(*)",
        "SELECT profile, run_id, name, device_category, bookkeeping, count(*) AS n, sum(dur_us) AS dur_us "
        "FROM events WHERE {rows} AND name IN ({names}) "
        "GROUP BY profile, run_id, name, device_category, bookkeeping",
    ),
}


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values) or "NULL"


@dataclass
class Levels:
    """The runs either side of one change whose account named a busy part: what :func:`name` reads."""

    profile: str
    platform: str  # gpu | ipu
    part: dict  # the busy part that moved most (a row of the decomposition's parts)
    before: list[str]
    after: list[str]
    divisors: list[int | None]  # per run of before + after: its steps (runs) when the account is per step


def name(
    store: Store, levels: Sequence[Levels], con: duckdb.DuckDBPyConnection
) -> list[tuple[dict, list[str]]]:
    """For each of ``levels``, the contributors document of its busy part (``part``, ``section``, ``unit``,
    ``unavailable``, ``rows``: ``name``, ``change``, ``status``, as ``popprof diff``'s; with ``unavailable``,
    a ``reason``; and ``runs_before``, ``runs_after``: the runs the means are of) and the names of the section
    compared (for the text to keep the shown ones apart). The queries of each table read every level's runs
    at once, on ``con``, a connection of :meth:`~popprof.store.api.Store.duckdb` (the table's views added to
    it)."""
    tables = {}
    for section in {NAMED_SECTIONS[lv.platform][0] for lv in levels}:
        tables[section] = _read(
            store, con, section, [lv for lv in levels if NAMED_SECTIONS[lv.platform][0] == section]
        )
    out = []
    for lv in levels:
        section, unit = NAMED_SECTIONS[lv.platform]
        doc = {"part": lv.part["part"], "section": section, "unit": unit}
        frame, have = tables[section]
        rows = frame[frame["profile"] == lv.profile]
        lacking = _lacking(have[have["profile"] == lv.profile], lv.before + lv.after)
        if lacking:
            kinds = _kinds(store, con, lv.profile, lacking)
            reason = _reason(lacking, kinds, section, len(lv.before) + len(lv.after))
            counts = {"runs_before": len(lv.before), "runs_after": len(lv.after)}
            out.append(({**doc, **counts, "unavailable": True, "reason": reason, "rows": []}, []))
            continue
        sides = [
            _mean_totals(
                rows, section, ids, lv.divisors[: len(lv.before)] if i == 0 else lv.divisors[len(lv.before) :]
            )
            for i, ids in enumerate((lv.before, lv.after))
        ]
        compared = compare_named(*sides, DEFAULT_TOLERANCE)
        named = top_contributors(compared, lv.part, lv.platform)
        counts = {"runs_before": len(lv.before), "runs_after": len(lv.after)}
        out.append(({**doc, **counts, "unavailable": False, "rows": named}, compared["name"].tolist()))
    return out


def _read(
    store: Store, con: duckdb.DuckDBPyConnection, section: str, levels: list[Levels]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of ``section``'s table of the runs of ``levels``, summed per run and name in DuckDB, and per run
    the count of its rows (``known``; steps: those with cycles). Only the names with a row of the categories of
    the levels' parts are read (:func:`~popprof.compare.what_changed.categories_of`; every row of those names,
    so that a name of several categories is one still): three scans of the runs' rows, two of them of one or
    two columns."""
    from .engine_duckdb import add_views, readable

    table, name_column, category, count, sql = _SQL[section]
    profiles = sorted({lv.profile for lv in levels})
    runs = sorted({r for lv in levels for r in lv.before + lv.after})
    rows = f"profile IN ({_marks(profiles)}) AND run_id IN ({_marks(runs)})"
    params = [*profiles, *runs]
    known: set[str] = set()
    unknown = False
    for lv in levels:
        cats, other = categories_of(lv.part["part"], lv.platform)
        known.update(cats)
        unknown = unknown or other
    mapped = sorted(set(CATEGORY_PARTS[levels[0].platform]) - known)
    fills = f"{category} IN ({_marks(sorted(known))})" + (
        f" OR {category} NOT IN ({_marks(mapped)})" if unknown else ""
    )
    add_views(con, store.location, [table_kind(table)])
    with readable(store.location):
        have = con.execute(
            f"SELECT profile, run_id, {count} AS known FROM {table} WHERE {rows} GROUP BY profile, run_id",
            params,
        ).fetch_df()
        names = [
            n
            for (n,) in con.execute(
                f"SELECT DISTINCT {name_column} FROM {table} WHERE {rows} AND ({fills})",
                [*params, *sorted(known), *(mapped if unknown else [])],
            ).fetchall()
            if n is not None
        ]
        frame = con.execute(sql.format(rows=rows, names=_marks(names)), [*params, *names]).fetch_df()
    return frame, have


def _lacking(have: pd.DataFrame, runs: list[str]) -> list[str]:
    """The runs of ``runs`` whose table gave no rows (or, steps, no known cycles: totals unknown, not 0)."""
    found = set(have.loc[have["known"] > 0, "run_id"])
    return [r for r in runs if r not in found]


def _kinds(store: Store, con: duckdb.DuckDBPyConnection, profile: str, runs: list[str]) -> dict[str, str]:
    """What each of ``runs`` was added from (the catalogue's ``kind``: ``profile`` or ``baseline``)."""
    marks = ", ".join("?" for _ in runs)
    found = store.frame(
        f"SELECT run_id, kind FROM runs WHERE profile = ? AND run_id IN ({marks})",
        [profile, *runs],
        con=con,
    )
    return dict(zip(found["run_id"], found["kind"], strict=True))


def _reason(lacking: list[str], kinds: dict[str, str], section: str, total: int) -> str:
    """Why the names are unknown: ``3 of the 6 runs either side were added from a baseline JSON, which holds
    metrics only (r1, r2, r3)``."""
    named = ", ".join(lacking[:NAMED_RUNS]) + (
        f" and {len(lacking) - NAMED_RUNS} more" if len(lacking) > NAMED_RUNS else ""
    )
    count = f"{len(lacking)} of the {plural(total, 'run')} either side"
    one = len(lacking) == 1
    if all(kinds.get(r) == "baseline" for r in lacking):
        return f"{count} {'was' if one else 'were'} added from a baseline JSON, which holds metrics only ({named})"
    what = "step cycles" if section == "programs" else "trace events"
    return f"{count} {'holds' if one else 'hold'} no {what} in the store ({named})"


def _mean_totals(
    rows: pd.DataFrame, section: str, runs: list[str], divisors: list[int | None]
) -> pd.DataFrame:
    """Per name, the mean over ``runs`` of each run's totals (a run's own divided by its divisor when not None):
        :func:`~popprof.compare.core.program_totals` / :func:`~popprof.compare.core.event_totals` of the rows of
        the runs at once (the totals add up over runs), each row weighted by 1 over its run's divisor, then divided
    by the number of runs."""
    share = {r: 1.0 / (d or 1) for r, d in zip(runs, divisors, strict=True)}
    side = rows[rows["run_id"].isin(share)]
    weight = side["run_id"].map(share).to_numpy(dtype="float64")
    if section == "programs":
        frame = pd.DataFrame(
            {
                # each row stands for its run's steps of one program (a step runs one program): a step of its
                # own, counting for their number
                "step": np.arange(len(side)),
                "program": side["program"].astype("category"),
                "category": side["category"].astype("category"),
                "cycles": side["cycles"].to_numpy(dtype="float64", na_value=0.0) * weight,
            }
        )
        totals = program_totals(
            frame.reset_index(drop=True), side["steps"].to_numpy(dtype="float64") * weight
        )
    else:
        frame = pd.DataFrame(
            {
                "name": side["name"].astype("category"),
                "device_category": side["device_category"].astype("category"),
                "bookkeeping": side["bookkeeping"].astype("boolean"),
                "dur_us": side["dur_us"].to_numpy(dtype="float64", na_value=0.0) * weight,
            }
        )
        totals = event_totals(frame.reset_index(drop=True), side["n"].to_numpy(dtype="float64") * weight)
    numbers = totals.columns.drop("category", errors="ignore")
    totals[numbers] = totals[numbers].astype("float64") / len(runs)  # summed first: exact sums stay exact
    return totals
