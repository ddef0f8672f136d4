"""``popprof trend`` output: text, JSON, Markdown (a PR comment), JUnit (one case per series) and a plot."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace

import pandas as pd

from ..io import units
from ..io.plural import plural
from ..report import markdown as md
from ..report.diff_blocks import (
    contributor_lines,
    markdown_contributors,
    part_moved,
    parts_table,
    window_words,
)
from ..report.fit import WIDTH, fit_lines
from ..report.junit import Case, Failure, Suite, render
from .trend import Change, Series
from .trend_findings import FindingChange, FindingsProfile, LimitChange


def _rel(change: Change) -> str:
    return units.relative(change.rel_change, missing="n/a")


#: A commit's hash in a range too long for the text's width: its first 12 digits, as git abbreviates one.
SHORT_COMMIT = 12
_HASH = re.compile(r"[0-9a-f]{13,}")


def _range(change: Change, short: bool = False) -> str:
    """The runs or commits to bisect, ``OLD..NEW``; with ``short`` a commit hash is abbreviated."""
    old = change.bisect_from_commit or change.bisect_from_run
    new = change.bisect_to_commit or change.bisect_to_run
    if short:
        old, new = (_HASH.sub(lambda m: m.group()[:SHORT_COMMIT], str(x)) for x in (old, new))
    return f"{old}..{new}"


def _state(change: Change) -> str:
    if change.regression:
        if change.acknowledged:
            return "regression (acknowledged)"
        return "REGRESSION" if change.recent else "regression"
    return change.direction


def text(series: list[Series], width: int = WIDTH) -> str:
    """Plain text: per series its mode, last value and changes, each line wrapped at ``width`` columns
    (docs/figures.md, "How text prints")."""
    lines = []
    for s in series:
        runs = sum(s.runs_per_point) or len(s.values)
        points = (
            f"{len(s.values)} runs" if runs == len(s.values) else f"{len(s.values)} commits ({runs} runs)"
        )
        head = f"{s.metric} [{s.profile}] {s.mode}, {points}, last {units.value(s.values[-1], s.unit)}"
        lines.append(head)
        if s.note:
            lines.append(f"  note: {s.note}")
        if not s.changes:
            lines.append("  no change" if s.mode == "exact" else "  no change point beyond the budget")
        for c in s.changes:
            where = f"between runs {c.last_old_run} and {c.first_new_run}"
            if (c.bisect_from_run, c.bisect_to_run) != (c.last_old_run, c.first_new_run):
                where = f"between runs {c.bisect_from_run} and {c.bisect_to_run} (most likely from {c.first_new_run})"
            bisect = _range(c)
            if len(bisect) + len("      (bisect ;") > width:  # whole on a line of its own, or abbreviated
                bisect = _range(c, short=True)
            lines.append(
                f"  {_state(c)}: {units.value(c.before, s.unit)} -> {units.value(c.after, s.unit)} ({_rel(c)}) "
                f"{where} (bisect {bisect}; budget {c.budget})"
            )
            if c.what_changed is not None:
                lines += account_lines(c.what_changed, width, c.named)
    return "\n".join(fit_lines(lines, width)) + "\n"


def _levels(doc: dict) -> str:
    """``mean of 3 runs before and 2 after, per run``: what the account's figures of a change are of."""
    per = "" if doc["basis"] == "total" else f", {doc['basis']}"
    return f"mean of {plural(doc['runs_before'], 'run')} before and {doc['runs_after']} after{per}"


#: The words of the contributors' rows in trend's text: the diff's, and that they are means.
_MEANS = {"programs": "programs (IPU-cycles, {means})", "events": "device work (events, {means})"}


def _named_words(doc: dict, who: dict) -> str:
    """What the names' figures are of: ``programs (IPU-cycles, means)`` when of the runs the heading says
    (:func:`_levels`), else with their own runs (``means of 50 runs before and 50 after``: the runs nearest the
    change, :data:`~.trend_explain.NAMED_PER_LEVEL`)."""
    runs = (who["runs_before"], who["runs_after"])
    means = (
        "means"
        if runs == (doc["runs_before"], doc["runs_after"])
        else f"means of {plural(runs[0], 'run')} before and {runs[1]} after"
    )
    return _MEANS[who["section"]].format(means=means)


def account_lines(doc: dict, width: int = WIDTH, others: list[str] | None = None) -> list[str]:
    """A change's time account (``Change.what_changed``, :mod:`.trend_explain`) under its line, indented by 4:
    the window's change and the parts that moved most with their share of it, and the programs or device work
    that changed most with the busy part that moved most (``others``: the names they are kept apart from),
    laid out as ``popprof diff``'s "What changed"; one line when it is not explained or nothing moved beyond
    noise."""
    if not doc["available"]:
        return [f"    time account: not explained: {doc['reason']}"]
    w = doc["window"]
    if not doc["material"]:
        span = f"{units.duration(w['base_us'])} -> {units.duration(w['new_us'])}"
        return [
            f"    time account ({_levels(doc)}): no material change (window {span}; no part moved by "
            f"{units.duration(doc['noise_us'])} or more)"
        ]
    lines = [f"    time account ({_levels(doc)}):", f"      {window_words(doc)}"]
    lines += ["    " + line for line in parts_table(doc, width - 4)]
    who = doc.get("contributors")
    if who is not None and who["unavailable"]:
        lines.append(f"      {part_moved(doc, who['part'])}: {who['section']} unknown: {who['reason']}")
    elif who is not None and who["rows"]:
        names = pd.Series(others or [r["name"] for r in who["rows"]], dtype="str")
        lines += ["    " + line for line in contributor_lines(doc, names, width - 4, _named_words(doc, who))]
    return lines


def as_json(series: list[Series]) -> str:
    """JSON: every series with its values and changes."""
    return (
        json.dumps({"series": [s.to_dict() for s in series]}, indent=2, allow_nan=False, default=str) + "\n"
    )


def markdown(series: list[Series]) -> str:
    """A Markdown report for a pull-request comment: one table of the changes found."""
    rows = []
    for s in series:
        for c in s.changes:
            rows.append(
                [
                    md.code(s.metric),
                    md.cell(s.profile),
                    md.cell(_state(c)),
                    md.cell(f"{units.value(c.before, s.unit)} → {units.value(c.after, s.unit)}"),
                    md.cell(_rel(c)),
                    md.code(_range(c)),
                    md.cell(c.budget),
                ]
            )
    failing = sum(len(s.regressions) for s in series)
    lines = [f"### popprof trend: {plural(failing, 'unacknowledged recent regression')}", ""]
    if rows:
        lines += md.table(
            ["metric", "profile", "change", "values", "relative", "bisect", "budget"], rows, right=[4]
        )
    else:
        lines.append(f"No changes in {len(series)} series.")
    explained = [(s, c) for s in series for c in s.changes if c.what_changed is not None]
    if explained:
        lines += [
            "",
            "**Time account** of each change (the parts that moved, with their share of the window's change):",
            "",
        ]
        lines += [_markdown_account(s, c) for s, c in explained]
    return "\n".join(lines) + "\n"


def _markdown_account(s: Series, c: Change) -> str:
    """One list item: a change's time account in a sentence (:func:`account_lines` in Markdown)."""
    doc = c.what_changed or {}
    where = f"- {md.code(s.metric)} [{md.cell(s.profile)}] from run {md.code(c.first_new_run)}: "
    if not doc.get("available"):
        return where + f"not explained: {md.cell(doc.get('reason', ''))}"
    w = doc["window"]
    span = f"{units.duration(w['base_us'])} → {units.duration(w['new_us'])}"
    if not doc["material"]:
        return where + f"no material change in the time account (window {span}, {md.cell(_levels(doc))})"
    moved = doc["window_moved"]
    change = units.change(w["change_us"], "us")
    head = f"window {span}, {change}" + (
        f" ({units.relative(w['rel_change'])})" if moved else ", within noise"
    )
    parts = [
        f"{p['words']} {units.change(p['change_us'], 'us')}"
        + (
            f" ({units.percent(p['share_of_change'])}{', offsetting' if p['offsetting'] else ''})"
            if moved
            else ""
        )
        for p in doc["parts"]
    ]
    text = where + f"{head} ({md.cell(_levels(doc))}): " + (", ".join(parts) or "no part beyond noise")
    who = doc.get("contributors")
    if who is not None and who["unavailable"]:
        text += f"; {part_moved(doc, who['part'])}: {who['section']} unknown: {md.cell(who['reason'])}"
    elif who is not None and who["rows"]:
        names = pd.Series(c.named or [r["name"] for r in who["rows"]], dtype="str")
        text += f"; {part_moved(doc, who['part'])}, its {_named_words(doc, who)} that changed most: "
        text += markdown_contributors(who, names)
    return text


def junit(series: list[Series]) -> str:
    """JUnit XML: one suite per metric, one case per profile, failing on an unacknowledged recent regression."""
    suites: dict[str, Suite] = {}
    for s in series:
        suite = suites.setdefault(s.metric, Suite(f"trend.{s.metric}"))
        failure = None
        if s.regressions:
            c = s.regressions[-1]
            failure = Failure(
                f"{s.metric} {_rel(c)} from run {c.first_new_run} (bisect {_range(c)}; budget {c.budget})",
                "regression",
                text([s]),
            )
        suite.cases.append(Case(s.profile, f"trend.{s.metric}", failure=failure, output=text([s])))
    return render(list(suites.values()), "popprof trend")


def plot(series: list[Series], out: str | os.PathLike[str]) -> None:
    """A PNG (or any format matplotlib writes by suffix) of each series with its change points, atomically."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from ..model.errors import UsageError

        raise UsageError("-o needs matplotlib: pip install 'popprof[plots]'") from None
    from ..io.atomic import atomic_path

    fig, axes = plt.subplots(len(series), 1, figsize=(9, 2.6 * len(series)), squeeze=False)
    for ax, s in zip(axes[:, 0], series, strict=True):
        ax.plot(range(len(s.values)), s.values, lw=0.9, marker=".", ms=3, color="#3465a4")
        for c in s.changes:
            ax.axvline(c.index - 0.5, color="#cc0000" if c.regression else "#4e9a06", lw=1.2, ls="--")
        ax.set_title(f"{s.metric} [{s.profile}] ({s.mode})", fontsize=9)
        ax.set_ylabel(s.unit or "value", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("run (oldest first)", fontsize=8)
    fig.tight_layout()
    suffix = os.path.splitext(str(out))[1].lstrip(".") or "png"
    try:
        with atomic_path(out) as tmp, open(tmp, "wb") as handle:
            fig.savefig(handle, format=suffix, dpi=110)
    finally:
        plt.close(fig)


# ``popprof trend --findings`` (:mod:`.trend_findings`)


def _finding_state(c: FindingChange) -> str:
    """``NEW`` / ``WORSE`` (recent, unacknowledged, not a settings change), else the direction in lower case."""
    word = c.direction
    if c.settings_changed:
        return f"{word} (rule settings changed)"
    if c.acknowledged:
        return f"{word} (acknowledged)"
    return word.upper() if c.recent and c.direction in ("new", "worse") else word


def _finding_range(c: FindingChange | LimitChange, short: bool = False) -> str:
    old = c.last_old_commit or c.last_old_run
    new = c.first_new_commit or c.first_new_run
    if short:
        old, new = (_HASH.sub(lambda m: m.group()[:SHORT_COMMIT], str(x)) for x in (old, new))
    return f"{old}..{new}"


def _named_runs(runs: list[str], most: int = 3) -> str:
    shown = ", ".join(runs[:most])
    return shown + (f" and {len(runs) - most} more" if len(runs) > most else "")


def findings_text(profiles: list[FindingsProfile], width: int = WIDTH) -> str:
    """Plain text: per profile its points, then per rule that fired its state since when and each transition
    with the range to bisect, wrapped at ``width`` columns."""
    lines = []
    for p in profiles:
        runs = sum(p.runs_per_point)
        points = f"{len(p.runs)} runs" if runs == len(p.runs) else f"{len(p.runs)} commits ({runs} runs)"
        settings = len({h for h in p.rules_sha256 if h is not None})
        head = f"findings [{p.profile}] {points}"
        if settings > 1:
            head += f", {settings} rule settings"
        lines.append(head)
        if p.not_judged:
            lines.append(
                f"  not judged (added before findings were kept): {plural(len(p.not_judged), 'point')}, "
                f"{_named_runs(p.not_judged)}"
            )
        lines += _limit_lines(p, width)
        if not p.rules:
            lines.append("  no finding at any judged point")
        for r in p.rules:
            since = f"since run {r.since_run}" + (f" (commit {r.since_commit})" if r.since_commit else "")
            lines.append(f"  {r.rule_id}: {r.state} {since}")
            for c in r.changes:
                gap = f", {c.not_judged_between} not judged between" if c.not_judged_between else ""
                lines.append(_transition_line(_finding_state(c), c, gap, width))
    return "\n".join(fit_lines(lines, width)) + "\n"


def _limit_lines(p: FindingsProfile, width: int) -> list[str]:
    """The profile's limit now and since when, then each change with the range to bisect; none kept: none."""
    have = [i for i, v in enumerate(p.limits) if v is not None]
    if not have:
        return []
    since = p.limit_changes[-1].index if p.limit_changes else have[0]
    commit = f" (commit {p.commits[since]})" if p.commits[since] else ""
    lines = [f"  limit: {p.limits[have[-1]]} since run {p.runs[since]}{commit}"]
    for c in p.limit_changes:
        gap = f", {c.not_kept_between} without a limit between" if c.not_kept_between else ""
        lines.append(_transition_line("changed", c, gap, width))
    return lines


def _transition_line(word: str, c: FindingChange | LimitChange, gap: str, width: int) -> str:
    """One transition of a rule's state or of the limit: the word, before -> after at the first new run, the
    last old run (and ``gap``), and the range to bisect (commits shortened when the full range does not fit)."""
    bisect = _finding_range(c)
    if len(bisect) + len("      (bisect ;") > width:
        bisect = _finding_range(c, short=True)
    return (
        f"    {word}: {c.before} -> {c.after} at run {c.first_new_run} (last {c.before} at run "
        f"{c.last_old_run}{gap}; bisect {bisect})"
    )


def findings_json(profiles: list[FindingsProfile]) -> str:
    """JSON: every profile with its points and each rule's states and transitions."""
    doc = {"profiles": [p.to_dict() for p in profiles]}
    return json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n"


def findings_markdown(profiles: list[FindingsProfile], severity: str = "warning") -> str:
    """A Markdown report for a pull-request comment: one table of the transitions, headed by the number of
    unacknowledged recent new findings at or above ``severity``."""
    rows = [
        [
            md.code(c.rule_id),
            md.cell(p.profile),
            md.cell(_finding_state(c)),
            md.cell(f"{c.before} → {c.after}"),
            md.code(c.first_new_run),
            md.code(_finding_range(c)),
        ]
        for p in profiles
        for r in p.rules
        for c in r.changes
    ]
    failing = sum(len(p.failing(severity)) for p in profiles)
    lines = [f"### popprof trend: {plural(failing, f'new {severity}-or-worse finding')}", ""]
    if rows:
        lines += md.table(["rule", "profile", "change", "state", "from run", "bisect"], rows)
    else:
        lines.append(f"No finding changed in {plural(len(profiles), 'profile')}.")
    changes = [
        [
            md.cell(p.profile),
            md.cell(f"{c.before} → {c.after}"),
            md.code(c.first_new_run),
            md.code(_finding_range(c)),
        ]
        for p in profiles
        for c in p.limit_changes
    ]
    if changes:
        lines += ["", "The run's limit changed:", ""]
        lines += md.table(["profile", "limit", "from run", "bisect"], changes)
    not_judged = sum(len(p.not_judged) for p in profiles)
    if not_judged:
        lines += ["", f"{plural(not_judged, 'point')} not judged (added before findings were kept)."]
    return "\n".join(lines) + "\n"


def findings_junit(profiles: list[FindingsProfile], severity: str = "warning") -> str:
    """JUnit XML: one suite per profile, one case per rule, failing on an unacknowledged recent new finding at
    or above ``severity``."""
    suites = []
    for p in profiles:
        suite = Suite(f"trend.findings.{p.profile}")
        failing = {id(c) for c in p.failing(severity)}
        for r in p.rules:
            output = findings_text([replace(p, rules=[r])])
            bad = [c for c in r.changes if id(c) in failing]
            failure = None
            if bad:
                c = bad[-1]
                failure = Failure(
                    f"{r.rule_id} {c.before} -> {c.after} from run {c.first_new_run} (bisect {_finding_range(c)})",
                    "new finding",
                    output,
                )
            suite.cases.append(Case(r.rule_id, f"trend.findings.{p.profile}", failure=failure, output=output))
        suites.append(suite)
    return render(suites, "popprof trend")
