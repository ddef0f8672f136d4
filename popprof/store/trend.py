"""``popprof trend``: how metrics moved over a store's runs, and the changes that matter.

Two modes per series (one metric of one profile, oldest run first):

- ``exact`` (auto when the series never moves by noise, MAD of its first differences is 0: compile-time
  memory, cycle counts): every change of value, with the last old and the first new run and commit, the
  range to bisect.
- ``noisy`` (trace timings): change points by PELT-L1 (:mod:`.changepoints`), kept only when the change
  exceeds the metric's gate budget (``[tool.popprof.gate]``, else the default budget) in the metric's worse
  direction, or would exceed it were it a worsening (so improvements of that size show too).

Re-runs of one commit are one point (``collapse``, the default): the median of their values, at the time and
run id of the commit's first run (so the point, and an acknowledgement of a change at it, stay put as
re-runs come in); ``runs_per_point`` says how many runs each point holds. Runs without a commit are a point
each.

A change of a time metric is explained by the time account of the runs of the levels either side
(:mod:`.trend_explain`: ``Change.what_changed``).

A kept worsening beyond the budget is a *regression*; ``fail`` is true when one lies in the last ``recent``
runs and is not acknowledged (``popprof trend ack``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .. import metrics as registry
from ..compare.gate import Budget, load_budget
from ..compare.gate import _check as budget_violations
from ..io.plural import plural
from ..model.errors import UsageError
from .api import Store, open_store
from .changepoints import INSTALL_HINT, MissingTrendExtra, change_points, far_jump, robust_sigma
from .layout import slug
from .trend_config import TrendSettings
from .trend_explain import explain

if TYPE_CHECKING:
    import pandas as pd

MODES = ("auto", "exact", "noisy")

#: Units of the registry whose figures are counts of a deterministic program: the same program gives the
#: same value, so any change is real, whatever the spread of a few runs looks like.
EXACT_UNITS = frozenset({"cycles", "bytes", "tile", "tiles", "step", "steps", "runs"})
#: Metric families read from the Poplar compile and execution reports: cycles, bytes, and the shares and
#: times derived from those alone (cycles / clock), so exact too.
EXACT_PREFIXES = ("execution.", "memory.")


def exact_by_definition(name: str) -> bool:
    """Whether the metric registry knows ``name`` to be exact: a count of cycles, bytes, tiles, steps or runs
    (by its unit), or a figure of the Poplar reports (``execution.*``, ``memory.*``). Trace timings and
    shares (``trace.*``, ``account.*``) and metrics the registry does not know are not."""
    described = registry.describe(name)
    if described is None:
        return False
    return described.unit in EXACT_UNITS or name.startswith(EXACT_PREFIXES)


@dataclass
class Change:
    """One change of a series: where (the runs either side), how much, and what the gate budget says."""

    metric: str
    profile: str
    mode: str
    index: int  # position of the first new run in the series
    last_old_run: str
    first_new_run: str
    last_old_commit: str | None
    first_new_commit: str | None
    first_new_created: str
    before: float
    after: float
    change: float
    rel_change: float | None
    direction: str  # worse | better | changed (a neutral metric)
    budget: str
    beyond_budget: bool
    regression: bool
    recent: bool
    acknowledged: bool = False
    p_value: float | None = None
    # the range to bisect: the last run surely of the old level and the first surely of the new one. The
    # runs either side of the change for an exact metric; for a noisy one the span of the runs where the new
    # level most likely starts (99 % of the likelihood), a few runs wide when the step is small for the noise
    bisect_from_run: str = ""
    bisect_to_run: str = ""
    bisect_from_commit: str | None = None
    bisect_to_commit: str | None = None
    # the points of the levels either side: before is [before_from, index), after [index, after_to)
    before_from: int = 0
    after_to: int = 0
    # the change explained by the time account of those points' runs (:func:`explain`); None: not a time metric
    what_changed: dict | None = None
    # the names of the programs or events section its contributors were chosen from (the text keeps the names
    # it shows apart from these, as the diff's does); not in the JSON
    named: list[str] = field(default_factory=list, repr=False)


@dataclass
class Series:
    """One metric of one profile over the runs, with its changes."""

    metric: str
    profile: str
    unit: str
    better: str | None
    mode: str
    runs: list[str]
    commits: list[str | None]
    created: list[str]
    values: list[float]
    changes: list[Change] = field(default_factory=list)
    note: str | None = None
    runs_per_point: list[int] = field(default_factory=list)
    # the run ids of each point (its re-runs with ``collapse``), for the account's means; not in the JSON
    point_runs: list[list[str]] = field(default_factory=list, repr=False)

    @property
    def regressions(self) -> list[Change]:
        """Unacknowledged regressions in the recent runs (what ``--fail-on regression`` fails on)."""
        return [c for c in self.changes if c.regression and c.recent and not c.acknowledged]

    def to_dict(self) -> dict:
        """JSON-ready form."""
        out = asdict(self)
        del out["point_runs"]
        out["changes"] = [{k: v for k, v in asdict(c).items() if k != "named"} for c in self.changes]
        return out


def trend(
    store: str | os.PathLike[str] | Store,
    metrics: list[str],
    *,
    profile: str | None = None,
    branch: str | None = None,
    last: int | None = 500,
    mode: str = "auto",
    recent: int = 10,
    budget: Budget | None = None,
    collapse: bool = True,
    settings: TrendSettings | None = None,
) -> list[Series]:
    """The series of ``metrics`` in ``store`` (one per metric and profile) with their changes.

    ``last`` keeps the latest N points; with ``collapse`` re-runs of one commit are one point (their median).
    ``settings`` (``[tool.popprof.trend]``, default: from the nearest config) set each metric's mode when
    ``mode`` is auto, and trend's own thresholds, looked up before ``budget``'s.
    """
    if mode not in MODES:
        raise UsageError(f"--mode {mode!r}: choose one of {', '.join(MODES)}")
    handle = store if isinstance(store, Store) else open_store(store)
    if settings is None:
        from ..io.config import load_config

        settings = TrendSettings.from_config(load_config())
    budget = settings.budget(budget if budget is not None else load_budget())
    acks = read_acks(handle)
    out = []
    history = handle.metric(list(metrics), profile=profile, branch=branch)
    for name in metrics:
        frame = history[history["name"] == name]
        if frame.empty:
            raise UsageError(
                f"no runs of metric {name!r} in {handle.root}"
                + (f" for profile {profile!r}" if profile else "")
                + (f" on branch {branch!r}" if branch else "")
            )
        for prof, group in frame.groupby("profile", sort=True):
            if collapse:
                group = collapse_reruns(group)
            else:
                group = group.assign(runs_per_point=1, point_runs=[[str(r)] for r in group["run_id"]])
            if last is not None:
                group = group.tail(last)
            group = group.reset_index(drop=True)
            out.append(_series(name, str(prof), group, settings.mode_for(name, mode), recent, budget, acks))
    explain(handle, out, branch=branch)
    return out


def collapse_reruns(group: pd.DataFrame) -> pd.DataFrame:
    """One row per commit (runs without a commit stay one row each), oldest first: the commit's first run with
    the median ``value`` of all its runs, ``runs_per_point`` and ``point_runs`` (their run ids, oldest first)."""
    commits = group["commit"].astype(object)
    key = commits.where(commits.notna(), "\0run " + group["run_id"].astype(str))
    by = group.assign(_key=key.to_numpy()).groupby("_key", sort=False)
    first = by.head(1).set_index("_key")
    first["value"] = by["value"].median()
    first["runs_per_point"] = by.size()
    # each point's run ids in one numpy pass (a Python function per group was most of the collapse's time)
    order = np.argsort(by.ngroup().to_numpy(), kind="stable")
    ids = group["run_id"].astype(str).to_numpy()[order]
    first["point_runs"] = [part.tolist() for part in np.split(ids, np.cumsum(first["runs_per_point"])[:-1])]
    return first.reset_index(drop=True)


def _iso_utc(times: pd.Series) -> list[str]:
    """ISO 8601 text of each time in UTC (``2026-01-01T02:00:00+00:00``), in one numpy pass: a Timestamp's
    ``isoformat`` per run was half of a 10,000-run exact trend's time. Microseconds only when a time has them."""
    import numpy as np

    values = times.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[us]")
    whole = bool((values.astype("int64") % 1_000_000 == 0).all())
    text = np.datetime_as_string(values, unit="s" if whole else "us")
    return [t + "+00:00" for t in text.tolist()]


def _series(name, prof, group, mode, recent, budget, acks) -> Series:
    unit, better = group["unit"].iloc[-1], group["better"].iloc[-1]
    values = group["value"].to_numpy(dtype=np.float64)
    finite = np.isfinite(values)
    note = None
    if not finite.all():  # a broken or hostile store file: such a value is no level to compare with
        note = f"{name} of {prof}: {plural(int((~finite).sum()), 'run')} whose value is not a finite number left out"
        group = group[finite].reset_index(drop=True)
        values = values[finite]
    series = Series(
        metric=name,
        profile=prof,
        unit=str(unit or ""),
        better=better if isinstance(better, str) else None,
        mode="exact",
        runs=group["run_id"].astype(str).tolist(),
        commits=[c if isinstance(c, str) else None for c in group["commit"]],
        created=_iso_utc(group["created"]),
        values=values.tolist(),
        runs_per_point=[int(c) for c in group["runs_per_point"]],
        point_runs=list(group["point_runs"]),
        note=note,
    )
    if mode == "auto" and exact_by_definition(name):
        mode = "exact"
    noisy = mode == "noisy" or (mode == "auto" and robust_sigma(values) > 0)
    if not noisy:
        indices = [i for i in range(1, len(values)) if values[i] != values[i - 1]]
        bounds = [0, *indices, len(values)]
        series.changes = [
            _change(series, i, values[i - 1], values[i], "exact", budget, bounds[k], bounds[k + 2])
            for k, i in enumerate(indices)
        ]
    else:
        series.mode = "noisy"
        try:
            found = change_points(values)
        except MissingTrendExtra:
            series.note = INSTALL_HINT
            found = []
        edges = [0, *(b for b, _, _ in found), len(values)]
        for k, (b, first, last) in enumerate(found):
            change = _noisy_change(series, values, b, edges[k], edges[k + 2], budget)
            change.bisect_from_run, change.bisect_from_commit = (
                series.runs[first - 1],
                series.commits[first - 1],
            )
            change.bisect_to_run, change.bisect_to_commit = series.runs[last], series.commits[last]
            if change.beyond_budget:
                series.changes.append(change)
        # a jump far beyond the noise after the last change point: a series too short for change points, or
        # a step in its last few runs (the change points need 3 runs a side on a grid of 5)
        start = found[-1][0] if found else 0
        b = far_jump(values, start)
        if b is not None:
            change = _noisy_change(series, values, b, start, len(values), budget)
            if change.beyond_budget:
                series.changes.append(change)
    n = len(values)
    for change in series.changes:
        change.recent = change.index >= n - recent
        change.acknowledged = (name, change.first_new_run) in acks
    return series


def _flip(better: str | None) -> str | None:
    return {"lower": "higher", "higher": "lower"}.get(better or "", better)


def _noisy_change(series: Series, values: np.ndarray, i: int, start: int, end: int, budget: Budget) -> Change:
    """The change of a noisy series at point ``i`` between the medians of points ``start`` to ``i`` and ``i`` to
    ``end``, with the p-value of the two levels (a change point's, or a far jump's after the last one)."""
    before, after = values[start:i], values[i:end]
    change = _change(
        series, i, float(np.median(before)), float(np.median(after)), "noisy", budget, start, end
    )
    change.p_value = _p_value(before, after)
    return change


def _change(
    series: Series, i: int, before: float, after: float, mode: str, budget: Budget, start: int, end: int
) -> Change:
    """The change of ``series`` at point ``i`` from the level ``before`` (of points ``start`` to ``i``) to
    ``after`` (of points ``i`` to ``end``)."""
    delta = after - before
    rel = delta / abs(before) if before else None
    better = series.better
    if better in ("lower", "higher"):
        worse = delta > 0 if better == "lower" else delta < 0
        direction = "worse" if worse else "better"
    else:
        worse, direction = True, "changed"
    limit = budget.limit_for(series.metric)
    rel_value = rel if rel is not None else math.nan
    if limit is None:
        beyond, text = True, "none"
    else:
        text = limit.describe()
        as_is = budget_violations(series.metric, better, before, after, delta, rel_value, limit, series.unit)
        mirrored = budget_violations(
            series.metric, _flip(better), before, after, delta, rel_value, limit, series.unit
        )
        beyond = bool(as_is) or (direction == "better" and bool(mirrored))
    return Change(
        metric=series.metric,
        profile=series.profile,
        mode=mode,
        index=i,
        last_old_run=series.runs[i - 1],
        first_new_run=series.runs[i],
        last_old_commit=series.commits[i - 1],
        first_new_commit=series.commits[i],
        first_new_created=series.created[i],
        before=before,
        after=after,
        change=delta,
        rel_change=rel,
        direction=direction,
        budget=text,
        beyond_budget=beyond,
        regression=worse and beyond and (limit is None or bool(as_is)),
        recent=False,
        bisect_from_run=series.runs[i - 1],
        bisect_to_run=series.runs[i],
        bisect_from_commit=series.commits[i - 1],
        bisect_to_commit=series.commits[i],
        before_from=start,
        after_to=end,
    )


def _p_value(before: np.ndarray, after: np.ndarray) -> float | None:
    """Mann-Whitney U two-sided p-value of the two segments, normal approximation with tie and continuity
    corrections (for people; the decision does not use it). Computed here: importing scipy.stats for it
    would cost more than the whole trend."""
    n1, n2 = len(before), len(after)
    if n1 == 0 or n2 == 0:
        return None
    values = np.concatenate([before, after])
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = (ends - (counts - 1) / 2.0)[inverse]  # average rank of each tied group (1-based)
    u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    ties = float((counts.astype(np.float64) ** 3 - counts).sum())
    variance = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2.0) - 0.5) / math.sqrt(variance)
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def _ack_file(metric: str, run_id: str) -> str:
    digest = hashlib.sha1(f"{metric}\0{run_id}".encode()).hexdigest()[:8]
    return f"acks/{slug(metric, 60)}--{slug(run_id)}--{digest}.json"


def acknowledge(store: str | os.PathLike[str] | Store, metric: str, run_id: str, note: str = "") -> str:
    """Acknowledge the change of ``metric`` whose first new run is ``run_id`` (or the new finding of the rule
    of that id, ``popprof trend --findings``); returns the ack file."""
    handle = store if isinstance(store, Store) else open_store(store)
    found = handle.query(
        "SELECT count(*) AS n FROM metrics WHERE name = "
        + _sql_text(metric)
        + " AND run_id = "
        + _sql_text(run_id)
    )["n"].iloc[0]
    if not found:  # a rule id: its new finding (trend --findings)
        found = _rule_found(handle, metric, run_id)
    if not found:
        raise UsageError(f"{handle.root}: no run {run_id!r} with metric {metric!r} to acknowledge")
    rel = _ack_file(metric, run_id)
    document = {
        "metric": metric,
        "run_id": run_id,
        "note": note,
        "acked_at": dt.datetime.now(dt.UTC).isoformat(),
    }
    handle.location.write_bytes(rel, (json.dumps(document, indent=2) + "\n").encode())
    return rel


def _rule_found(handle: Store, rule_id: str, run_id: str) -> bool:
    """Whether ``rule_id`` has a stored finding and ``run_id`` is a run of the store (what ``trend ack`` of a
    finding checks: the first run of a new state may be a re-run whose own finding is missing)."""
    row = handle.frame(
        "SELECT (SELECT count(*) FROM findings WHERE rule_id = ?) AS f, "
        "(SELECT count(*) FROM runs WHERE run_id = ?) AS r",
        [rule_id, run_id],
        kinds=["findings"],
    ).iloc[0]
    return bool(row["f"]) and bool(row["r"])


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def read_acks(store: Store) -> set[tuple[str, str]]:
    """The acknowledged (metric, first new run) pairs of a store."""
    out = set()
    for rel in store.location.files("acks", "*.json"):
        try:
            document = json.loads(store.location.read_bytes(rel))
            out.add((str(document["metric"]), str(document["run_id"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a broken ack file acknowledges nothing
    return out
