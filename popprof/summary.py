"""The summary of a profile: target, memory, execution and trace figures, as plain data.

:func:`summarise` returns a dict (JSON-ready); :func:`render_text` turns it
into the terminal view. Figures come from the shared metric registry, so the
summary agrees with diff, gate and baselines.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from .metrics import compute
from .metrics.execution import ipu_count
from .profile import Profile
from .readproblems import problems
from .schema import STEP_CATEGORIES

TOP_PROGRAMS = 10


def target_section(profile: Profile) -> dict | None:
    """Target figures (None when the profile has no target table)."""
    if not profile.has("target"):
        return None
    row = profile.target.iloc[0]
    return {k: (None if pd.isna(v) else (v.item() if hasattr(v, "item") else v)) for k, v in row.items()}


def memory_section(profile: Profile, metrics: dict[str, float | None] | None = None) -> dict | None:
    """Memory totals, the fullest tile and its headroom, tiles out of memory, liveness.

    ``metrics``: the profile's computed metrics, when the caller has them already.
    """
    m = compute(profile) if metrics is None else metrics
    keys = {
        "total_incl_gaps_bytes": "memory.total_incl_gaps_bytes",
        "total_excl_gaps_bytes": "memory.total_excl_gaps_bytes",
        "gap_share": "memory.gap_share",
        "capacity_bytes_per_tile": None,
        "max_tile": "memory.max_tile_index",
        "max_tile_incl_gaps_bytes": "memory.max_tile_incl_gaps_bytes",
        "max_tile_headroom_bytes": "memory.max_tile_headroom_bytes",
        "max_tile_utilisation": "memory.max_tile_utilisation",
        "tiles_out_of_memory": "memory.tiles_out_of_memory",
        "always_live_bytes": "memory.always_live_bytes",
        "peak_not_always_live_bytes": "memory.peak_not_always_live_bytes",
        "peak_liveness_bytes": "memory.peak_liveness_bytes",
        "peak_liveness_step": "memory.peak_liveness_step",
    }
    section = {k: (m.get(v) if v else None) for k, v in keys.items()}
    cap = profile.target_value("bytes_per_tile")
    section["capacity_bytes_per_tile"] = None if cap is None else int(cap)
    for k in ("max_tile", "tiles_out_of_memory", "peak_liveness_step"):
        if section[k] is not None:
            section[k] = int(section[k])
    if profile.has("liveness") and section["peak_liveness_step"] is not None:
        live = profile.liveness
        section["peak_liveness_program"] = str(
            live.loc[live["step"] == section["peak_liveness_step"], "program"].iloc[0])
    oom = profile.get("out_of_memory")
    if oom is not None and not oom.empty:
        section["out_of_memory"] = [
            {"compilation": int(c), "tile": int(t), "bytes_used": int(u), "capacity_bytes": int(cap),
             "over_bytes": int(o)}
            for c, t, u, cap, o in zip(oom["compilation"], oom["tile"], oom["bytes_used"], oom["capacity_bytes"],
                                       oom["over_bytes"], strict=True)]
    if all(v is None for v in section.values()):
        return None
    return section


def execution_section(profile: Profile, metrics: dict[str, float | None] | None = None) -> dict | None:
    """Cycles by category with shares, and the top programs by cycles (needs an execution profile).

    ``metrics``: the profile's computed metrics, when the caller has them already.
    """
    if not profile.has("steps"):
        return None
    m = compute(profile) if metrics is None else metrics
    steps = profile.steps
    by_cat = {cat: {"cycles": m.get(f"execution.cycles.{cat}"), "share": m.get(f"execution.share.{cat}")}
              for cat in STEP_CATEGORIES}
    grouped = steps.groupby("program", observed=True)
    top = (grouped.agg(steps=("step", "nunique"), category=("category", "first"))
           .assign(cycles=grouped["cycles"].sum(min_count=1))  # NA when no step of it has known cycles
           .sort_values("cycles", ascending=False, na_position="last").head(TOP_PROGRAMS))
    total = float(steps["cycles"].sum()) or 1.0
    return {
        "total_cycles": m.get("execution.total_cycles"),
        "total_time_us": m.get("execution.total_time_us"),
        "runs": m.get("execution.run_count"),
        "steps": m.get("execution.step_count"),
        "ipus": ipu_count(profile),
        "by_category": by_cat,
        "top_programs": [
            {"program": str(name), "category": str(row["category"]),
             "cycles": None if pd.isna(row["cycles"]) else int(row["cycles"]),
             "share": None if pd.isna(row["cycles"]) else float(row["cycles"]) / total, "steps": int(row["steps"])}
            for name, row in top.iterrows()
        ],
    }


def trace_section(profile: Profile) -> dict | None:
    """Trace figures (busiest threads, top events, span) when the profile holds events."""
    if not profile.has("events"):
        return None
    try:
        from .trace.summary import trace_summary
    except ImportError:
        return None
    return trace_summary(profile)


#: Sections in display order: (key, function).
SECTIONS: list[tuple[str, Callable[[Profile], dict | None]]] = [
    ("target", target_section),
    ("memory", memory_section),
    ("execution", execution_section),
    ("trace", trace_section),
]


def summarise(profile: Profile) -> dict:
    """The summary of ``profile`` as a JSON-ready dict (sections absent from the source are omitted)."""
    out: dict = {"profile": profile.name, "source": profile.source, "source_format": profile.source_format}
    metrics = compute(profile)  # once, shared by the sections that read metrics
    for key, func in SECTIONS:
        section = func(profile, metrics) if func in (memory_section, execution_section) else func(profile)
        if section is not None:
            out[key] = section
    missing = [t for t in ("tiles", "liveness", "steps", "events") if not profile.has(t)]
    out["absent_tables"] = missing
    read_problems = problems(profile)
    if read_problems:  # what the reader worked around; kept in a bundle's metadata too
        out["read_problems"] = read_problems
    return out


# -- text rendering ---------------------------------------------------------

def _b(value: float | None) -> str:
    if value is None:
        return "n/a"
    value = float(value)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value:,.0f} B ({value / size:,.1f} {unit})"
    return f"{value:,.0f} B"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _n(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def render_text(summary: dict) -> str:
    """The summary as terminal text (plain; the CLI adds colour when on a terminal)."""
    lines = [f"Profile {summary['profile']} ({summary['source_format']})"]
    t = summary.get("target")
    if t and any(t.get(k) is not None for k in ("num_ipus", "num_tiles", "bytes_per_tile", "clock_hz")):
        clock = f"{t['clock_hz'] / 1e6:,.0f} MHz" if t.get("clock_hz") else "n/a"
        lines += ["", "Target",
                  f"  {t.get('ipu_arch') or 'IPU'} x {_n(t.get('num_ipus'))}: {_n(t.get('num_tiles'))} tiles "
                  f"({_n(t.get('tiles_per_ipu'))} per IPU), {_b(t.get('bytes_per_tile'))} per tile, clock {clock}"]
        if t.get("poplar_version"):
            lines.append(f"  Poplar {t['poplar_version']}")
    m = summary.get("memory")
    if m:
        lines += ["", "Memory",
                  f"  total including gaps   {_b(m['total_incl_gaps_bytes'])}",
                  f"  total excluding gaps   {_b(m['total_excl_gaps_bytes'])}   (gaps {_pct(m['gap_share'])})"]
        tile = "" if m.get("max_tile") is None else f" on tile {m['max_tile']:,}"
        lines.append(f"  fullest tile           {_b(m['max_tile_incl_gaps_bytes'])}{tile}"
                     f" = {_pct(m['max_tile_utilisation'])} of capacity")
        lines.append(f"  headroom               {_b(m['max_tile_headroom_bytes'])}")
        lines.append(f"  tiles out of memory    {_n(m['tiles_out_of_memory'])}")
        for row in (m.get("out_of_memory") or [])[:20]:
            lines.append(f"    compilation {row['compilation']}: tile {row['tile']:,} needs {_b(row['bytes_used'])}"
                         f" of {_b(row['capacity_bytes'])} (over by {_b(row['over_bytes'])})")
        if m.get("peak_liveness_bytes") is not None:
            lines.append(f"  always-live            {_b(m['always_live_bytes'])}")
            program = f" ({m['peak_liveness_program']})" if m.get("peak_liveness_program") else ""
            lines.append(f"  peak liveness          {_b(m['peak_liveness_bytes'])} at step "
                         f"{m['peak_liveness_step']:,}{program}")
    e = summary.get("execution")
    if e:
        time = "" if e.get("total_time_us") is None else f" = {e['total_time_us'] / 1e3:,.3f} ms"
        lines += ["", "Execution",
                  f"  {_n(e['runs'])} runs, {_n(e['steps'])} steps on {e['ipus']} IPU(s); "
                  f"busiest IPU {_n(e['total_cycles'])} cycles{time}",
                  "  cycles by category (summed over IPUs):"]
        for cat, row in e["by_category"].items():
            if row["cycles"]:
                lines.append(f"    {cat:<16} {_n(row['cycles']):>16}  {_pct(row['share']):>8}")
        lines.append("  top programs:")
        for p in e["top_programs"]:
            lines.append(f"    {_n(p['cycles']):>14}  {_pct(p['share']):>7}  {p['category']:<15} {p['program']}")
    tr = summary.get("trace")
    if tr:
        lines += ["", "Trace"]
        for key, value in tr.items():
            if isinstance(value, list):
                lines.append(f"  {key}:")
                for item in value[:10]:
                    lines.append("    " + ", ".join(f"{k}={_fmt(v)}" for k, v in item.items())
                                 if isinstance(item, dict) else f"    {item}")
            elif isinstance(value, dict):
                lines.append(f"  {key}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()))
            else:
                lines.append(f"  {key}: {_fmt(value)}")
    absent = summary.get("absent_tables") or []
    if absent:
        lines += ["", "Not in this source: " + ", ".join(absent)]
    if summary.get("read_problems"):
        lines += ["", "Read with problems", *(f"  {text}" for text in summary["read_problems"].values())]
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
