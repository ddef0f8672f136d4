"""The pilot report's per-side figures: timeline, step-time distribution, device-time breakdown bars.

Each function returns ``(figure, None)`` or ``(None, why not drawn)``; figures read the pilot
column's values (the breakdown) or :func:`popprof.metrics.steps.step_times` (the distribution).
"""

from __future__ import annotations

from typing import Any

from ..io import words
from ..metrics.steps import step_times
from ..model.errors import PopprofError
from ..plots._common import new_figure


def bars(platform: str) -> tuple[tuple[str, str], ...]:
    """The breakdown bars' figures and labels, in the words of the side's ``platform``."""
    return (
        ("compute_pct", "compute"),
        ("communication_pct", words.COMMUNICATION_WORD[platform]),
        ("memory_pct", words.MEMORY_WORD[platform]),
        ("sync_pct", "sync"),
        ("idle_host_pct", words.IDLE_HOST),
    )


def timeline_or_none(profile: Any, column: dict) -> tuple[Any, str | None]:
    """popprof's timeline plot of the side (needs events or runs)."""
    from ..plots import KINDS, plot

    needs = KINDS["timeline"][2]
    if not any(all(profile.has(t) for t in group) for group in needs):
        return None, "no timeline: the profile has no events or runs"
    try:
        return plot(profile, "timeline"), None
    except (PopprofError, ValueError) as exc:
        return None, f"timeline not drawn: {exc}"


def step_distribution(profile: Any, column: dict) -> tuple[Any, str | None]:
    """A histogram of step times (ms), warm-up steps drawn apart."""
    times = step_times(profile)
    if times.empty:
        return None, column["figures"]["step_p50_us"]["missing"]
    warm = int(column["figures"]["warmup_steps"]["value"] or 0)
    import numpy as np

    dur = times.sort_values("step")["dur_us"].to_numpy() / 1e3
    fig, ax = new_figure(5.5, 3.2)
    # one set of bins for both: the warm-up and steady bars of a bin stand side by side, never on each other
    edges = np.histogram_bin_edges(dur, bins=min(30, max(len(dur), 1)))
    groups = [(dur[warm:], "#1565c0", "steady state")]
    if warm:
        groups.append((dur[:warm], "#e65100", f"first {warm} (warm-up)"))
    ax.hist([g[0] for g in groups], bins=edges, color=[g[1] for g in groups], label=[g[2] for g in groups])
    ax.set_xlabel("step time (ms)")
    ax.set_ylabel("steps")
    ax.legend(fontsize=8)
    return fig, None


def breakdown_bars(profile: Any, column: dict) -> tuple[Any, str | None]:
    """Horizontal bars: the side's device-time shares and its idle share (the pilot table's figures)."""
    known = [
        (label, column["figures"][key]["value"])
        for key, label in bars(words.GPU if column.get("platform") == words.GPU else words.IPU)
        if column["figures"][key]["value"] is not None
    ]
    busy = column["figures"]["busy_pct"]["value"]
    if busy is not None:
        known.append(("idle", 100.0 - busy))
    if not known:
        return None, column["figures"]["compute_pct"]["missing"]
    fig, ax = new_figure(5.5, 3.2)
    ax.barh([k for k, _ in known], [v for _, v in known], color="#2e7d32")
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the device window")
    ax.invert_yaxis()
    return fig, None
