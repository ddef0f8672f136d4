"""The critical path of each profiler step, one row per (rank, step): which step's path was the longest and
what dominated it, without asking for ``--steps N`` once per step.

Each row is :func:`popprof.metrics.critical_path.critical_paths` of that one step's window (``steps=(n, n)``,
HTA's ``annotation="ProfilerStep"`` window), never a path of its own: the same graph, built once per step and
cached on the profile as ``--steps N`` builds it.
"""

from __future__ import annotations

import pandas as pd

from ..model.profile import Profile
from .critical_path import PARTS, critical_paths, path_steps

#: The columns of :func:`critical_paths_by_step`: the step's path length, its time per part (``PARTS``, as
#: ``parts_us``), and the name with the most time on it (the first of ``top``: its name, part and time).
STEP_COLUMNS = [
    "rank",
    "step",
    "length_us",
    *(f"{part}_us" for part in PARTS),
    "top_name",
    "top_part",
    "top_us",
]


def critical_paths_by_step(profile: Profile) -> pd.DataFrame:
    """One row per rank and profiler step (:data:`STEP_COLUMNS`), for every step of
    :func:`popprof.metrics.critical_path.path_steps` the rank has a path in: the figures of
    ``critical_paths(profile, steps=(n, n))`` for that rank. ``rank`` is missing on a trace without ranks;
    ``top_name``, ``top_part`` and ``top_us`` are missing when no event has time on the path. Sorted by rank,
    then step; no rows without steps (or without GPU work in them)."""
    rows = []
    for step in path_steps(profile):
        for path in critical_paths(profile, top=1, steps=(step, step), savings=False):
            top = path["top"][0] if path["top"] else {}
            rows.append(
                {
                    "rank": path["rank"],
                    "step": step,
                    "length_us": path["length_us"],
                    **{f"{part}_us": path["parts_us"][part] for part in PARTS},
                    "top_name": top.get("name"),
                    "top_part": top.get("part"),
                    "top_us": top.get("us"),
                }
            )
    frame = pd.DataFrame(rows, columns=STEP_COLUMNS)
    frame["rank"] = frame["rank"].astype("Int64")
    frame["step"] = frame["step"].astype("int64")
    for column in ("length_us", *(f"{part}_us" for part in PARTS), "top_us"):
        frame[column] = frame[column].astype("float64")
    return frame.sort_values(["rank", "step"], kind="stable", ignore_index=True)


def step_records(frame: pd.DataFrame) -> list[dict]:
    """The rows of :func:`critical_paths_by_step` as JSON-ready dicts (missing values None, numbers Python's):
    the summary's ``trace.critical_path_by_step``."""
    out = []
    for row in frame.astype(object).to_dict("records"):
        out.append({k: (None if v is None or pd.isna(v) else v) for k, v in row.items()})
    for row in out:
        row["rank"] = None if row["rank"] is None else int(row["rank"])
        row["step"] = int(row["step"])
    return out
