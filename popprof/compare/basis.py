"""The basis of a comparison: totals, or per profiler step / per run when the two sides ran different numbers.

A trace of 5 profiler steps against one of 2 (or an IPU profile of 5 runs
against one of 2) would compare totals that differ only because one side ran
longer. When both sides have steps (runs) and their numbers differ, the figures
that grow with the number of steps are divided by it on each side; with equal
numbers, totals are like for like and are compared as they are. The basis used
is always reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..metrics.account import GPU_PARTS, IPU_PARTS
from ..model.profile import Profile

#: Per family: the metric giving the number of iterations, its unit, and the metrics that add up over them
#: (a name ending in "." is a family prefix).
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "trace": (
        "trace.profiler_step_count",
        "profiler step",
        (
            "trace.span_us",
            "trace.recorded_span_us",
            "trace.event_count",
            "trace.device_busy_us",
            "trace.device_idle_us",
            "trace.device_time_us.",
            "collectives.skew_us",
            "collectives.transfer_us",
            "launches.launch_idle_us",
            "launches.short_launch_idle_us",
            "launches.short_gaps_us",
            "counters.kernels",
            "counters.sass_flops",
            "counters.sass_flops.",
            "counters.total.",
        ),
    ),
    "execution": (
        "execution.run_count",
        "run",
        (
            "execution.total_cycles",
            "execution.total_time_us",
            "execution.step_count",
            "execution.cycles.",
            "pipeline.imbalance_us",
        ),
    ),
}


#: Family prefixes that add up over steps but stay totals on a per-step basis, and why (the diff's note says so).
AS_TOTALS: dict[str, str] = {
    "trace.gpu_annotation_us.": (
        "HolisticTraceAnalysis's window leaves the last ProfilerStep out, so the steps they cover are not "
        "trace.profiler_step_count"
    ),
}


#: The time account's rows (``account.<part>_us``, ``account.window_us``) add up over the steps of a GPU trace
#: and over the runs of an IPU profile: they follow the basis of the family of the account's platform
#: (:func:`account_family`), not a family of their own (a GPU diff says nothing of runs).
ACCOUNT_PREFIX = "account."
_IPU_ONLY_PARTS = frozenset(f"{ACCOUNT_PREFIX}{p}_us" for p in IPU_PARTS if p not in GPU_PARTS)


def account_family(values: dict[str, float | None]) -> str:
    """The family whose basis the account's rows of one side follow: ``execution`` for an IPU account (one of
    the parts only an IPU has, ``account.exchange_us``, has a value), else ``trace``."""
    return "execution" if any(values.get(name) is not None for name in _IPU_ONLY_PARTS) else "trace"


def totals_notes(bases: dict[str, Basis], *sides: dict[str, float | None]) -> list[str]:
    """A note per :data:`AS_TOTALS` family either side has when the trace figures are compared per step."""
    trace = bases.get("trace")
    if trace is None or trace.per is None:
        return []
    return [
        f"{prefix}* compared as totals, not per {trace.per}: {why}"
        for prefix, why in AS_TOTALS.items()
        if any(name.startswith(prefix) for values in sides for name in values)
    ]


@dataclass(frozen=True)
class Basis:
    """How one family of figures (``trace`` or ``execution``) was compared."""

    family: str
    per: str | None  # "profiler step" / "run", or None for totals
    base_count: int | None
    new_count: int | None

    def divisor(self, side: str) -> int | None:
        """What ``side``'s additive figures are divided by (None: they are compared as totals)."""
        if self.per is None:
            return None
        return self.base_count if side == "base" else self.new_count

    def describe(self) -> str:
        """One line, e.g. ``trace figures per profiler step (base 5 steps, new 2)``."""
        unit = FAMILIES[self.family][1]
        counts = f"base {_count(self.base_count, unit)}, new {_count(self.new_count, unit)}"
        if self.per is not None:
            return (
                f"{self.family} figures per {self.per} ({counts}): totals divided by the {unit}s of each side"
            )
        if self.base_count and self.new_count:
            return f"{self.family} figures as totals (both sides ran {_count(self.base_count, unit)})"
        return f"{self.family} figures as totals ({counts})"

    def to_dict(self) -> dict:
        """JSON-ready: ``{"per": ..., "base": n, "new": n, "text": ...}``."""
        return {
            "per": self.per or "total",
            "base": self.base_count,
            "new": self.new_count,
            "text": self.describe(),
        }


def _count(n: int | None, unit: str) -> str:
    return f"no {unit}s" if not n else f"{n:,} {unit}{'s' if n != 1 else ''}"


def choose(base: dict[str, float | None], new: dict[str, float | None]) -> dict[str, Basis]:
    """The basis of each family that either side has (from the two sides' metric values)."""
    out = {}
    for family, (count_metric, unit, additive) in FAMILIES.items():
        if not any(
            _additive(name, additive) and value is not None
            for values in (base, new)
            for name, value in values.items()
        ):
            continue
        b, n = _whole(base.get(count_metric)), _whole(new.get(count_metric))
        out[family] = Basis(family, _per([b, n], unit), b, n)
    return out


def _per(counts: list[int | None], unit: str) -> str | None:
    """The basis of sides that ran ``counts`` iterations: per ``unit`` when every side has iterations and their
    numbers differ; None (totals, like for like) when they are equal or one side's are unknown."""
    return unit if all(counts) and len(set(counts)) > 1 else None


def account_on_one_basis(
    runs: list[dict[str, float | None]],
) -> tuple[list[dict[str, float | None]], str | None]:
    """The values of several runs of one platform with the time account's rows on one basis, as :func:`choose`
    and :func:`normalise` put two sides': each run's rows divided by its own number of steps (GPU: profiler
    steps) or runs (IPU), the count of the family of its account (:func:`account_family`), when the runs ran
    different numbers; as totals when they ran the same. Returns the values and the basis (``profiler step``
    / ``run``, or None for totals)."""
    family = account_family(runs[0]) if runs else "trace"
    counts, per = run_divisors(runs)
    if per is None:
        return [dict(values) for values in runs], None
    return [
        normalise(v, {family: Basis(family, per, n, n)}, "new") for v, n in zip(runs, counts, strict=True)
    ], per


def run_divisors(runs: list[dict[str, float | None]]) -> tuple[list[int | None], str | None]:
    """What :func:`account_on_one_basis` divides each run's additive figures by: each run's number of steps
    (GPU: profiler steps) or runs (IPU), the count of the family of the first run's account
    (:func:`account_family`), and the basis (``profiler step`` / ``run``); ``[None, ...]`` and None (totals)
    when the runs ran the same number, or one's is unknown."""
    family = account_family(runs[0]) if runs else "trace"
    count_metric, unit, _ = FAMILIES[family]
    counts = [_whole(values.get(count_metric)) for values in runs]
    per = _per(counts, unit)
    return (counts if per is not None else [None] * len(runs)), per


def _whole(value: float | None) -> int | None:
    return None if value is None or value <= 0 else int(value)


def _additive(name: str, additive: tuple[str, ...]) -> bool:
    return any(name.startswith(a) if a.endswith(".") else name == a for a in additive)


def normalise(values: dict[str, float | None], bases: dict[str, Basis], side: str) -> dict[str, float | None]:
    """``values`` with each additive figure divided by its family's divisor for ``side``; the time account's rows
    by the divisor of the family of its platform (:func:`account_family`)."""
    out = dict(values)
    for family, basis in bases.items():
        divisor = basis.divisor(side)
        if divisor is None:
            continue
        additive = FAMILIES[family][2]
        if family == account_family(values):
            additive = (*additive, ACCOUNT_PREFIX)
        for name, value in values.items():
            if value is not None and _additive(name, additive):
                out[name] = value / divisor
    return out


# -- the basis of IPU step cycles -------------------------------------------------------------------------


def steps_per_step_busiest(profile: Profile) -> bool:
    """True when ``profile``'s steps hold one row per step for a target of several IPUs.

    An SDK 1.x JSON execution profile records each step once, with the cycles of its busiest IPU;
    a profile.pop (or its bundle) records each step on every IPU. Their totals are on different
    bases (the sum of per-step maxima against a sum over IPUs) until one is put on the other's.
    """
    if not profile.has("steps") or profile.steps.empty:
        return False
    ipus = profile.target_value("num_ipus")
    return bool(ipus and int(ipus) > 1 and profile.steps["ipu"].nunique() == 1)


def busiest_ipu_per_step(profile: Profile) -> Profile:
    """A copy of ``profile`` whose steps keep, per (run, step), the row of the IPU with the most cycles.

    The rows are given IPU 0, as an SDK 1.x JSON profile has them, so every execution figure
    (totals, categories, programs) is on the per-step-busiest basis on both sides.
    """
    steps = profile.steps
    cycles = steps["cycles"].astype("float64").fillna(-1.0)
    order = cycles.groupby([steps["run"], steps["step"]], sort=False).idxmax()
    reduced = steps.loc[order.to_numpy()].sort_values(["run", "step"], kind="stable").reset_index(drop=True)
    reduced["ipu"] = pd.Series(0, index=reduced.index, dtype=steps["ipu"].dtype)
    out = profile.copy(profile.name)
    out.set_table("steps", reduced)
    return out


def on_one_step_basis(base: Profile, new: Profile) -> tuple[Profile, Profile, str | None]:
    """``base`` and ``new`` with their step cycles on one basis, and the note saying what was done."""
    b, n = steps_per_step_busiest(base), steps_per_step_busiest(new)
    if b == n or not base.has("steps") or not new.has("steps"):
        return base, new, None
    side = "new" if b else "base"
    note = (
        f"execution figures on one basis: the {'base' if b else 'new'} profile records each step once, on its "
        f"busiest IPU (SDK 1.x JSON), so the {side} profile's steps were reduced to the busiest IPU of each "
        "step before comparing (cycle totals are sums of per-step maxima on both sides)"
    )
    if b:
        return base, busiest_ipu_per_step(new), note
    return busiest_ipu_per_step(base), new, note
