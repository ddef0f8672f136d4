"""Shared helpers of the plot modules: lazy matplotlib, figures, byte axes, thresholds, findings.

matplotlib is an optional extra, so it is imported here, inside functions, and
a missing install becomes one clear :class:`~popprof.model.errors.UsageError`.
Figures are created with :class:`matplotlib.figure.Figure` directly (not
``pyplot``), so plotting never touches global state or a GUI backend; notebooks
display the returned Figure inline, and ``fig.savefig`` works anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io import units, words
from ..model.errors import UsageError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MPL_MISSING = "plots need matplotlib: pip install 'popprof[plots]'"

#: Colours of the step / device categories, used by every plot that shows them.
CATEGORY_COLOURS: dict[str, str] = {
    "compute": "#4c72b0",
    "exchange": "#dd8452",
    "global_exchange": "#c44e52",
    "host_io": "#8172b3",
    "sync": "#937860",
    "other": "#8c8c8c",
}


def platform_of(profile: Any) -> str:
    """``"ipu"`` for an IPU source (its format, or execution steps or runs), else ``"gpu"``: the words plots use."""
    if getattr(profile, "source_format", None) in words.IPU_FORMATS or any(
        profile.has(t) for t in ("steps", "runs", "tiles")
    ):
        return words.IPU
    return words.GPU


#: Default memory thresholds (fraction of a tile's capacity) when the rules package does not say.
DEFAULT_HEADROOM = {"warning": 0.85, "error": 1.0}


def require_matplotlib() -> Any:
    """Import and return ``matplotlib``; raise UsageError with the install hint when it is absent."""
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise UsageError(MPL_MISSING) from None
    return matplotlib


def new_figure(width: float = 11.0, height: float = 4.5, nrows: int = 1, **kw: Any) -> tuple[Figure, Any]:
    """A new Figure (no pyplot) and its axes (one Axes, or an array when ``nrows > 1``)."""
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows=nrows, squeeze=True, **kw)
    return fig, axes


def bytes_axis(axis: Any) -> None:
    """Label an axis's ticks in binary byte units (the data stay in bytes)."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _pos: units.bytes_short(value)))
    axis.set_major_locator(BytesLocator.make())


def rule_params(rule_id: str) -> dict[str, Any]:
    """Default parameters of a rule from ``popprof.rules.RULES`` (``{}`` when rules are not installed)."""
    try:
        from ..rules import RULES
    except ImportError:
        return {}
    rule = RULES.get(rule_id) if hasattr(RULES, "get") else None
    params = getattr(rule, "params", None)
    return dict(params) if isinstance(params, dict) else {}


def headroom_thresholds(params: dict[str, Any] | None = None) -> dict[str, float]:
    """Memory fill thresholds (fractions of capacity) to draw: ``{"warning": 0.85, "error": 1.0}``.

    Read from the ``memory.headroom`` rule's defaults when the rules package
    provides them; ``params`` (e.g. from a config) override them.
    """
    found = dict(DEFAULT_HEADROOM)
    for key, value in {**rule_params("memory.headroom"), **(params or {})}.items():
        name = str(key).rsplit(".", 1)[-1]
        if name in found and isinstance(value, int | float) and not isinstance(value, bool):
            found[name] = float(value)
    return found


def configured_headroom(config: dict | None) -> dict[str, float] | None:
    """The ``memory.headroom`` thresholds after a ``[tool.popprof]`` config's ``rules`` overrides.

    ``None`` when there is no config or the rules package is not available
    (the plots then use the rule defaults).
    """
    if not config:
        return None
    try:
        from ..rules import plan
    except ImportError:
        return None
    _, resolved = plan(config=config)
    params = resolved.get("memory.headroom", {})
    return {k: float(v) for k, v in params.items() if k in DEFAULT_HEADROOM}


def finding_items(findings: Any, prefixes: Sequence[str]) -> list[Any]:
    """The findings whose rule id starts with one of ``prefixes`` (``findings`` may be None or a list)."""
    if findings is None:
        return []
    items = getattr(findings, "items", findings)
    if callable(items):  # a dict was passed by mistake
        items = list(items())
    return [f for f in items if any(str(getattr(f, "rule_id", "")).startswith(p) for p in prefixes)]


def where_ranges(items: Iterable[Any], key: str) -> list[tuple[float, float]]:
    """``(first, last)`` pairs from the findings' ``where[key]`` (entries that lack it are skipped)."""
    ranges: list[tuple[float, float]] = []
    for item in items:
        where = getattr(item, "where", None) or {}
        value = where.get(key)
        if value is None:
            continue
        if len(value) == 2 and np.isscalar(value[0]):
            ranges.append((float(value[0]), float(value[1])))
        else:  # a list of ranges
            ranges.extend((float(a), float(b)) for a, b in value)
    return ranges


def merge_ranges(ranges: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sort and merge overlapping ``(start, end)`` ranges (either order within a pair)."""
    from ..trace.spans import merge_intervals

    pairs = np.array([(min(a, b), max(a, b)) for a, b in ranges], dtype=np.float64).reshape(-1, 2)
    starts, ends = merge_intervals(pairs[:, 0], pairs[:, 1])
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def bin_edges(first: int, last: int, max_bins: int) -> np.ndarray:
    """Integer bin edges covering ``first..last`` inclusive in at most ``max_bins`` equal-width bins."""
    span = last - first + 1
    width = max(1, -(-span // max_bins))
    return np.arange(first, last + width + 1, width)[: -(-span // width) + 1]


def add_stairs(
    ax: Any, values: np.ndarray, edges: np.ndarray, baseline: np.ndarray | float = 0.0, **kw: Any
) -> Any:
    """Add a filled or outline step area (a ``StepPatch``) without the slow per-segment autoscaling.

    Callers set the axis limits themselves. Returns the patch; its
    ``get_data()`` gives back ``values``, ``edges`` and ``baseline``.
    """
    from matplotlib.patches import StepPatch

    kw.setdefault("fill", False)
    patch = StepPatch(
        np.asarray(values, dtype=np.float64), np.asarray(edges, dtype=np.float64), baseline=baseline, **kw
    )
    ax.add_artist(patch)
    return patch


class BytesLocator:
    """Factory for a tick locator at round binary steps (1, 2, 4, 5, 8, 10, 16, 20, 25, 50 ... x 1024^k)."""

    @staticmethod
    def make(nbins: int = 6) -> Any:
        from matplotlib.ticker import Locator

        class _Locator(Locator):
            def __call__(self) -> Any:
                vmin, vmax = self.axis.get_view_interval()
                return self.tick_values(vmin, vmax)

            def tick_values(self, vmin: float, vmax: float) -> Any:
                lo, hi = sorted((float(vmin), float(vmax)))
                span = hi - lo
                if span <= 0 or not np.isfinite(span):
                    return np.array([lo])
                raw = span / nbins
                unit = 1024.0 ** max(0, int(np.floor(np.log(max(raw, 1.0)) / np.log(1024))))
                # Decimal multiples (5, 10, 25, ... of a unit) only while every tick stays in that unit;
                # otherwise powers of two, which stay round in the next unit (512 MiB = 0.5 GiB).
                same_unit = max(abs(lo), abs(hi)) < 1024 * unit
                mults = (
                    (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 250, 256, 500, 512)
                    if same_unit
                    else (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
                )
                step = unit
                for mult in mults:
                    step = mult * unit
                    if step >= raw:
                        break
                first = np.ceil(lo / step) * step
                return np.arange(first, hi + step * 0.5, step)

        return _Locator()


def title_of(profile: Any, what: str) -> str:
    """A figure title: ``what`` and the profile's name."""
    name = getattr(profile, "name", "")
    return f"{what} — {name}" if name else what
