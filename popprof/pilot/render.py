"""The pilot document as a terminal table, Markdown, and a self-contained HTML report."""

from __future__ import annotations

from collections.abc import Sequence

from ..io import units
from ..io.plural import plural
from ..report import markdown as md
from ..report.explain import render_what_limits
from ..report.fit import WIDTH, fit_lines

MISSING = "—"


def _rows(doc: dict) -> list[tuple[str, list[str]]]:
    rows = []
    for fig in doc["figures"]:
        cells = [
            _cell(c["figures"][fig["key"]]["value"], c["figures"][fig["key"]]["unit"]) for c in doc["columns"]
        ]
        rows.append((fig["label"], cells))
    for rule in doc["rules"]:
        cells = []
        for c in doc["columns"]:
            f = c["findings"].get(rule)
            cells.append(f"{f['count']} {f['severity']}" if f else MISSING)
        rows.append((f"finding {rule}", cells))
    return rows


def _cell(value: object, unit: str) -> str:
    """A figure in its unit; ``share`` is a fraction shown as a percentage like the other shares."""
    return units.value(value, unit, missing=MISSING)


def _header(doc: dict) -> list[str]:
    return [f"{c['label']} ({c.get('device_kind') or c['platform'].upper()})" for c in doc["columns"]]


def _missing_lines(doc: dict) -> list[str]:
    out = []
    labels = {f["key"]: f["label"] for f in doc["figures"]}
    for c in doc["columns"]:
        reasons: dict[str, list[str]] = {}
        for key, entry in c["figures"].items():
            if entry["missing"]:
                reasons.setdefault(entry["missing"], []).append(labels[key])
        for reason, keys in reasons.items():
            out.append(f"{c['label']}: {', '.join(keys)}: {reason}")
    return out


#: The fewest columns the figure names keep beside a table's figures before its sides go in two tables.
MIN_LABEL = 24


def _figure_table(header: list[str], rows: list[list[str]], width: int) -> list[str]:
    """The figures, one column per side, laid out for ``width`` (docs/figures.md, "How text prints"): as one
    table when it fits; else each side's head is a number, ``(1)``, named on a line above the table, the
    sides go in as few tables as leave the names :data:`MIN_LABEL` columns, and a figure's name too long for
    the room its figures leave goes on a line of its own, its figures under their columns on the next."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    if sum(widths) + 2 * (len(widths) - 1) <= width:
        groups, legend, heads = [list(range(1, len(header)))], [], header
    else:
        heads = ["figure", *(f"({i})" for i in range(1, len(header)))]
        legend = fit_lines([f"{heads[i]} {header[i]}" for i in range(1, len(header))], width)
        groups = []
        room = width - MIN_LABEL
        for i in range(1, len(header)):
            cell = max(len(heads[i]), *(len(str(r[i])) for r in rows)) + 2
            if (
                groups
                and sum(max(len(heads[j]), *(len(str(r[j])) for r in rows)) + 2 for j in groups[-1]) + cell
                <= room
            ):
                groups[-1].append(i)
            else:
                groups.append([i])
    out = list(legend)
    for n, group in enumerate(groups):
        cols = [0, *group]
        table = [[heads[i] for i in cols], *[[r[i] for i in cols] for r in rows]]
        w = [max(len(str(r[k])) for r in table) for k in range(len(cols))]
        figures = sum(w[1:]) + 2 * (len(w) - 1)
        w[0] = max(min(w[0], width - figures), 0)

        def line(row: Sequence[str], w: list[int] = w) -> str:
            return "  ".join(
                [str(row[0]).ljust(w[0])] + [str(v).rjust(k) for v, k in zip(row[1:], w[1:], strict=True)]
            )

        out += [""] if n or legend else []
        out += [line(table[0]), line(["-" * k for k in w])]
        for row in table[1:]:
            if len(str(row[0])) > w[0]:  # the name on its own line, its figures under their columns
                out.append(str(row[0]))
                row = ["", *row[1:]]
            out.append(line(row).rstrip())
    return out


def render_text(doc: dict, width: int = WIDTH) -> str:
    """The pilot table for a terminal: one column per side, the diagnosis and what each side lacks, laid out
    for ``width`` columns (docs/figures.md, "How text prints"): the prose wraps, every figure is kept."""
    header = ["figure", *_header(doc)]
    rows = [[label, *cells] for label, cells in _rows(doc)]
    out = ["popprof pilot", "", *_figure_table(header, rows, width)]
    out += fit_lines([f"  caveat: {c}" for c in caveats(doc)], width)  # next to the figures they qualify
    out += ["", "Diagnosis"]
    out += fit_lines([f"  {c['label']}: {c['diagnosis']['text']}" for c in doc["columns"]], width)
    for c in doc["columns"]:  # each side's time account and its top priced opportunities
        limits = render_what_limits(c.get("what_limits"), width)
        if limits:
            out += ["", *fit_lines([f"{limits[0]}: {c['label']}"], width), *limits[1:]]
    missing = _missing_lines(doc)
    if missing:
        out += ["", f"Missing figures ({MISSING})"] + fit_lines([f"  {m}" for m in missing], width)
    opts = doc["options"]
    per_sample = opts["batch_size"] or opts["samples_per_step"]
    rate = "samples/s" if per_sample else "steps/s (give --batch-size for samples/s)"
    out += [
        "",
        *fit_lines(
            [
                f"Step times after the first {plural(opts['warmup_steps'], 'warm-up step')}; {rate}. "
                "Definitions: docs/pilot.md."
            ],
            width,
        ),
    ]
    return "\n".join(out)


def render_markdown(doc: dict) -> str:
    """The pilot table as Markdown, for a pilot write-up."""
    out = ["## popprof pilot", ""]
    out += md.table(
        ["figure", *(md.cell(h) for h in _header(doc))],
        [[md.cell(label), *cells] for label, cells in _rows(doc)],
        right=range(1, len(doc["columns"]) + 1),
    )
    out += [f"> caveat: {md.cell(c)}" for c in caveats(doc)]
    out += ["", "### Diagnosis", ""]
    out += [f"- **{md.cell(c['label'])}**: {md.cell(c['diagnosis']['text'])}" for c in doc["columns"]]
    missing = _missing_lines(doc)
    if missing:
        out += ["", "### Missing figures", ""] + [f"- {md.cell(m)}" for m in missing]
    out += ["", f"Definitions: `docs/pilot.md` (popprof pilot JSON schema version {doc['schema_version']})."]
    return "\n".join(out) + "\n"


def render_html(doc: dict, profiles: Sequence[object], plots: bool = True) -> str:
    """A self-contained HTML report (``report/templates/pilot.html.j2``): the table, the diagnoses, and
    each side's plots next to each other."""
    from ..report.templating import render_template

    plots_note, plot_rows = (None, []) if not plots else _plots_grid(doc, profiles)
    return render_template(
        "pilot.html.j2",
        header=_header(doc),
        rows=_rows(doc),
        caveats=caveats(doc),
        columns=doc["columns"],
        missing=_missing_lines(doc),
        plots_note=plots_note,
        plot_rows=plot_rows,
    )


def caveats(doc: dict) -> list[str]:
    """Warnings that belong next to the figures (e.g. percentiles from a single steady step)."""
    return [c for column in doc["columns"] for c in column.get("caveats") or []]


def _plots_grid(doc: dict, profiles: Sequence[object]) -> tuple[str | None, list]:
    """(a note when no plot can be drawn, [(title, [(label, figure markup or None, note)], wide)])."""
    try:
        from ..plots import require_matplotlib

        require_matplotlib()
    except Exception as exc:  # matplotlib is an optional extra
        return str(exc), []
    from ..report.html import figure_html
    from ..report.templating import trusted
    from .plots import breakdown_bars, step_distribution, timeline_or_none

    rows = []
    for title, draw in (
        ("Timeline", timeline_or_none),
        ("Step-time distribution", step_distribution),
        ("Device time breakdown", breakdown_bars),
    ):
        cells = []
        for column, profile in zip(doc["columns"], profiles, strict=True):
            fig, note = draw(profile, column)
            figure = None if fig is None else trusted(figure_html(fig, f"{title}: {column['label']}"))
            cells.append((column["label"], figure, note))
        rows.append((title, cells, title == "Timeline"))  # a timeline needs the page's width to be read
    return None, rows
