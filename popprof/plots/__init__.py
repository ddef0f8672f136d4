"""Plots of profiles, findings and diffs (matplotlib, an optional extra: ``pip install 'popprof[plots]'``).

Every function returns a :class:`matplotlib.figure.Figure` (shown inline in a
notebook, saved with ``fig.savefig(path)``), with units on the axes and the
rule thresholds drawn where they apply. Large profiles are binned, not drawn
point by point. :data:`KINDS` maps the CLI's ``--kind`` names to functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._common import MPL_MISSING, configured_headroom, require_matplotlib
from .account import memory_categories, time_account
from .device_memory import device_memory_timeline
from .diff import diff_metrics, diff_tiles
from .execution import execution
from .liveness import liveness
from .memory import tile_histogram, tile_memory
from .roofline import roofline
from .tilemap import tile_map
from .timeline import timeline

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: ``--kind`` name -> (function, whether it takes findings, tables it needs (any one set)).
KINDS: dict[str, tuple[Callable[..., Any], bool, tuple[tuple[str, ...], ...]]] = {
    "memory": (tile_memory, True, (("tiles",),)),
    "histogram": (tile_histogram, False, (("tiles",), ("tile_histogram",))),
    "tilemap": (tile_map, False, (("tiles",),)),
    "liveness": (liveness, False, (("liveness",),)),
    "execution": (execution, True, (("steps",),)),
    "timeline": (timeline, True, (("events",), ("runs",))),
    "account": (time_account, False, (("events",), ("steps",), ("execution_totals",))),
    "categories": (memory_categories, False, (("memory_totals",),)),
    "roofline": (roofline, False, (("events",),)),
    "device-memory": (device_memory_timeline, False, (("allocations",),)),
}


def available_kinds(profile: Any) -> list[str]:
    """The plot kinds a profile has the tables for, in :data:`KINDS` order."""
    return [kind for kind, (_, _, needs) in KINDS.items() if any(profile.has(*tables) for tables in needs)]


#: The plot drawn when none is asked for: the first of these the profile can draw (a full profile: memory;
#: a text summary: the histogram, else its time account, else its memory by data type; a trace: the timeline).
DEFAULT_ORDER = (
    "memory",
    "histogram",
    "timeline",
    "execution",
    "account",
    "categories",
    "liveness",
    "tilemap",
)


def default_kind(profile: Any) -> str | None:
    """The most useful plot ``profile`` can draw (see :data:`DEFAULT_ORDER`); None when it can draw none."""
    available = available_kinds(profile)
    return next((kind for kind in DEFAULT_ORDER if kind in available), None)


#: Kinds that draw the memory headroom thresholds (``thresholds=``).
THRESHOLD_KINDS = ("memory", "histogram", "tilemap")


def plot(
    profile: Any, kind: str, findings: Any = None, *, config: dict | None = None, **options: Any
) -> Figure:
    """Draw one plot kind of ``profile``.

    ``findings`` go to the kinds that shade them; ``config`` (the
    ``[tool.popprof]`` table) sets the memory thresholds drawn, as the rule
    checks would use them.
    """
    if kind not in KINDS:
        from ..model.errors import UsageError

        raise UsageError(f"unknown plot kind {kind!r}; choose from {', '.join(KINDS)}")
    func, takes_findings, _ = KINDS[kind]
    if kind in THRESHOLD_KINDS and "thresholds" not in options:
        thresholds = configured_headroom(config)
        if thresholds:
            options["thresholds"] = thresholds
    return func(profile, findings, **options) if takes_findings else func(profile, **options)


__all__ = [
    "DEFAULT_ORDER",
    "KINDS",
    "MPL_MISSING",
    "THRESHOLD_KINDS",
    "available_kinds",
    "default_kind",
    "device_memory_timeline",
    "diff_metrics",
    "diff_tiles",
    "execution",
    "liveness",
    "memory_categories",
    "plot",
    "require_matplotlib",
    "roofline",
    "tile_histogram",
    "tile_map",
    "tile_memory",
    "time_account",
    "timeline",
]
