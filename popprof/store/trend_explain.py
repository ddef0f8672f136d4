"""A change of a time metric in ``popprof trend``, explained by the time account of the runs either side.

The time account (:mod:`popprof.metrics.account`) partitions each device's window into exclusive parts, and
the store keeps ``account.window_us`` and ``account.<part>_us`` for each run. For a change of a time metric
(:func:`explained_by_account`), :func:`explain` takes the runs of the level before the change and of the
level after it (every run of their points, re-runs included), puts their account on one basis
(:func:`popprof.compare.basis.account_on_one_basis`: per step or run when the runs ran different numbers),
takes the mean of each row over each level's runs and splits the window's change into its parts' changes
with :func:`popprof.compare.what_changed.decompose`, the decomposition of ``popprof diff``'s "What changed".
Means, not the medians the change itself is of, so that the parts add up to the window exactly. When a busy
part moved, :mod:`.trend_named` names the programs or device work that changed most in it, from the same
runs' tables, as ``popprof diff`` names them (``contributors``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

from ..compare.basis import FAMILIES, account_family, account_on_one_basis, run_divisors
from ..compare.what_changed import WINDOW, busy_part, decompose
from ..io.plural import plural
from ..metrics.account import PARTS
from .trend_named import Levels, name

if TYPE_CHECKING:
    import duckdb

    from .api import Store


class _Series(Protocol):
    """What :func:`explain` reads of a :class:`~popprof.store.trend.Series` (which imports this module)."""

    metric: str
    profile: str
    point_runs: list[list[str]]
    changes: list[Any]


#: The account's rows a run carries (its window and every part of either platform).
ACCOUNT_METRICS: tuple[str, ...] = (WINDOW, *(f"account.{p}_us" for p in PARTS))
#: Metrics of the time a run (or its steps) took, besides the account's own rows, whose changes are explained.
TIME_METRICS: tuple[str, ...] = ("execution.total_time_us", "trace.step_time_us", "trace.span_us")
#: The runs either side of a change, nearest it, whose programs or device work are read for the names
#: (:mod:`.trend_named`): each run's table is read row by row (2,000 steps a run for the Mk2 fixture), so all the
#: runs of a long level (9,750 of a 10,000-run exact series) would cost seconds; the account's means, a few rows
#: a run, take every run.
NAMED_PER_LEVEL = 50
#: How many runs a reason names before "and N more".
NAMED_RUNS = 3


def explained_by_account(metric: str) -> bool:
    """Whether a change of ``metric`` is explained by the time account: the account's window or one of its
    parts (``account.window_us``, ``account.<part>_us``) or a time of the whole run or its steps
    (:data:`TIME_METRICS`)."""
    return metric in ACCOUNT_METRICS or metric in TIME_METRICS


def explain(store: Store, series: list[_Series], branch: str | None = None) -> None:
    """Set ``what_changed`` on every change of each series of ``series`` whose metric is
    :func:`explained_by_account`, reading the account of the runs of its levels from ``store`` in one query."""
    wanted = [s for s in series if s.changes and explained_by_account(s.metric)]
    if not wanted:
        return
    profiles = {s.profile for s in wanted}
    runs = sorted(
        {
            r
            for s in wanted
            for c in s.changes
            for point in s.point_runs[c.before_from : c.after_to]
            for r in point
        }
    )
    names = [*ACCOUNT_METRICS, *(count for count, _, _ in FAMILIES.values())]
    profile = next(iter(profiles)) if len(profiles) == 1 else None
    con = store.duckdb(kinds=["metrics"])  # the names' tables are added to it: the catalogue is read once
    try:
        _explain(store, con, wanted, names, profile, branch, runs)
    finally:
        con.close()


def _explain(
    store: Store,
    con: duckdb.DuckDBPyConnection,
    wanted: list[_Series],
    names: list[str],
    profile: str | None,
    branch: str | None,
    runs: list[str],
) -> None:
    """:func:`explain`'s work on one connection of ``store``."""
    frame = store.metric(names, profile=profile, branch=branch, runs=runs, con=con)
    values: dict[tuple[str, str], dict[str, float | None]] = {}
    if not frame.empty:  # oldest first: a run stored again keeps its latest value
        table = frame.pivot_table(index=["profile", "run_id"], columns="name", values="value", aggfunc="last")
        for key, row in zip(table.index, table.to_dict("records"), strict=True):
            values[(str(key[0]), str(key[1]))] = {n: float(v) for n, v in row.items() if not math.isnan(v)}
    named: list[tuple[Any, Levels]] = []
    for s in wanted:
        for change in s.changes:
            before = [r for point in s.point_runs[change.before_from : change.index] for r in point]
            after = [r for point in s.point_runs[change.index : change.after_to] for r in point]
            runs_values = [values.get((s.profile, r), {}) for r in before + after]
            doc = change.what_changed = account_change(runs_values, before, after)
            part = busy_part(doc["parts"]) if doc["available"] else None
            if doc["available"]:
                doc["contributors"] = None  # no busy part moved, until named below
            if part is not None:
                divisors, _ = run_divisors(runs_values)  # the account's basis, of all the runs
                # the runs nearest the change: their tables are read row by row, the account's rows are a few
                near = slice(max(len(before) - NAMED_PER_LEVEL, 0), len(before) + NAMED_PER_LEVEL)
                named.append(
                    (
                        change,
                        Levels(
                            s.profile,
                            doc["platform"],
                            part,
                            before[near],
                            after[:NAMED_PER_LEVEL],
                            divisors[near],
                        ),
                    )
                )
    if named:  # the programs or device work of the busy part that moved most, from the runs' tables
        for (change, _), (who, others) in zip(named, name(store, [lv for _, lv in named], con), strict=True):
            change.what_changed["contributors"] = who
            change.named = others


def account_change(runs: list[dict[str, float | None]], before: list[str], after: list[str]) -> dict:
    """The decomposition of the change from the runs ``before`` to the runs ``after`` (their ids; ``runs`` holds
    the stored values of each, in the same order): ``available`` (False with a ``reason`` when a run lacks the
    account or the runs' accounts are of different platforms), ``basis`` (``total``, ``per profiler step`` or
    ``per run``), ``runs_before``, ``runs_after`` and the fields of
    :func:`~popprof.compare.what_changed.decompose` of the two levels' means."""
    ids = before + after
    lacking = [run for run, v in zip(ids, runs, strict=True) if v.get(WINDOW) is None]
    if lacking:
        named = ", ".join(lacking[:NAMED_RUNS]) + (
            f" and {len(lacking) - NAMED_RUNS} more" if len(lacking) > NAMED_RUNS else ""
        )
        return {
            "available": False,
            "reason": f"{len(lacking)} of the {plural(len(ids), 'run')} either side "
            f"{'lacks' if len(lacking) == 1 else 'lack'} the time account ({named})",
        }
    if len({account_family(v) for v in runs}) > 1:
        return {
            "available": False,
            "reason": "the runs either side have time accounts of different platforms",
        }
    on_basis, per = account_on_one_basis(runs)
    sides = on_basis[: len(before)], on_basis[len(before) :]
    means = []
    for side in sides:
        present = [name for name in ACCOUNT_METRICS if any(v.get(name) is not None for v in on_basis)]
        means.append({name: sum(v.get(name) or 0.0 for v in side) / len(side) for name in present})
    doc = decompose(*means)
    return {
        "available": True,
        "platform": doc["platform"],
        "basis": "total" if per is None else f"per {per}",
        "runs_before": len(before),
        "runs_after": len(after),
        **{k: v for k, v in doc.items() if k != "platform"},
    }
