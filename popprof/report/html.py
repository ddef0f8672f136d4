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
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from .._version import __version__
from ..io import units
from ..io.atomic import write_text_atomic
from ..model.errors import PopprofError
from ..model.profile import Profile
from .findings import where_text

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

SEVERITY_COLOURS = {"error": "#b71c1c", "warning": "#e65100", "info": "#1565c0"}

STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2em auto;max-width:1200px;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}h3{margin-top:1.5em}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.sev{font-weight:bold;text-transform:uppercase;font-size:.85em}
.finding{border-left:4px solid #999;padding:.4em .8em;margin:.8em 0;background:#fafafa}
.finding p{margin:.3em 0}.advice{color:#444}.where{color:#555;font-size:.9em}
figure{margin:1em 0}figure img,figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:.9em}
.note{color:#555;font-style:italic}code{background:#f2f2f2;padding:0 .2em}
"""


def _e(value: object) -> str:
    """HTML-escape any value as text."""
    return html.escape("" if value is None else str(value), quote=True)


def summary_html(profile: Profile) -> str:
    """The target and key-metric tables of one profile (all metrics in a collapsed details block)."""
    from ..metrics import METRICS, compute

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
            rows.append(f"<tr><th>{_e(label)}</th><td>{_e(text)}</td></tr>")
    tables = ", ".join(f"{_e(name)} ({len(frame):,})" for name, frame in profile.tables.items())
    rows.append(f"<tr><th>tables (rows)</th><td>{tables}</td></tr>")
    values = compute(profile)
    unit_names = {name: m.unit for name, m in METRICS.items()}

    def unit_of(name: str) -> str:
        return unit_names.get(name) or next(
            (m.unit for p, m in METRICS.items() if m.family and name.startswith(p)), ""
        )

    key = [
        f"<tr><td><code>{_e(n)}</code></td><td "
        f"class='num'>{_e(units.value(values[n], unit_of(n), missing='—'))}</td></tr>"
        for n in KEY_METRICS
        if values.get(n) is not None
    ]
    every = [
        f"<tr><td><code>{_e(n)}</code></td><td class='num'>{_e(units.value(v, unit_of(n), missing='—'))}</td>"
        f"<td>{_e(unit_of(n))}</td></tr>"
        for n, v in values.items()
        if v is not None
    ]
    return (
        f"<table class='target'>{''.join(rows)}</table>"
        + (
            f"<h3>Key metrics</h3><table class='metrics'><tr><th>metric</th><th>value</th></tr>{''.join(key)}"
            "</table>"
            if key
            else ""
        )
        + (
            f"<details><summary>All metrics ({len(every)})</summary><table><tr><th>metric</th><th>value</th>"
            f"<th>unit</th></tr>{''.join(every)}</table></details>"
            if every
            else ""
        )
    )


def findings_html(findings: Any) -> str:
    """Every finding (severity, rule id, title, message, where, advice, evidence) and the rules not evaluated."""
    if findings is None:
        return "<p class='note'>Rule checks were not run.</p>"
    items = list(getattr(findings, "items", findings))
    out = []
    if not items:
        out.append("<p>No findings: every rule that could be evaluated passed.</p>")
    counts: dict[str, int] = {}
    for f in items:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    if items:
        out.append("<p>" + ", ".join(f"{n} {_e(s)}" for s, n in counts.items()) + "</p>")
    for f in items:
        colour = SEVERITY_COLOURS.get(f.severity, "#555")
        block = [
            f"<div class='finding' style='border-left-color:{colour}' data-rule='{_e(f.rule_id)}'>",
            f"<p><span class='sev' style='color:{colour}'>{_e(f.severity)}</span> "
            f"<code>{_e(f.rule_id)}</code> <b>{_e(f.title)}</b></p>",
            f"<p class='message'>{_e(f.message)}</p>",
        ]
        where = where_text(getattr(f, "where", None) or {})
        if where:
            block.append(f"<p class='where'>where: {_e(where)}</p>")
        if getattr(f, "advice", ""):
            block.append(f"<p class='advice'>What to do: {_e(f.advice)}</p>")
        evidence = getattr(f, "evidence", None)
        if isinstance(evidence, pd.DataFrame) and not evidence.empty:
            block.append(
                f"<details><summary>evidence ({len(evidence):,} rows; first 10)</summary>"
                f"{evidence.head(10).to_html(index=False, escape=True, border=0)}</details>"
            )
        block.append("</div>")
        out.append("".join(block))
    skipped = list(getattr(findings, "not_evaluated", []) or [])
    if skipped:
        lis = "".join(f"<li><code>{_e(r)}</code>: {_e(why)}</li>" for r, why in skipped)
        out.append(
            f"<details><summary>Rules not evaluated ({len(skipped)})</summary><ul>{lis}</ul></details>"
        )
    return "".join(out)


def figure_html(fig: Any, caption: str, image_format: str = "png", dpi: int = 96) -> str:
    """A figure embedded in a ``<figure>``: base64 PNG ``<img>`` or inline SVG (no external references)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=image_format, dpi=dpi)
    if image_format == "svg":
        svg = buffer.getvalue().decode("utf-8")
        svg = re.sub(r"^<\?xml[^>]*>\s*", "", svg)
        svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
        body = svg
    else:
        data = base64.b64encode(buffer.getvalue()).decode("ascii")
        body = f"<img alt='{_e(caption)}' src='data:image/png;base64,{data}'>"
    return f"<figure>{body}<figcaption>{_e(caption)}</figcaption></figure>"


PLOT_CAPTIONS: dict[str, str] = {
    "memory": "Memory per tile, stacked by category, with the tile capacity and the headroom threshold.",
    "histogram": "How many tiles use how much memory; tiles right of the capacity line do not fit.",
    "tilemap": "Each IPU's tiles as a grid, coloured by memory use relative to capacity (red: over).",
    "liveness": "Live memory per program step: always-live base plus not-always-live variables; the peak "
    "step is where out-of-memory errors come from.",
    "execution": "Cycles by step category over the run; shaded: exchange-heavy phases flagged by the rules.",
    "timeline": "Host threads and device activity over time; shaded: the device waiting on the host, with "
    "the host events that filled the wait.",
}


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
    try:
        from .. import plots
        from ..plots import available_kinds

        plots.require_matplotlib()
    except PopprofError as exc:
        return f"<p class='note'>{_e(exc)}</p>"
    from ..io.progress import progress

    out = []
    chosen = list(kinds) if kinds is not None else available_kinds(profile)
    with progress(f"plotting {profile.name}", total=len(chosen)) as advance:
        for kind in chosen:
            try:
                fig = plots.plot(profile, kind, findings, config=dict(config or {}))
            except (PopprofError, ValueError) as exc:
                out.append(f"<p class='note'>{_e(kind)} plot not drawn: {_e(exc)}</p>")
                continue
            finally:
                advance(1)
            out.append(f"<h3>{_e(kind)}</h3>" + figure_html(fig, PLOT_CAPTIONS.get(kind, kind), image_format))
    if not chosen:
        out.append("<p class='note'>This profile has none of the tables the plots need.</p>")
    return "".join(out)


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
) -> str:
    """The report as one HTML string.

    ``findings``: a Findings for a single profile, or ``{profile name:
    Findings}``; profiles without findings are checked here (with
    ``config``). ``plots=False`` leaves the figures out.
    """
    items = [profiles] if isinstance(profiles, Profile) else list(profiles)
    if isinstance(findings, Mapping):
        by_name = dict(findings)
    else:
        by_name = {items[0].name: findings} if findings is not None and len(items) == 1 else {}
    title = title or "popprof report: " + ", ".join(p.name for p in items)
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        f"<h1>{_e(title)}</h1>",
        f"<p class='note'>Made by popprof {_e(__version__)} on {_e(when)}. Self-contained: it needs no "
        "network to view. It shows program and variable names from the profile: redact the profile first "
        "(<code>popprof redact</code>) if those are confidential.</p>",
    ]
    for profile in items:
        found = by_name.get(profile.name)
        if found is None:
            found = run_checks(profile, config)
        source = f" <span class='note'>({_e(profile.source)})</span>" if profile.source else ""
        body.append(f"<section data-profile='{_e(profile.name)}'><h2>{_e(profile.name)}{source}</h2>")
        body.append("<h3>Summary</h3>" + summary_html(profile))
        body.append("<h3>Findings</h3>" + findings_html(found))
        if plots:
            body.append(
                "<h3>Plots</h3>" + plots_html(profile, found, image_format=image_format, config=config)
            )
        body.append("</section>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


def write(profiles: Profile | Iterable[Profile], out: str, **options: Any) -> str:
    """Render the report and write it atomically to ``out``; returns ``out``."""
    write_text_atomic(out, render(profiles, **options))
    return str(out)
