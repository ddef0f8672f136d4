"""Findings as text (plain or a rich table), JSON, Markdown and JUnit XML.

All renderers take the list of per-profile :class:`Findings` of one
``popprof check`` and the ``fail_on`` level, and return a string.
"""

from __future__ import annotations

import io

from .._version import __version__
from ..io import jsonout, units
from ..rules.base import SEVERITIES, Finding, Findings, severity_rank
from . import junit
from . import markdown as md

#: Identifies the JSON layout; bump on incompatible changes.
JSON_SCHEMA = "popprof.findings/1"
FAIL_ON = ("info", "warning", "error", "never")


def failing(findings: Findings, fail_on: str) -> list[Finding]:
    """Findings at or above ``fail_on`` (none for ``never``)."""
    return [] if fail_on == "never" else findings.at_least(fail_on)


def failed(results: list[Findings], fail_on: str) -> bool:
    """Whether any profile has a finding at or above ``fail_on``."""
    return any(failing(f, fail_on) for f in results)


def totals(results: list[Findings]) -> dict[str, int]:
    """Counts of findings per severity, and of rules not evaluated, over all profiles."""
    out = dict.fromkeys(SEVERITIES, 0)
    for f in results:
        for sev, n in f.counts().items():
            out[sev] += n
    out["not_evaluated"] = sum(len(f.not_evaluated) for f in results)
    return out


def _summary_line(results: list[Findings], fail_on: str) -> str:
    t = totals(results)
    verdict = (
        ""
        if fail_on == "never"
        else (f"; fail-on {fail_on}: " + ("FAILED" if failed(results, fail_on) else "passed"))
    )
    return (
        f"{t['error']} error(s), {t['warning']} warning(s), {t['info']} info, "
        f"{t['not_evaluated']} rule(s) not evaluated{verdict}"
    )


def where_text(where: dict, limit: int = 5) -> str:
    """A compact description of a finding's location."""

    def listing(values: list, fmt=str, n: int = limit) -> str:
        shown = ", ".join(fmt(v) for v in list(values)[:n])
        return shown + (f" (+{len(values) - n} more)" if len(values) > n else "")

    parts = []
    if where.get("tiles"):
        parts.append("tiles " + listing(where["tiles"], lambda t: f"{t:,}"))
    if where.get("ipus"):
        parts.append("IPUs " + listing(where["ipus"]))
    if where.get("ranks"):
        parts.append("ranks " + listing(where["ranks"]))
    if where.get("devices"):
        parts.append("devices " + listing(where["devices"]))
    if where.get("steps"):
        a, b = where["steps"]
        parts.append(f"steps {a:,}-{b:,}")
    if where.get("liveness_steps"):
        a, b = where["liveness_steps"]
        parts.append(f"liveness step {a:,}" if a == b else f"liveness steps {a:,}-{b:,}")
    if where.get("time_us"):
        a, b = where["time_us"]
        origin = where.get("origin_us")
        if origin is None:  # a finding made without a trace origin: the times as the events table has them
            parts.append(f"time {units.count(a)}-{units.count(b)} us")
        else:
            parts.append(
                f"time {units.offset(a - origin)} to {units.offset(b - origin)} from the trace start"
            )
    if where.get("threads"):
        parts.append("threads " + listing(where["threads"]))
    if where.get("programs"):
        parts.append(
            "programs " + listing(where["programs"], n=3)
            if len(where["programs"]) > 1
            else f"program {where['programs'][0]}"
        )
    return "; ".join(parts)


# -- text -------------------------------------------------------------------


def skipped_line(res: Findings) -> str:
    """The rules a profile could not evaluate, folded into one line (``--show-skipped`` lists them)."""
    ids = ", ".join(rule_id for rule_id, _ in res.not_evaluated)
    return f"{len(res.not_evaluated)} rule(s) not evaluated: {ids} (--show-skipped says why)"


def render_text(
    results: list[Findings],
    fail_on: str = "error",
    *,
    rich: bool = False,
    width: int = 120,
    show_skipped: bool = False,
) -> str:
    """Plain text (stable, for logs and pipes), or a rich table for a terminal when ``rich``.

    Rules not evaluated are one line per profile unless ``show_skipped`` lists each with its reason.
    """
    if rich:
        return _render_rich(results, fail_on, width, show_skipped)
    lines: list[str] = []
    for res in results:
        lines.append(f"{res.profile_name} ({res.source})" if res.source else res.profile_name)
        if not res.items:
            lines.append("  no findings")
        for f in res.items:
            lines.append(f"  {f.severity.upper():<8} {f.rule_id:<22} {f.message}")
            where = where_text(f.where)
            if where:
                lines.append(f"  {'':<8} {'':<22} where: {where}")
            if f.severity != "info" and f.advice:
                lines.append(f"  {'':<8} {'':<22} advice: {f.advice}")
        if show_skipped:
            for rule_id, reason in res.not_evaluated:
                lines.append(f"  {'SKIPPED':<8} {rule_id:<22} not evaluated: {reason}")
        elif res.not_evaluated:
            lines.append(f"  {'SKIPPED':<8} {skipped_line(res)}")
        lines.append("")
    lines.append(_summary_line(results, fail_on))
    return "\n".join(lines) + "\n"


def _render_rich(results: list[Findings], fail_on: str, width: int, show_skipped: bool) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    styles = {"error": "bold red", "warning": "yellow", "info": "cyan"}
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=width)
    for res in results:
        table = Table(title=escape(res.profile_name), title_justify="left", show_lines=True, expand=True)
        table.add_column("severity", no_wrap=True)
        table.add_column("rule", no_wrap=True)
        table.add_column("finding", ratio=3)
        table.add_column("where", ratio=1)
        for f in res.items:
            text = escape(f.message) + (
                f"\n[dim]{escape(f.advice)}[/dim]" if f.severity != "info" and f.advice else ""
            )
            table.add_row(
                f"[{styles[f.severity]}]{f.severity}[/]", f.rule_id, text, escape(where_text(f.where))
            )
        if not res.items:
            table.add_row("[green]ok[/green]", "", "no findings", "")
        console.print(table)
        if res.not_evaluated and not show_skipped:  # compact, below the table: these are not findings
            console.print(f"[dim]{escape(skipped_line(res))}[/dim]")
        elif res.not_evaluated:
            console.print("[dim]not evaluated:[/dim]")
            for rule_id, reason in res.not_evaluated:
                console.print(f"[dim]  {rule_id}: {escape(reason)}[/dim]")
    console.print(_summary_line(results, fail_on))
    return buffer.getvalue()


# -- JSON -------------------------------------------------------------------


def to_json_dict(results: list[Findings], fail_on: str = "error") -> dict:
    """The documented JSON structure (see docs/rules.md)."""
    return {
        "schema": JSON_SCHEMA,
        "tool_version": __version__,
        "fail_on": fail_on,
        "failed": failed(results, fail_on),
        "totals": totals(results),
        "profiles": [r.to_dict() for r in results],
    }


def render_json(results: list[Findings], fail_on: str = "error") -> str:
    """Findings as indented JSON (NaN becomes null)."""
    return jsonout.dumps(to_json_dict(results, fail_on))


# -- Markdown ---------------------------------------------------------------


def render_markdown(results: list[Findings], fail_on: str = "error") -> str:
    """Markdown for pull-request comments: a table of findings per profile, skipped rules folded away."""
    out = ["## popprof check", "", f"**{_summary_line(results, fail_on)}**", ""]
    for res in results:
        out += [f"### {md.code(res.profile_name)}", ""]
        if res.items:
            out += md.table(
                ["severity", "rule", "finding", "where"],
                [
                    [
                        f"**{f.severity}**",
                        md.code(f.rule_id),
                        md.cell(f.message),
                        md.cell(where_text(f.where)),
                    ]
                    for f in res.items
                ],
            )
        else:
            out.append("No findings.")
        out.append("")
        advice = {f.rule_id: f.advice for f in res.items if f.severity != "info" and f.advice}
        if advice:
            out += ["<details><summary>advice</summary>", ""]
            out += [f"- {md.code(rid)}: {md.cell(text)}" for rid, text in advice.items()]
            out += ["", "</details>", ""]
        if res.not_evaluated:
            out += [f"<details><summary>not evaluated ({len(res.not_evaluated)})</summary>", ""]
            out += [f"- {md.code(rid)}: {md.cell(reason)}" for rid, reason in res.not_evaluated]
            out += ["", "</details>", ""]
    return "\n".join(out)


# -- JUnit ------------------------------------------------------------------


def junit_suites(results: list[Findings], fail_on: str = "error") -> list[junit.Suite]:
    """One JUnit suite per profile, one case per rule.

    A rule fails when it has a finding at or above ``fail_on``; it is skipped
    when not evaluated; findings below ``fail_on`` are in its system-out.
    """
    suites = []
    for res in results:
        suite = junit.Suite(res.profile_name)
        reasons = dict(res.not_evaluated)
        for rule_id in dict.fromkeys([*res.evaluated, *reasons]):
            case = junit.Case(rule_id, f"popprof.check.{res.profile_name}")
            suite.cases.append(case)
            if rule_id in reasons:
                case.skipped = f"not evaluated: {reasons[rule_id]}"
                continue
            found = res.by_rule(rule_id)
            bad = [
                f for f in found if fail_on != "never" and severity_rank(f.severity) >= severity_rank(fail_on)
            ]
            if bad:
                worst = max(bad, key=lambda f: severity_rank(f.severity))
                case.failure = junit.Failure(
                    worst.message,
                    worst.severity,
                    "\n\n".join(
                        f"[{f.severity}] {f.message}\nwhere: {where_text(f.where)}\nadvice: {f.advice}"
                        for f in bad
                    ),
                )
            rest = [f for f in found if not any(f is b for b in bad)]  # by identity: == compares evidence
            if rest:
                case.output = "\n".join(f"[{f.severity}] {f.message}" for f in rest)
        suites.append(suite)
    return suites


def render_junit(results: list[Findings], fail_on: str = "error") -> str:
    """JUnit XML (see :mod:`popprof.report.junit`): one testsuite per profile, one testcase per rule."""
    return junit.render(junit_suites(results, fail_on), "popprof check")


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown, "junit": render_junit}
