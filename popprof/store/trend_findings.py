"""``popprof trend --findings``: when each rule's finding started, changed severity or stopped, per profile.

The store keeps each run's findings (:mod:`.judged`). Per profile, the runs oldest first are grouped into
points as ``popprof trend`` groups them for metrics: the runs of one commit are one point (``collapse``), at
the commit's first run, and runs without a commit a point each; runs of one commit judged by other rule
settings (another ``rules_sha256``), or not judged at all, are points of their own. A rule's **state** at a
point is ``not fired``, ``info``, ``warning`` or ``error`` (its most severe finding of a run); a point of
several runs takes the **lower median** of its runs' states in that order, as a metric's point is the median
of its values: one re-run on a bad machine does not move it, and a tie (one of two re-runs) does not fire.

A point whose runs were added before findings were kept (no ``judged`` in the catalogue's manifest) is ``not
judged``: never read as ``not fired``. Transitions are between consecutive judged points, so a run of not
judged points lies inside the range to bisect. A transition between points judged by different rule settings
is kept and marked ``settings_changed``: the series is not split, so a fix that landed with a settings change
still shows, but such a transition is not read as a change of the code and never fails ``--fail-on``.

A **new finding at or above** a severity S is a transition from a state below S to one at or above it, not
across a settings change; ``fail`` counts those in the last ``recent`` points not acknowledged (``popprof
trend ack STORE RULE_ID RUN_ID``, the first run of the new state).

Each point also has the run's **limit** as summary states it (``docs/figures.md``, "What limits the run"),
kept at ``store add`` in the manifest's ``judged``: a point of several runs takes the limit most of its runs
have (the first run's among equals), a point with none kept (added before limits were kept, or no time
account) has none and lies inside the range of a change. A change of the limit is listed, never failed on.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from ..io.jsonout import plain
from ..model.errors import UsageError
from .api import Store, open_store
from .trend import _iso_utc, read_acks

if TYPE_CHECKING:
    import pandas as pd

SEVERITIES = ("info", "warning", "error")
NOT_FIRED = "not fired"
NOT_JUDGED = "not judged"
#: The order of the states a rule takes at a run (a point's state is the lower median of its runs').
RANK = {NOT_FIRED: 0, "info": 1, "warning": 2, "error": 3}

#: One query: every run of the catalogue (judged or not) with its findings, oldest first.
SQL = (
    "SELECT r.run_id, r.profile, r.created, r.commit, r.branch, "
    "json_extract_string(r.manifest, '$.judged.rules_sha256') AS rules_sha256, "
    "json_extract_string(r.manifest, '$.judged.limit.limit') AS run_limit, "
    "f.rule_id, f.severity, f.title, f.figure, f.value, f.threshold, f.message "
    "FROM runs r LEFT JOIN findings f USING (run_id, profile, ingest_id) "
    "{where} ORDER BY r.created, r.run_id, f.position"
)


@dataclass
class FindingChange:
    """One transition of a rule's state between two consecutive judged points of a profile."""

    rule_id: str
    profile: str
    index: int  # the point of the new state
    before: str  # not fired | info | warning | error
    after: str
    direction: str  # new | stopped | worse | better
    last_old_run: str
    first_new_run: str
    last_old_commit: str | None
    first_new_commit: str | None
    first_new_created: str
    not_judged_between: int  # not judged points between the two (inside the range to bisect)
    settings_changed: bool
    before_rules_sha256: str
    after_rules_sha256: str
    recent: bool = False
    acknowledged: bool = False
    # the finding at the first new point (its first run in the new state), as stored; None when stopped
    finding: dict | None = None

    def new_at(self, severity: str) -> bool:
        """Whether this is a new finding at or above ``severity`` (a change of the code, not of the settings)."""
        limit = RANK[severity]
        return not self.settings_changed and RANK[self.before] < limit <= RANK[self.after]


@dataclass
class LimitChange:
    """The run's limit changed between two consecutive points that have one."""

    index: int  # the point of the new limit
    before: str
    after: str
    last_old_run: str
    first_new_run: str
    last_old_commit: str | None
    first_new_commit: str | None
    not_kept_between: int  # points without a limit between the two (inside the range to bisect)


@dataclass
class RuleSeries:
    """One rule on one profile: its state at each point and its transitions."""

    rule_id: str
    title: str
    states: list[str]  # per point: not judged | not fired | info | warning | error
    state: str  # at the last judged point
    since_run: str  # the first point of the current state (after the last transition)
    since_commit: str | None
    changes: list[FindingChange] = field(default_factory=list)


@dataclass
class FindingsProfile:
    """The findings of one profile over its points, one :class:`RuleSeries` per rule that fired."""

    profile: str
    runs: list[str]
    commits: list[str | None]
    created: list[str]
    rules_sha256: list[str | None]  # None: not judged
    runs_per_point: list[int]
    rules: list[RuleSeries] = field(default_factory=list)
    limits: list[str | None] = field(default_factory=list)  # per point; None: none kept
    limit_changes: list[LimitChange] = field(default_factory=list)

    @property
    def not_judged(self) -> list[str]:
        """The run ids of the points not judged (added before findings were kept)."""
        return [r for r, h in zip(self.runs, self.rules_sha256, strict=True) if h is None]

    def failing(self, severity: str) -> list[FindingChange]:
        """New findings at or above ``severity`` in the recent points, not acknowledged (``--fail-on``)."""
        return [
            c for r in self.rules for c in r.changes if c.new_at(severity) and c.recent and not c.acknowledged
        ]

    def to_dict(self) -> dict:
        """JSON-ready form."""
        out = asdict(self)
        out["not_judged"] = self.not_judged
        return out


def findings_trend(
    store: str | os.PathLike[str] | Store,
    *,
    profile: str | None = None,
    branch: str | None = None,
    last: int | None = 500,
    recent: int = 10,
    collapse: bool = True,
) -> list[FindingsProfile]:
    """The findings of ``store``'s runs per profile (``profile``, ``branch``: only those), the latest ``last``
    points each, with each rule's transitions; ``collapse``: re-runs of one commit are one point."""
    handle = store if isinstance(store, Store) else open_store(store)
    where, params = [], []
    if profile is not None:
        where.append("r.profile = ?")
        params.append(profile)
    if branch is not None:
        where.append("r.branch = ?")
        params.append(branch)
    sql = SQL.format(where=("WHERE " + " AND ".join(where)) if where else "")
    frame = handle.frame(sql, params, kinds=["findings"])
    if frame.empty:
        raise UsageError(
            f"no runs in {handle.root}"
            + (f" for profile {profile!r}" if profile else "")
            + (f" on branch {branch!r}" if branch else "")
        )
    acks = read_acks(handle)
    return [
        _profile(str(prof), group, last, recent, collapse, acks)
        for prof, group in frame.groupby("profile", sort=True)
    ]


def _points(group: pd.DataFrame, collapse: bool) -> list[list[str]]:
    """The run ids of each point, oldest first: one per commit and rule settings (not judged: none), or per
    run without a commit or without ``collapse``."""
    order: dict[tuple, list[str]] = {}
    seen = set()
    for run, commit, rules in zip(group["run_id"], group["commit"], group["rules_sha256"], strict=True):
        if run in seen:
            continue
        seen.add(run)
        key = (commit, rules) if collapse and isinstance(commit, str) else ("\0run", run)
        order.setdefault(key, []).append(str(run))
    return list(order.values())


def _profile(
    prof: str, group: pd.DataFrame, last: int | None, recent: int, collapse: bool, acks: set
) -> FindingsProfile:
    group = group.reset_index(drop=True)
    points = _points(group, collapse)
    if last is not None:
        points = points[-last:]
    first = group.drop_duplicates("run_id").set_index("run_id")
    heads = [p[0] for p in points]
    out = FindingsProfile(
        profile=prof,
        runs=heads,
        commits=[c if isinstance(c, str) else None for c in first.loc[heads, "commit"]],
        created=_iso_utc(first.loc[heads, "created"]),
        rules_sha256=[h if isinstance(h, str) else None for h in first.loc[heads, "rules_sha256"]],
        runs_per_point=[len(p) for p in points],
    )
    _limits(out, group, points)
    fired = group[group["rule_id"].notna()]
    # each run's state per rule (its most severe finding) and the row of that finding, the first stored of that
    # severity, in one pandas pass (a dict per stored row was most of a 10,000-run store's time)
    rank = fired["severity"].astype(object).map(RANK).fillna(0)
    rows = rank.groupby(
        [fired["rule_id"].astype(object), fired["run_id"].astype(object)], sort=False
    ).idxmax()
    severities = fired.loc[rows.to_numpy(), "severity"].astype(str).tolist()
    worst: dict[tuple[str, str], tuple[str, int]] = {
        (str(rule), str(run)): (severity, index)
        for (rule, run), severity, index in zip(rows.index, severities, rows.tolist(), strict=True)
    }
    kept = {r for p in points for r in p}
    rules = sorted({rule for rule, run in worst if run in kept})
    titles = fired.groupby(fired["rule_id"].astype(object))["title"].last()  # oldest first: the latest
    for rule in rules:
        series = _rule(out, rule, str(titles.get(rule, "")), points, worst, fired, recent, acks)
        if any(s in SEVERITIES for s in series.states):  # fired at a point, not only in one re-run of one
            out.rules.append(series)
    return out


def _limits(out: FindingsProfile, group: pd.DataFrame, points: list[list[str]]) -> None:
    """Each point's limit (the most common of its runs', the first run's among equals) and its changes."""
    kept = group.drop_duplicates("run_id").set_index("run_id")["run_limit"]
    for point in points:
        values = [str(v) for v in kept.loc[point] if isinstance(v, str)]
        out.limits.append(max(values, key=values.count) if values else None)  # max keeps the first of equals
    have = [i for i, v in enumerate(out.limits) if v is not None]
    for old, new in zip(have, have[1:], strict=False):
        if out.limits[old] != out.limits[new]:
            out.limit_changes.append(
                LimitChange(
                    index=new,
                    before=str(out.limits[old]),
                    after=str(out.limits[new]),
                    last_old_run=out.runs[old],
                    first_new_run=out.runs[new],
                    last_old_commit=out.commits[old],
                    first_new_commit=out.commits[new],
                    not_kept_between=new - old - 1,
                )
            )


def _rule(
    out: FindingsProfile,
    rule: str,
    title: str,
    points: list[list[str]],
    worst: dict[tuple[str, str], tuple[str, int]],
    fired: pd.DataFrame,
    recent: int,
    acks: set,
) -> RuleSeries:
    states = []
    for point, rules_hash in zip(points, out.rules_sha256, strict=True):
        if rules_hash is None:
            states.append(NOT_JUDGED)
            continue
        ranked = sorted((worst.get((rule, r), (NOT_FIRED, None))[0] for r in point), key=RANK.__getitem__)
        states.append(ranked[(len(ranked) - 1) // 2])  # the lower median
    judged = [i for i, s in enumerate(states) if s != NOT_JUDGED]
    series = RuleSeries(
        rule_id=rule,
        title=title,
        states=states,
        state=states[judged[-1]] if judged else NOT_JUDGED,
        since_run=out.runs[judged[0]] if judged else out.runs[0],
        since_commit=out.commits[judged[0]] if judged else out.commits[0],
    )
    n = len(points)
    for old, new in zip(judged, judged[1:], strict=False):
        before, after = states[old], states[new]
        if before == after:
            continue
        finding = None
        if after != NOT_FIRED:
            at = next(worst[(rule, r)][1] for r in points[new] if worst.get((rule, r), ("",))[0] == after)
            row = fired.loc[at]
            finding = {
                k: plain(row[k]) for k in ("severity", "title", "figure", "value", "threshold", "message")
            }
        change = FindingChange(
            rule_id=rule,
            profile=out.profile,
            index=new,
            before=before,
            after=after,
            direction=_direction(before, after),
            last_old_run=out.runs[old],
            first_new_run=out.runs[new],
            last_old_commit=out.commits[old],
            first_new_commit=out.commits[new],
            first_new_created=out.created[new],
            not_judged_between=new - old - 1,
            settings_changed=out.rules_sha256[old] != out.rules_sha256[new],
            before_rules_sha256=str(out.rules_sha256[old]),
            after_rules_sha256=str(out.rules_sha256[new]),
            recent=new >= n - recent,
            acknowledged=(rule, out.runs[new]) in acks,
            finding=finding,
        )
        series.changes.append(change)
        series.since_run, series.since_commit = change.first_new_run, change.first_new_commit
    return series


def _direction(before: str, after: str) -> str:
    if before == NOT_FIRED:
        return "new"
    if after == NOT_FIRED:
        return "stopped"
    return "worse" if RANK[after] > RANK[before] else "better"


__all__ = [
    "NOT_FIRED",
    "NOT_JUDGED",
    "RANK",
    "SEVERITIES",
    "FindingChange",
    "FindingsProfile",
    "LimitChange",
    "RuleSeries",
    "findings_trend",
]
