"""The figures of one side of a pilot, each taken from the API that already computes it (docs/pilot.md).

Nothing here computes a figure a second time: shares come from
:func:`popprof.metrics.devices.device_breakdown`, memory from the metric registry
(the figures ``popprof summary`` prints), step times from :mod:`popprof.metrics.steps`,
findings from :func:`popprof.check`. A figure a side lacks has ``value`` None and
``missing`` saying what to capture; it is never 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..io.plural import plural
from ..io.words import IDLE_HOST, IPU_FORMATS, STAGE_IMBALANCE
from ..metrics import account, compute, stored_values
from ..metrics.devices import device_breakdown
from ..metrics.pipeline import pipeline_imbalance
from ..metrics.steps import name_mask, step_stats, step_times
from ..model.profile import Profile
from ..report.explain import what_limits
from ..report.summary import accelerator
from ..rules import Findings
from .diagnose import diagnose

#: Version of the JSON document :func:`pilot` returns (docs/pilot.md, "JSON"). Bump on any incompatible change.
SCHEMA_VERSION = 3

#: Tables only IPU sources fill: a profile with any of them is an IPU run.
IPU_TABLES = ("tiles", "steps", "runs", "liveness", "execution_totals", "out_of_memory", "tile_histogram")


@dataclass(frozen=True)
class Figure:
    """One row of the pilot table."""

    key: str
    label: str
    unit: str
    group: str


FIGURES: tuple[Figure, ...] = (
    Figure("compile_time_us", "compile time", "us", "compile"),
    Figure("warmup_steps", "warm-up steps", "steps", "warm-up"),
    Figure("warmup_mean_us", "warm-up step time (mean)", "us", "warm-up"),
    Figure("warmup_ratio", "warm-up / steady p50", "ratio", "warm-up"),
    Figure("step_count", "steady steps", "steps", "step time"),
    Figure("step_p50_us", "step time p50", "us", "step time"),
    Figure("step_p90_us", "step time p90", "us", "step time"),
    Figure("step_p99_us", "step time p99", "us", "step time"),
    Figure("step_max_us", "step time max", "us", "step time"),
    Figure("throughput", "throughput", "per s", "throughput"),
    Figure("devices", "devices", "devices", "device"),
    Figure("busy_pct", "device busy", "%", "device"),
    Figure("compute_pct", "compute", "%", "device"),
    Figure("communication_pct", "communication (GPU) / all exchange (IPU)", "%", "device"),
    Figure("memory_pct", "copies (GPU) / stream copies (IPU)", "%", "device"),
    Figure("sync_pct", "sync (IPU)", "%", "device"),
    Figure("idle_host_pct", IDLE_HOST, "%", "device"),
    Figure("launch_idle_pct", "launch-bound idle (GPU)", "%", "device"),
    Figure("stage_imbalance_pct", f"{STAGE_IMBALANCE} (IPU)", "%", "device"),
    Figure("memory_utilisation", "fullest tile / capacity", "share", "memory"),
    Figure("memory_headroom_bytes", "headroom of the fullest tile", "bytes", "memory"),
    Figure("tiles_out_of_memory", "tiles out of memory", "tiles", "memory"),
    Figure("peak_liveness_bytes", "liveness peak", "bytes", "memory"),
    Figure("peak_allocated_bytes", "peak allocated (GPU)", "bytes", "memory"),
)

#: Names of compilation events: ``compile`` / ``compilation`` / ``compiling`` as a word (not ``Compiled``,
#: which names the execution of a compiled graph, e.g. PyTorch's ``Torch-Compiled Region``). On a PyTorch trace
#: these are the ranges ``torch.compile`` records around its phases (``torch/_dynamo/utils.py`` ``dynamo_timed``:
#: ``record_function(f"{key} (dynamo_timed)")``, e.g. ``compile_inner (dynamo_timed)``).
COMPILE_NAME = re.compile(r"(?i)(?<![a-z])compil(?:e|ation|ing)(?![a-z])")

#: The channel of a PyTorch trace's Python stack frames (``with_stack=True``): their names are a source file and a
#: function (``torch/compiler/__init__.py(367): is_compiling``, ``vllm/compilation/cuda_graph.py(208): __call__``,
#: ``<built-in function compile>``), so the compile word there names a file or a check, not a compilation.
PYTHON_FRAMES = "python_function"

CAPTURE = {
    "ipu": {
        "compile": 'a .pvti trace of the compilation (PVTI_OPTIONS=\'{"enable":"true"}\', `popprof record`)',
        "steps": "an execution profile (POPLAR_ENGINE_OPTIONS autoReport.all, `popprof record`)",
        "device": "an execution profile (autoReport.all) or a .pvti trace",
        "sync": "an execution profile (autoReport.all)",
        "idle_host": "not split on IPUs: the time account's stream copies are the host-bound time",
        "launches": "not an IPU figure (kernel launches are GPU-only)",
        "pipeline": "an execution profile (autoReport.all) of a run pipelined over two or more IPUs",
        "memory": "the graph profile (autoReport.outputGraphProfile) or the text summary",
        "liveness": "the graph profile with liveness (profile.pop)",
        "gpu_memory": "not an IPU figure",
    },
    "gpu": {
        "compile": "the compilation in the trace (torch.compile / XLA events inside the profiled window)",
        "steps": "a trace with profiler steps (torch.profiler schedule, prof.step() each iteration)",
        "device": "a trace with GPU activity (ProfilerActivity.CUDA)",
        "sync": "not measured on GPUs (the device's own sync events count as idle, launch or dependency)",
        "idle_host": "a trace with CPU activity (ProfilerActivity.CPU): the launches split the idle time",
        "launches": "a trace with CPU and GPU activity: the launch calls and the kernels they launched",
        "pipeline": "not a GPU figure (pipeline stages across IPUs)",
        "memory": "not a GPU figure (per-tile memory is IPU-only)",
        "liveness": "not a GPU figure (liveness is IPU-only)",
        "gpu_memory": "a trace with the allocator's memory events (profile_memory=True)",
    },
}

FIGURE_NEEDS = {
    "compile_time_us": "compile",
    "warmup_steps": "steps",
    "warmup_mean_us": "steps",
    "warmup_ratio": "steps",
    "step_count": "steps",
    "step_p50_us": "steps",
    "step_p90_us": "steps",
    "step_p99_us": "steps",
    "step_max_us": "steps",
    "throughput": "steps",
    "devices": "device",
    "busy_pct": "device",
    "compute_pct": "device",
    "communication_pct": "device",
    "memory_pct": "device",
    "sync_pct": "sync",
    "idle_host_pct": "idle_host",
    "launch_idle_pct": "launches",
    "stage_imbalance_pct": "pipeline",
    "memory_utilisation": "memory",
    "memory_headroom_bytes": "memory",
    "tiles_out_of_memory": "memory",
    "peak_liveness_bytes": "liveness",
    "peak_allocated_bytes": "gpu_memory",
}


def platform_of(profile: Profile, devices: pd.DataFrame | None = None) -> str:
    """``"ipu"`` for an IPU run (any IPU-only table, an IPU source format or IPU device rows), else ``"gpu"``.

    ``devices``: the profile's :func:`device_breakdown`, when the caller has it already.
    """
    if any(profile.has(t) for t in IPU_TABLES) or profile.source_format in IPU_FORMATS:
        return "ipu"
    stored = stored_values(profile)  # a baseline file: the metrics of the profile it was made from
    if any(name.startswith(("memory.", "execution.")) for name in stored):
        return "ipu"
    devices = device_breakdown(profile) if devices is None else devices
    if not devices.empty and (devices["platform"] == "ipu").any():
        return "ipu"
    return "gpu"


def compile_time_us(profile: Profile) -> float | None:
    """Total time of compilation events (union of their intervals, us); None when the profile has none. Python
    stack frames (:data:`PYTHON_FRAMES`) are not compilation events, whatever their file or function is named."""
    events = profile.get("events")
    if events is None or events.empty:
        return None
    mask = name_mask(events, COMPILE_NAME) & events["dur_us"].notna().to_numpy()
    if "channel" in events.columns:
        mask &= (events["channel"] != PYTHON_FRAMES).to_numpy()
    if not mask.any():
        return None
    from ..trace import spans as im

    start = events["start_us"].to_numpy(dtype=np.float64)[mask]
    end = start + events["dur_us"].to_numpy(dtype=np.float64)[mask]
    return float(im.union_length(start, end))


def _as_percent(share: float | None) -> float | None:
    return None if share is None else 100.0 * share


def _mean(frame: pd.DataFrame, column: str) -> float | None:
    values = pd.to_numeric(frame[column], errors="coerce").dropna()
    return None if values.empty else float(values.mean())


def samples_per_step(
    profile: Profile, platform: str, batch_size: int | None, samples: int | None, devices: pd.DataFrame
) -> int | None:
    """Samples one step processes: ``samples`` as given, else ``batch_size`` x replicas (IPU) or ranks (GPU)."""
    if samples is not None:
        return samples
    if batch_size is None:
        return None
    if platform == "ipu":
        replicas = profile.target_value("num_replicas")
        return batch_size * (int(replicas) if replicas is not None and not pd.isna(replicas) else 1)
    ranks = devices["rank"].dropna().nunique() if not devices.empty else 0
    return batch_size * max(int(ranks), 1)


def side(
    profile: Profile,
    label: str,
    *,
    role: str,
    batch_size: int | None = None,
    samples: int | None = None,
    warmup_steps: int = 1,
    thresholds: dict | None = None,
    config: dict | None = None,
    findings: object = None,
) -> dict:
    """One column of the pilot: ``label``, ``role`` (ipu / baseline), ``platform``, ``device_kind`` (the word for
    its devices: ``IPU``, ``GPU``, or ``TPU`` for an XPlane profile of TPUs, whose platform is ``gpu``), ``figures``
    (key -> ``{"value", "unit", "missing"}``), ``findings`` (rule id -> count and severity) and
    ``diagnosis``."""
    metrics = compute(profile)  # first: it clears the profile's derived-table cache
    devices = device_breakdown(profile)
    platform = platform_of(profile, devices)
    stats = step_stats(step_times(profile), warmup_steps)
    values: dict[str, float | None] = dict.fromkeys(f.key for f in FIGURES)
    values["compile_time_us"] = compile_time_us(profile)
    per_step = samples_per_step(profile, platform, batch_size, samples, devices)
    throughput_unit = "samples/s" if per_step is not None else "steps/s"
    if stats is not None:
        values.update(
            warmup_steps=stats["warmup_steps"] if stats["steady_state"] else None,
            warmup_mean_us=stats["warmup_mean_us"],
            warmup_ratio=stats["warmup_ratio"],
            step_count=stats["count"],
            step_p50_us=stats["p50_us"],
            step_p90_us=stats["p90_us"],
            step_p99_us=stats["p99_us"],
            step_max_us=stats["max_us"],
        )
        if stats["total_us"] > 0:
            values["throughput"] = stats["count"] * (per_step or 1) / (stats["total_us"] / 1e6)
    shares_source = shares_basis = None
    sync = None
    pooled = account.pooled(profile)
    if pooled is not None and pooled["window_us"] > 0:  # the time account: one figure per device and window
        window = pooled["window_us"]

        def share_of(*parts: str) -> float:
            return 100.0 * sum(pooled.get(p, 0.0) for p in parts) / window

        runs = account.run_account(profile)
        values["devices"] = float(len(runs))
        values["busy_pct"] = share_of(*account.BUSY_PARTS)
        values["compute_pct"] = share_of("compute")
        values["communication_pct"] = share_of(*account.COMMUNICATION_PARTS[platform])
        values["memory_pct"] = share_of("copies", "stream_copies")
        if platform == "gpu":
            values["idle_host_pct"] = share_of("idle_host")
            launch_idle = metrics.get("launches.launch_idle_us")  # the account's idle_launch in launch gaps
            values["launch_idle_pct"] = None if launch_idle is None else 100.0 * launch_idle / window
        else:
            sync = share_of("sync") / 100.0
        shares_source = "time_account"
        bases = set(runs["basis"])
        shares_basis = summary_basis(profile) if bases == {"summary_total"} else DEVICE_TIME
    values["sync_pct"] = _as_percent(sync)
    if platform == "ipu":
        stages = pipeline_imbalance(profile)  # the summary's pipeline: its share of the run
        values["stage_imbalance_pct"] = None if stages is None else _as_percent(stages.get("share"))
    if platform == "gpu":  # the allocator's peak of the trace's [memory] events
        values["peak_allocated_bytes"] = metrics.get("trace.device_memory_peak_bytes")
    if platform == "ipu":
        values["memory_utilisation"] = metrics.get("memory.max_tile_utilisation")
        values["memory_headroom_bytes"] = metrics.get("memory.max_tile_headroom_bytes")
        values["tiles_out_of_memory"] = metrics.get("memory.tiles_out_of_memory")
        values["peak_liveness_bytes"] = metrics.get("memory.peak_liveness_bytes")
    figures = {}
    for fig in FIGURES:
        value = values[fig.key]
        unit = throughput_unit if fig.key == "throughput" else fig.unit
        missing = (
            None
            if value is not None
            else f"not in this profile: capture {CAPTURE[platform][FIGURE_NEEDS[fig.key]]}"
        )
        if value is None and CAPTURE[platform][FIGURE_NEEDS[fig.key]].startswith("not "):
            missing = CAPTURE[platform][FIGURE_NEEDS[fig.key]]
        if value is None and stats is not None and fig.key.startswith("warmup_"):
            missing = (
                f"no warm-up: only {plural(stats['count'], 'step')}, not more than --warmup-steps {warmup_steps}"
                if warmup_steps
                else "no warm-up: --warmup-steps 0"
            )
        figures[fig.key] = {"value": value, "unit": unit, "missing": missing}
    found = findings if findings is not None else _check(profile, config)
    caveats = []
    if stats is not None and stats["count"] == 1:
        caveats.append(
            f"{label}: the step-time percentiles come from a single steady step (p50 = p90 = p99 = max); "
            "profile more steps for a distribution"
        )
    out = {
        "label": label,
        "role": role,
        "profile": profile.name,
        "source": str(profile.source or ""),
        "source_format": profile.source_format,
        "platform": platform,
        "device_kind": "IPU" if platform == "ipu" else accelerator(devices.to_dict("records")),
        "step_source": None if stats is None else stats["source"],
        "shares_source": shares_source,
        "shares_basis": shares_basis,
        "figures": figures,
        "findings": _findings_by_rule(found),
        "caveats": caveats,
    }
    out["what_limits"] = what_limits(profile, found if isinstance(found, Findings) else None)
    limits = out["what_limits"] or {}
    out["diagnosis"] = diagnose(figures, _does_not_fit_evidence(profile), thresholds, limits.get("limit"))
    return out


#: Bases of the device shares (``shares_basis``): what a percentage is a share of.
DEVICE_TIME = "device time"
TILE_AVERAGE = "tile average cycles"
SUMMARY_TOTALS = "summary cycle totals"
BASIS_WORDS = {
    DEVICE_TIME: "each device's share of its time",
    TILE_AVERAGE: "Poplar's tile averages (the average tile's cycles in a category over the total cycles, "
    "as the text summary prints them)",
    SUMMARY_TOTALS: "the text summary's category cycle totals over its total cycles (SDK 1.x)",
}


def summary_basis(profile: Profile) -> str:
    """The basis of a text summary's shares: tile averages (SDK 2.x/3.x) or cycle totals (SDK 1.x)."""
    totals = profile.execution_totals
    rows = totals[totals["category"] != "total"]
    return TILE_AVERAGE if (rows["basis"] == "tile_average").any() else SUMMARY_TOTALS


def basis_caveats(columns: list[dict]) -> None:
    """Add to each column whose shares are on another basis than some other column's a caveat naming both:
    a text summary's tile-average shares and a trace's share of device time are different figures."""
    bases = {c["label"]: c.get("shares_basis") for c in columns if c.get("shares_basis")}
    if len(set(bases.values())) < 2:
        return
    for column in columns:
        mine = column.get("shares_basis")
        if mine is None or mine == DEVICE_TIME:
            continue
        others = [label for label, basis in bases.items() if basis != mine]
        column["caveats"].append(
            f"{column['label']}: the compute, exchange, stream copies and sync shares are "
            f"{BASIS_WORDS[mine]}, while {', '.join(others)} give{'s' if len(others) == 1 else ''} "
            f"{BASIS_WORDS.get(bases[others[0]], bases[others[0]])}: different bases, so the shares are "
            "not comparable point for point (a tile average weighs every tile equally, idle ones too; a "
            "share of device time counts the time any work ran on the device)"
        )


def _check(profile: Profile, config: dict | None) -> object:
    from ..rules import check

    return check(profile, config=config)


def _findings_by_rule(findings: object) -> dict[str, dict]:
    order = {"error": 0, "warning": 1, "info": 2}
    out: dict[str, dict] = {}
    for item in getattr(findings, "items", []):
        entry = out.setdefault(item.rule_id, {"count": 0, "severity": item.severity})
        entry["count"] += 1
        if order.get(item.severity, 3) < order.get(entry["severity"], 3):
            entry["severity"] = item.severity
    return dict(sorted(out.items()))


def _does_not_fit_evidence(profile: Profile) -> int:
    """Failed compilations the profile records (out-of-memory messages); 0 when none."""
    oom = profile.get("out_of_memory")
    return 0 if oom is None or oom.empty else int(oom["compilation"].nunique())


def pilot(
    ipu: list[tuple[str, Profile]],
    baseline: list[tuple[str, Profile]],
    *,
    batch_size: int | None = None,
    samples: int | None = None,
    warmup_steps: int = 1,
    thresholds: dict | None = None,
    config: dict | None = None,
) -> dict:
    """The pilot document: one column per (label, profile), IPU columns first, then the baseline's.

    ``batch_size`` (per replica / rank) or ``samples`` (per step, as given) turn steps/s into
    samples/s; ``warmup_steps``: the first K steps left out of the step-time figures.
    """
    from .diagnose import thresholds_from

    limits = thresholds_from(config or {}, thresholds)
    kw = {
        "batch_size": batch_size,
        "samples": samples,
        "warmup_steps": warmup_steps,
        "thresholds": limits,
        "config": config,
    }
    columns = [side(p, label, role="ipu", **kw) for label, p in ipu]
    columns += [side(p, label, role="baseline", **kw) for label, p in baseline]
    basis_caveats(columns)
    rules = sorted({r for c in columns for r in c["findings"]})
    return {
        "schema": "popprof.pilot",
        "schema_version": SCHEMA_VERSION,
        "options": {"batch_size": batch_size, "samples_per_step": samples, "warmup_steps": warmup_steps},
        "thresholds": limits,
        "figures": [{"key": f.key, "label": f.label, "unit": f.unit, "group": f.group} for f in FIGURES],
        "rules": rules,
        "columns": columns,
    }
