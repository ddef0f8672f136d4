"""Launch-overhead rule: many short kernels whose launch cost keeps the GPU waiting.

The figures are :mod:`popprof.metrics.launches` (HolisticTraceAnalysis's launch statistics, HTA 0.5.0):
a short kernel runs for less time than its launch call takes on the host, and the launch-bound idle time
before it is the part of the device's idle gap after its launch call started (the time account's
``idle_launch`` of that gap). ``host.device-gaps`` looks at gaps of 1 ms or more (the host not submitting
work); this rule prices the short gaps between launches that CUDA graphs and kernel fusion remove.
"""

from __future__ import annotations

import re

from ..io import units
from ..metrics.account import run_account
from ..metrics.launches import RUNTIME_CUTOFF_US, kernel_launches, launch_idle, launch_overview
from ..model.profile import Profile
from .base import Finding, Gain, NotEvaluated, RuleContext, band, rule

_TEMPLATE = re.compile(r"<[^<>]*>")


def _kernel_word(name: str, width: int = 48) -> str:
    """A kernel's name without return type, template and parameters (``at::native::elementwise_kernel``),
    at most ``width`` characters; a name without C++ decoration (``Memcpy DtoD``) as it is."""
    text = str(name)
    if "::" in text or "<" in text:
        for _ in range(8):  # nested templates, innermost first
            text, n = _TEMPLATE.subn("", text)
            if not n:
                break
        text = (text.split("(")[0].split() or [text])[-1]
    else:
        text = text.split("(")[0].strip() or text
    return text if len(text) <= width else text[: width - 3] + "..."


@rule(
    "host.launch-overhead",
    "short kernels (shorter than their launch call) whose launches keep the GPU idle between them",
    needs=["events"],
    params={"warning": 0.05, "error": 0.25, "min_short_share": 0.10, "top": 3},
    advice={
        "ipu": "Not applicable to IPU programs (the IPU runs one compiled program; no kernel launches).",
        "gpu": "Many kernels run for less time than the host needs to launch them, so the GPU waits for "
        "launches: capture the steady-state step in a CUDA graph (torch.cuda.graphs, "
        "torch.compile(mode='reduce-overhead')), fuse small element-wise kernels (torch.compile / "
        "Inductor, fused optimizers such as foreach/fused Adam), and make the work per kernel larger "
        "(bigger batches, fewer Python-level loops over small tensors).",
    },
)
def launch_overhead(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    overview = launch_overview(profile)
    if overview is None:
        raise NotEvaluated(
            "needs kernel launch calls joined with their device work by correlation id (a Kineto trace with "
            "runtime events)"
        )
    runs = run_account(profile)
    runs = runs[runs["platform"] == "gpu"]
    window = float(runs["window_us"].sum())
    if window <= 0:
        raise NotEvaluated("needs device time (the time account's window is empty)")
    short_share = overview["short_count"] / overview["count"]
    idle = overview["short_launch_idle_us"]  # the account's idle_launch before short kernels: never above it
    value = idle / window
    severity, threshold = band(value, params["warning"], params["error"])
    if severity is None or short_share < params["min_short_share"]:
        return []
    frame = kernel_launches(profile)
    short = frame[frame["short"].to_numpy(dtype=bool)]
    gaps = launch_idle(profile)
    gaps = gaps[gaps["short"].to_numpy(dtype=bool)]
    top = (
        short.groupby("name", observed=True)
        .agg(count=("name", "size"), gpu_us=("gpu_duration_us", "sum"), cpu_us=("cpu_duration_us", "sum"))
        .join(
            gaps.groupby("name", observed=True)["idle_launch_us"].sum().rename("launch_idle_us"), how="outer"
        )
        .fillna({"count": 0, "gpu_us": 0.0, "cpu_us": 0.0, "launch_idle_us": 0.0})
        .astype({"count": "int64"})
        .sort_values("launch_idle_us", ascending=False, kind="stable")
        .reset_index()
    )
    top["name"] = top["name"].astype(str)
    n = int(params["top"])
    names = ", ".join(
        f"{_kernel_word(row.name)} x{row.count:,} ({units.duration(row.launch_idle_us)})"
        for row in top.head(n).itertuples()
    )
    message = (
        f"{overview['short_count']:,} of {overview['count']:,} launches ({units.percent(short_share)}) are "
        f"short kernels (shorter than their launch call, which takes <= {RUNTIME_CUTOFF_US:g} us): "
        f"{units.duration(overview['short_gpu_us'])} on the GPU for {units.duration(overview['short_cpu_us'])} "
        f"of launch calls; the GPU sits idle {units.duration(idle)} waiting for their launches, "
        f"{units.percent(value)} of its time ({severity} at >= {units.limit_percent(threshold)}); "
        f"launch delay median {units.duration(overview['delay_median_us'])}, p95 "
        f"{units.duration(overview['delay_p95_us'])}; most: {names}"
    )
    gain = Gain(
        idle,
        "us",
        "the launch-bound idle time before the short kernels (the part of each gap after its launch call "
        "started), were they launched as one CUDA graph or fused; at most the account's idle, launch or "
        "dependency time",
        whole=window,
        rests_on=("idle_launch",),
    )
    return [
        ctx.finding(
            severity,
            "Launch overhead",
            message,
            value=value,
            threshold=threshold,
            where={"kernels": [str(x) for x in top["name"].head(n)]},
            evidence=top,
            figure="launches.short_launch_idle_us",
            share=min(value, 1.0),
            gain=gain,
        )
    ]
