"""Host timeline: host threads as lanes, device activity as its own lane, stalls shaded and explained.

Time is drawn in milliseconds since the start of the trace (the earliest
event's ``start_us``; the x label says so). Host lanes show top-level events
(depth 0, light) and their children (depth 1, dark) of each thread; the device lane shows events with a
``device_category`` (coloured by category), or the execution runs when the
profile has no trace. Lanes with many events are drawn with neighbouring
events closer than a fraction of the visible span merged into one bar, so a
million events draw in about a second.

Stalls, the device idle gaps, come from findings of
the ``host.device-gaps`` rule (every gap in its evidence table, else
``where["time_us"]``) or from ``stalls=``. Each is shaded; the longest few
are numbered and listed under the plot with the host events that overlap
them most (each for its own time, from the events table).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..io import units, words
from ..metrics.trace import time_origin
from ..model.errors import MissingTableError
from ..model.profile import Profile
from ..trace.activity import is_bookkeeping
from ..trace.ids import SYNTHETIC_ID_BASE
from ..trace.intervals import host_events
from ..trace.spans import merge_intervals
from ._common import (
    CATEGORY_COLOURS,
    finding_items,
    merge_ranges,
    new_figure,
    platform_of,
    title_of,
    where_ranges,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STALL_RULE = "host.device-gaps"
DEVICE_LANE = "device"


def _rects(
    ax: Any,
    start: np.ndarray,
    end: np.ndarray,
    band: tuple[float, float],
    colour: str,
    gid: str,
    label: str | None,
):
    from matplotlib.collections import PolyCollection

    y0, y1 = band
    verts = np.empty((len(start), 4, 2))
    verts[:, 0, 0] = verts[:, 3, 0] = start
    verts[:, 1, 0] = verts[:, 2, 0] = np.maximum(end, start)
    verts[:, 0, 1] = verts[:, 1, 1] = y0
    verts[:, 2, 1] = verts[:, 3, 1] = y1
    coll = PolyCollection(verts, facecolors=colour, edgecolors="none", label=label)
    coll.set_gid(gid)
    ax.add_collection(coll, autolim=False)
    return coll


def lanes(profile: Profile) -> list[tuple[str, pd.DataFrame]]:
    """``(label, events)`` per lane: the device lane first (when any), then host threads by pid, tid."""
    events = profile.get("events")
    result: list[tuple[str, pd.DataFrame]] = []
    if events is None or events.empty:
        runs = profile.get("runs")
        if runs is None or runs.empty:
            raise MissingTableError(
                "events", profile.name, "needs a trace (.pvti or Chrome trace) or execution runs"
            )
        frame = pd.DataFrame(
            {
                "name": runs["name"],
                "start_us": runs["start_us"],
                "dur_us": runs["end_us"] - runs["start_us"],
                "device_category": "compute",
            }
        )
        return [(f"{DEVICE_LANE} (runs)", frame)]
    device = events["device_category"].notna()
    if device.any():
        result.append((DEVICE_LANE, events[device]))
    # profiler bookkeeping (Kineto's "Traces" / "Spans" pseudo-threads, the PyTorch Profiler (N) span) is no
    # thread of the program: no lane (as summary counts no such thread)
    host = events[~device & (events["depth"] <= 1) & ~is_bookkeeping(events)]
    names = {}
    threads = profile.get("threads")
    if threads is not None and not threads.empty:
        for pid, tid, pname, tname in threads[["pid", "tid", "process_name", "thread_name"]].itertuples(
            index=False
        ):
            if isinstance(tname, str) and tname and tname != "nan":
                label = str(tname)
            else:  # an id the reader stood in for a text id is not in the file: not printed
                label = "unnamed thread" if int(tid) >= SYNTHETIC_ID_BASE else f"tid {tid}"
            if isinstance(pname, str) and pname and pname != "nan":
                label = f"{pname}: {label}"
            names[(int(pid), int(tid))] = label
    for (pid, tid), group in host.groupby(["pid", "tid"], sort=True):
        result.append((names.get((int(pid), int(tid)), f"pid {pid} tid {tid}"), group))
    return result


def stall_windows(
    findings: Any, stalls: Iterable[tuple[float, float]] | None = None
) -> list[tuple[float, float]]:
    """Stall windows ``(start_us, end_us)``, sorted and merged.

    From ``host.device-gaps`` findings: every gap of the evidence table when
    it has ``start_us``/``end_us`` columns (the rule lists all gaps there),
    else ``where["time_us"]``. Plus the plain ``stalls`` given.
    """
    windows: list[tuple[float, float]] = list(stalls or [])
    for item in finding_items(findings, (STALL_RULE,)):
        evidence = getattr(item, "evidence", None)
        if (
            isinstance(evidence, pd.DataFrame)
            and {"start_us", "end_us"} <= set(evidence.columns)
            and len(evidence)
        ):
            windows.extend(
                zip(evidence["start_us"].astype(float), evidence["end_us"].astype(float), strict=True)
            )
        else:
            windows.extend(where_ranges([item], "time_us"))
    return merge_ranges(windows)


def top_host_events(profile: Profile, window: tuple[float, float], top: int = 3) -> pd.DataFrame:
    """The host events that overlap ``window`` (µs) most: columns ``name`` and ``overlap_us``.

    The host events are those the ``host.*`` rules attribute time to (``trace.intervals.host_events``):
    profiler bookkeeping (the ``PyTorch Profiler (N)`` span, Kineto's overhead events), ``ProfilerStep#N``
    markers and calls blocking on the device are left out, so a note names what the host did. Each event
    counts its own time in the window (its overlap minus its children's, as ``host.device-gaps`` does), so
    a main loop enclosing everything counts only where no recorded child ran, and a data loader's long
    ``__next__`` is named for its own time, not hidden behind its short copies. Summed per event name.
    """
    empty = pd.DataFrame({"name": pd.Series([], dtype="str"), "overlap_us": pd.Series([], dtype=float)})
    events = profile.get("events")
    if events is None or events.empty:
        return empty
    host = host_events(profile)
    work = host.subset(~host.waits)
    lo, hi = window
    overlap = np.minimum(work.start + work.dur, hi) - np.maximum(work.start, lo)
    inside = overlap > 0
    if not inside.any():
        return empty
    ids = work.event_id[inside]
    parents = work.parent_id[inside]
    overlap = overlap[inside]
    has_parent = ~np.isnan(parents)
    in_children = pd.Series(overlap[has_parent]).groupby(parents[has_parent].astype(np.int64)).sum()
    own = overlap - in_children.reindex(ids, fill_value=0.0).to_numpy()
    keep = own > 0
    names = np.asarray(work.name.astype("str"))[inside][keep]
    chosen = pd.DataFrame({"name": names, "overlap_us": own[keep]})
    ranked = (
        chosen.groupby("name", sort=False)["overlap_us"].sum().sort_values(ascending=False, kind="stable")
    )
    ranked = ranked.head(top)
    return pd.DataFrame({"name": ranked.index.astype("str"), "overlap_us": ranked.to_numpy(float)})


def timeline(
    profile: Profile,
    findings: Any = None,
    *,
    stalls: Iterable[tuple[float, float]] | None = None,
    top: int = 3,
    window_us: tuple[float, float] | None = None,
    max_lanes: int = 24,
    resolution: int = 4000,
    label_chars: int = 70,
    max_labels: int = 6,
    width: float = 12.0,
) -> Figure:
    """Threads as lanes over time, device lane first, stalls shaded with their top host events.

    ``stalls`` adds plain ``(start_us, end_us)`` windows to those of the
    findings. The ``max_labels`` longest visible stalls are numbered above the
    plot and listed under it with the ``top`` host events in them (and the
    time each overlaps the stall; events under 1 % of the stall are left out).
    ``window_us`` limits the view to a time range (µs, as in the events table). At most
    ``max_lanes`` host lanes are drawn (the busiest).
    Returns the Figure; x is milliseconds since the trace's time origin (its first event that is not
    profiler bookkeeping, as in ``check`` messages).
    """
    all_lanes = lanes(profile)
    first = min(float(frame["start_us"].min()) for _, frame in all_lanes)
    origin = time_origin(profile)
    origin = first if origin is None else origin  # the trace's time origin (docs/figures.md)
    device = [lane for lane in all_lanes if lane[0].startswith(DEVICE_LANE)]
    host = [lane for lane in all_lanes if not lane[0].startswith(DEVICE_LANE)]
    if len(host) > max_lanes:
        host = sorted(host, key=lambda lane: -float(lane[1]["dur_us"].sum()))[:max_lanes]
    shown = device + host
    ends = [float((frame["start_us"] + frame["dur_us"].fillna(0)).max()) for _, frame in shown]
    lo_us, hi_us = window_us if window_us else (origin, max(ends))
    span_ms = max((hi_us - lo_us) / 1e3, 1e-9)
    tol = span_ms / resolution
    windows = stall_windows(findings, stalls)
    visible = [w for w in windows if w[1] > lo_us and w[0] < hi_us]
    labelled_stalls = sorted(sorted(visible, key=lambda w: w[0] - w[1])[:max_labels])
    fig, ax = new_figure(width, 1.6 + 0.42 * len(shown) + 0.17 * len(labelled_stalls))
    labels = []
    for lane_no, (label, frame) in enumerate(shown):
        start = (frame["start_us"].to_numpy(float) - origin) / 1e3
        end = start + frame["dur_us"].fillna(0).to_numpy(float) / 1e3
        if label.startswith(DEVICE_LANE):
            cats = frame["device_category"].astype("str").to_numpy()
            present = [c for c in CATEGORY_COLOURS if (cats == c).any()]
            height = 0.8 / max(len(present), 1)
            for k, cat in enumerate(present):  # one sub-band per category: they may overlap in time
                s, e = merge_intervals(start[cats == cat], end[cats == cat], tol)
                band = (lane_no - 0.4 + k * height, lane_no - 0.4 + (k + 1) * height)
                word = words.category_word(cat, platform_of(profile))
                legend = "execution run" if label != DEVICE_LANE else f"device {word}"
                _rects(ax, s, e, band, CATEGORY_COLOURS[cat], f"lane:{label}:{cat}", legend)
        else:
            depth = frame["depth"].to_numpy() if "depth" in frame.columns else np.zeros(len(frame))
            s, e = merge_intervals(start[depth == 0], end[depth == 0], tol)
            _rects(ax, s, e, (lane_no - 0.38, lane_no + 0.38), "#a9c1dc", f"lane:{label}", None)
            s, e = merge_intervals(start[depth == 1], end[depth == 1], tol)
            _rects(ax, s, e, (lane_no - 0.1, lane_no + 0.38), "#3b6a9e", f"lane:{label}:nested", None)
        labels.append(label if len(label) <= 40 else "…" + label[-39:])
    ax.set_yticks(range(len(shown)), labels, fontsize="small")
    ax.set_ylim(len(shown) - 0.4, -0.6)
    ax.set_xlim((lo_us - origin) / 1e3, (hi_us - origin) / 1e3)
    for i, (s_us, e_us) in enumerate(windows):
        ax.axvspan(
            (s_us - origin) / 1e3,
            (e_us - origin) / 1e3,
            color="#d62728",
            alpha=0.15,
            lw=0,
            gid="stall",
            label="device idle gap" if i == 0 else None,
        )
    for k, (s_us, e_us) in enumerate(labelled_stalls):
        x0, x1 = (s_us - origin) / 1e3, (e_us - origin) / 1e3
        ax.text(
            (x0 + x1) / 2,
            1.0,
            str(k + 1),
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize="small",
            fontweight="bold",
            color="#a50f15",
            gid="stall-number",
        )
        best = top_host_events(profile, (s_us, e_us), top)
        best = best[best["overlap_us"] >= 0.01 * (e_us - s_us)]
        names = " · ".join(
            _short(n, label_chars) + f" ({units.duration(o)})"
            for n, o in zip(best["name"], best["overlap_us"], strict=True)
        )
        ax.annotate(
            f"{k + 1}. at {units.offset(s_us - origin)}, device idle {units.duration(e_us - s_us)}: "
            f"{names or 'no host event recorded'}",
            xy=(0, 0),
            xycoords="axes fraction",
            xytext=(0, -34 - 12 * k),
            textcoords="offset points",
            fontsize="x-small",
            color="#7f0000",
            va="top",
            ha="left",
            gid="stall-label",
            annotation_clip=False,
        )
    ax.set_xlabel("time since the trace start (ms; the first event that is not profiler bookkeeping)")
    ax.grid(axis="x", alpha=0.3)
    stalled = f", {len(windows)} stall{'s' if len(windows) != 1 else ''}" if windows else ""
    what = (
        f"{len(host)} host thread{'s' if len(host) != 1 else ''}"
        if host or not device or device[0][0] == DEVICE_LANE
        else "execution runs (no host trace)"
    )
    ax.set_title(title_of(profile, f"Timeline: {what}{stalled}"), pad=14 if labelled_stalls else 6)
    labelled: set[str] = set()
    heavy = (
        "communication" if platform_of(profile) == words.GPU else "exchange"
    )  # what the exchange.* rules flag
    for item in finding_items(findings, ("exchange.",)):
        where = getattr(item, "where", None) or {}
        key = "phases" if "phases" in where and "time_us" in where else "time_us"  # every phase listed
        for s_us, e_us in where_ranges([item], key):
            rule_id = str(item.rule_id)
            ax.axvspan(
                (s_us - origin) / 1e3,
                (e_us - origin) / 1e3,
                color="#ff7f0e",
                alpha=0.12,
                lw=0,
                gid=f"phase:{rule_id}",
                label=None if rule_id in labelled else f"{rule_id} ({heavy}-heavy)",
            )
            labelled.add(rule_id)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    return fig


def _short(name: str, limit: int) -> str:
    return name if len(name) <= limit else "…" + name[-(limit - 1) :]
