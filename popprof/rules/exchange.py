"""Exchange rules: exchange-heavy phases over the run, and the run-wide exchange share.

Both work from IPU execution steps (cycles per step category) or, for GPU and
other traces, from device events marked with ``events.device_category``
(durations per category stand in for step cycles; windows are built in time).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..metrics import execution as ex
from ..profile import Profile
from .base import RULES, Finding, NotEvaluated, band, rule
from .fmt import duration, num, pct, threshold_pct
from .intervals import NO_DEVICE, category_mask, device_activity, window_sums

#: Step / device categories that count as exchange (data movement and the barriers around it).
EXCHANGE = ("exchange", "global_exchange", "sync")

ADVICE_PHASES = ("In exchange-heavy phases tiles wait on data movement rather than compute: look at the "
                 "dominant programs, overlap I/O and compute, fuse small exchanges, keep tensors where they "
                 "are consumed (tile mapping), and for multi-IPU runs reduce inter-IPU traffic (pipeline "
                 "stage boundaries, replication, gradient accumulation).")


def _phases(share: np.ndarray, moderate: float, high: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Band per window (0 none, 1 moderate, 2 high), and first/last window of each merged phase."""
    bands = np.where(share >= high, 2, np.where(share >= moderate, 1, 0))
    bands[np.isnan(share)] = 0
    flagged = bands > 0
    edges = np.diff(np.concatenate([[0], flagged.astype(np.int8), [0]]))
    return bands, np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1


def _phase_of_window(bands: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Phase index of each window (-1 outside phases)."""
    marks = np.zeros(len(bands), dtype=np.int64)
    marks[starts] = 1
    return np.where(bands > 0, np.cumsum(marks) - 1, -1)


#: More windows than this would only produce noise (and memory use): the window is too small.
MAX_WINDOWS = 1_000_000


def _steps_phases(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["exchange.phases"]
    steps = profile.steps
    width = int(params["window"])
    if width < 1:
        raise NotEvaluated("parameter window must be at least 1 step")
    if not ex.has_cycles(profile):
        raise NotEvaluated("needs step cycles (steps.cycles are all missing)")
    step = steps["step"].to_numpy(dtype=np.int64)
    cycles = steps["cycles"].to_numpy(dtype=np.float64, na_value=0.0)
    is_x = category_mask(steps["category"], EXCHANGE)
    first_step = int(step.min())
    win = (step - first_step) // width
    count = int(win.max()) + 1
    if count > MAX_WINDOWS:
        raise NotEvaluated(f"window = {width} would make {count:,} windows; use a larger window")
    total = np.bincount(win, weights=cycles, minlength=count)
    xcycles = np.bincount(win, weights=np.where(is_x, cycles, 0.0), minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, xcycles / total, np.nan)
    bands, starts, ends = _phases(share, params["moderate"], params["high"])
    last_step = int(step.max())
    win_first = first_step + np.arange(count) * width
    windows = pd.DataFrame({"window": np.arange(count), "first_step": win_first,
                            "last_step": np.minimum(win_first + width - 1, last_step),
                            "cycles": total, "exchange_cycles": xcycles, "share": share,
                            "band": pd.Categorical.from_codes(bands, ["none", "moderate", "high"])})
    phase_of_window = _phase_of_window(bands, starts)
    windows["phase"] = phase_of_window
    if len(starts) == 0:
        return []
    clock = profile.target_value("clock_hz")
    ipus = max(int(steps["ipu"].nunique()), 1)
    # Per-phase figures from the window sums, vectorised (prefix sums over windows).
    csum_total = np.concatenate([[0.0], np.cumsum(total)])
    csum_x = np.concatenate([[0.0], np.cumsum(xcycles)])
    phase_total = csum_total[ends + 1] - csum_total[starts]
    phase_x = csum_x[ends + 1] - csum_x[starts]
    phase_frame = pd.DataFrame({
        "phase": np.arange(len(starts)), "first_step": win_first[starts],
        "last_step": np.minimum(win_first[ends] + width - 1, last_step), "windows": ends - starts + 1,
        "cycles": phase_total, "exchange_cycles": phase_x,
        "share": np.where(phase_total > 0, phase_x / np.where(phase_total > 0, phase_total, 1), np.nan),
        # windows between phases are unflagged (band 0), so a max up to the next phase start is exact
        "worst_band": np.maximum.reduceat(bands, starts)})
    chosen = phase_frame.sort_values("exchange_cycles", ascending=False, kind="stable").head(int(params["max_phases"]))
    # Dominant programs of the reported phases: exchange cycles per (phase, program) on codes, not strings.
    slot = np.full(len(starts), -1)
    slot[chosen["phase"].to_numpy()] = np.arange(len(chosen))
    row_slot = np.where(phase_of_window[win] >= 0, slot[np.maximum(phase_of_window[win], 0)], -1)
    inside = (row_slot >= 0) & is_x
    programs = steps["program"].array
    n_prog = len(programs.categories) + 1
    key = row_slot[inside].astype(np.int64) * n_prog + (np.asarray(programs.codes)[inside] + 1)
    sums = np.bincount(key, weights=cycles[inside], minlength=len(chosen) * n_prog).reshape(len(chosen), n_prog)
    top_n = int(params["top"])
    names_of = np.asarray(programs.categories)
    top_programs = {}
    for k, phase in enumerate(chosen["phase"]):  # loop over reported phases, not steps
        best = np.argsort(-sums[k], kind="stable")[:top_n]
        best = best[sums[k][best] > 0]
        top_programs[int(phase)] = pd.DataFrame({"program": [str(names_of[i - 1]) if i > 0 else "?" for i in best],
                                                 "cycles": sums[k][best]})
    findings = []
    for p in chosen.sort_values("first_step").itertuples():
        severity = "error" if p.worst_band == 2 else "warning"
        threshold = params["high"] if severity == "error" else params["moderate"]
        progs = top_programs.get(p.phase, pd.DataFrame(columns=["program", "cycles"]))
        names = [str(n) for n in progs["program"]]
        dom = ", ".join(f"{n} ({pct(c / p.exchange_cycles)})" for n, c in zip(names, progs["cycles"], strict=True)
                        if p.exchange_cycles)
        time = ""
        if clock:
            time = f", about {duration(p.cycles / ipus / float(clock) * 1e6)}"
        message = (f"steps {num(p.first_step)}-{num(p.last_step)} ({p.windows} window(s) of {width} steps): "
                   f"exchange + sync take {pct(p.share)} of {num(p.cycles)} IPU-cycles{time} "
                   f"({severity} for a window at >= {threshold_pct(threshold)})")
        if dom:
            message += f"; dominated by {dom}"
        findings.append(r.finding(severity, "Exchange-heavy phase", message, value=float(p.share),
                                  threshold=float(threshold),
                                  where={"steps": (int(p.first_step), int(p.last_step)), "programs": names},
                                  evidence=windows))
    if len(phase_frame) > len(chosen):
        findings[-1].message += f" ({len(phase_frame) - len(chosen)} smaller phase(s) not listed)"
    return findings


def _auto_width(span: float, params: dict) -> float:
    width = float(params["window_us"])
    return width if width > 0 else max(span / 100.0, 1e-6)


def _trace_phases(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["exchange.phases"]
    activity = device_activity(profile)
    t0, t1 = activity.span
    width = _auto_width(t1 - t0, params)
    count = max(int(np.ceil((t1 - t0) / width)), 1)
    if count > MAX_WINDOWS:
        raise NotEvaluated(f"window_us = {width:g} would make {count:,} windows over {duration(t1 - t0)}; "
                           f"use at least {duration((t1 - t0) / MAX_WINDOWS)}")
    s, e = activity.start, activity.end
    is_x = activity.in_categories(EXCHANGE)
    total = window_sums(s, e, t0, width, count)
    xtime = window_sums(s[is_x], e[is_x], t0, width, count)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, xtime / total, np.nan)
    bands, starts, ends = _phases(share, params["moderate"], params["high"])
    windows = pd.DataFrame({"window": np.arange(count), "start_us": t0 + np.arange(count) * width,
                            "end_us": t0 + (np.arange(count) + 1) * width, "device_us": total,
                            "exchange_us": xtime, "share": share,
                            "band": pd.Categorical.from_codes(bands, ["none", "moderate", "high"])})
    findings = []
    top_n = int(params["top"])
    xs, xe, xcodes = s[is_x], e[is_x], np.asarray(activity.name.codes)[is_x]
    vocabulary = activity.name.categories
    csum_x = np.concatenate([[0.0], np.cumsum(xtime)])
    order = np.argsort(-(csum_x[ends + 1] - csum_x[starts]), kind="stable")[: int(params["max_phases"])]
    for k in sorted(order, key=lambda i: starts[i]):
        a, b = int(starts[k]), int(ends[k])
        lo, hi = t0 + a * width, min(t0 + (b + 1) * width, t1)
        ph_total, ph_x = float(total[a:b + 1].sum()), float(xtime[a:b + 1].sum())
        ph_share = ph_x / ph_total if ph_total else float("nan")
        severity = "error" if bands[a:b + 1].max() == 2 else "warning"
        threshold = params["high"] if severity == "error" else params["moderate"]
        inside = (xs < hi) & (xe > lo)
        overlap = np.minimum(xe[inside], hi) - np.maximum(xs[inside], lo)
        sums = np.bincount(xcodes[inside], weights=overlap, minlength=len(vocabulary))
        best = np.argsort(-sums, kind="stable")[:top_n]
        per_name = pd.Series(sums[best], index=[str(vocabulary[i]) for i in best])
        per_name = per_name[per_name > 0]
        dom = ", ".join(f"{n} ({duration(v)})" for n, v in per_name.items())
        message = (f"{duration(lo - t0)}-{duration(hi - t0)} into the device activity ({b - a + 1} window(s) of "
                   f"{duration(width)}): exchange + sync take {pct(ph_share)} of {duration(ph_total)} device "
                   f"time ({severity} for a window at >= {threshold_pct(threshold)})")
        if dom:
            message += f"; dominated by {dom}"
        findings.append(r.finding(severity, "Exchange-heavy phase", message, value=ph_share,
                                  threshold=float(threshold),
                                  where={"time_us": (float(lo), float(hi)), "programs": list(per_name.index)},
                                  evidence=windows))
    if len(starts) > len(order) and findings:
        findings[-1].message += f" ({len(starts) - len(order)} smaller phase(s) not listed)"
    return findings


@rule("exchange.phases",
      "windows of the run where exchange + global exchange + sync take a large share, merged into phases",
      needs=[("steps",), ("events",)],
      params={"window": 100, "window_us": 0.0, "moderate": 0.30, "high": 0.50, "top": 3, "max_phases": 5},
      advice=ADVICE_PHASES)
def phases(profile: Profile, params: dict) -> list[Finding]:
    if int(params["max_phases"]) < 1:
        raise NotEvaluated("parameter max_phases must be at least 1")
    return _from_each_source(profile, params, _steps_phases, _trace_phases)


def _from_each_source(profile: Profile, params: dict, from_steps, from_events) -> list[Finding]:
    """Findings from the steps and from the events, whichever the profile has; NotEvaluated (with every
    reason) only when no source present could be evaluated."""
    findings: list[Finding] = []
    reasons: list[str] = []
    present = [(t, f) for t, f in (("steps", from_steps), ("events", from_events)) if profile.has(t)]
    for _, source in present:
        try:
            findings += source(profile, params)
        except NotEvaluated as exc:
            reasons.append(str(exc))
    if present and len(reasons) == len(present):
        raise NotEvaluated("; or ".join(reasons))
    return findings


def _trace_shares(profile: Profile) -> tuple[float, float]:
    activity = device_activity(profile)
    dur = activity.end - activity.start
    total = float(dur.sum())
    if total <= 0:
        raise NotEvaluated(NO_DEVICE)
    return float(dur[activity.in_categories(EXCHANGE)].sum()) / total, total


@rule("exchange.share",
      "run-wide share of exchange + global exchange + sync, and the global-exchange (inter-IPU) share",
      needs=[("steps",), ("events",)],
      params={"warning": 0.30, "error": 0.50, "global_warning": 0.15, "global_error": 0.30},
      advice="A run dominated by exchange is limited by data movement, not compute: see exchange.phases for "
             "where; for multi-IPU runs a large global-exchange share points at pipeline stage boundaries "
             "or replica all-reduces worth overlapping or shrinking.")
def share(profile: Profile, params: dict) -> list[Finding]:
    return _from_each_source(profile, params, _steps_share, _trace_share)


def _steps_share(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["exchange.share"]
    value = ex.exchange_share(profile)
    if value is None:
        raise NotEvaluated("needs step cycles (steps.cycles are all missing or zero)")
    shares = ex.share_by_category(profile)
    ipus = ex.ipu_count(profile)
    multi = ipus > 1
    severity, threshold = band(value, params["warning"], params["error"])
    message = f"exchange + global exchange + sync take {pct(value)} of all IPU-cycles"
    message += (f" ({severity} at >= {threshold_pct(threshold)})" if severity
                else f" (warning at >= {threshold_pct(params['warning'])})")
    gsev, gthr = None, None
    if multi:
        gshare = shares.get("global_exchange", 0.0)
        gsev, gthr = band(gshare, params["global_warning"], params["global_error"])
        message += f"; global (inter-IPU) exchange {pct(gshare)} over {ipus} IPUs"
        if gsev:
            message += f" ({gsev} at >= {threshold_pct(gthr)})"
    worst = max([s for s in (severity, gsev) if s], key=["warning", "error"].index, default="info")
    evidence = pd.DataFrame({"category": list(shares), "share": list(shares.values()),
                             "cycles": list(ex.cycles_by_category(profile).values())})
    return [r.finding(worst, "Exchange share" if worst == "info" else "Exchange-bound run", message,
                      value=value, threshold=threshold, evidence=evidence)]


def _trace_share(profile: Profile, params: dict) -> list[Finding]:
    r = RULES["exchange.share"]
    value, total = _trace_shares(profile)
    severity, threshold = band(value, params["warning"], params["error"])
    message = (f"exchange + sync take {pct(value)} of {duration(total)} device time in the trace"
               + (f" ({severity} at >= {threshold_pct(threshold)})" if severity
                  else f" (warning at >= {threshold_pct(params['warning'])})"))
    return [r.finding(severity or "info", "Exchange share" if not severity else "Exchange-bound run",
                      message, value=value, threshold=threshold)]
