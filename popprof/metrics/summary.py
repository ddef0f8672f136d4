"""The summary of a profile: target, memory, execution and trace figures, as plain data.

:func:`summarise` returns a dict (JSON-ready); :func:`render_text` turns it
into the terminal view. Figures come from the shared metric registry, so the
summary agrees with diff, gate and baselines.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pandas as pd

from ..model.profile import Profile
from ..model.readproblems import problems
from ..model.schema import STEP_CATEGORIES
from ..trace.activity import is_device_activity
from . import compute, shared
from .execution import ipu_count
from .memory import failed_compilations, memory_by_category
from .pipeline import pipeline_imbalance
from .tiles import fullest_tile

TOP_PROGRAMS = 10


def target_section(profile: Profile) -> dict | None:
    """Target figures (None when the profile has no target table)."""
    if not profile.has("target"):
        return None
    row = profile.target.iloc[0]
    return {k: (None if pd.isna(v) else (v.item() if hasattr(v, "item") else v)) for k, v in row.items()}


#: The graph counts a text summary's "Graph:" section prints (metadata keys ``graph.num_*``).
GRAPH_COUNTS = {
    "vertices": "graph.num_vertices",
    "edges": "graph.num_edges",
    "variables": "graph.num_variables",
    "compute_sets": "graph.num_compute_sets",
}


#: The largest count a graph figure may be (a signed 64-bit integer, as every table's counts): a larger one is a
#: damaged source's, and JSON writers refuse it.
COUNT_MAX = (1 << 63) - 1


def graph_section(profile: Profile) -> dict | None:
    """Vertices, edges, variables and compute sets of the graph, as the source printed them (None without; a
    count that is no whole number, or beyond :data:`COUNT_MAX`, is left out)."""
    out = {}
    for key, meta in GRAPH_COUNTS.items():
        value = profile.meta.get(meta)
        if value not in (None, ""):
            try:
                count = int(value)
            except (TypeError, ValueError):
                continue
            if abs(count) <= COUNT_MAX:
                out[key] = count
    return out or None


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
            live.loc[live["step"] == section["peak_liveness_step"], "program"].iloc[0]
        )
    oom = profile.get("out_of_memory")
    if oom is not None and not oom.empty:
        section["failed_compilations"] = failed_compilations(profile)

        def whole(value: object) -> int | None:
            return None if pd.isna(value) else int(value)

        section["out_of_memory"] = [
            {
                "compilation": int(c),
                "tile": whole(t),
                "bytes_used": whole(u),
                "capacity_bytes": whole(cap),
                "over_bytes": whole(o),
                "reason": None if pd.isna(r) else str(r),
                "profile_path": None if pd.isna(pp) else str(pp),
            }
            for c, t, u, cap, o, r, pp in zip(
                oom["compilation"],
                oom["tile"],
                oom["bytes_used"],
                oom["capacity_bytes"],
                oom["over_bytes"],
                oom["reason"],
                oom["profile_path"],
                strict=True,
            )
        ]
    if all(v is None for v in section.values()):
        return None
    by_type = memory_by_category(profile)
    if by_type:  # as printed ("By Data Type:") or the profile's categories, whole target
        section["by_data_type"] = [
            {"category": k.removesuffix("_bytes"), "bytes": int(v)} for k, v in by_type.items()
        ]
    return section


def execution_section(
    profile: Profile, metrics: dict[str, float | None] | None = None, top: int = TOP_PROGRAMS
) -> dict | None:
    """Cycles by category with shares, and the ``top`` programs by cycles (needs an execution profile).

    ``metrics``: the profile's computed metrics, when the caller has them already.
    """
    if not profile.has("steps"):
        return execution_totals_section(profile, metrics) if profile.has("execution_totals") else None
    m = compute(profile) if metrics is None else metrics
    steps = profile.steps
    by_cat = {
        cat: {"cycles": m.get(f"execution.cycles.{cat}"), "share": m.get(f"execution.share.{cat}")}
        for cat in STEP_CATEGORIES
    }
    grouped = steps.groupby("program", observed=True)
    top = (
        grouped.agg(steps=("step", "nunique"), category=("category", "first"))
        .assign(cycles=grouped["cycles"].sum(min_count=1))  # NA when no step of it has known cycles
        .sort_values("cycles", ascending=False, na_position="last")
        .head(top)
    )
    total = float(steps["cycles"].sum()) or 1.0
    return {
        "total_cycles": m.get("execution.total_cycles"),
        "total_time_us": m.get("execution.total_time_us"),
        "runs": m.get("execution.run_count"),
        "steps": m.get("execution.step_count"),
        "ipus": ipu_count(profile),
        "by_category": by_cat,
        "top_programs": [
            {
                "program": str(name),
                "category": str(row["category"]),
                "cycles": None if pd.isna(row["cycles"]) else int(row["cycles"]),
                "share": None if pd.isna(row["cycles"]) else float(row["cycles"]) / total,
                "steps": int(row["steps"]),
            }
            for name, row in top.iterrows()
        ],
    }


TOP_VERTEX_TYPES = 10


def execution_totals_section(profile: Profile, metrics: dict[str, float | None] | None = None) -> dict:
    """A text summary's Execution section: total cycles and time, each category's cycles and share of
    the total (None where the summary printed no number), and the vertex types with the most cycles."""
    m = compute(profile) if metrics is None else metrics
    totals = profile.execution_totals
    by_cat: dict[str, dict] = {}
    for row in totals.itertuples(index=False):
        cat = str(row.category)
        if cat == "total" or cat in by_cat:
            continue
        by_cat[cat] = {
            "basis": str(row.basis),
            "cycles": None if pd.isna(row.cycles) else float(row.cycles),
            "share": m.get(f"execution.summary_share.{cat}"),
            "estimated": bool(row.estimated) if pd.notna(row.estimated) else False,
            "label": row.label,
        }
    out: dict = {
        "source": "summary",
        "total_cycles": m.get("execution.total_cycles"),
        "total_time_us": m.get("execution.total_time_us"),
        "exchange_share": m.get("execution.exchange_and_sync_share"),
        "by_category": by_cat,
    }
    programs = profile.meta.get("text_summary.programs_executed")
    if programs:
        out["programs_executed"] = json.loads(programs)
    vertices = profile.get("vertex_cycles")
    if vertices is not None and not vertices.empty:
        top = vertices.sort_values("cycles", ascending=False, kind="stable", na_position="last").head(
            TOP_VERTEX_TYPES
        )
        out["top_vertex_types"] = [
            {
                "vertex_type": str(t),
                "instances": None if pd.isna(n) else int(n),
                "cycles": None if pd.isna(c) else int(c),
            }
            for t, n, c in zip(top["vertex_type"], top["instances"], top["cycles"], strict=True)
        ]
    return out


def trace_section(profile: Profile, top: int = TOP_PROGRAMS) -> dict | None:
    """Trace figures (busiest threads, ``top`` events and kernels, span) when the profile holds events."""
    if not profile.has("events"):
        return None
    try:
        from .trace_summary import trace_summary
    except ImportError:
        return None
    return trace_summary(profile, top)


#: Most iterations the summary lists (the JSON says how many there were in all).
MAX_ITERATIONS = 1_000


def iterations_section(profile: Profile) -> dict | None:
    """Per-iteration step times (:func:`popprof.metrics.steps.step_times`): ProfilerStep spans of a GPU
    trace, engine runs of a .pvti or IPU profile; None when the source has no iterations."""
    from .steps import step_times

    times = step_times(profile)
    if times.empty:
        return None
    shown = times.head(MAX_ITERATIONS)
    return {
        "source": str(times["source"].iloc[0]),
        "count": int(len(times)),
        "steps": [
            {"step": int(st), "start_us": float(start), "dur_us": float(dur)}
            for st, start, dur in zip(shown["step"], shown["start_us"], shown["dur_us"], strict=True)
        ],
    }


def time_account_section(profile: Profile) -> list | None:
    """The time account (:func:`popprof.metrics.account.time_account`): per device, the run and each step,
    ``{platform, rank, device, step, basis, window_us, parts}``; None when the profile holds no device time."""
    from .account import to_records

    rows = to_records(profile)
    return rows or None


def operations_section(profile: Profile, top: int = TOP_PROGRAMS) -> list | None:
    """The GPU operators (:func:`popprof.metrics.operations.operation_records`): the ``top`` (operator,
    input shapes) rows by device time; None when the trace holds no operator that launched GPU work."""
    from .operations import operation_records

    return operation_records(profile, top) or None


def roofline_device_section(profile: Profile) -> dict | None:
    """The device the roofline reads its peaks for (:func:`popprof.metrics.peaks.device_section`: its name, how
    it was named, the peak table's device or why none); None when the trace names no device."""
    from .peaks import device_section

    return device_section(profile)


def operations_note_section(profile: Profile) -> str | None:
    """Why the operators carry no FLOPs (:func:`popprof.metrics.operations.operations_note`), or None."""
    from .operations import operations_note

    return operations_note(profile)


def operations_coverage_section(profile: Profile) -> dict | None:
    """How much of the GPU work the operators hold (:func:`popprof.metrics.operations.coverage`), or None."""
    from .operations import coverage

    return coverage(profile)


def devices_section(profile: Profile) -> list | None:
    """The per-device table (per IPU from ``steps``) of a profile without a trace; traces have ``trace.devices``."""
    if profile.has("events") or not profile.has("steps"):
        return None
    from .devices import device_breakdown
    from .trace_summary import _frame_records

    frame = device_breakdown(profile)
    return _frame_records(frame) if not frame.empty else None


def collectives_section(profile: Profile) -> dict | None:
    """Collectives across ranks: skew, transfer, bytes and bandwidths (:mod:`popprof.metrics.collectives`)."""
    if not profile.has("events"):
        return None
    from .collectives import collectives_section as section

    return section(profile)


def launches_section(profile: Profile) -> dict | None:
    """Kernel launches: delays, short kernels, launch-bound idle (:mod:`popprof.metrics.launches`)."""
    if not profile.has("events"):
        return None
    from .launches import launches_section as section

    return section(profile)


def pipeline_section(profile: Profile) -> dict | None:
    """Pipeline-stage imbalance across IPUs (:func:`popprof.metrics.pipeline.pipeline_imbalance`); None
    without execution steps on two IPUs of a replica."""
    if not profile.has("steps"):
        return None
    return pipeline_imbalance(profile)


def fullest_tile_section(profile: Profile) -> dict | None:
    """The fullest tile explained (:func:`popprof.metrics.tiles.fullest_tile`); None without tile memory."""
    if not any(profile.has(t) for t in ("tiles", "memory_totals", "out_of_memory")):
        return None
    return fullest_tile(profile)


#: Sections in display order: (key, function).
SECTIONS: list[tuple[str, Callable[[Profile], dict | None]]] = [
    ("target", target_section),
    ("graph", graph_section),
    ("memory", memory_section),
    ("fullest_tile", fullest_tile_section),
    ("execution", execution_section),
    ("pipeline", pipeline_section),
    ("time_account", time_account_section),
    ("devices", devices_section),
    ("iterations", iterations_section),
    ("trace", trace_section),
    ("roofline_device", roofline_device_section),
    ("operations", operations_section),
    ("operations_note", operations_note_section),
    ("operations_coverage", operations_coverage_section),
    ("collectives", collectives_section),
    ("launches", launches_section),
]


def summarise(profile: Profile, top: int = TOP_PROGRAMS) -> dict:
    """The summary of ``profile`` as a JSON-ready dict (sections absent from the source are omitted).

    ``top``: how many programs, kernels, events and threads the lists hold.
    """
    out: dict = {"profile": profile.name, "source": profile.source, "source_format": profile.source_format}
    with shared(profile):  # the metrics and the sections share their intermediates (GPU work, unions)
        metrics = compute(profile)  # once, shared by the sections that read metrics
        for key, func in SECTIONS:
            if func is memory_section:
                section = func(profile, metrics)
            elif func is execution_section:
                section = func(profile, metrics, top)
            elif func is trace_section or func is operations_section:
                section = func(profile, top)
            else:
                section = func(profile)
            if section is not None:
                out[key] = section
            # no malloc_trim between sections: the next section reuses the pages glibc kept instead of
            # faulting fresh ones in (600k-event trace: -25 ms of CPU, the same peak within 1 MiB, since
            # the shared scope holds the large intermediates anyway; benchmarks/README.md)
    missing = [t for t in ("tiles", "liveness", "steps", "events") if not profile.has(t)]
    events = profile.get("events")
    if events is not None and not is_device_activity(events).any():
        missing.append("devices")  # a trace with no device activity: nothing of any device is in it
    out["absent_tables"] = missing
    read_problems = problems(profile)
    if read_problems:  # what the reader worked around; kept in a bundle's metadata too
        out["read_problems"] = read_problems
    return out
