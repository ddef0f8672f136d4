"""The analyses' headline figures in the registry: a diff of two real multi-rank traces shows them, on the
basis the diff chose (per profiler step here), with the direction of "worse" the registry gives.

Traces: ``fixtures/real/traces/two_ranks`` (2 ranks, 2 profiler steps) and ``dlrm_8ranks`` (8 ranks, 1
step), provenance in ``fixtures/real/traces/README.md``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import popprof
import popprof.metrics as registry
from popprof.compare import diff, gate
from popprof.compare.basis import FAMILIES
from popprof.metrics.collectives import collective_calls
from popprof.metrics.launches import launch_overview
from popprof.report.diff import render as render_diff

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
TRACKED = (
    "collectives.skew_us",
    "collectives.transfer_us",
    "launches.launch_idle_us",
    "launches.short_launch_idle_us",
    "launches.delay_p95_us",
)


@pytest.fixture(scope="module")
def sides() -> tuple[popprof.Profile, popprof.Profile]:
    return popprof.open(REAL / "two_ranks"), popprof.open(REAL / "dlrm_8ranks")


def test_registry_figures_are_the_analyses_sums(sides) -> None:
    _, dlrm = sides
    values = registry.compute(dlrm, TRACKED)
    calls = collective_calls(dlrm)
    assert values["collectives.skew_us"] == pytest.approx(calls["skew_us"].sum())
    assert values["collectives.transfer_us"] == pytest.approx(calls["transfer_us"].sum())
    overview = launch_overview(dlrm)
    for name in TRACKED[2:]:
        assert values[name] == pytest.approx(overview[name.removeprefix("launches.")]), name
    # the 8-rank DLRM run waits in its collectives far more than it moves data (docs/collectives.md)
    assert values["collectives.skew_us"] > 10 * values["collectives.transfer_us"]
    assert all(registry.METRICS[name].better == "lower" for name in (*TRACKED, "pipeline.imbalance_us"))


def test_diff_of_two_real_traces_shows_them_per_step(sides) -> None:
    base, new = sides
    result = diff(base, new)
    rows = result.metrics.set_index("name")
    assert result.basis["trace"].per == "profiler step"  # 2 steps against 1
    steps = {"base": result.basis["trace"].base_count, "new": result.basis["trace"].new_count}
    additive = FAMILIES["trace"][2]
    for name in TRACKED:
        row = rows.loc[name]
        for side, profile in (("base", base), ("new", new)):
            raw = registry.compute(profile, [name])[name]
            expected = raw / steps[side] if name in additive else raw
            assert row[side] == pytest.approx(expected), (name, side)
        assert row["better"] == "lower" and row["status"] == "changed"
        assert bool(row["worse"]) == (row["new"] > row["base"])
    text = render_diff(result)
    assert all(any(line.strip().startswith(name) for line in text.splitlines()) for name in TRACKED)


def test_a_trace_without_the_analysis_has_no_figure() -> None:
    """None (not in this profile), never 0: a CPU-only trace has no launches and no collectives."""
    values = registry.compute(
        popprof.open(REAL / "cpu_only_rank-34.json.gz"), [*TRACKED, "pipeline.imbalance_us"]
    )
    assert set(values.values()) == {None}


def test_pipeline_imbalance_is_the_summarys() -> None:
    """No real pipelined IPU profile is public: the generated 4-IPU pipeline (fixtures/README.md)."""
    profile = popprof.open(REAL.parent.parent / "pod4_pipeline.popprof")
    value = registry.compute(profile, ["pipeline.imbalance_us"])["pipeline.imbalance_us"]
    assert value is not None and value == pytest.approx(popprof.summary(profile)["pipeline"]["imbalance_us"])


def test_the_gate_tracks_collective_skew_and_launch_idle(sides) -> None:
    """A budget on the new names is a known pattern and judges them in the direction the registry gives:
    the 8-rank run's skew per step is below the 2-rank run's (passes), the way back grows (fails)."""
    budget = {
        "defaults": False,
        "budgets": {
            "collectives.skew_us": {"relative": 0.05},
            "launches.short_launch_idle_us": {"relative": 0.05},
        },
    }
    base, new = sides
    assert gate(diff(base, new), budget).passed
    back = gate(diff(new, base), budget)
    assert not back.passed
    assert set(back.violations["metric"]) == {"collectives.skew_us", "launches.short_launch_idle_us"}
