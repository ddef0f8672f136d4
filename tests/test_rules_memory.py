"""Memory rules at their boundaries: hand-built tiles for exact thresholds, synthetic profiles, text summaries."""

from __future__ import annotations

import pandas as pd
import pytest

from popprof.model.profile import Profile
from popprof.rules import check
from popprof.testing.synth import make_profile

CAP = 1_000_000


def tiles_profile(incl: list[int], excl: list[int] | None = None, cap: int = CAP, **tables) -> Profile:
    n = len(incl)
    tiles = pd.DataFrame(
        {
            "tile": range(n),
            "ipu": [0] * n,
            "tile_in_ipu": range(n),
            "bytes_incl_gaps": incl,
            "bytes_excl_gaps": excl if excl is not None else incl,
            "capacity_bytes": [cap] * n,
        }
    )
    target = pd.DataFrame(
        {
            "num_ipus": [1],
            "tiles_per_ipu": [n],
            "num_tiles": [n],
            "bytes_per_tile": [cap],
            "clock_hz": [1.33e9],
        }
    )
    return Profile("hand", {"tiles": tiles, "target": target, **tables})


def run(profile: Profile, rule: str, **params):
    return check(profile, rules=[rule], params={f"{rule}.{k}": v for k, v in params.items()})


# -- memory.headroom ----------------------------------------------------------


def test_headroom_exactly_at_warning_threshold_is_flagged():
    found = run(tiles_profile([500_000, 850_000, 400_000]), "memory.headroom")
    assert [f.severity for f in found] == ["warning"]
    f = found.items[0]
    assert f.value == pytest.approx(0.85) and f.threshold == 0.85
    assert (
        "tile 1 uses 850,000 B (830.1 KiB) including gaps = 85.0 % of 1,000,000 B (976.6 KiB) (warning at >= 85 %)"
        in f.message
    )
    assert f.where["tiles"] == [1]


def test_headroom_just_below_warning_is_not_flagged():
    assert len(run(tiles_profile([500_000, 849_999]), "memory.headroom")) == 0


def test_headroom_error_band_lists_all_tiles_above_warning():
    found = run(tiles_profile([950_000, 900_000, 100_000, 860_000]), "memory.headroom")
    f = found.items[0]
    assert f.severity == "error" and f.threshold == 0.95
    assert f.where["tiles"] == [0, 1, 3]  # fullest first, all >= 85 %
    assert list(f.evidence["tile"]) == [0, 1, 3]


def test_headroom_params_override():
    found = run(tiles_profile([800_000, 100_000]), "memory.headroom", warning=0.8)
    assert [f.severity for f in found] == ["warning"]


# -- memory.tile-oom ----------------------------------------------------------


def test_tile_exactly_at_capacity_is_not_out_of_memory():
    assert len(run(tiles_profile([CAP, 10]), "memory.tile-oom")) == 0


def test_tile_one_byte_over_capacity_is_an_error():
    found = run(tiles_profile([CAP + 1, 10, CAP + 500]), "memory.tile-oom")
    f = found.items[0]
    assert f.severity == "error" and f.value == 2
    assert f.where["tiles"] == [2, 0]
    assert list(f.evidence["over_bytes"]) == [500, 1]
    assert "2 tiles over capacity; tile 2 uses 1,000,500 B" in f.message


def test_synthetic_oom_tiles_are_found():
    profile = make_profile(num_steps=200, num_liveness_steps=50, oom_tiles=4, seed=3)
    found = run(profile, "memory.tile-oom")
    tiles = profile.tiles
    expected = sorted(tiles.loc[tiles["bytes_incl_gaps"] > tiles["capacity_bytes"], "tile"])
    assert len(expected) == 4
    assert sorted(found.items[0].where["tiles"]) == expected


def test_synthetic_roomy_profile_has_no_memory_errors():
    profile = make_profile(
        num_steps=200, num_liveness_steps=50, median_fill=0.4, hot_tiles=0, oom_tiles=0, gap_share=0.03
    )
    found = check(profile, rules=["memory.*"])
    assert found.at_least("warning") == []
    assert set(found.evaluated) == {
        "memory.tile-oom",
        "memory.headroom",
        "memory.tile-imbalance",
        "memory.liveness-peak",
        "memory.gaps",
        "memory.fullest-tile",
    }


# -- text summary: memory_totals only ---------------------------------------------


def summary_profile(max_bytes: int, oom: int | None) -> Profile:
    totals = pd.DataFrame(
        {
            "tile": [None, None, 1017, 1017],
            "group": ["total", "total", "maximum", "maximum"],
            "category": ["including_gaps", "excluding_gaps", "including_gaps", "excluding_gaps"],
            "bytes": [812_004_112, 700_115_024, max_bytes, max_bytes - 10_112],
        }
    )
    target = pd.DataFrame(
        {
            "source_format": ["text_summary"],
            "num_ipus": [2],
            "tiles_per_ipu": [1472],
            "num_tiles": [2944],
            "bytes_per_tile": [638_976],
        }
    )
    meta = {} if oom is None else {"tiles_out_of_memory": oom}
    return Profile("summary", {"memory_totals": totals, "target": target}, metadata=meta)


def test_text_summary_out_of_memory_and_headroom():
    found = check(summary_profile(650_112, 3))
    oom = found.by_rule("memory.tile-oom")[0]
    assert oom.severity == "error" and oom.value == 3
    assert (
        "3 tiles over capacity; tile 1,017 uses 650,112 B (634.9 KiB) including gaps = 101.7 % of 638,976 B (624 KiB)"
        in oom.message
    )
    head = found.by_rule("memory.headroom")[0]
    assert (
        head.message
        == "tile 1,017 uses 650,112 B (634.9 KiB) including gaps = 101.7 % of 638,976 B (624 KiB) (error at >= 95 %)"
    )
    gaps = found.by_rule("memory.gaps")[0]  # (812,004,112 - 700,115,024) / 812,004,112 = 13.8 %
    assert gaps.severity == "warning" and gaps.value == pytest.approx(111_889_088 / 812_004_112)
    reasons = dict(found.not_evaluated)
    assert "memory.tile-imbalance" in reasons and "memory.liveness-peak" in reasons
    assert "exchange.phases" in reasons and "execution profile" in reasons["exchange.phases"]


def test_text_summary_without_oom_count_uses_the_maximum():
    assert len(check(summary_profile(600_000, None), rules=["memory.tile-oom"])) == 0
    found = check(summary_profile(640_000, None), rules=["memory.tile-oom"])
    assert found.items[0].value == 1


# -- memory.tile-imbalance ----------------------------------------------------------


def test_imbalance_needs_both_ratio_and_fill():
    # fullest = 1.5 x median but only 60 % full: not flagged
    assert len(run(tiles_profile([400_000] * 5 + [600_000]), "memory.tile-imbalance")) == 0
    # fullest 70 % full but only 1.4 x median: not flagged
    assert len(run(tiles_profile([500_000] * 5 + [700_000]), "memory.tile-imbalance")) == 0
    # both at their thresholds exactly: flagged
    found = run(tiles_profile([400_000] * 4 + [700_000, 600_000]), "memory.tile-imbalance")
    f = found.items[0]
    assert f.severity == "warning" and f.where["tiles"] == [4]
    assert f.value == pytest.approx(700_000 / 400_000)


def test_imbalance_ignores_empty_tiles_for_the_median():
    # median of non-empty tiles is 400,000, so 700,000 is 1.75 x
    found = run(tiles_profile([0] * 10 + [400_000] * 3 + [700_000]), "memory.tile-imbalance")
    assert found.items[0].value == pytest.approx(1.75)


# -- memory.liveness-peak ----------------------------------------------------------


def liveness_profile(peak: int) -> Profile:
    profile = tiles_profile([500] * 4, cap=1000)
    tiles = profile.tiles.assign(always_live_bytes=250)  # 1,000 B always-live over 4 tiles of 1,000 B
    liveness = pd.DataFrame(
        {
            "step": [0, 1, 2, 3],
            "program": ["fwd/a", "fwd/b", "bwd/peak", "bwd/c"],
            "program_type": ["OnTileExecute"] * 4,
            "not_always_live_bytes": [100, 900, peak, 50],
        }
    )
    live_vars = pd.DataFrame(
        {
            "step": [2, 2, 2, 1],
            "name": ["act/small", "act/big", "act/mid", "act/other"],
            "bytes": [10, 2000, 300, 900],
        }
    )
    ops = pd.DataFrame(
        {
            "name": ["Linear/MatMul", "Softmax", "Later/Add"],
            "layer": ["popart"] * 3,
            "first_step": [1, 2, 3],
            "last_step": [2, 2, 3],
            "bytes": [100, 900, 5],
        }
    )
    return Profile(
        "live",
        {
            "tiles": tiles,
            "target": profile.target,
            "liveness": liveness,
            "liveness_variables": live_vars,
            "operations": ops,
        },
    )


def test_liveness_peak_warning_exactly_at_threshold():
    # always-live 1,000 + peak 2,400 = 3,400 = 85 % of 4 tiles x 1,000 B
    f = run(liveness_profile(2400), "memory.liveness-peak").items[0]
    assert f.severity == "warning" and f.value == pytest.approx(0.85)
    assert "liveness step 2 (program 'bwd/peak')" in f.message
    assert f.where["variables"] == ["act/big", "act/mid", "act/small"]
    assert f.where["operations"] == ["Softmax", "Linear/MatMul"]  # covering step 2, largest first
    assert f.where["liveness_steps"] == (2, 2)
    assert list(f.evidence["total_bytes"]) == [1100, 1900, 3400, 1050]


def test_liveness_peak_below_threshold_is_info():
    f = run(liveness_profile(2399), "memory.liveness-peak").items[0]
    assert f.severity == "info" and f.threshold is None
    assert f.value == pytest.approx(3399 / 4000)
    assert "warning at" not in f.message


def test_liveness_over_total_memory_is_an_error():
    f = run(liveness_profile(3000), "memory.liveness-peak").items[0]
    assert f.severity == "error" and f.threshold == 1.0


# -- memory.gaps -------------------------------------------------------------


def test_gaps_on_a_nearly_full_tile_exact_thresholds():
    # tile 0: 850,000 B incl. gaps = 85 % of capacity, gaps 85,000 B = 10 %: both thresholds met exactly
    found = run(tiles_profile([850_000, 400_000], excl=[765_000, 200_000]), "memory.gaps")
    assert [f.severity for f in found] == ["warning"]
    f = found.items[0]
    assert f.value == pytest.approx(0.10) and f.threshold == 0.10 and f.where["tiles"] == [0]
    assert (
        "tile 0: 850,000 B (830.1 KiB) including gaps = 85.0 % of 1,000,000 B (976.6 KiB), 765,000 B (747.1 "
        "KiB) without (gaps 10.0 %)" in f.message
    )
    assert len(run(tiles_profile([850_000, 400_000], excl=[765_001, 200_000]), "memory.gaps")) == 0  # < 10 %
    assert len(run(tiles_profile([849_999, 400_000], excl=[700_000, 200_000]), "memory.gaps")) == 0  # < 85 %


def test_large_gaps_on_roomy_tiles_are_not_flagged():
    """The calibration case: 77.6 % gaps while the fullest tile is 18.8 % full is a healthy profile."""
    assert len(run(tiles_profile([188_000, 150_000], excl=[42_112, 33_600]), "memory.gaps")) == 0


def test_gaps_never_error_but_say_when_a_tile_is_over_only_because_of_them():
    found = run(tiles_profile([1_100_000, 990_000, 100], excl=[700_000, 980_000, 100]), "memory.gaps")
    f = found.items[0]
    assert f.severity == "warning" and f.where["tiles"] == [0]  # tile 1 loses only 1 % to gaps
    assert "1 of them are over capacity only because of gaps" in f.message


def test_synthetic_gap_share_on_full_tiles():
    lossy = make_profile(
        num_steps=100, num_liveness_steps=50, execution=False, gap_share=0.15, seed=4, hot_tiles=5
    )
    tight = make_profile(
        num_steps=100, num_liveness_steps=50, execution=False, gap_share=0.03, seed=4, hot_tiles=5
    )
    tiles = lossy.tiles
    fill = tiles["bytes_incl_gaps"] / tiles["capacity_bytes"]
    tile_gap = 1 - tiles["bytes_excl_gaps"] / tiles["bytes_incl_gaps"]
    expected = set(tiles.loc[(fill >= 0.85) & (tile_gap >= 0.10), "tile"])
    found = run(lossy, "memory.gaps")
    if expected:
        assert found.items[0].severity == "warning" and set(found.items[0].where["tiles"]) == expected
    else:
        assert len(found) == 0
    assert len(run(tight, "memory.gaps")) == 0


def test_synthetic_hot_tiles_are_imbalanced_and_the_peak_is_located():
    profile = make_profile(num_steps=100, num_liveness_steps=300, hot_tiles=5, seed=6)
    f = run(profile, "memory.tile-imbalance").items[0]
    hot = profile.tiles.nlargest(5, "bytes_incl_gaps")["tile"].tolist()
    assert f.where["tiles"][:5] == hot
    peak = run(profile, "memory.liveness-peak").items[0]
    liveness = profile.liveness
    step = int(liveness.loc[liveness["not_always_live_bytes"].idxmax(), "step"])
    assert peak.where["liveness_steps"] == (step, step)
    assert peak.where["programs"] == [liveness.loc[liveness["step"] == step, "program"].iloc[0]]
