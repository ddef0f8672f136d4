"""Pipeline-stage imbalance: how much longer each step takes than it would with its IPUs' stages balanced.

A pipelined model places each stage on its own IPU (within a replica) and the stages run at once; the IPUs
meet at the end of each step, so a step lasts as long as its slowest stage (Graphcore's pipelining tutorial,
``graphcore/tutorials`` ``tutorials/tensorflow1/pipelining/README.md``; ``docs/figures.md``).

From the ``steps`` table (one row per execution step and IPU, with its cycles):

- a stage's time in a step is the IPU's cycles in that step over the clock, counting every step category
  except ``sync`` (a barrier's cycles are the wait for the others, not the stage's work);
- a **pipeline step** is one where at least two IPUs of one replica have a stage time above zero;
- per pipeline step: ``slowest_us`` (the longest stage of any IPU), ``mean_us`` (the mean stage of the
  active IPUs; with replicas, the largest replica's mean: balancing moves work within a replica only) and
  ``imbalance_us = slowest_us - mean_us``: what the step would lose were its stages balanced.

:func:`pipeline_imbalance` sums them over the steps, with each IPU's stage time (a stage's total). None when
the profile has no steps on two IPUs of a replica (one IPU, or replicas of one IPU: data parallel, no stages).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.profile import Profile
from .execution import total_time_us
from .memory import num_replicas

#: Step categories that are not a stage's own work: a sync's cycles are its wait for the other IPUs.
NOT_STAGE_WORK: tuple[str, ...] = ("sync",)

STEP_COLUMNS = ["step", "ipus", "slowest_ipu", "slowest_us", "mean_us", "imbalance_us"]


def _clock_hz(profile: Profile) -> float | None:
    clock = profile.target_value("clock_hz")
    return None if clock is None or pd.isna(clock) or float(clock) <= 0 else float(clock)


def ipus_per_replica(profile: Profile) -> int | None:
    """IPUs one replica spans: the target's ``ipus_per_replica``, else its IPUs over its replicas."""
    value = profile.target_value("ipus_per_replica")
    if value is not None and not pd.isna(value) and int(value) > 0:
        return int(value)
    ipus = profile.target_value("num_ipus")
    if ipus is None or pd.isna(ipus) or int(ipus) <= 0:
        return None
    return max(1, int(ipus) // num_replicas(profile))


def stage_times(profile: Profile) -> pd.DataFrame:
    """Per pipeline step and active IPU: ``step, ipu, replica, stage_us`` (empty without pipeline steps)."""
    empty = pd.DataFrame(
        {
            "step": pd.Series(dtype="int64"),
            "ipu": pd.Series(dtype="int64"),
            "replica": pd.Series(dtype="int64"),
            "stage_us": pd.Series(dtype="float64"),
        }
    )
    steps = profile.get("steps")
    clock = _clock_hz(profile)
    if steps is None or steps.empty or clock is None or not steps["cycles"].notna().any():
        return empty
    work = steps[~steps["category"].astype("str").isin(NOT_STAGE_WORK)]
    frame = pd.DataFrame(
        {
            "step": work["step"].astype("int64"),
            "ipu": work["ipu"].astype("int64"),
            "cycles": work["cycles"].astype("float64").fillna(0.0),
        }
    )
    frame = frame.groupby(["step", "ipu"], sort=True, as_index=False)["cycles"].sum()
    frame = frame[frame["cycles"] > 0]
    per_replica = ipus_per_replica(profile) or int(frame["ipu"].max() + 1 if len(frame) else 1)
    frame["replica"] = frame["ipu"] // per_replica
    active = frame.groupby(["step", "replica"])["ipu"].transform("size")
    frame = frame[active >= 2]
    if frame.empty:
        return empty
    frame["stage_us"] = frame["cycles"] / clock * 1e6
    return frame[["step", "ipu", "replica", "stage_us"]].reset_index(drop=True)


def step_imbalance(profile: Profile) -> pd.DataFrame:
    """Per pipeline step: ``step, ipus`` (active), ``slowest_ipu, slowest_us, mean_us, imbalance_us``."""
    stages = stage_times(profile)
    if stages.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in STEP_COLUMNS})
    slowest_rows = stages.loc[stages.groupby("step")["stage_us"].idxmax()]
    means = stages.groupby(["step", "replica"])["stage_us"].mean().groupby("step").max()
    out = pd.DataFrame(
        {
            "step": slowest_rows["step"].to_numpy(),
            "ipus": stages.groupby("step")["ipu"].size().to_numpy(),
            "slowest_ipu": slowest_rows["ipu"].to_numpy(),
            "slowest_us": slowest_rows["stage_us"].to_numpy(),
            "mean_us": means.to_numpy(),
        }
    )
    out["imbalance_us"] = (out["slowest_us"] - out["mean_us"]).clip(lower=0.0)
    return out


def pipeline_imbalance(profile: Profile) -> dict | None:
    """The pipeline's stage imbalance, JSON-ready; None without pipeline steps.

    ``{ipus, steps, imbalance_us, slowest_sum_us, window_us, share, stages: [{ipu, stage_us, slowest_steps}],
    worst_steps: [{step, slowest_ipu, slowest_us, mean_us, imbalance_us}]}``: ``share`` is ``imbalance_us``
    of the run's window (the busiest IPU's time, ``execution.total_time_us``), None without it.
    """
    per_step = step_imbalance(profile)
    if per_step.empty:
        return None
    stages = stage_times(profile)
    totals = stages.groupby("ipu")["stage_us"].sum()
    slowest_counts = per_step["slowest_ipu"].value_counts()
    imbalance = float(per_step["imbalance_us"].sum())
    window = total_time_us(profile)
    worst = per_step.sort_values("imbalance_us", ascending=False, kind="stable").head(5)
    return {
        "ipus": int(stages["ipu"].nunique()),
        "steps": int(len(per_step)),
        "imbalance_us": imbalance,
        "slowest_sum_us": float(per_step["slowest_us"].sum()),
        "window_us": window,
        "share": None if not window else min(imbalance / window, 1.0),
        "stages": [
            {"ipu": int(ipu), "stage_us": float(us), "slowest_steps": int(slowest_counts.get(ipu, 0))}
            for ipu, us in totals.items()
        ],
        "worst_steps": [
            {
                "step": int(r.step),
                "slowest_ipu": int(r.slowest_ipu),
                "slowest_us": float(r.slowest_us),
                "mean_us": float(r.mean_us),
                "imbalance_us": float(r.imbalance_us),
            }
            for r in worst.itertuples()
        ],
    }


def slowest_stage(summary: dict) -> int:
    """The IPU whose stage is the longest in total (of :func:`pipeline_imbalance`'s document)."""
    totals = np.array([s["stage_us"] for s in summary["stages"]])
    return int(summary["stages"][int(totals.argmax())]["ipu"])
