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

from dataclasses import dataclass

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


@dataclass(frozen=True)
class StageGrid:
    """The stage time of every IPU in every pipeline step: ``stage_us[s, i]`` of step ``steps[s]`` on IPU
    ``ipus[i]`` (0 where the IPU ran no stage work, or its replica had fewer than two active IPUs)."""

    steps: np.ndarray
    ipus: np.ndarray
    replica: np.ndarray  # per IPU column: its replica's code (0..R-1)
    stage_us: np.ndarray  # (steps, ipus)
    active: np.ndarray  # (steps, replicas): the replica's active IPUs in that step (0 where not counted)


def stage_grid(profile: Profile) -> StageGrid | None:
    """The :class:`StageGrid` of the profile's pipeline steps; None without them."""
    return profile.cached("pipeline.stage_grid", lambda: _stage_grid(profile))


def _not_stage_work(category: pd.Series) -> np.ndarray:
    """Per step row: its category is not a stage's work (compared once per category when categorical)."""
    if isinstance(category.dtype, pd.CategoricalDtype):
        hits = np.flatnonzero(np.asarray(category.cat.categories.astype("str").isin(NOT_STAGE_WORK)))
        return np.isin(category.cat.codes.to_numpy(), hits)
    return category.astype("str").isin(NOT_STAGE_WORK).to_numpy()


def _stage_grid(profile: Profile) -> StageGrid | None:
    steps = profile.get("steps")
    clock = _clock_hz(profile)
    if steps is None or steps.empty or clock is None or not steps["cycles"].notna().any():
        return None
    work = ~_not_stage_work(steps["category"])
    step_code, step_ids = pd.factorize(steps["step"].to_numpy(dtype=np.int64)[work], sort=True)
    ipu_code, ipu_ids = pd.factorize(steps["ipu"].to_numpy(dtype=np.int64)[work], sort=True)
    if not len(step_ids):
        return None
    cycles = steps["cycles"].to_numpy(dtype="float64", na_value=0.0)[work]
    n_steps, n_ipus = len(step_ids), len(ipu_ids)
    grid = np.bincount(step_code * n_ipus + ipu_code, weights=cycles, minlength=n_steps * n_ipus)
    grid = grid.reshape(n_steps, n_ipus) * (1e6 / clock)
    ipus = np.asarray(ipu_ids, dtype=np.int64)
    per_replica = ipus_per_replica(profile) or int(ipus.max()) + 1
    replica_code, _ = pd.factorize(ipus // per_replica, sort=True)
    on = grid > 0
    active = np.stack([on[:, replica_code == r].sum(axis=1) for r in range(int(replica_code.max()) + 1)], 1)
    active = np.where(active >= 2, active, 0)  # a replica with one active IPU has no stages to balance
    counted = on & (active[:, replica_code] > 0)
    rows = counted.any(axis=1)
    if not rows.any():
        return None
    return StageGrid(
        np.asarray(step_ids, dtype=np.int64)[rows],
        ipus,
        replica_code,
        np.where(counted, grid, 0.0)[rows],
        active[rows],
    )


def stage_times(profile: Profile) -> pd.DataFrame:
    """Per pipeline step and active IPU: ``step, ipu, replica, stage_us`` (empty without pipeline steps)."""
    found = stage_grid(profile)
    if found is None:
        return pd.DataFrame(
            {
                "step": pd.Series(dtype="int64"),
                "ipu": pd.Series(dtype="int64"),
                "replica": pd.Series(dtype="int64"),
                "stage_us": pd.Series(dtype="float64"),
            }
        )
    row, col = np.nonzero(found.stage_us)
    return pd.DataFrame(
        {
            "step": found.steps[row],
            "ipu": found.ipus[col],
            "replica": found.replica[col].astype(np.int64),
            "stage_us": found.stage_us[row, col],
        }
    )


def step_imbalance(profile: Profile) -> pd.DataFrame:
    """Per pipeline step: ``step, ipus`` (active), ``slowest_ipu, slowest_us, mean_us, imbalance_us``."""
    found = stage_grid(profile)
    if found is None:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in STEP_COLUMNS})
    grid, active = found.stage_us, found.active
    sums = np.stack([grid[:, found.replica == r].sum(axis=1) for r in range(active.shape[1])], 1)
    means = np.where(active > 0, sums / np.maximum(active, 1), -np.inf).max(axis=1)
    slowest = grid.max(axis=1)
    out = pd.DataFrame(
        {
            "step": found.steps,
            "ipus": active.sum(axis=1),
            "slowest_ipu": found.ipus[grid.argmax(axis=1)],
            "slowest_us": slowest,
            "mean_us": means,
        }
    )
    out["imbalance_us"] = np.maximum(slowest - means, 0.0)
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
    found = stage_grid(profile)
    totals = pd.Series(found.stage_us.sum(axis=0), index=found.ipus)
    totals = totals[totals > 0]
    slowest_counts = per_step["slowest_ipu"].value_counts()
    imbalance = float(per_step["imbalance_us"].sum())
    window = total_time_us(profile)
    worst = per_step.sort_values("imbalance_us", ascending=False, kind="stable").head(5)
    return {
        "ipus": int(len(totals)),
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
