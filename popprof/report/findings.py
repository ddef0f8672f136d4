"""Findings as text (plain or a rich table), JSON, Markdown and JUnit XML.

All renderers take the list of per-profile :class:`Findings` of one
``popprof check`` and the ``fail_on`` level, and return a string.
"""

from __future__ import annotations

import io
import re
import textwrap

from .._version import __version__
from ..io import jsonout, units
from ..io.names import short_names
from ..io.plural import plural
from ..rules.base import SEVERITIES, Finding, Findings, severity_rank
from . import junit
from . import markdown as md
from .limit_words import limit_text

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
        f"{plural(t['error'], 'error')}, {plural(t['warning'], 'warning')}, {t['info']} info, "
        f"{plural(t['not_evaluated'], 'rule')} not evaluated{verdict}"
    )


def _listing(values: list, fmt=str, n: int = 5) -> list[str]:
    """The first ``n`` of ``values`` formatted, and ``(+N more)`` for the rest."""
    shown = [fmt(v) for v in list(values)[:n]]
    return shown + ([f"(+{len(values) - n} more)"] if len(values) > n else [])


def _span(pair, where: dict) -> str:
    """A (first, last) pair of ``where``: trace times as offsets from the origin, else steps."""
    a, b = pair
    if "time_us" in where:
        origin = where.get("origin_us")
        if origin is None:  # a finding made without a trace origin: the times as the events table has them
            return f"{units.count(a)}-{units.count(b)} us"
        return f"{units.offset(a - origin)} to {units.offset(b - origin)}"
    return f"{a:,}-{b:,}"


def where_items(where: dict, limit: int = 5, short=None) -> list[tuple[str, list[str]]]:
    """A finding's location as ``(label, items)`` pairs, in a fixed order; a list of several things
    (devices, threads, phases) keeps one item per entry so text can print one per line. When a finding
    lists several phases, the worst one (``steps`` or ``time_us``) is marked among them.

    ``short`` shortens a list of program names for a table (text; JSON keeps them whole).
    """
    out: list[tuple[str, list[str]]] = []
    phases = [tuple(p) for p in where.get("phases") or []]
    # numbers (tiles, IPUs, ranks) read well on one line; devices, phases, threads and programs one a line
    if where.get("tiles"):
        out.append(("tiles", [", ".join(_listing(where["tiles"], lambda t: f"{t:,}", limit))]))
    if where.get("ipus"):
        out.append(("IPUs", [", ".join(_listing(where["ipus"], n=limit))]))
    if where.get("ranks"):
        out.append(("ranks", [", ".join(_listing(where["ranks"], n=limit))]))
    if where.get("devices"):
        out.append(("devices", _listing(where["devices"], n=limit)))
    worst = where.get("steps") or where.get("time_us")
    if len(phases) > 1:  # the worst phase is one of them: marked there, not a line of its own

        def phase(p: tuple) -> str:
            return _span(p, where) + (" (worst)" if worst is not None and p == tuple(worst) else "")

        out.append(("phases", _listing(phases, phase, limit)))
    elif where.get("steps"):
        out.append(("steps", [_span(where["steps"], {})]))
    elif where.get("time_us"):
        suffix = "" if where.get("origin_us") is None else " from the trace start"
        out.append(("time", [_span(where["time_us"], where) + suffix]))
    if where.get("liveness_steps"):
        a, b = where["liveness_steps"]
        out.append(
            ("liveness step" if a == b else "liveness steps", [f"{a:,}" if a == b else f"{a:,}-{b:,}"])
        )
    if where.get("threads"):
        out.append(("threads", _listing(where["threads"], n=limit)))
    if where.get("programs"):
        programs = list(where["programs"])
        n = min(limit, 3)
        shown = short(programs[:n]) if short else [str(p) for p in programs[:n]]
        more = [f"(+{len(programs) - n} more)"] if len(programs) > n else []
        out.append(("programs" if len(programs) > 1 else "program", shown + more))
    return out


def where_text(where: dict, limit: int = 5, short=None) -> str:
    """A compact description of a finding's location, on one line (Markdown, HTML, JUnit)."""
    return "; ".join(f"{label} {', '.join(items)}" for label, items in where_items(where, limit, short))


def _short_programs(names: list) -> list[str]:
    """Program names in a Markdown table's cell (:func:`popprof.io.names.short_names`)."""
    return short_names(names, 60)


def gain_text(finding: Finding) -> str:
    """What fixing the finding would buy at most, in words (empty when the finding has no gain):
    ``up to 12.30 ms (5.6 % of rank 0 gpu:0's window) - <basis>`` (:meth:`popprof.rules.base.Gain.text`)."""
    g = getattr(finding, "estimated_gain", None)
    return "" if g is None else g.text()


# -- text -------------------------------------------------------------------

#: Width of piped text (a log, a file) when ``COLUMNS`` does not say otherwise; docs/figures.md.
TEXT_WIDTH = 80
#: Narrowest width text is laid out for: below it the indents leave too little room.
MIN_WIDTH = 40
#: Indent of a finding's lines under its heading.
INDENT = "      "
#: On a terminal (``brief``): message and advice lines shown before the rest is cut.
BRIEF_MESSAGE_LINES = 3
BRIEF_ADVICE_LINES = 1
BRIEF_WHERE_ITEMS = 2
#: A number and its unit (``21.97 ms``, ``22.7 %``, ``24,130,123 cycles``), kept on one line by a no-break
#: space while wrapping.
_UNIT = re.compile(r"(\d) (ns|us|ms|s|%|pp|B|KiB|MiB|GiB|TiB|PiB|GB/s|TB/s|cycles)(?=[\s),;:.]|$)")
#: A figure and the figure in parentheses after it (bytes and their binary tail, ``303,260,018 B (289.2
#: MiB)``, one figure of ``units.nbytes``; a time and its share, ``723.87 ms (100.0 %)``), kept on one line
#: the same way once :data:`_UNIT` has bound each number to its unit.
_TAIL = re.compile(r"(\d\u00a0[^\s\u00a0]+) (?=\([+-]?[\d.,]+\u00a0[^\s\u00a0)]+\))")
#: What ends a line after which text was cut.
CUT = " [...]"


def skipped_line(res: Findings) -> str:
    """The rules a profile could not evaluate, folded into one line (``--show-skipped`` lists them)."""
    ids = ", ".join(rule_id for rule_id, _ in res.not_evaluated)
    return f"{plural(len(res.not_evaluated), 'rule')} not evaluated: {ids} (--show-skipped says why)"


def wrap_text(text: str, width: int, first: str, rest: str, max_lines: int | None = None) -> list[str]:
    """``text`` wrapped to ``width`` with ``first`` before its first line and ``rest`` before the others;
    words longer than a line (a C++ name) are broken. With ``max_lines``, the lines after it are cut and
    the last one kept ends in ``[...]``."""
    lines = textwrap.wrap(
        _TAIL.sub("\\1\u00a0", _UNIT.sub("\\1\u00a0\\2", text)),
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]
    lines = [line.replace("\u00a0", " ") for line in lines]
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        last, lead = lines[-1], first if max_lines == 1 else rest
        if len(last) + len(CUT) > width:
            space = last.rfind(" ", len(lead) + 1, width - len(CUT) + 1)
            last = last[:space] if space > 0 else last[: width - len(CUT)]
        lines[-1] = last + CUT
    return lines


def _where_lines(where: dict, width: int, limit: int) -> list[str]:
    items = where_items(where, limit, short=lambda names: short_names(names, max(width - 30, 30)))
    if not items:
        return []
    label_width = max(len(label) for label, _ in items)
    lines: list[str] = []
    first = f"{INDENT}where: "
    under = " " * len(first)
    for i, (label, values) in enumerate(items):
        lead = (first if i == 0 else under) + f"{label:<{label_width}} "
        pad = " " * len(lead)
        for j, value in enumerate(values):
            lines += wrap_text(value, width, lead if j == 0 else pad, pad + "  ")
    return lines


def finding_lines(f: Finding, width: int = TEXT_WIDTH, *, brief: bool = False) -> list[str]:
    """One finding as text lines no wider than ``width``: a heading (severity, rule, title), the message,
    the gain, the location (one device, thread or phase per line) and the advice.

    ``brief`` (a terminal) cuts the message and the advice to a few lines and lists fewer places."""
    width = max(width, MIN_WIDTH)
    lines = wrap_text(f"{f.severity.upper():<7} {f.rule_id}: {f.title}", width, "  ", "  " + " " * 8)
    lines += wrap_text(f.message, width, INDENT, INDENT, BRIEF_MESSAGE_LINES if brief else None)
    gain = gain_text(f)
    if gain:
        lines += wrap_text(gain, width, f"{INDENT}gain: ", INDENT + "  ", 1 if brief else None)
    lines += _where_lines(f.where, width, BRIEF_WHERE_ITEMS if brief else 5)
    if f.severity != "info" and f.advice:
        lines += wrap_text(
            f.advice, width, f"{INDENT}advice: ", INDENT + "  ", BRIEF_ADVICE_LINES if brief else None
        )
    return lines


def render_text(
    results: list[Findings],
    fail_on: str = "error",
    *,
    rich: bool = False,
    width: int = TEXT_WIDTH,
    show_skipped: bool = False,
    brief: bool | None = None,
) -> str:
    """Text no wider than ``width`` (plain, stable, for logs and pipes; coloured for a terminal when
    ``rich``). ``brief`` (by default on a terminal) cuts long messages and advice to a few lines and
    says so at the end; piped text keeps every word.

    Rules not evaluated are one line per profile unless ``show_skipped`` lists each with its reason.
    """
    width = max(width, MIN_WIDTH)
    brief = rich if brief is None else brief
    lines: list[str] = []
    headings: list[int] = []  # lines that open a finding: its severity coloured on a terminal
    dim: set[int] = set()  # advice and rules not evaluated: dimmed on a terminal
    cut = False
    for res in results:
        title = f"{res.profile_name} ({res.source})" if res.source else res.profile_name
        lines += wrap_text(title, width, "", "  ")
        if res.limit:
            lines += wrap_text(limit_text(res.limit, lead="limit: "), width, "  ", "    ")
        if not res.items:
            lines.append("  no findings")
        for f in res.items:
            headings.append(len(lines))
            full = finding_lines(f, width)
            shown = finding_lines(f, width, brief=True) if brief else full
            cut = cut or shown != full
            advice = next(
                (i for i, line in enumerate(shown) if line.startswith(f"{INDENT}advice: ")), len(shown)
            )
            dim.update(range(len(lines) + advice, len(lines) + len(shown)))
            lines += shown
        skipped_from = len(lines)
        if show_skipped:
            for rule_id, reason in res.not_evaluated:
                lines += wrap_text(f"not evaluated: {reason}", width, f"  SKIPPED {rule_id}: ", INDENT)
        elif res.not_evaluated and brief:
            lines += wrap_text(
                f"{plural(len(res.not_evaluated), 'rule')} not evaluated (--show-skipped)",
                width,
                "  SKIPPED ",
                INDENT,
            )
        elif res.not_evaluated:
            lines += wrap_text(skipped_line(res), width, "  SKIPPED ", INDENT)
        dim.update(range(skipped_from, len(lines)))
        lines.append("")
    lines += wrap_text(_summary_line(results, fail_on), width, "", "  ")
    if cut:
        lines += wrap_text(
            "[...]: cut to fit the terminal (--full shows all)",
            width,
            "",
            "",
        )
    if rich:
        return _colour(lines, headings, dim, width)
    return "\n".join(lines) + "\n"


def _colour(lines: list[str], headings: list[int], dim: set[int], width: int) -> str:
    """The text lines with each finding's severity coloured, for a terminal (nothing in a line is markup)."""
    from rich.console import Console
    from rich.text import Text

    styles = {"ERROR": "bold red", "WARNING": "yellow", "INFO": "cyan"}
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=width, soft_wrap=True, highlight=False)
    heading = set(headings)
    for i, line in enumerate(lines):
        text = Text(line)
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if i in heading and word in styles:
            text.stylize(styles[word], 2, 2 + len(word))
        elif i in dim:
            text.stylize("dim")
        console.print(text)
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
        if res.limit:
            out += [md.cell(limit_text(res.limit)), ""]
        if res.items:
            priced = any(f.estimated_gain is not None for f in res.items)  # a gain column only then
            out += md.table(
                ["severity", "rule", "finding", *(["estimated gain"] if priced else []), "where"],
                [
                    [
                        f"**{f.severity}**",
                        md.code(f.rule_id),
                        md.cell(f.message),
                        *([md.cell(gain_text(f))] if priced else []),
                        md.cell(where_text(f.where, short=_short_programs)),
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
                    "\n\n".join(_failure_text(f) for f in bad),
                )
            rest = [f for f in found if not any(f is b for b in bad)]  # by identity: == compares evidence
            if rest:
                case.output = "\n".join(f"[{f.severity}] {f.message}" for f in rest)
        suites.append(suite)
    return suites


def _failure_text(f: Finding) -> str:
    """A failing finding in a JUnit failure's text: the message, its gain when priced, where, the advice."""
    gain = gain_text(f)
    return "\n".join(
        [
            f"[{f.severity}] {f.message}",
            *([f"gain: {gain}"] if gain else []),
            f"where: {where_text(f.where)}",
            f"advice: {f.advice}",
        ]
    )


def render_junit(results: list[Findings], fail_on: str = "error") -> str:
    """JUnit XML (see :mod:`popprof.report.junit`): one testsuite per profile, one testcase per rule."""
    return junit.render(junit_suites(results, fail_on), "popprof check")


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown, "junit": render_junit}
