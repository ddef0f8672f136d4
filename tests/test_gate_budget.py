"""The regression gate: budgets pass at the boundary and fail just beyond; gaps; parsing; configuration."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from popprof.compare import diff, gate, load_budget
from popprof.compare.gate import Budget, budget_from_mapping, parse_limit
from popprof.model.errors import InputError, UsageError
from popprof.testing import synth

CAP = 638_976
FILL = 400_000
N_TILES = 1_472


@pytest.fixture(scope="module")
def flat():
    """A Mk2 profile whose tiles all hold exactly FILL bytes (so budgets land on exact byte counts)."""
    profile = synth.make_profile(num_steps=400, num_liveness_steps=60, seed=21)
    tiles = profile.tiles.copy()
    tiles["bytes_incl_gaps"] = FILL
    profile.set_table("tiles", tiles)
    return profile


def with_tiles(profile, values: np.ndarray):
    new = profile.copy()
    tiles = new.tiles.copy()
    tiles["bytes_incl_gaps"] = values
    new.set_table("tiles", tiles)
    return new


def grown_total(profile, extra: int):
    """Spread ``extra`` bytes over the tiles (whole bytes, so the total grows by exactly ``extra``)."""
    values = np.full(N_TILES, FILL, dtype=np.int64)
    values += extra // N_TILES
    values[: extra % N_TILES] += 1
    return with_tiles(profile, values)


ONLY_TOTAL = {"defaults": False, "budgets": {"memory.total_incl_gaps_bytes": {"relative": 0.01}}}


def test_relative_growth_at_budget_passes_and_one_byte_beyond_fails(flat):
    allowed = FILL * N_TILES // 100  # 1 % of 588,800,000 = 5,888,000 bytes exactly
    assert allowed * 100 == FILL * N_TILES
    at = gate(diff(flat, grown_total(flat, allowed)), ONLY_TOTAL)
    assert at.passed and at.violations.empty
    assert at.checks.set_index("metric").loc["memory.total_incl_gaps_bytes", "result"] == "pass"
    beyond = gate(diff(flat, grown_total(flat, allowed + 1)), ONLY_TOTAL)
    assert not beyond.passed
    v = beyond.violations.iloc[0]
    assert v["metric"] == "memory.total_incl_gaps_bytes" and v["kind"] == "relative"
    assert v["change"] == allowed + 1
    assert "memory.total_incl_gaps_bytes" in v["message"] and "1 %" in v["message"]
    assert "588,800,000 B (561.5 MiB) -> 594,688,001 B (567.1 MiB)" in v["message"]


def test_shrinking_a_lower_is_better_metric_never_fails(flat):
    result = gate(diff(flat, grown_total(flat, -10_000_000)), ONLY_TOTAL)
    assert result.passed


def test_default_budget_headroom_floor_and_oom_tiles(flat):
    at_capacity = np.full(N_TILES, FILL, dtype=np.int64)
    at_capacity[10] = CAP  # headroom exactly 0, no tile over capacity
    result = gate(
        diff(flat, with_tiles(flat, at_capacity)),
        {
            "defaults": False,
            "budgets": {
                "memory.max_tile_headroom_bytes": {"min": 0},
                "memory.tiles_out_of_memory": {"absolute": 0},
            },
        },
    )
    assert result.passed, result.violations
    over = at_capacity.copy()
    over[10] = CAP + 1
    result = gate(
        diff(flat, with_tiles(flat, over)),
        {
            "defaults": False,
            "budgets": {
                "memory.max_tile_headroom_bytes": {"min": 0},
                "memory.tiles_out_of_memory": {"absolute": 0},
            },
        },
    )
    assert not result.passed
    kinds = result.violations.set_index("metric")["kind"].to_dict()
    assert kinds == {"memory.max_tile_headroom_bytes": "min", "memory.tiles_out_of_memory": "absolute"}


def test_higher_is_better_metric_is_budgeted_on_shrink(flat):
    base_headroom = CAP - FILL  # 238,976
    budget = {"defaults": False, "budgets": {"memory.max_tile_headroom_bytes": {"relative": 0.5}}}
    half = np.full(N_TILES, FILL, dtype=np.int64)
    half[0] = CAP - base_headroom // 2
    assert gate(diff(flat, with_tiles(flat, half)), budget).passed
    half[0] += 1
    failed = gate(diff(flat, with_tiles(flat, half)), budget)
    assert not failed.passed and "shrink <= 50 %" in failed.violations.iloc[0]["message"]
    # growing headroom (less memory) is never a regression
    less = np.full(N_TILES, FILL - 100_000, dtype=np.int64)
    assert gate(diff(flat, with_tiles(flat, less)), budget).passed


def test_neutral_metric_absolute_budget_applies_both_ways(flat):
    def with_steps(delta: int):
        steps = flat.steps
        if delta > 0:
            extra = steps[steps["step"] < delta].copy()
            extra["step"] = extra["step"] + steps["step"].max() + 1
            steps = pd.concat([steps, extra], ignore_index=True)
        else:
            steps = steps[steps["step"] < steps["step"].max() + 1 + delta]
        new = flat.copy()
        new.set_table("steps", steps)
        return new

    budget = {"defaults": False, "budgets": {"execution.step_count": {"absolute": 10}}}
    assert gate(diff(flat, with_steps(10)), budget).passed
    assert gate(diff(flat, with_steps(-10)), budget).passed
    assert not gate(diff(flat, with_steps(11)), budget).passed
    assert not gate(diff(flat, with_steps(-11)), budget).passed


def test_glob_patterns_most_specific_wins_and_user_budget_beats_defaults(flat):
    budget = budget_from_mapping(
        {
            "budgets": {
                "memory.*": "+5%",
                "memory.category.*": "+1%",
                "memory.category.vertexCode_bytes": "+0.5%",
                "execution.total_cycles": {"relative": "10%"},
            }
        },
        "test",
    )
    assert budget.limit_for("memory.category.vertexCode_bytes").relative == 0.005
    assert budget.limit_for("memory.category.controlCode_bytes").relative == 0.01
    assert budget.limit_for("memory.always_live_bytes").relative == 0.05
    assert budget.limit_for("execution.total_cycles").relative == 0.10  # overrides the default +2 %
    assert budget.limit_for("execution.exchange_and_sync_share").absolute == 0.02  # default still in force
    no_defaults = budget_from_mapping({"defaults": False, "budgets": {"memory.*": "+5%"}}, "test")
    assert no_defaults.limit_for("execution.exchange_and_sync_share") is None


def test_shorthand_and_bad_budget_entries():
    assert parse_limit("m", "+1%").relative == 0.01
    assert parse_limit("m", "+2.9%").relative == 0.029  # not 0.028999999999999998
    assert parse_limit("m", {"relative": "2.9%", "min": 0}).describe() == "+2.9 %, >= 0"
    assert parse_limit("m", "+4096").absolute == 4096
    assert parse_limit("m", {"relative": "2.5%", "min": 0}).min == 0
    for bad in (
        {"relative": "x"},
        {"growth": 1},
        {},
        {"absolute": -1},
        [1, 2],
        {"relative": True},
        {"min": "nan"},
        {"max": float("nan")},
        {"min": "inf"},
        "nan",
        "+nan%",
    ):
        with pytest.raises(UsageError):
            parse_limit("m", bad)


def test_gaps_are_reported_and_fail_only_when_strict(flat):
    summary_like = flat.copy()
    for table in ("steps", "runs", "liveness"):
        summary_like.set_table(table, None)
    result = diff(summary_like, flat)
    lenient = gate(result, Budget())
    gap_metrics = set(lenient.gaps["metric"])
    assert {
        "execution.total_cycles",
        "execution.exchange_and_sync_share",
        "memory.peak_liveness_bytes",
    } <= gap_metrics
    assert lenient.passed
    assert "the base profile lacks this metric" in set(lenient.gaps["reason"])
    assert "trace.device_idle_us" in lenient.not_applicable
    strict = gate(result, Budget(), strict=True)
    assert not strict.passed and strict.violations.empty
    assert "strict" in strict.verdict


def test_budget_files_toml_json_pyproject(tmp_path, flat):
    toml_file = tmp_path / "budget.toml"
    toml_file.write_text('strict = true\n[budgets]\n"memory.total_incl_gaps_bytes" = "+1%"\n')
    budget = load_budget(toml_file)
    assert budget.strict and budget.limit_for("memory.total_incl_gaps_bytes").relative == 0.01
    json_file = tmp_path / "budget.json"
    json_file.write_text(json.dumps({"budgets": {"execution.total_cycles": {"relative": 0.03}}}))
    assert load_budget(json_file).limit_for("execution.total_cycles").relative == 0.03
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[tool.popprof.gate.budgets]\n"execution.total_cycles" = { relative = 0.07 }\n'
    )
    from_config = load_budget(start=project / "sub")
    assert from_config.limit_for("execution.total_cycles").relative == 0.07
    assert load_budget(project / "pyproject.toml").limit_for("execution.total_cycles").relative == 0.07
    assert load_budget(config={}).source == "default budget"
    broken = tmp_path / "broken.toml"
    broken.write_text("budgets = [\n")
    with pytest.raises(InputError, match="broken.toml"):
        load_budget(broken)
    with pytest.raises(InputError, match="budget file: no such file"):
        load_budget(tmp_path / "absent.toml")


def test_budget_patterns_that_match_no_known_metric_are_flagged(flat):
    result = gate(
        diff(flat, flat),
        {
            "budgets": {
                "memory.totl_bytes": "+1%",
                "memory.category.*": "+1%",
                "memory.category.vertexCode_bytes": "+1%",
                "execution.*": "+2%",
            }
        },
    )
    assert result.unknown_patterns == ["memory.totl_bytes"]
    assert result.passed


def _one_metric_diff(name: str, base: float, new: float, better: str | None):
    """A ProfileDiff holding a single metric row (for boundary properties)."""
    import math

    from popprof.compare.core import METRIC_COLUMNS, ProfileDiff

    rel = (new - base) / abs(base) if base else (0.0 if new == base else math.inf)
    metrics = pd.DataFrame(
        [
            {
                "name": name,
                "unit": "bytes",
                "better": better,
                "base": base,
                "new": new,
                "abs_change": new - base,
                "rel_change": rel,
                "status": "unchanged" if new == base else "changed",
                "worse": None,
            }
        ],
        columns=METRIC_COLUMNS,
    )
    empty = pd.DataFrame()
    return ProfileDiff("a", "b", metrics, empty, empty, empty, empty, empty)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    base=st.integers(1, 10**13),
    percent=st.integers(0, 500),
    better=st.sampled_from(["lower", "higher", None]),
)
def test_relative_boundary_property(base, percent, better):
    """Whole-byte changes: the largest one within the budget passes, one byte more fails."""
    allowed = base * percent // 100  # floor of the allowed worsening in whole bytes
    sign = -1 if better == "higher" else 1
    budget = {"defaults": False, "budgets": {"m.x": {"relative": percent / 100}}}
    at = gate(_one_metric_diff("m.x", float(base), float(base + sign * allowed), better), budget)
    assert at.passed, at.violations
    beyond = gate(_one_metric_diff("m.x", float(base), float(base + sign * (allowed + 1)), better), budget)
    assert not beyond.passed


@settings(max_examples=40, deadline=None)
@given(base=st.integers(-(10**9), 10**9), limit=st.integers(0, 10**9))
def test_absolute_and_min_boundary_property(base, limit):
    absolute = {"defaults": False, "budgets": {"m.x": {"absolute": limit}}}
    assert gate(_one_metric_diff("m.x", float(base), float(base + limit), "lower"), absolute).passed
    assert not gate(_one_metric_diff("m.x", float(base), float(base + limit + 1), "lower"), absolute).passed
    floor = {"defaults": False, "budgets": {"m.x": {"min": base}}}
    assert gate(_one_metric_diff("m.x", float(base + 5), float(base), "higher"), floor).passed
    assert not gate(_one_metric_diff("m.x", float(base + 5), float(base - 1), "higher"), floor).passed


def test_a_family_member_appearing_from_zero_exceeds_a_relative_budget():
    one = synth.make_profile(num_ipus=1, num_steps=200, num_liveness_steps=30, seed=61)
    two = synth.make_profile(num_ipus=2, num_steps=200, num_liveness_steps=30, seed=61)
    result = gate(diff(one, two), {"defaults": False, "budgets": {"memory.category.globalExchange*": "+1%"}})
    assert not result.passed
    message = result.violations.set_index("metric").loc["memory.category.globalExchangeCode_bytes", "message"]
    assert "new (base was 0)" in message
