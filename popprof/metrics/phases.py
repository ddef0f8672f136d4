"""Exchange-heavy phases: windows of a run where exchange, global exchange and sync take a large share.

Two sources, one shape of result. IPU execution steps (:func:`step_phases`): windows of ``window`` steps,
the share of each window's IPU-cycles in the exchange categories. Device activity of a trace
(:func:`device_phases`): windows of ``window_us`` over one device's active span, the share of its busy time
in exchange not overlapped by other device work. In both, windows at or above ``moderate`` are flagged
(band 1; ``high``: band 2) and adjacent flagged windows merge into one phase. The ``exchange.phases`` rule
judges these figures; it computes none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..io import units
from ..model.errors import NotEvaluated
from ..model.profile import Profile
from ..trace.activity import labels_mask
from ..trace.intervals import DeviceActivity, device_activities, device_label
from ..trace.spans import intersect_intervals, merge_intervals, subtract_intervals, window_sums
from . import account
from . import execution as ex
from .collectives import skew_spans

#: Step / device categories that count as exchange (data movement and the barriers around it).
EXCHANGE: tuple[str, ...] = ("exchange", "global_exchange", "sync")
#: The categories of :data:`EXCHANGE` that move data (sync left out).
TRANSFER: tuple[str, ...] = ("exchange", "global_exchange")

#: More windows than this would only produce noise (and memory use): the window is too small.
MAX_WINDOWS = 1_000_000

#: Names of the window bands (codes 0, 1, 2).
BANDS = ["none", "moderate", "high"]


def phase_bands(share: np.ndarray, moderate: float, high: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Band per window (0 none, 1 moderate, 2 high; NaN shares none), and first/last window of each merged
    phase (runs of adjacent flagged windows)."""
    bands = np.where(share >= high, 2, np.where(share >= moderate, 1, 0))
    bands[np.isnan(share)] = 0
    flagged = bands > 0
    edges = np.diff(np.concatenate([[0], flagged.astype(np.int8), [0]]))
    return bands, np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1


def phase_of_window(bands: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Phase index of each window (-1 outside phases)."""
    marks = np.zeros(len(bands), dtype=np.int64)
    marks[starts] = 1
    return np.where(bands > 0, np.cumsum(marks) - 1, -1)


@dataclass(frozen=True)
class StepPhases:
    """Exchange-heavy phases of an IPU execution profile.

    ``windows``: one row per window (``window``, ``first_step``, ``last_step``, ``cycles``,
    ``exchange_cycles``, ``share``, ``band``, ``phase``). ``phases``: one row per phase (``phase``,
    ``first_step``, ``last_step``, ``windows``, ``cycles``, ``exchange_cycles``, ``share``, ``worst_band``).
    ``chosen``: the ``max_phases`` phases with the most exchange cycles (rows of ``phases``, largest first),
    and ``programs`` their ``top`` programs by exchange cycles (phase -> frame of ``program``, ``cycles``).
    Cycles are IPU-cycles summed over the ``ipus`` IPUs the steps name; ``total_cycles`` is the run's.
    """

    width: int
    windows: pd.DataFrame
    phases: pd.DataFrame
    chosen: pd.DataFrame
    programs: dict[int, pd.DataFrame]
    ipus: int
    clock_hz: float | None
    total_cycles: float

    def time_us(self, cycles: float) -> float | None:
        """IPU-cycles summed over the IPUs as the time of the mean IPU, in microseconds (None without a clock)."""
        return cycles / self.ipus / self.clock_hz * 1e6 if self.clock_hz else None


def step_phases(
    profile: Profile, *, window: int, moderate: float, high: float, max_phases: int, top: int
) -> StepPhases | None:
    """The exchange-heavy phases of ``profile.steps`` in windows of ``window`` steps (None when there are none).

    Raises :class:`NotEvaluated` for a window under one step, steps without cycles, or more windows than
    :data:`MAX_WINDOWS`.
    """
    steps = profile.steps
    width = int(window)
    if width < 1:
        raise NotEvaluated("parameter window must be at least 1 step")
    if not ex.has_cycles(profile):
        raise NotEvaluated("needs step cycles (steps.cycles are all missing)")
    step = steps["step"].to_numpy(dtype=np.int64)
    cycles = steps["cycles"].to_numpy(dtype=np.float64, na_value=0.0)
    is_x = labels_mask(steps["category"], EXCHANGE)
    first_step = int(step.min())
    win = (step - first_step) // width
    count = int(win.max()) + 1
    if count > MAX_WINDOWS:
        raise NotEvaluated(f"window = {width} would make {count:,} windows; use a larger window")
    total = np.bincount(win, weights=cycles, minlength=count)
    xcycles = np.bincount(win, weights=np.where(is_x, cycles, 0.0), minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, xcycles / total, np.nan)
    bands, starts, ends = phase_bands(share, moderate, high)
    last_step = int(step.max())
    win_first = first_step + np.arange(count) * width
    windows = pd.DataFrame(
        {
            "window": np.arange(count),
            "first_step": win_first,
            "last_step": np.minimum(win_first + width - 1, last_step),
            "cycles": total,
            "exchange_cycles": xcycles,
            "share": share,
            "band": pd.Categorical.from_codes(bands, BANDS),
        }
    )
    window_phase = phase_of_window(bands, starts)
    windows["phase"] = window_phase
    if len(starts) == 0:
        return None
    clock = profile.target_value("clock_hz")
    ipus = max(int(steps["ipu"].nunique()), 1)
    # Per-phase figures from the window sums, vectorised (prefix sums over windows).
    csum_total = np.concatenate([[0.0], np.cumsum(total)])
    csum_x = np.concatenate([[0.0], np.cumsum(xcycles)])
    phase_total = csum_total[ends + 1] - csum_total[starts]
    phase_x = csum_x[ends + 1] - csum_x[starts]
    phases = pd.DataFrame(
        {
            "phase": np.arange(len(starts)),
            "first_step": win_first[starts],
            "last_step": np.minimum(win_first[ends] + width - 1, last_step),
            "windows": ends - starts + 1,
            "cycles": phase_total,
            "exchange_cycles": phase_x,
            "share": np.where(phase_total > 0, phase_x / np.where(phase_total > 0, phase_total, 1), np.nan),
            # windows between phases are unflagged (band 0), so a max up to the next phase start is exact
            "worst_band": np.maximum.reduceat(bands, starts),
        }
    )
    chosen = phases.sort_values("exchange_cycles", ascending=False, kind="stable").head(int(max_phases))
    # Dominant programs of the chosen phases: exchange cycles per (phase, program) on codes, not strings.
    slot = np.full(len(starts), -1)
    slot[chosen["phase"].to_numpy()] = np.arange(len(chosen))
    row_slot = np.where(window_phase[win] >= 0, slot[np.maximum(window_phase[win], 0)], -1)
    inside = (row_slot >= 0) & is_x
    programs = steps["program"].array
    n_prog = len(programs.categories) + 1
    key = row_slot[inside].astype(np.int64) * n_prog + (np.asarray(programs.codes)[inside] + 1)
    sums = np.bincount(key, weights=cycles[inside], minlength=len(chosen) * n_prog).reshape(
        len(chosen), n_prog
    )
    names_of = np.asarray(programs.categories)
    top_programs = {}
    for k, phase in enumerate(chosen["phase"]):  # loop over chosen phases, not steps
        best = np.argsort(-sums[k], kind="stable")[: int(top)]
        best = best[sums[k][best] > 0]
        top_programs[int(phase)] = pd.DataFrame(
            {"program": [str(names_of[i - 1]) if i > 0 else "?" for i in best], "cycles": sums[k][best]}
        )
    return StepPhases(
        width=width,
        windows=windows,
        phases=phases,
        chosen=chosen,
        programs=top_programs,
        ipus=ipus,
        clock_hz=float(clock) if clock else None,
        total_cycles=float(total.sum()),
    )


def auto_width(span: float, window_us: float) -> float:
    """The window in microseconds: ``window_us``, or a hundredth of the span when it is 0 (or less)."""
    width = float(window_us)
    return width if width > 0 else max(span / 100.0, 1e-6)


def device_phases(
    activity: DeviceActivity,
    *,
    window_us: float,
    moderate: float,
    high: float,
    top: int,
    skew: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[list[dict], pd.DataFrame]:
    """Exchange-heavy phases of one device (time windows over its own active span) and its window table.

    Each phase is a dict: ``rank``, ``device``, ``label``, ``t0``, ``t1`` (the active span), ``lo``, ``hi`` (the
    phase's times), ``width``, ``total_us`` (busy time: streams running at once count once),
    ``exchange_us`` (exchange not overlapped by other device work), ``skew_us`` (the part of that exchange
    in ``skew``, the device's :func:`~popprof.metrics.collectives.skew_spans`: waiting for the last rank;
    0 without), ``share``, ``dominant`` (the ``top`` exchange event names with their time in the phase) and
    ``non_sync_us`` (the exchange and global exchange in the phase, sync left out: a GPU phase of device-side
    syncs alone moved no data). Raises :class:`NotEvaluated` for more windows than :data:`MAX_WINDOWS`.
    """
    t0, t1 = activity.span
    width = auto_width(t1 - t0, window_us)
    count = max(int(np.ceil((t1 - t0) / width)), 1)
    if count > MAX_WINDOWS:
        raise NotEvaluated(
            f"window_us = {width:g} would make {count:,} windows over {units.duration(t1 - t0)}; "
            f"use at least {units.duration((t1 - t0) / MAX_WINDOWS)}"
        )
    s, e = activity.start, activity.end
    is_x = activity.in_categories(EXCHANGE)
    # busy time (streams running at once count once) and exposed exchange (not overlapped by compute)
    total = window_sums(activity.busy_start, activity.busy_end, t0, width, count)
    exposed_start, exposed_end = activity.exposed(EXCHANGE)
    xtime = window_sums(exposed_start, exposed_end, t0, width, count)
    stime = None
    if skew is not None:  # the exposed exchange spent waiting for the last rank
        stime = window_sums(*intersect_intervals(*skew, exposed_start, exposed_end), t0, width, count)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, xtime / total, np.nan)
    bands, starts, ends = phase_bands(share, moderate, high)
    windows = pd.DataFrame(
        {
            "rank": activity.rank,
            "device": activity.device,
            "window": np.arange(count),
            "start_us": t0 + np.arange(count) * width,
            "end_us": t0 + (np.arange(count) + 1) * width,
            "device_us": total,
            "exchange_us": xtime,
            "share": share,
            "band": pd.Categorical.from_codes(bands, BANDS),
            "phase": phase_of_window(bands, starts),
        }
    )
    transfer = activity.in_categories(TRANSFER)[is_x]
    xs, xe, xcodes = s[is_x], e[is_x], np.asarray(activity.name.codes)[is_x]
    vocabulary = activity.name.categories
    found = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):  # loop over phases, not events
        lo, hi = t0 + a * width, min(t0 + (b + 1) * width, t1)
        ph_total, ph_x = float(total[a : b + 1].sum()), float(xtime[a : b + 1].sum())
        inside = (xs < hi) & (xe > lo)
        overlap = np.minimum(xe[inside], hi) - np.maximum(xs[inside], lo)
        named = xcodes[inside] >= 0  # an event without a name counts in the phase's time, not in its names
        sums = np.bincount(xcodes[inside][named], weights=overlap[named], minlength=len(vocabulary))
        best = np.argsort(-sums, kind="stable")[: int(top)]
        found.append(
            {
                "rank": activity.rank,
                "device": activity.device,
                "label": activity.label,
                "t0": t0,
                "t1": t1,
                "lo": lo,
                "hi": hi,
                "width": width,
                "total_us": ph_total,
                "exchange_us": ph_x,
                "skew_us": float(stime[a : b + 1].sum()) if stime is not None else 0.0,
                "share": ph_x / ph_total if ph_total else 0.0,
                "dominant": [(str(vocabulary[i]), float(sums[i])) for i in best if sums[i] > 0],
                "non_sync_us": float(overlap[transfer[inside]].sum()),
            }
        )
    return found, windows


def exchange_share_per_ipu(profile: Profile) -> pd.Series:
    """Exchange + global exchange + sync cycles over all cycles, per IPU of ``profile.steps`` (IPUs without
    cycles left out)."""
    steps = profile.steps
    cycles = steps["cycles"].to_numpy(dtype=np.float64, na_value=0.0)
    is_x = labels_mask(steps["category"], EXCHANGE)
    frame = pd.DataFrame({"ipu": steps["ipu"].to_numpy(), "all": cycles, "x": np.where(is_x, cycles, 0.0)})
    sums = frame.groupby("ipu").sum()
    return (sums["x"] / sums["all"].where(sums["all"] > 0)).dropna()


def phase_spans(
    activity: DeviceActivity, phases: list[dict], skew: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The exchange of ``activity`` not overlapped by other device work inside the windows of ``phases`` (its
    :func:`device_phases`), less ``skew`` (its :func:`~popprof.metrics.collectives.skew_spans`): the time
    their ``exchange_us`` less ``skew_us`` add up to, as sorted, disjoint intervals."""
    lo = np.array([ph["lo"] for ph in phases], dtype=np.float64)
    hi = np.array([ph["hi"] for ph in phases], dtype=np.float64)
    start, end = intersect_intervals(*activity.exposed(EXCHANGE), *merge_intervals(lo, hi))
    if skew is not None:
        start, end = subtract_intervals(start, end, *skew)
    return start, end


def transfer_spans(profile: Profile) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per device of a GPU trace (its label as the time account names it), when it ran communication and no
    compute (the account's ``communication`` part) and was not waiting for the last rank of a collective
    (:func:`~popprof.metrics.collectives.skew_spans`): the exposed communication that hiding it behind compute
    could remove, whose length is :func:`exposed_exchange_per_device`'s ``transfer_us``. Sorted, disjoint,
    read-only arrays."""
    return profile.cached("phases.transfer_spans", lambda: _transfer_spans(profile))


def _transfer_spans(profile: Profile) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    skew = skew_spans(profile)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for activity in device_activities(profile):  # a handful of devices
        comm = activity.in_categories(("exchange",))
        if not comm.any():
            continue
        start, end = activity.without(
            *merge_intervals(activity.start[comm], activity.end[comm]), ("compute",)
        )
        if activity.label in skew:
            start, end = subtract_intervals(start, end, *skew[activity.label])
        start.setflags(write=False)
        end.setflags(write=False)
        out[activity.label] = (start, end)
    return out


def exposed_exchange_per_device(profile: Profile) -> pd.DataFrame:
    """Per device of a trace with busy time, from the time account's run rows (``metrics/account.py``):
    ``rank``, ``device``, ``label``, ``busy_us`` (the account's busy parts), ``exchange_us`` (GPU: the
    account's communication, not overlapped by compute; IPU: exchange + global exchange + sync), ``span_us``
    (the account's window: first to last device activity), ``share`` (exchange over busy), ``skew_us`` (GPU:
    the part of ``exchange_us`` spent waiting inside collectives for the last rank,
    :func:`~popprof.metrics.collectives.skew_spans`; 0 on one rank and on IPUs) and ``transfer_us``
    (``exchange_us`` less ``skew_us``), in device order.

    Raises :class:`NotEvaluated` without device activity with a duration.
    """
    rows = []
    skew = skew_spans(profile)
    for row in account.run_account(profile).to_dict("records"):
        busy = account.busy_us(row)
        if busy <= 0:
            continue
        exposed = account.communication_us(row)
        if row["platform"] != "gpu" and not pd.isna(row["sync"]):
            exposed += float(row["sync"])
        rank = None if pd.isna(row["rank"]) else int(row["rank"])
        label = device_label(rank, row["device"])
        waited = skew.get(label) if row["platform"] == "gpu" else None
        waited_us = min(float((waited[1] - waited[0]).sum()), exposed) if waited is not None else 0.0
        rows.append(
            {
                "rank": rank,
                "device": row["device"],
                "label": label,
                "busy_us": busy,
                "exchange_us": exposed,
                "span_us": float(row["window_us"]),
                "skew_us": waited_us,
                "transfer_us": exposed - waited_us,
            }
        )
    if not rows:
        device_activities(profile)  # no device activity at all: NotEvaluated with its reason (NO_DEVICE)
        raise NotEvaluated("needs device activity with a duration in the trace")
    per_device = pd.DataFrame(rows)
    per_device["share"] = per_device["exchange_us"] / per_device["busy_us"]
    return per_device
