"""One self-contained HTML report of profiles: summary, findings and plots, to attach to a bug.

The file needs nothing but a browser: styles are inline, plots are embedded as
base64 PNG (or inline SVG), and no script, font or image is fetched from
anywhere. Every piece of text that comes from a profile (program names,
messages, metadata) is HTML-escaped.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from .._version import __version__
from ..io import units, words
from ..io.atomic import write_text_atomic
from ..io.plural import plural
from ..metrics.account import PART_WORDS
from ..model.errors import PopprofError
from ..model.profile import Profile
from .findings import gain_text, where_text
from .gpu_analyses import skew_share
from .host_threads import shown_threads
from .summary import (
    IDLE_NOTE,
    accelerator,
    device_labels,
    device_window,
    steps_left_out,
    whole_work_text,
)

#: Metrics shown in the summary table, in order (others are in the "all metrics" details).
KEY_METRICS: tuple[str, ...] = (
    "memory.total_incl_gaps_bytes",
    "memory.max_tile_incl_gaps_bytes",
    "memory.max_tile_index",
    "memory.max_tile_utilisation",
    "memory.tiles_out_of_memory",
    "memory.always_live_bytes",
    "memory.peak_liveness_bytes",
    "memory.peak_liveness_step",
    "memory.gap_share",
    "execution.total_cycles",
    "execution.total_time_us",
    "execution.step_count",
    "execution.exchange_and_sync_share",
    "execution.share.host_io",
    "trace.span_us",
    "trace.event_count",
    "trace.thread_count",
    "trace.device_busy_us",
    "trace.device_idle_share",
    "trace.device_window_idle_share",
    "trace.device_idle_us",
)

TARGET_FIELDS: tuple[tuple[str, str], ...] = (
    ("source_format", "source format"),
    ("ipu_arch", "IPU architecture"),
    ("num_ipus", "IPUs"),
    ("tiles_per_ipu", "tiles per IPU"),
    ("num_tiles", "tiles"),
    ("bytes_per_tile", "bytes per tile"),
    ("clock_hz", "clock"),
    ("num_replicas", "replicas"),
    ("poplar_version", "Poplar version"),
)

#: What a table cell shows for a figure the profile does not have.
MISSING = "—"

SEVERITY_COLOURS = {"error": "#b71c1c", "warning": "#e65100", "info": "#1565c0"}


def style() -> str:
    """The report's stylesheet (package data, shared with the pilot report)."""
    from .templating import template_text

    return template_text("style.css")


def _e(value: object) -> str:
    """HTML-escape any value as text."""
    return html.escape("" if value is None else str(value), quote=True)


def _units() -> Callable[[str], str]:
    from ..metrics import METRICS

    units = {name: m.unit for name, m in METRICS.items()}

    def unit_of(name: str) -> str:
        return units.get(name) or next(
            (m.unit for p, m in METRICS.items() if m.family and name.startswith(p)), ""
        )

    return unit_of


def _target_rows(profile: Profile) -> list[tuple[str, str]]:
    rows = []
    for column, label in TARGET_FIELDS:
        value = profile.target_value(column)
        if value is not None:
            if column == "clock_hz":
                text = f"{float(value) / 1e9:.2f} GHz"
            elif isinstance(value, numbers.Real) and float(value).is_integer():
                text = f"{int(value):,}"
            else:
                text = str(value)
            rows.append((label, text))
    return rows


def _metric_rows(
    values: Mapping[str, float | None],
) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    unit_of = _units()
    key = [
        (n, units.value(values[n], unit_of(n), missing=MISSING))
        for n in KEY_METRICS
        if values.get(n) is not None
    ]
    every = [
        (n, units.value(v, unit_of(n), missing=MISSING), unit_of(n))
        for n, v in values.items()
        if v is not None
    ]
    return key, every


def _profile_part(profile: Profile, index: int = 1, **parts: Any) -> dict:
    """What the profile template shows of one profile; ``parts`` gives summary, findings and plots."""
    from ..metrics import compute

    key, every = _metric_rows(compute(profile))
    summary = parts.get("summary") or {}
    plots, memory_figure = beside_tables(parts.get("plots"))
    devices = summary.get("devices") or (summary.get("trace") or {}).get("devices") or []
    return {
        "anchor": f"profile-{index}",
        "name": profile.name,
        "source": profile.source,
        "target_rows": _target_rows(profile),
        "tables": [(name, profile.rows(name)) for name in profile.table_names],  # a deferred table unbuilt
        "key_metrics": key,
        "all_metrics": every,
        "summary": parts.get("summary", {}),
        "idle_causes": _idle_rows(summary),
        "idle_note": IDLE_NOTE,
        "platform": words.platform_of_summary(summary),
        "device_labels": device_labels(devices),
        "device_window": device_window(devices, summary.get("source_format"), steps_left_out(summary)),
        "host_blocked": words.HOST_BLOCKED,
        "whole_work": whole_work_text(spans)
        if (spans := (summary.get("trace") or {}).get("work_spans"))
        else "",
        "findings": parts.get("findings"),
        "what_limits": parts.get("what_limits"),
        "plots": plots,
        "memory_figure": memory_figure,
        "only": parts.get("only"),
        "analyses": analyses_context(summary),
    }


#: The plot kind shown beside its table ("Device memory", analyses.html.j2) rather than among the plots.
BESIDE_TABLE = "device-memory"


def beside_tables(plots: list[dict] | None) -> tuple[list[dict] | None, dict | None]:
    """The plots drawn among the plots, and the one shown beside its table (:data:`BESIDE_TABLE`; None
    when not drawn or not asked for)."""
    if not plots:
        return plots, None
    beside = next((p for p in plots if p.get("kind") == BESIDE_TABLE), None)
    return [p for p in plots if p is not beside], beside


#: GPU operators the report lists (the summary JSON holds ``--top``).
REPORT_OPERATIONS = 10


def analyses_context(summary: Mapping[str, Any]) -> dict:
    """What ``analyses.html.j2`` adds to the summary's figures: the top operators, each collective type with
    its skew share (:func:`popprof.report.gpu_analyses.skew_share`, as the text shows it), and the words."""
    return {
        "operations": (summary.get("operations") or [])[:REPORT_OPERATIONS],
        # a TPU's rows are its HLO ops, from XLA's cost analysis (docs/operations.md)
        "operations_tpu": accelerator((summary.get("trace") or {}).get("devices") or []) == "TPU",
        "collectives": [
            {**row, "skew_share": skew_share(row)}
            for row in (summary.get("collectives") or {}).get("by_type", [])
        ],
        "ranks": plural((summary.get("collectives") or {}).get("ranks") or 0, "rank"),
        "stage_imbalance": words.STAGE_IMBALANCE,
        "saving_words": words.MEMORY_SAVING_WORDS,
        "idle_launch_words": PART_WORDS["idle_launch"],
        "critical_path_words": words.CRITICAL_PATH_WORDS,
        "critical_path_by_step": words.CRITICAL_PATH_BY_STEP,
        "longest_steps": longest_steps((summary.get("trace") or {}).get("critical_path_by_step")),
        "critical_path_colours": CRITICAL_PATH_COLOURS,
        "sequence_rows": REPORT_SEQUENCES,
        "on_cpu": words.ON_CPU,
        "off_cpu": words.OFF_CPU,
        "host_threads": [
            t
            for threads in shown_threads((summary.get("trace") or {}).get("host_cpu") or []).values()
            for t in threads
            if t["gaps_us"]
        ],
    }


#: How many kernel-sequence patterns the report's table lists (over all ranks; the JSON has every one).
REPORT_SEQUENCES = 20


def longest_steps(rows: list[dict] | None) -> dict:
    """Per rank of ``trace.critical_path_by_step``, the step whose own critical path is the longest (the first
    of equal ones)."""
    out: dict = {}
    length: dict = {}
    for row in rows or []:
        if row["rank"] not in length or row["length_us"] > length[row["rank"]]:
            out[row["rank"]], length[row["rank"]] = row["step"], row["length_us"]
    return out


#: The colour of each part of a critical path in the report's bar (as the text's words, in order).
CRITICAL_PATH_COLOURS = {
    "host": "#8e24aa",
    "compute": "#1e88e5",
    "communication": "#fb8c00",
    "launch_delay": "#e53935",
    "kernel_gap": "#757575",
}


def _idle_rows(summary: Mapping[str, Any]) -> list[dict]:
    """The summary's idle causes with each one's share of its device's idle time (as the text shows)."""
    causes = (summary.get("trace") or {}).get("idle_causes") or []
    totals: dict[tuple, float] = {}
    for c in causes:
        key = (c.get("rank"), c["device"])
        totals[key] = totals.get(key, 0.0) + c["idle_us"]
    return [
        {
            "rank": c.get("rank"),
            "device": c["device"],
            "cause": words.HTA_IDLE_CAUSES.get(c["idle_category"], c["idle_category"].replace("_", " ")),
            "idle_us": c["idle_us"],
            "share": c["idle_us"] / totals[(c.get("rank"), c["device"])]
            if totals[(c.get("rank"), c["device"])]
            else None,
        }
        for c in causes
    ]


def _render_part(section: Mapping[str, Any]) -> str:
    from .templating import render_template

    return render_template("profile.html.j2", s=section, kernel_columns=KERNEL_COLUMNS)


def summary_html(profile: Profile) -> str:
    """The target and key-metric tables of one profile (all metrics in a collapsed details block)."""
    return _render_part(_profile_part(profile, only="summary"))


def findings_context(findings: Any) -> dict | None:
    """Findings as the templates show them (``None``: the checks were not run)."""
    if findings is None:
        return None
    from .templating import trusted

    items = list(getattr(findings, "items", findings))
    counts: dict[str, int] = {}
    for f in items:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    shown = []
    for f in items:
        evidence = getattr(f, "evidence", None)
        has_evidence = isinstance(evidence, pd.DataFrame) and not evidence.empty
        shown.append(
            {
                "severity": f.severity,
                "colour": SEVERITY_COLOURS.get(f.severity, "#555"),
                "rule_id": f.rule_id,
                "title": f.title,
                "message": f.message,
                "where": where_text(getattr(f, "where", None) or {}),
                "gain": gain_text(f),
                "advice": getattr(f, "advice", "") or "",
                # pandas escapes the cells (escape=True): the table is markup popprof made
                "evidence": trusted(evidence.head(10).to_html(index=False, escape=True, border=0))
                if has_evidence
                else None,
                "evidence_rows": len(evidence) if has_evidence else 0,
            }
        )
    return {
        "items": shown,
        "counts_text": ", ".join(f"{n} {s}" for s, n in counts.items()) or "no findings",
        "not_evaluated": list(getattr(findings, "not_evaluated", []) or []),
    }


def findings_html(findings: Any) -> str:
    """Every finding (severity, rule id, title, message, where, advice, evidence) and the rules not evaluated."""
    return _render_part({"only": "findings", "findings": findings_context(findings)})


def figure_html(fig: Any, caption: str, image_format: str = "png", dpi: int = 96) -> str:
    """A figure embedded in a ``<figure>``: base64 PNG ``<img>`` or inline SVG (no external references)."""
    from .templating import render_template, trusted

    buffer = io.BytesIO()
    fig.savefig(buffer, format=image_format, dpi=dpi)
    if image_format == "svg":
        svg = buffer.getvalue().decode("utf-8")
        svg = re.sub(r"^<\?xml[^>]*>\s*", "", svg)
        svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
        return render_template("figure.html.j2", svg=trusted(svg), png=None, caption=caption)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return render_template("figure.html.j2", svg=None, png=data, caption=caption)


PLOT_CAPTIONS: dict[str, str] = {
    "memory": "Memory per tile, stacked by category, with the tile capacity and the headroom threshold.",
    "histogram": "How many tiles use how much memory; tiles right of the capacity line do not fit.",
    "tilemap": "Each IPU's tiles as a grid, coloured by memory use relative to capacity (red: over).",
    "liveness": "Live memory per program step: always-live base plus not-always-live variables; the peak "
    "step is where out-of-memory errors come from.",
    "execution": "Cycles by step category over the run.",
    "timeline": "Host threads and device activity over time.",
    "account": "Where each device's window went: the time account's parts as shares of the window (idle in "
    "greys), the same figures as 'What limits this run'.",
    "categories": "Memory of the whole target by data type, as the source printed it.",
    "device-memory": "Each device's memory over time from the allocator's events: allocated (the peak marked "
    "with its operator, as in the table), reserved, the capacity when the curves reach a quarter of it; profiler "
    "steps shaded in turn, so memory that grows step after step shows as a staircase.",
}

#: What a plot's shading means, said only when the figure shades something: kind -> (gid test, text).
SHADING: dict[str, tuple[Callable[[str], bool], str]] = {
    "execution": (
        lambda gid: gid.startswith("phase:"),
        "Shaded: exchange-heavy phases flagged by the rules.",
    ),
    "timeline": (
        lambda gid: gid == "stall",
        "Shaded: device idle gaps (host.device-gaps), with the host events that ran during them.",
    ),
}


def caption(kind: str, fig: Any) -> str:
    """The caption of a plot: what it shows, and what its shading means when anything is shaded."""
    text = PLOT_CAPTIONS.get(kind, kind)
    if kind not in SHADING:
        return text
    test, shading = SHADING[kind]
    shaded = any(
        test(str(artist.get_gid() or "")) for ax in fig.axes for artist in (*ax.patches, *ax.collections)
    )
    return f"{text} {shading}" if shaded else f"{text} Nothing is shaded: no finding marks a window."


def plot_items(
    profile: Profile,
    findings: Any = None,
    kinds: Iterable[str] | None = None,
    image_format: str = "png",
    config: Mapping[str, object] | None = None,
) -> list[dict]:
    """Every plot the profile has tables for (or ``kinds``) as ``{kind, figure}``, or ``{note}`` when not drawn."""
    try:
        from .. import plots
        from ..plots import available_kinds

        plots.require_matplotlib()
    except PopprofError as exc:
        return [{"kind": None, "figure": None, "note": str(exc)}]
    from ..io.progress import progress
    from .templating import trusted

    out: list[dict] = []
    chosen = list(kinds) if kinds is not None else available_kinds(profile)
    with progress(f"plotting {profile.name}", total=len(chosen)) as advance:
        for kind in chosen:
            try:
                fig = plots.plot(profile, kind, findings, config=dict(config or {}))
            except (PopprofError, ValueError) as exc:
                out.append({"kind": kind, "figure": None, "note": f"{kind} plot not drawn: {exc}"})
                continue
            finally:
                advance(1)
            out.append({"kind": kind, "figure": trusted(figure_html(fig, caption(kind, fig), image_format))})
    if not chosen:
        out.append(
            {"kind": None, "figure": None, "note": "This profile has none of the tables the plots need."}
        )
    return out


def plots_html(
    profile: Profile,
    findings: Any = None,
    kinds: Iterable[str] | None = None,
    image_format: str = "png",
    config: Mapping[str, object] | None = None,
) -> str:
    """Every plot the profile has tables for (or ``kinds``), embedded; reasons for plots not drawn.

    ``config`` (the ``[tool.popprof]`` table) sets the thresholds drawn, as for the checks.
    """
    return _render_part(
        {"only": "plots", "plots": plot_items(profile, findings, kinds, image_format, config)}
    )


def run_checks(profile: Profile, config: Mapping[str, object] | None = None) -> Any:
    """``popprof.check(profile)``, or ``None`` when the rules package is not available."""
    try:
        from ..rules import check
    except ImportError:
        return None
    return check(profile, config=config)


def render(
    profiles: Profile | Iterable[Profile],
    findings: Mapping[str, Any] | Any = None,
    *,
    title: str | None = None,
    plots: bool = True,
    image_format: str = "png",
    config: Mapping[str, object] | None = None,
    run: Mapping[str, object] | None = None,
    critical_path: bool = False,
    steps: tuple[int, int] | None = None,
    kernel_sequences: str | None = None,
    min_sequence_length: int = 3,
) -> str:
    """The report as one HTML string (``templates/report.html.j2``).

    ``findings``: a Findings for a single profile, or ``{profile name:
    Findings}``; profiles without findings are checked here (with
    ``config``). ``plots=False`` leaves the figures out. ``run``: the recorded
    command (``command``, ``outcome``, ``duration_us``, ``started``), shown first.
    Each profile gets every section its summary has (execution, devices, top
    kernels, launch delays, trace events); several profiles get contents and a
    side-by-side table of the key metrics. ``critical_path``: a GPU trace's
    summary also holds each rank's critical path
    (:func:`popprof.report.explain.add_critical_path`; of the work of ``steps``
    only, first and last profiler step, when given), shown in a section. ``kernel_sequences``: an operator
    name (part of one) whose frequent kernel sequences of at least ``min_sequence_length`` kernels a GPU
    trace's summary also holds (:func:`popprof.report.explain.add_kernel_sequences`), shown in a section.
    """
    from ..metrics import compute, shared
    from ..metrics.summary import summarise
    from .explain import add_critical_path, add_kernel_sequences, display_rows, what_limits
    from .templating import render_template

    items = [profiles] if isinstance(profiles, Profile) else list(profiles)
    if isinstance(findings, Mapping):
        by_name = dict(findings)
    else:
        by_name = {items[0].name: findings} if findings is not None and len(items) == 1 else {}
    title = title or "popprof report: " + ", ".join(p.name for p in items)
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = []
    for i, profile in enumerate(items):
        with shared(profile):  # checks, summary, metrics and plots share their intermediates
            found = by_name.get(profile.name)
            if found is None:
                found = run_checks(profile, config)
            summary = summarise(profile)
            if critical_path:
                add_critical_path(profile, summary, steps=steps)
            if kernel_sequences:
                add_kernel_sequences(profile, summary, kernel_sequences, min_sequence_length)
            sections.append(
                _profile_part(
                    profile,
                    i + 1,
                    summary=summary,
                    findings=findings_context(found),
                    what_limits=display_rows(what_limits(profile, found)),
                    plots=plot_items(profile, found, image_format=image_format, config=config)
                    if plots
                    else None,
                )
            )
    return render_template(
        "report.html.j2",
        title=title,
        version=__version__,
        when=when,
        run=run,
        sections=sections,
        side_by_side=_side_by_side([compute(p) for p in items]) if len(items) > 1 else [],
        kernel_columns=KERNEL_COLUMNS,
    )


#: Columns of the top-kernels table after name and type: (key in the summary, header).
KERNEL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("count", "count"),
    ("total_us", "total"),
    ("mean_us", "mean"),
    ("min_us", "min"),
    ("max_us", "max"),
    ("std_us", "std"),
)


def _side_by_side(values_by_profile: list[Mapping[str, float | None]]) -> list[dict]:
    """The key metrics any profile has, one row each with every profile's value (— where absent)."""
    unit_of = _units()
    rows = []
    for name in KEY_METRICS:
        if all(v.get(name) is None for v in values_by_profile):
            continue
        rows.append(
            {
                "metric": name,
                "values": [
                    units.value(v.get(name), unit_of(name), missing=MISSING) for v in values_by_profile
                ],
            }
        )
    return rows


def write(profiles: Profile | Iterable[Profile], out: str, **options: Any) -> str:
    """Render the report and write it atomically to ``out``; returns ``out``."""
    write_text_atomic(out, render(profiles, **options))
    return str(out)
