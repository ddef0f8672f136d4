"""GPU operators far below the roofline that take a large share of the device's compute time.

A threshold, advice and a gain formula over :func:`popprof.metrics.operations.operations` (the figures are
defined there and in ``docs/operations.md``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import units
from ..io.names import shape_words
from ..io.plural import plural
from ..metrics import account, operations
from ..model.errors import NotEvaluated
from ..model.profile import Profile
from ..trace.device import NOT_ON_THE_ROOFLINE
from .base import Finding, Gain, RuleContext, band, held_to_stake, held_words, rule


def roofline_frame(profile: Profile) -> pd.DataFrame:
    """The operators a roofline can judge (FLOPs, bytes, time and a known peak) with ``attainable_tflops``
    (``min(peak, intensity x memory TB/s)``), ``efficiency`` (achieved / attainable) and ``roofline_us``
    (the time their FLOPs would take at the attainable rate). Empty when none can be judged."""
    table = operations.operations(profile)
    known = (
        table["tflops"].notna()
        & table["peak_tflops"].notna()
        & table["intensity"].notna()
        & (table["tflops"] > 0)
    )
    frame = table[known.to_numpy(dtype=bool)].copy()
    if frame.empty:
        return frame
    intensity = frame["intensity"].to_numpy(dtype=np.float64)
    attainable = np.minimum(
        frame["peak_tflops"].to_numpy(dtype=np.float64),
        intensity * frame["peak_tbps"].to_numpy(dtype=np.float64),
    )
    flops = frame["flops_per_call"].to_numpy(dtype=np.float64) * frame["count"].to_numpy(dtype=np.float64)
    frame["attainable_tflops"] = attainable
    frame["efficiency"] = frame["tflops"].to_numpy(dtype=np.float64) / attainable
    frame["roofline_us"] = flops / (attainable * 1e12) * 1e6
    return frame.reset_index(drop=True)


@rule(
    "operations.below-roofline",
    "GPU operators far below the device's roofline that take a large share of its compute time",
    needs=["events"],
    params={
        "efficiency_below": 0.25,
        "share_warning": 0.20,
        "share_error": 0.60,
        "span_warning": 0.10,
        "span_error": 0.30,
        "top": 3,
    },
    advice={
        "ipu": "Operators run far below what the device could do for their arithmetic intensity.",
        "gpu": "These operators reach a small part of what the GPU could do for their shapes: use the "
        "tensor-core dtypes (bf16/fp16, TF32 for fp32 matmuls: torch.backends.cuda.matmul.allow_tf32), pad "
        "GEMM dimensions to multiples of 8/16, batch small GEMMs, fuse elementwise chains (torch.compile), "
        "and use the fused attention kernels (scaled_dot_product_attention).",
        "tpu": "These TPU ops reach a small part of what the chip could do for their FLOPs and bytes "
        "(XLA's own counts; xprof's op profile shows each): run matmuls and convolutions in bf16, "
        "shape large dimensions to multiples of 128 and 8 (XLA pads a tensor to its 128 x 8 tiles: "
        "Cloud TPU's performance guide), batch small ops together, and keep elementwise chains inside "
        "one jitted function so that XLA fuses them.",
    },
)
def below_roofline(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    tpu = ctx.advice_platform == "tpu"  # the rows are a TPU's HLO ops (XLA's cost analysis)
    if operations.operations(profile).empty:
        return []  # no framework operator launched GPU work, no TPU op: nothing to judge
    frame = roofline_frame(profile)
    if frame.empty:
        note = operations.operations_note(profile) or "no operator has a FLOPs model and a known device peak"
        raise NotEvaluated(f"needs operators' input shapes and the device's peak ({note})")
    runs = account.run_account(profile)
    gpu = runs[runs["platform"] == "gpu"] if "platform" in runs.columns else runs
    compute = float(gpu["compute"].sum()) if not gpu.empty else 0.0
    window = float(gpu["window_us"].sum()) if not gpu.empty else 0.0
    if compute <= 0:
        return []
    # copies are left out: a host-device copy runs at the link's bandwidth, which the peak table does not hold;
    # so are a TPU's copies and collectives (their HLO categories)
    judged = frame[~frame["category"].isin({"copy", *NOT_ON_THE_ROOFLINE})]
    slow = judged[judged["efficiency"] < float(params["efficiency_below"])]
    slow = slow.sort_values("device_time_us", ascending=False, kind="stable")
    spent = float(slow["device_time_us"].sum())
    share = spent / compute
    severity, threshold = band(share, params["share_warning"], params["share_error"])
    if severity is None:
        return []
    n = int(params["top"])
    parts = [
        f"{row.name}{_inputs(row.input_shapes)} {units.duration(row.device_time_us)} at "
        f"{units.percent(row.efficiency)} of its roofline"
        for row in slow.head(n).itertuples()
    ]
    message = (
        f"Operators below {units.percent(float(params['efficiency_below']))} of the roofline for their "
        f"arithmetic intensity ({plural(len(slow), 'operator shape')}) take {units.percent(share)} of the device "
        "compute time "
        f"({severity} at >= {units.percent(threshold)}): " + ", ".join(parts)
    )
    if len(slow) > n:
        message += f" ({len(slow) - n} more in the evidence)"
    saved = float(np.clip(slow["device_time_us"] - slow["roofline_us"], 0, None).sum())
    # what reaching the roofline would buy, of the devices' windows, holds the severity (a launch-bound run
    # whose few small GEMMs are slow is not an error)
    stake = min(saved, spent) / window if window > 0 else None
    held = held_to_stake(severity, stake, params["span_warning"], params["span_error"])
    if held != severity:  # lowered: to a warning (its threshold then the share's) or to info
        message += (
            f"; at the roofline they would save {units.percent(stake)} of the devices' windows"
            + held_words(held, params)
        )
        severity, threshold = held, float(params["share_warning"]) if held == "warning" else None
    gain = Gain(
        min(saved, spent),
        "us",
        "the time of those operators minus the time their FLOPs would take at the roofline (the device's peak "
        "for their dtype, or its memory bandwidth times their arithmetic intensity)",
        whole=window or None,
        rests_on=("compute",),
    )
    return [
        ctx.finding(
            severity,
            "TPU ops far below the roofline" if tpu else "GPU operators far below the roofline",
            message,
            value=share,
            threshold=threshold,
            where={"operations": [str(x) for x in slow["name"].head(20)]},
            evidence=slow,
            figure="operations.device_time_us",
            share=min(share, 1.0),
            gain=gain,
        )
    ]


def _inputs(shapes: object) -> str:
    """`` (16x512, 512x512)``: the call's input shapes after an operator's name, which alone does not tell two
    rows of one operator apart; empty without recorded shapes."""
    words = shape_words(shapes)
    return f" ({words})" if words else ""
