"""GPU device memory: the peak reserved by PyTorch's caching allocator against the GPU's memory.

Figures come from :mod:`popprof.metrics.device_memory` (the summary's "Device memory": the peak allocated
and reserved, the capacity from ``deviceProperties``, the bytes in use at the trace's start, the operator at
the peak) and its :func:`~popprof.metrics.device_memory.reserved_peaks` (the bytes reserved but not
allocated at the peak reserved); the rule adds thresholds, the memory held before the trace, the advice and
the gain (docs/rules.md, ``memory.device-headroom``).
"""

from __future__ import annotations

import pandas as pd

from ..io import units
from ..metrics.device_memory import NET, device_memory, reserved_peaks
from ..model.profile import Profile
from ..trace.intervals import device_label
from .base import SEVERITIES, Finding, Gain, NotEvaluated, RuleContext, band, rule

#: The columns of the rule's evidence, one row per GPU with a known capacity.
EVIDENCE_COLUMNS = [
    "device",
    "rank",
    "figure",
    "peak_bytes",
    "capacity_bytes",
    "share",
    "start_bytes",
    "held_share",
    "unallocated_bytes",
    "unallocated_share",
    "peak_op",
    "basis",
    "severity",
]


@rule(
    "memory.device-headroom",
    "a GPU's peak reserved memory (peak allocated when the trace gives no reserved) against its capacity; "
    "memory held before the trace began, and the part reserved but not allocated at the peak",
    needs=["allocations"],
    params={"warning": 0.9, "error": 0.97, "held": 0.8, "fragmentation": 0.1},
    advice={
        "gpu": "Lower the peak: recompute activations (torch.utils.checkpoint), a smaller batch or "
        "micro-batch, bf16 weights and activations (torch.autocast), fewer tensors kept alive across steps. "
        "When much is reserved but not allocated, set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "(ROCm reads it too, or PYTORCH_HIP_ALLOC_CONF) so the allocator grows segments instead of "
        "caching fragments. Memory held before the trace (weights, a server's KV cache: vLLM's "
        "gpu_memory_utilization) is set where the model is loaded.",
    },
)
def device_headroom(profile: Profile, ctx: RuleContext) -> list[Finding]:
    """One finding for the GPUs whose peak reserved (else allocated) reaches ``warning`` of their memory,
    the worst severity first, then the fullest; a device's severity is one step lower when ``held`` of its
    peak was in use before the trace began (docs/rules.md)."""
    frame = _devices(profile, ctx.params)
    flagged = frame[frame["severity"].notna()]
    if flagged.empty:
        return []
    rank = flagged["severity"].map(SEVERITIES.index).rename("rank_of_severity")
    order = pd.concat([rank, flagged["share"]], axis=1).sort_values(
        ["rank_of_severity", "share"], ascending=False, kind="stable"
    )
    flagged = flagged.loc[
        order.index
    ]  # the worst severity first, then the fullest: the message leads with it
    worst = flagged.iloc[0]
    severity = worst["severity"]
    fragmented = bool(worst["unallocated_share"] >= ctx.params["fragmentation"])
    return [
        ctx.finding(
            severity,
            _title(worst, ctx.params, fragmented),
            _message(flagged, ctx.params, fragmented),
            value=float(worst["share"]),
            threshold=_threshold(worst["share"], ctx.params),
            where=_where(flagged),
            evidence=flagged.reset_index(drop=True),
            figure=f"device_memory.peak_{worst['figure']}_bytes",
            share=min(float(worst["share"]), 1.0),
            gain=_gain(worst, fragmented),
        )
    ]


def _devices(profile: Profile, params: dict) -> pd.DataFrame:
    """Per GPU with allocator events and a capacity: its figure, share, held and unallocated bytes and the
    severity it falls in (None below ``warning``). NotEvaluated without a GPU or without its capacity."""
    records = [r for r in device_memory(profile) if r["device"] != "cpu"]
    if not records:
        raise NotEvaluated("needs allocator events on a GPU (the PyTorch profiler's profile_memory=True)")
    known = [r for r in records if r["capacity_bytes"]]
    if not known:
        raise NotEvaluated("needs the GPU's memory: the trace's deviceProperties give no totalGlobalMem")
    slack = reserved_peaks(profile)
    return pd.DataFrame(
        [_row(r, slack.get((r["rank"], r["device"])), params) for r in known], columns=EVIDENCE_COLUMNS
    )


def _row(record: dict, slack: dict | None, params: dict) -> dict:
    """One GPU's row: the peak reserved when known (else allocated) over its capacity, and its severity."""
    reserved = record["peak_reserved_bytes"]
    figure, peak = ("reserved", reserved) if reserved else ("allocated", record["peak_allocated_bytes"])
    capacity = record["capacity_bytes"]
    share = peak / capacity
    held = record["start_bytes"] / peak if peak else 0.0
    unallocated = slack["unallocated_at_peak_bytes"] if slack and figure == "reserved" else 0
    severity = band(share, params["warning"], params["error"])[0]
    if severity is not None and held >= params["held"]:  # filled before the trace: one step lower
        severity = SEVERITIES[SEVERITIES.index(severity) - 1]
    return {
        "device": record["device"],
        "rank": record["rank"],
        "figure": figure,
        "peak_bytes": int(peak),
        "capacity_bytes": int(capacity),
        "share": share,
        "start_bytes": int(record["start_bytes"]),
        "held_share": held,
        "unallocated_bytes": int(unallocated),
        "unallocated_share": unallocated / peak if peak else 0.0,
        "peak_op": record["peak_op"],
        "basis": record["basis"],
        "severity": severity,
    }


def _title(worst: pd.Series, params: dict, fragmented: bool) -> str:
    """The finding's title: near capacity, and why when the rule can tell (fragmented, held before)."""
    if fragmented:
        return "GPU memory near capacity, fragmented"
    if worst["held_share"] >= params["held"]:
        return "GPU memory near capacity, held before the trace"
    return "GPU memory near capacity"


def _threshold(share: float, params: dict) -> float:
    """The band's threshold the share met (the error's, else the warning's), whatever severity it kept."""
    return float(band(share, params["warning"], params["error"])[1])


def _message(flagged: pd.DataFrame, params: dict, fragmented: bool) -> str:
    """The worst GPU's figures in words, then the other flagged GPUs' shares."""
    w = flagged.iloc[0]
    label = device_label(w["rank"], w["device"])
    banded = band(w["share"], params["warning"], params["error"])[0]
    text = (
        f"{label} {w['figure']} {units.nbytes(w['peak_bytes'])} at its peak = {units.percent(w['share'])} of "
        f"its {units.nbytes(w['capacity_bytes'])} ({banded} at >= "
        f"{units.limit_percent(_threshold(w['share'], params))})"
    )
    if w["basis"] == NET:
        text += (
            "; the net of the blocks allocated since the trace began (the trace gives no allocator totals): "
            "memory allocated before it is not in it"
        )
    if isinstance(w["peak_op"], str):
        text += f"; the peak allocated was reached in {w['peak_op']}"
    if w["held_share"] >= params["held"]:
        text += (
            f"; {units.nbytes(w['start_bytes'])} = {units.percent(w['held_share'])} of it was in use before "
            "the trace began (weights, or memory reserved up front such as vLLM's KV cache, sized by "
            "gpu_memory_utilization): a process that reserves memory up front fills it by design, so "
            f"{w['severity']} (held from {units.limit_percent(params['held'])} of the peak: one step lower)"
        )
    if w["figure"] == "reserved":
        text += (
            f"; reserved but not allocated at the peak: {units.nbytes(w['unallocated_bytes'])} = "
            f"{units.percent(w['unallocated_share'])} of the reserved"
        )
        if fragmented:
            text += (
                f" (fragmentation from {units.limit_percent(params['fragmentation'])}: expandable segments "
                "can return it)"
            )
    others = flagged.iloc[1:]
    if len(others):
        text += "; also " + ", ".join(
            f"{device_label(r.rank, r.device)} {units.percent(r.share)}" for r in others.itertuples()
        )
    return text


def _where(flagged: pd.DataFrame) -> dict:
    """The flagged GPUs (worst first), their ranks and the operator at the worst one's peak."""
    where: dict = {"devices": [device_label(r.rank, r.device) for r in flagged.itertuples()]}
    ranks = sorted({int(r) for r in flagged["rank"].dropna()})
    if ranks:
        where["ranks"] = ranks
    op = flagged.iloc[0]["peak_op"]
    if isinstance(op, str):  # None when no operator was around the peak's allocation
        where["operations"] = [op]
    return where


def _gain(worst: pd.Series, fragmented: bool) -> Gain:
    """Fragmented: the bytes reserved but not allocated at the peak. Otherwise: the peak above the bytes in
    use when the trace began (what the traced work and the allocator's cache added). Of the GPU's memory."""
    label = device_label(worst["rank"], worst["device"])
    if fragmented:
        value = worst["unallocated_bytes"]
        basis = (
            f"the bytes reserved but not allocated at {label}'s peak reserved: the most that expandable "
            "segments could return, the blocks live then staying"
        )
    else:
        value = max(worst["peak_bytes"] - worst["start_bytes"], 0)
        basis = (
            f"the bytes {worst['figure']} at {label}'s peak above those in use when the trace began: the most "
            "that checkpointing, a smaller batch, bf16 or expandable segments could free, memory held before "
            "the trace staying"
        )
    return Gain(float(value), "bytes", basis, whole=float(worst["capacity_bytes"]), of=f"{label}'s memory")
