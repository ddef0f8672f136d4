"""Render a :class:`ProfileDiff` (and optionally a :class:`GateResult`) as text, JSON, Markdown or JUnit XML."""

from __future__ import annotations

import pandas as pd

from ..compare.core import ProfileDiff
from ..compare.document import liveness_changed, to_dict
from ..compare.gate import GateResult
from ..io import jsonout, units
from ..io.names import names_apart
from ..io.plural import plural
from . import junit
from . import markdown as md
from .diff_blocks import (
    device_memory_changed_material,
    explanation_lines,
    markdown_device_memory_changed,
    markdown_memory_changed,
    markdown_what_changed,
    memory_changed_material,
    tile_rows,
    what_changed_material,
    whole_number,
)
from .fit import WIDTH, fit_lines
from .text_table import table

#: Widest program or event name in a diff table (the full name stays in the JSON): a line of its own at 80
#: columns when the figures leave it too little room beside them.
DIFF_NAME_WIDTH = 76


def _on(frame: pd.DataFrame) -> list[str]:
    """The header of the events' host / device column, when the frame has one (programs have none)."""
    return ["on"] if "where" in frame.columns else []


def where_cells(row: object) -> list[str]:
    """An events row's ``host`` / ``device`` / ``both`` cell, none for a program's row."""
    where = getattr(row, "where", None)
    return [] if where is None else [str(where)]


def _text_value(amount: object, unit: str, signed: bool = False) -> str:
    """A figure of the text's tables: bytes in their binary unit to 4 significant figures (``406.3 KiB``,
    ``+16 KiB``: :func:`~popprof.io.units.bytes_figures`) so that a byte row fits 80 columns on one line, any
    other unit as everywhere (:func:`~popprof.io.units.value`); the exact bytes are in the JSON and Markdown."""
    if unit == "bytes":
        return units.bytes_figures(amount, signed=signed, missing="" if signed else units.MISSING)
    return units.change(amount, unit) if signed else units.value(amount, unit)


def metric_rows(result: ProfileDiff, include_unchanged: bool, width: int | None = None) -> list[list[str]]:
    """The metrics table's rows; with ``width`` (the text's), a wider name (a family member named by its source:
    an annotation's, a counter's) shortened as the events' names are, told apart from the others, and bytes to 4
    significant figures (:func:`_text_value`; the JSON and Markdown keep every name and byte count whole)."""
    rows = []
    frame = result.changed_metrics(include_unchanged)
    names = (
        frame["name"].tolist() if width is None else names_apart(frame["name"], result.metrics["name"], width)
    )
    for r, name in zip(frame.itertuples(index=False), names, strict=True):
        if r.status in ("missing_base", "missing_new"):
            mark = "not in base" if r.status == "missing_base" else "not in new"
        else:
            mark = {"added": "added", "removed": "removed"}.get(r.status, "")
            if _truth(r.worse):
                mark = (mark + " worse").strip()
            elif r.worse is not None and not pd.isna(r.worse) and r.status != "unchanged":
                mark = (mark + " better").strip()
        if width is None:
            figures = [
                units.value(r.base, r.unit),
                units.value(r.new, r.unit),
                units.change(r.abs_change, r.unit),
            ]
        else:
            figures = [
                _text_value(r.base, r.unit),
                _text_value(r.new, r.unit),
                _text_value(r.abs_change, r.unit, signed=True),
            ]
        rows.append([name, *figures, units.relative(r.rel_change), mark])
    return rows


def _truth(value: object) -> bool:
    return value is not None and not pd.isna(value) and bool(value)


def named_summary(frame: pd.DataFrame) -> str:
    """A programs or events section's rows counted by status: ``103 grown, 0 shrunk, ...``."""
    counts = frame["status"].value_counts()
    return ", ".join(
        f"{int(counts.get(s, 0)):,} {s}" for s in ("grown", "shrunk", "added", "removed", "unchanged")
    )


def occurrences(value: object) -> str:
    """An occurrence count: whole when it is (totals), else with two decimals (per step / per run)."""
    if value is None or pd.isna(value):
        return ""
    return f"{int(value):,}" if float(value).is_integer() else f"{float(value):,.2f}"


def render_text(
    result: ProfileDiff,
    gate_result: GateResult | None = None,
    *,
    include_unchanged: bool = False,
    top: int = 10,
    width: int = WIDTH,
) -> str:
    """The terminal report: changed metrics biggest relative change first, then tiles, programs, events; laid
    out for ``width`` columns (``report/fit.py``)."""
    lines = [f"popprof diff: base {result.base_name!r} -> new {result.new_name!r}"]
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"basis: {b.describe()}" for b in result.basis.values()]
    lines.append("")
    lines += [*explanation_lines(result, width), ""]
    rows = metric_rows(result, include_unchanged, width - 2)
    hidden = int((result.metrics["status"] == "unchanged").sum()) if not include_unchanged else 0
    if rows:
        lines += table(rows, ["metric", "base", "new", "change", "rel", ""], {1, 2, 3, 4}, width)
    else:
        lines.append("  no metric changed")
    if hidden:
        lines.append(f"  ({plural(hidden, 'unchanged metric')} hidden; --all shows them)")

    neither = [k for k, reason in result.unavailable.items() if reason.startswith("neither profile has")]

    def unavailable(section: str) -> list[str]:
        """One profile lacks the section: say which and why (neither: one line at the end says so)."""
        if section in neither:
            return []
        return ["", f"{section}: unavailable: {result.unavailable[section]}"]

    if "tiles" in result.unavailable:
        lines += unavailable("tiles")
    else:
        changed = int((result.tiles["change_bytes"].fillna(0) != 0).sum())
        lines += [
            "",
            f"tiles: {changed:,} of {len(result.tiles):,} compared tiles changed memory (including gaps)",
        ]
        top_tiles = result.top_tiles(top)
        if len(top_tiles):
            lines += table(
                [
                    [
                        whole_number(t.tile),
                        whole_number(t.ipu),
                        _text_value(t.base_bytes, "bytes"),
                        _text_value(t.new_bytes, "bytes"),
                        _text_value(t.change_bytes, "bytes", signed=True),
                        units.relative(t.rel_change),
                    ]
                    for t in top_tiles.itertuples(index=False)
                ],
                ["tile", "ipu", "base", "new", "change", "rel"],
                {0, 1, 2, 3, 4, 5},
                width,
            )
        if len(result.ipus) > 1 or (len(result.ipus) and result.ipus["change_bytes"].isna().any()):
            lines += ["", "per IPU:"]
            lines += table(
                [
                    [
                        whole_number(r.ipu),
                        _text_value(_f(r.base_bytes), "bytes"),
                        _text_value(_f(r.new_bytes), "bytes"),
                        _text_value(_f(r.change_bytes), "bytes", signed=True),
                        whole_number(r.base_tiles_out_of_memory),
                        whole_number(r.new_tiles_out_of_memory),
                    ]
                    for r in result.ipus.itertuples(index=False)
                ],
                ["ipu", "base", "new", "change", "base OOM", "new OOM"],
                {0, 1, 2, 3, 4, 5},
                width,
            )

    for section, label, unit in (
        ("programs", "programs (steps by program name, IPU-cycles)", ""),
        ("events", "events (by name, total duration)", "us"),
    ):
        if section in result.unavailable:
            lines += unavailable(section)
            continue
        frame = getattr(result, section)
        lines += ["", f"{label}: {named_summary(frame)} (unchanged within {result.tolerance * 100:g} %)"]
        top_named = result.top_named(section, top)
        if len(top_named):
            lines += table(
                [
                    [
                        name,
                        occurrences(r.base_count),
                        occurrences(r.new_count),
                        units.value(_f(r.base_total), unit),
                        units.value(_f(r.new_total), unit),
                        units.change(r.change, unit),
                        units.relative(r.rel_change),
                        r.status,
                        *where_cells(r),
                    ]
                    for name, r in zip(
                        names_apart(top_named["name"], frame["name"], DIFF_NAME_WIDTH),
                        top_named.itertuples(index=False),
                        strict=True,
                    )
                ],
                [
                    "name",
                    "base n",
                    "new n",
                    "base total",
                    "new total",
                    "change",
                    "rel",
                    "status",
                    *_on(top_named),
                ],
                {1, 2, 3, 4, 5, 6},
                width,
            )

    if "liveness" in result.unavailable:
        lines += unavailable("liveness")
    else:
        lv = result.liveness
        changed = liveness_changed(lv)
        lines += ["", f"liveness: {changed:,} of {len(lv):,} steps changed not-always-live bytes"]
        if changed:
            worst = lv.loc[lv["change_bytes"].astype("float64").abs().idxmax()]
            lines.append(
                f"  largest change at step {int(worst['step'])} ({worst['program']}): "
                f"{units.change(float(worst['change_bytes']), 'bytes')}"
            )
    if neither:
        lines += ["", f"not in either profile: {', '.join(neither)} (--format json says what each needs)"]
    if gate_result is not None:
        lines += ["", *render_gate_text(gate_result)]
    return "\n".join(fit_lines(lines, width)) + "\n"


def _f(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def render_gate_text(gate_result: GateResult) -> list[str]:
    """The gate's verdict, each violation and each gap, one per line."""
    lines = [gate_result.verdict + f" [{gate_result.budget_source}]"]
    lines += [f"  FAIL {v}" for v in gate_result.violations["message"]]
    lines += [
        f"  GAP  {g.metric}: {g.reason} (budget {g.pattern})"
        for g in gate_result.gaps.itertuples(index=False)
    ]
    if gate_result.unknown_patterns:
        lines.append(
            f"  warning: {'budget patterns' if len(gate_result.unknown_patterns) > 1 else 'a budget pattern'} "
            "matching no known metric (typo?): " + ", ".join(gate_result.unknown_patterns)
        )
    if gate_result.not_applicable:
        lines.append(f"  not applicable (neither profile has them): {', '.join(gate_result.not_applicable)}")
    return lines


# -- JSON ---------------------------------------------------------------------


def render_json(
    result: ProfileDiff, gate_result: GateResult | None = None, *, top: int = 10, **_: object
) -> str:
    """The diff as indented JSON."""
    return jsonout.dumps(to_dict(result, gate_result, top=top))


# -- Markdown -----------------------------------------------------------------


def render_markdown(
    result: ProfileDiff,
    gate_result: GateResult | None = None,
    *,
    include_unchanged: bool = False,
    top: int = 10,
) -> str:
    """A pull-request comment: verdict line, changed metrics table, top tiles and programs."""
    if gate_result is None:
        verdict = "**popprof diff**"
    elif gate_result.passed:
        verdict = "**popprof gate: PASS** :white_check_mark:"
    else:
        verdict = "**popprof gate: FAIL** :x:"
    lines = [f"{verdict} {md.code(result.base_name)} → {md.code(result.new_name)}"]
    if gate_result is not None:
        lines[0] += f" — {gate_result.verdict.split(': ', 1)[1]}"
        lines.append("")
        lines += [f"- :x: {md.cell(m)}" for m in gate_result.violations["message"]]
        lines += [
            f"- :grey_question: gap: {md.code(g.metric)}: {md.cell(g.reason)}"
            for g in gate_result.gaps.itertuples()
        ]
    if result.notes or result.basis:
        lines += [
            "",
            *[f"> note: {md.cell(n)}" for n in result.notes],
            *[f"> basis: {md.cell(b.describe())}" for b in result.basis.values()],
        ]
    lines += ["", *markdown_what_changed(result)]
    memory = markdown_memory_changed(result)
    lines += ["", *memory] if memory else []
    device = markdown_device_memory_changed(result)
    lines += ["", *device] if device else []
    rows = metric_rows(result, include_unchanged)
    lines.append("")
    if rows:
        lines += md.table(
            ["metric", "base", "new", "change", "rel", ""],
            [[md.code(r[0]), *r[1:]] for r in rows],
            right={1, 2, 3, 4},
        )
    else:
        lines.append("No metric changed.")
    if "tiles" not in result.unavailable and len(result.top_tiles(top)):
        lines += ["", f"<details><summary>Top {top} tiles by memory change</summary>", ""]
        lines += md.table(["tile", "ipu", "base", "new", "change"], tile_rows(result, top), right=range(5))
        lines += ["", "</details>"]
    for section, unit in (("programs", ""), ("events", "us")):
        if section in result.unavailable:
            continue
        top_named = result.top_named(section, top)
        if not len(top_named):
            continue
        lines += [
            "",
            f"<details><summary>{section.title()}: {named_summary(getattr(result, section))}</summary>",
            "",
        ]
        lines += md.table(
            ["name", "base n", "new n", "change", "rel", "status", *_on(top_named)],
            [
                [
                    md.code(name),
                    occurrences(r.base_count),
                    occurrences(r.new_count),
                    units.change(r.change, unit),
                    units.relative(r.rel_change),
                    r.status,
                    *where_cells(r),
                ]
                for name, r in zip(
                    names_apart(top_named["name"], getattr(result, section)["name"], DIFF_NAME_WIDTH),
                    top_named.itertuples(index=False),
                    strict=True,
                )
            ],
            right={1, 2, 3, 4},
        )
        lines += ["", "</details>"]
    unavailable = [f"- {section}: {md.cell(reason)}" for section, reason in result.unavailable.items()]
    if unavailable:
        lines += ["", "<details><summary>Not compared</summary>", "", *unavailable, "", "</details>"]
    return "\n".join(lines) + "\n"


# -- JUnit --------------------------------------------------------------------


#: the units of the figures whose gate failure carries "What changed" in its JUnit details (a time, the
#: cycles of an IPU run, a share of the time); a ``memory.`` figure is never one of them
TIME_UNITS = frozenset({"us", "cycles", "share"})
#: the prefix and units of the figures whose gate failure carries "What changed in memory": ``memory.*_bytes``
#: (all tiles', the fullest tile's, the liveness peaks, a category's), the shares of memory the block's figures
#: make (``memory.gap_share``: the gaps of the total; ``memory.max_tile_utilisation``: the fullest tile of its
#: capacity) and the count of tiles out of memory (the fullest tile's change shows why); not a tile index or
#: the liveness peak's step
MEMORY_PREFIX, MEMORY_UNITS = "memory.", frozenset({"bytes", "share", "tiles"})
#: the figure whose gate failure carries "What changed in device memory"
DEVICE_MEMORY_PEAK = "trace.device_memory_peak_bytes"


def junit_block(name: str, unit: object) -> str | None:
    """Which block a failure of the figure ``name`` (of ``unit``) carries in its JUnit details: ``"time"``,
    ``"memory"``, ``"device memory"`` (the GPU allocator's peak) or None (a count of something else, a tile
    index, a step)."""
    if name == DEVICE_MEMORY_PEAK:
        return "device memory"
    if name.startswith(MEMORY_PREFIX):
        return "memory" if unit in MEMORY_UNITS else None
    return "time" if unit in TIME_UNITS else None


def render_junit(result: ProfileDiff, gate_result: GateResult | None = None, **_: object) -> str:
    """JUnit XML document for one diff (see :func:`junit_suite`)."""
    return junit.render([junit_suite(result, gate_result)], _junit_root(gate_result is not None))


def _junit_root(gated: bool) -> str:
    return "popprof gate" if gated else "popprof diff"


def junit_suite(
    result: ProfileDiff, gate_result: GateResult | None = None, engine: str | None = None
) -> junit.Suite:
    """One JUnit suite: a test case per budgeted metric (failure = over budget, skipped = gap).

    Without a gate, one passing test case per metric that changed, for the record.
    """
    suite_name = "popprof.gate" if gate_result is not None else "popprof.diff"
    if engine:
        suite_name += f".{engine}"
    suite = junit.Suite(suite_name)
    if gate_result is not None:
        by_metric: dict[str, list[str]] = {}
        for v in gate_result.violations.itertuples(index=False):
            by_metric.setdefault(v.metric, []).append(v.message)
        units_of = dict(zip(result.metrics["name"], result.metrics["unit"], strict=True))
        # a time figure's failure says where the time went, a memory figure's where the bytes went
        blocks = {
            "time": what_changed_material,
            "memory": memory_changed_material,
            "device memory": device_memory_changed_material,
        }
        why: dict[str, list[str]] = {}
        for c in gate_result.checks.itertuples(index=False):
            case = junit.Case(c.metric, suite_name)
            if c.result == "fail":
                message = "; ".join(by_metric.get(c.metric, []))
                details = message
                block = junit_block(c.metric, units_of.get(c.metric))
                if block is not None:
                    if block not in why:
                        why[block] = blocks[block](result)
                    details = "\n".join([message, "", *why[block]]) if why[block] else message
                case.failure = junit.Failure(message, "budget", details)
            elif c.result == "gap":
                reason = gate_result.gaps.loc[gate_result.gaps["metric"] == c.metric, "reason"]
                text = f"gap: {reason.iloc[0] if len(reason) else 'missing'} (budget {c.budget})"
                if gate_result.strict:
                    case.failure = junit.Failure(text, "gap")
                else:
                    case.skipped = text
            suite.cases.append(case)
    else:
        for r in result.changed_metrics().itertuples(index=False):
            text = (
                f"{units.value(r.base, r.unit)} -> {units.value(r.new, r.unit)} "
                f"{units.relative(r.rel_change)}"
            ).strip()
            suite.cases.append(junit.Case(r.name, suite_name, output=text))
    return suite


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown, "junit": render_junit}


def render(
    result: ProfileDiff,
    gate_result: GateResult | None = None,
    fmt: str = "text",
    *,
    include_unchanged: bool = False,
    top: int = 10,
    width: int = WIDTH,
) -> str:
    """Render in ``fmt`` (text, json, markdown or junit); text laid out for ``width`` columns."""
    if fmt == "json":
        return render_json(result, gate_result, top=top)
    if fmt == "junit":
        return render_junit(result, gate_result)
    if fmt == "text":
        return render_text(result, gate_result, include_unchanged=include_unchanged, top=top, width=width)
    return RENDERERS[fmt](result, gate_result, include_unchanged=include_unchanged, top=top)


def render_many(
    results: list[tuple[str, ProfileDiff, GateResult | None]],
    fmt: str = "text",
    *,
    notes: list[str] = (),
    include_unchanged: bool = False,
    top: int = 10,
    width: int = WIDTH,
) -> str:
    """Render one or several (engine, diff, gate) results; several come from two run directories. Text is
    laid out for ``width`` columns."""
    if len(results) == 1 and not notes:
        _, result, gate_result = results[0]
        return render(result, gate_result, fmt, include_unchanged=include_unchanged, top=top, width=width)
    if fmt == "json":
        doc = {
            "notes": list(notes),
            "passed": all(g.passed for _, _, g in results if g is not None),
            "engines": {name: to_dict(r, g, top=top) for name, r, g in results},
        }
        return jsonout.dumps(doc)
    if fmt == "junit":
        gated = any(g is not None for _, _, g in results)
        return junit.render([junit_suite(r, g, name) for name, r, g in results], _junit_root(gated))
    parts = []
    if fmt == "markdown":
        parts += [f"> note: {md.cell(n)}\n" for n in notes]
        for name, r, g in results:
            parts.append(
                f"#### Engine {md.code(name)}\n\n"
                + render_markdown(r, g, include_unchanged=include_unchanged, top=top)
            )
    else:
        parts += [f"note: {n}\n" for n in notes]
        for name, r, g in results:
            parts.append(
                f"=== engine {name!r} ===\n"
                + render_text(r, g, include_unchanged=include_unchanged, top=top, width=width)
            )
    return "\n".join(parts)
