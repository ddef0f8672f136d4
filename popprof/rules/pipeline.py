"""Pipeline rule: stages of a pipelined model out of balance across its IPUs.

The figure is :func:`popprof.metrics.pipeline.pipeline_imbalance`; the rule adds the threshold, the advice
and the gain (the summed imbalance: what balanced stages would save, an upper bound).
"""

from __future__ import annotations

from ..io import units, words
from ..metrics.pipeline import pipeline_imbalance, slowest_stage, step_imbalance
from ..model.profile import Profile
from .base import Finding, NotEvaluated, RuleContext, band, ipu_run_gain, rule

#: The time-account parts the stages' wait is in: the faster IPUs idle or held at the barrier.
STAGE_WAIT_PARTS: tuple[str, ...] = ("idle", "sync")


@rule(
    "distributed.stage-imbalance",
    "pipeline stages out of balance across IPUs: per step, the slowest stage minus the mean stage, summed",
    needs=["steps"],
    params={"warning": 0.10, "error": 0.30},
    advice="Each step lasts as long as its slowest stage while the other IPUs wait: move layers from the "
    "slowest stage's IPU to the faster ones (the split points of the pipeline), give the slow stage more "
    "room to plan with availableMemoryProportion, use recomputation or offloading to make room for moved "
    "layers, and check the first and last stages (embeddings, loss, optimizer) that often carry extra work.",
)
def stage_imbalance(profile: Profile, ctx: RuleContext) -> list[Finding]:
    params = ctx.params
    if not profile.steps["cycles"].notna().any():
        raise NotEvaluated("needs step cycles (steps.cycles are all missing)")
    if profile.target_value("clock_hz") is None:
        raise NotEvaluated("needs the IPU clock (target clock_hz) to turn cycles into time")
    found = pipeline_imbalance(profile)
    if found is None or found["share"] is None:
        return []  # one IPU, or replicas of one IPU each: no stages to balance
    share = float(found["share"])
    severity, threshold = band(share, params["warning"], params["error"])
    if severity is None:
        return []
    slow = slowest_stage(found)
    stages = ", ".join(f"IPU {s['ipu']} {units.duration(s['stage_us'])}" for s in found["stages"][:8])
    message = (
        f"{units.count(found['steps'])} steps run stages on {units.count(found['ipus'])} IPUs; "
        f"{words.STAGE_IMBALANCE} (the slowest stage minus the mean stage, summed over the steps) "
        f"{units.duration(found['imbalance_us'])} = "
        f"{units.percent(share)} of the run's {units.duration(found['window_us'])} ({severity} at >= "
        f"{units.limit_percent(threshold)}); stage time per IPU: {stages}; IPU {slow} is the slowest in total"
    )
    gain = ipu_run_gain(
        profile,
        found["imbalance_us"],
        "the sum over pipeline steps of the slowest stage minus the mean stage: what the run would save "
        "were every step's stages balanced (an upper bound: layers move in whole pieces)",
        STAGE_WAIT_PARTS,
    )
    evidence = step_imbalance(profile).sort_values("imbalance_us", ascending=False, kind="stable")
    return [
        ctx.finding(
            severity,
            "Pipeline stages out of balance",
            message,
            value=share,
            threshold=float(threshold),
            where={
                "ipus": [int(s["ipu"]) for s in found["stages"]],
                "steps": (int(evidence["step"].min()), int(evidence["step"].max())),
            },
            evidence=evidence.reset_index(drop=True),
            platform="ipu",
            figure="pipeline.imbalance_us",
            share=share,
            gain=gain,
        )
    ]
