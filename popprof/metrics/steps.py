"""Step (iteration) times of a run, the same table for IPU profiles and GPU traces.

:func:`step_times` gives one row per step: ``step``, ``start_us``, ``dur_us``, ``source``.

- GPU trace: the ``ProfilerStep#N`` spans (HTA's iteration times, read by
  :func:`popprof.metrics.ranks.step_times`, the function the straggler rule uses).
  With several ranks a step lasts as long as its slowest rank (the ranks wait
  for each other at the next collective): ``dur_us`` is the maximum over ranks.
- IPU ``.pvti`` trace: one step per ``Engine::run(PROGRAM)`` event (Poplar's span of one
  engine run), in start order.
- IPU profile: one step per execution run. ``dur_us`` is the run's host wall-clock
  time (``runs.end_us - runs.start_us``) when the runs table has it, else the run's
  cycles on its busiest IPU (``steps.cycles`` summed per run and IPU) over the clock.

:func:`step_stats` splits the first ``warmup`` steps off and gives the count,
percentiles and maximum of the rest (the steady state).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..model.profile import Profile

COLUMNS = ["step", "start_us", "dur_us", "source"]


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": pd.Series(dtype="int64"),
            "start_us": pd.Series(dtype="float64"),
            "dur_us": pd.Series(dtype="float64"),
            "source": pd.Series(dtype="str"),
        }
    )


def _profiler_steps(profile: Profile) -> pd.DataFrame:
    from .ranks import step_times as rank_step_times

    marks = rank_step_times(profile)
    if marks.empty:
        return _empty()
    if marks["step"].is_unique:  # one rank (or one marker per step): each group is one row, as it is
        out = marks[["step", "start_us", "dur_us"]].sort_values("step", kind="stable").reset_index(drop=True)
    else:
        grouped = marks.groupby("step", sort=True)
        out = pd.DataFrame(
            {"start_us": grouped["start_us"].min(), "dur_us": grouped["dur_us"].max()}
        ).reset_index()
    out["source"] = "ProfilerStep"
    return out[COLUMNS]


#: Poplar's span of one engine run in a ``.pvti`` trace: ``Engine::run(main)``.
ENGINE_RUN = re.compile(r"^Engine::run\(")


def name_mask(events: pd.DataFrame, pattern: re.Pattern) -> np.ndarray:
    """Boolean per event: its name matches ``pattern`` (searched once per distinct name when categorical)."""
    names = events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = names.cat.categories
        hits = np.flatnonzero(np.asarray(cats.astype("str").str.contains(pattern), dtype=bool))
        return np.isin(names.cat.codes.to_numpy(), hits)
    return np.asarray(names.astype("str").str.contains(pattern).fillna(False), dtype=bool)


def _engine_runs(profile: Profile) -> pd.DataFrame:
    events = profile.events
    mask = name_mask(events, ENGINE_RUN) & events["dur_us"].notna().to_numpy()
    if not mask.any():
        return _empty()
    start = events["start_us"].to_numpy(dtype=np.float64)[mask]
    dur = events["dur_us"].to_numpy(dtype=np.float64)[mask]
    order = np.argsort(start, kind="stable")
    return pd.DataFrame(
        {
            "step": np.arange(len(order), dtype=np.int64),
            "start_us": start[order],
            "dur_us": dur[order],
            "source": "Engine::run",
        }
    )


def _ipu_runs(profile: Profile) -> pd.DataFrame:
    runs = profile.get("runs")
    if (
        runs is not None
        and not runs.empty
        and runs["start_us"].notna().all()
        and runs["end_us"].notna().all()
    ):
        out = pd.DataFrame(
            {
                "step": runs["run"].astype("int64").to_numpy(),
                "start_us": runs["start_us"].to_numpy(dtype=np.float64),
                "dur_us": (runs["end_us"] - runs["start_us"]).to_numpy(dtype=np.float64),
                "source": "runs",
            }
        )
        return out.sort_values("step").reset_index(drop=True)
    steps = profile.get("steps")
    clock = profile.target_value("clock_hz")
    if steps is None or steps.empty or clock is None or pd.isna(clock) or float(clock) <= 0:
        return _empty()
    if steps["cycles"].isna().all():
        return _empty()
    per_ipu = steps["cycles"].astype("float64").groupby([steps["run"], steps["ipu"]]).sum()
    per_run = per_ipu.groupby(level=0).max() * 1e6 / float(clock)
    start = np.concatenate(([0.0], np.cumsum(per_run.to_numpy())[:-1]))
    return pd.DataFrame(
        {
            "step": per_run.index.astype("int64"),
            "start_us": start,
            "dur_us": per_run.to_numpy(dtype=np.float64),
            "source": "steps.cycles",
        }
    )


def step_times(profile: Profile) -> pd.DataFrame:
    """One row per step (``step``, ``start_us``, ``dur_us``, ``source``); empty when the profile has none."""
    events = profile.get("events")
    if events is not None and not events.empty:
        for find in (_profiler_steps, _engine_runs):
            out = find(profile)
            if not out.empty:
                return out
    return _ipu_runs(profile)


def step_stats(times: pd.DataFrame, warmup: int) -> dict | None:
    """Warm-up and steady-state figures of a :func:`step_times` table; None without steps.

    The first ``warmup`` steps are the warm-up; the rest the steady state (all steps when
    there are no more than ``warmup``, and then ``steady_state`` says ``False``).
    Keys: ``count`` (steady steps), ``p50_us``, ``p90_us``, ``p99_us`` (linear interpolation),
    ``max_us``, ``mean_us``, ``total_us`` (their sum), ``warmup_steps``, ``warmup_mean_us``,
    ``warmup_ratio`` (warm-up mean / steady p50), ``steady_state``, ``source``.
    """
    if times.empty:
        return None
    dur = times.sort_values("step")["dur_us"].to_numpy(dtype=np.float64)
    steady_state = len(dur) > warmup
    head, rest = (dur[:warmup], dur[warmup:]) if steady_state else (dur[:0], dur)
    p50, p90, p99 = (float(v) for v in np.percentile(rest, [50, 90, 99]))
    warm = float(head.mean()) if len(head) else None
    return {
        "count": int(len(rest)),
        "p50_us": p50,
        "p90_us": p90,
        "p99_us": p99,
        "max_us": float(rest.max()),
        "mean_us": float(rest.mean()),
        "total_us": float(rest.sum()),
        "warmup_steps": int(len(head)),
        "warmup_mean_us": warm,
        "warmup_ratio": warm / p50 if warm is not None and p50 > 0 else None,
        "steady_state": steady_state,
        "source": str(times["source"].iloc[0]),
    }
