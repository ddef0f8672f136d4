"""Launch-overhead rule: many short kernels whose launch cost keeps the GPU waiting.

The figures are :mod:`popprof.metrics.launches` (HolisticTraceAnalysis's launch statistics, HTA 0.5.0):
a short kernel runs for less time than its launch call takes on the host. The rule prices the device's idle
gaps under 1 ms that end at a short kernel, whole: the time account's ``idle_host`` of such a gap (the host
had not yet launched the kernel) and its ``idle_launch`` (launched, not yet running), which a CUDA graph or
kernel fusion removes (``short_gaps_us``). ``host.device-gaps`` judges the gaps of 1 ms or more (host work
between device runs), so the two price disjoint gaps.
"""

from __future__ import annotations

from ..io import units
from ..io.names import kernel_words
from ..io.plural import plural
from ..metrics.account import run_account
from ..metrics.devices import LAUNCH_CALLS
from ..metrics.launches import RUNTIME_CUTOFF_US, SHORT_GAP_US, launch_idle, launch_overview
from ..model.profile import Profile
from ..trace.intervals import device_label
from .base import Finding, Gain, NotEvaluated, RuleContext, band, rule


@rule(
    "host.launch-overhead",
    "short kernels (shorter than their launch call) whose launches keep the GPU idle between them",
    needs=["events"],
    params={"warning": 0.05, "error": 0.50, "min_short_share": 0.10, "top": 3},
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
            "needs runtime launch calls (cudaLaunchKernel, cudaMemcpyAsync, hipLaunchKernel, ...: HTA's launch "
            "statistics) joined with their device work by correlation id (a Kineto trace with runtime events); "
            "driver launches (cuLaunchKernel: Triton's) are not among them"
        )
    runs = run_account(profile)
    runs = runs[runs["platform"] == "gpu"]
    window = float(runs["window_us"].sum())
    if window <= 0:
        raise NotEvaluated("needs device time (the time account's window is empty)")
    short_share = overview["short_count"] / overview["count"]
    idle = overview["short_gaps_us"]  # the account's idle in the gaps under 1 ms that end at short kernels
    value = idle / window
    severity, threshold = band(value, params["warning"], params["error"])
    if severity is None or short_share < params["min_short_share"]:
        return []
    gaps = launch_idle(profile)
    gaps = gaps[gaps["short_gap"].to_numpy(dtype=bool)]
    gaps = gaps.assign(gaps_us=gaps["idle_host_us"] + gaps["idle_launch_us"])
    host_part = float(gaps["idle_host_us"].sum())
    # the kernels the priced gaps end at, from those gaps alone (HTA's launch statistics above count another
    # set: runtime launch calls only, on its rounded times, the last step left out)
    top = (
        gaps.groupby("name", observed=True)
        .agg(gaps=("name", "size"), gaps_us=("gaps_us", "sum"), idle_host_us=("idle_host_us", "sum"))
        .sort_values("gaps_us", ascending=False, kind="stable")
        .reset_index()
    )
    top["name"] = top["name"].astype(str)
    n = int(params["top"])
    listed = top.head(n)
    names = ", ".join(
        f"{word} ({plural(row.gaps, 'gap')}, {units.duration(row.gaps_us)})"
        for word, row in zip(kernel_words(listed["name"]), listed.itertuples(), strict=True)
    )
    outside = gaps["launch"][~gaps["launch"].isin(LAUNCH_CALLS)].value_counts()
    outside = outside[outside > 0]
    driver = (
        f"; {int(outside.sum()):,} of these gaps end at work launched by calls HTA's launch statistics leave "
        "out (" + ", ".join(f"{name} x{count:,}" for name, count in outside.items()) + ")"
        if len(outside)
        else ""
    )
    message = (
        f"{overview['short_count']:,} of {overview['count']:,} launches ({units.percent(short_share)}) are "
        f"short kernels (shorter than their launch call, which takes <= {RUNTIME_CUTOFF_US:g} us): "
        f"{units.duration(overview['short_gpu_us'])} on the GPU for {units.duration(overview['short_cpu_us'])} "
        f"of launch calls; the GPU sits idle {units.duration(idle)} in gaps under "
        f"{units.duration(SHORT_GAP_US)} before short kernels ({units.duration(host_part)} of it before the "
        f"host had launched them), {units.percent(value)} of its time ({severity} at >= "
        f"{units.limit_percent(threshold)}){driver}; launch delay median "
        f"{units.duration(overview['delay_median_us'])}, p95 {units.duration(overview['delay_p95_us'])}; most "
        f"idle before: {names}"
    )
    spans = {
        device_label(rank, device): (group["start_us"].to_numpy(), group["end_us"].to_numpy())
        for (rank, device), group in gaps.groupby(["rank", "device"], observed=True, dropna=False, sort=False)
    }
    gain = Gain(
        idle,
        "us",
        f"the idle gaps under {units.duration(SHORT_GAP_US)} that end at a short kernel, whole (the host not "
        "yet submitting it, then its launch), were the kernels launched as one CUDA graph or fused; longer "
        "gaps are host.device-gaps'",
        whole=window,
        rests_on=("idle_host", "idle_launch"),
        spans=spans,  # the gaps themselves: counted once with other gains on them
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
            figure="launches.short_gaps_us",
            share=min(value, 1.0),
            gain=gain,
        )
    ]
