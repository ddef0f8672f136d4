"""The time account as a figure, and memory by category for sources that only give totals.

:func:`time_account` draws one horizontal bar per device: its window (``metrics/account.py``) split into
the account's parts, each a share of the window, labelled where wide enough, in the platform's words. Past
:data:`MAX_BARS` devices the bars are pooled into one. A Poplar text summary (its Total cycles split into the
average tile's categories) draws too, so a summary that holds only execution totals gets a figure.

:func:`memory_categories` draws a source's memory by category (``memory_totals``: a text summary's
"Memory Usage" figures) as bars of bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..io import units
from ..metrics import account
from ..model.errors import UsageError
from ..model.profile import Profile
from ..trace.intervals import device_label
from ._common import CATEGORY_COLOURS, bytes_axis, new_figure, title_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Devices drawn one bar each; more are pooled into one bar.
MAX_BARS = 16
#: Part -> colour: busy parts in the step categories' colours, idle parts in greys.
PART_COLOURS: dict[str, str] = {
    "compute": CATEGORY_COLOURS["compute"],
    "communication": CATEGORY_COLOURS["exchange"],
    "exchange": CATEGORY_COLOURS["exchange"],
    "global_exchange": CATEGORY_COLOURS["global_exchange"],
    "copies": CATEGORY_COLOURS["host_io"],
    "stream_copies": CATEGORY_COLOURS["host_io"],
    "sync": CATEGORY_COLOURS["sync"],
    "other": CATEGORY_COLOURS["other"],
    "idle_host": "#bdbdbd",
    "idle_launch": "#d9d9d9",
    "idle_other": "#ececec",
    "idle": "#d9d9d9",
}


def _bars(profile: Profile) -> tuple[list[str], list[dict[str, float]], list[float], str]:
    runs = account.run_account(profile)
    if runs.empty:
        raise UsageError(
            f"{profile.source or profile.name}: no device time to account for (no device activity, execution "
            "steps with a clock, or a summary's execution totals)"
        )
    platform = str(runs["platform"].iloc[0])
    names = account.GPU_PARTS if platform == "gpu" else account.IPU_PARTS
    rows = runs.to_dict("records")
    if len(rows) > MAX_BARS:
        pooled = account.pooled(profile) or {}
        labels = [f"{len(rows)} devices"]
        parts = [{p: pooled.get(p, 0.0) for p in names}]
        windows = [pooled.get("window_us", 0.0)]
    else:
        labels = [device_label(r["rank"], r["device"]) for r in rows]
        parts = [{p: float(r[p]) for p in names} for r in rows]
        windows = [float(r["window_us"]) for r in rows]
    return labels, parts, windows, str(runs["basis"].iloc[0])


def time_account(profile: Profile, **_: Any) -> Figure:
    """One bar per device: its window split into the time account's parts, as shares of the window."""
    labels, parts, windows, basis = _bars(profile)
    fig, ax = new_figure(height=1.6 + 0.45 * len(labels))
    names = list(parts[0])
    y = list(range(len(labels)))[::-1]
    left = [0.0] * len(labels)
    for name in names:
        shares = [(p[name] / w if w > 0 else 0.0) for p, w in zip(parts, windows, strict=True)]
        if not any(shares):
            continue
        bars = ax.barh(
            y,
            shares,
            left=left,
            color=PART_COLOURS.get(name, "#8c8c8c"),
            edgecolor="white",
            label=account.PART_WORDS.get(name, name),
        )
        for bar, share in zip(bars, shares, strict=True):
            if share >= 0.08:
                ax.text(
                    bar.get_x() + bar.get_width() / 2,
                    bar.get_y() + bar.get_height() / 2,
                    units.percent(share),
                    ha="center",
                    va="center",
                    fontsize=8,
                )
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.set_yticks(y, [f"{label}\n{units.duration(w)}" for label, w in zip(labels, windows, strict=True)])
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"share of the window ({account.BASIS_TEXT.get(basis, basis)})")
    ax.xaxis.set_major_formatter(_percent_formatter())
    fig.legend(loc="outside lower center", ncol=min(len(names), 4), fontsize=8, frameon=False)
    ax.set_title(title_of(profile, "Where the device time went (the time account)"))
    return fig


def memory_categories(profile: Profile, **_: Any) -> Figure:
    """A source's memory by data type (``memory_totals``) as bars of bytes, largest on top: the whole
    target's "By Data Type" breakdown, or one tile's when the source printed only that tile's."""
    totals = profile.get("memory_totals")
    what = "whole target"
    if totals is not None and not totals.empty:
        totals = totals[(totals["group"].astype(str) == "data_type") & (totals["bytes"].fillna(0) > 0)]
        if totals["tile"].isna().any():
            totals = totals[totals["tile"].isna()]
        elif totals["tile"].nunique() == 1:
            what = f"tile {int(totals['tile'].iloc[0]):,}"
        else:
            totals = totals.iloc[0:0]
    if totals is None or totals.empty:
        raise UsageError(f"{profile.source or profile.name}: no memory totals by data type to draw")
    frame = (
        totals.assign(category=totals["category"].astype(str)).groupby("category", sort=False)["bytes"].sum()
    )
    frame = frame.sort_values()
    fig, ax = new_figure(height=1.4 + 0.32 * len(frame))
    ax.barh(frame.index.tolist(), frame.to_numpy(dtype=float), color=CATEGORY_COLOURS["host_io"])
    bytes_axis(ax.xaxis)
    ax.set_xlabel(f"bytes ({what})")
    ax.set_title(title_of(profile, "Memory by data type"))
    return fig


def _percent_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"{value * 100:.0f} %")
