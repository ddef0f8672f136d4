"""popprof.compare on real-shaped profiles: identical, known changes, programs, events, liveness, mismatched targets."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.compare import diff
from popprof.compare.document import to_dict
from popprof.report.diff import render as render_diff
from popprof.testing import synth

CAP = 638_976  # Mk2 bytes per tile


@pytest.fixture(scope="module")
def base():
    return synth.make_profile(num_steps=1_500, num_liveness_steps=200, seed=11)


def metric_row(result, name):
    rows = result.metrics[result.metrics["name"] == name]
    assert len(rows) == 1, f"{name} missing from the diff"
    return rows.iloc[0]


def test_identical_profiles_show_no_change(base):
    result = diff(base, base.copy())
    assert not result.has_changes
    assert set(result.metrics["status"]) == {"unchanged"}
    assert len(result.metrics) >= 30
    assert (result.tiles["change_bytes"] == 0).all() and len(result.tiles) == 1_472
    assert set(result.programs["status"]) == {"unchanged"}
    assert (result.liveness["change_bytes"] == 0).all() and len(result.liveness) == 200
    assert result.changed_metrics().empty
    assert result.notes == []


def test_popprof_diff_stays_a_function_after_the_package_is_imported(base):
    import popprof.compare as package

    first = popprof.diff(base, base)
    importlib.import_module("popprof.redaction")  # importing a subpackage must not replace a facade function
    second = popprof.diff(base, base)
    assert isinstance(first, package.ProfileDiff) and isinstance(second, package.ProfileDiff)
    assert callable(popprof.redact) and not isinstance(popprof.redact, type(package))


def test_tiles_pushed_over_capacity_show_exact_numbers(base):
    new = base.copy()
    tiles = new.tiles.copy()
    targets = np.array([7, 300, 1_000])
    bumped = np.array([CAP + 1, CAP + 5_000, CAP])  # the last sits exactly at capacity: not out of memory
    before = tiles.loc[targets, "bytes_incl_gaps"].to_numpy(dtype=np.int64)
    tiles.loc[targets, "bytes_incl_gaps"] = bumped
    new.set_table("tiles", tiles)
    result = diff(base, new)

    base_bytes = base.tiles["bytes_incl_gaps"].to_numpy(dtype=np.int64)
    new_bytes = tiles["bytes_incl_gaps"].to_numpy(dtype=np.int64)
    oom = metric_row(result, "memory.tiles_out_of_memory")
    assert oom["base"] == (base_bytes > CAP).sum()
    assert oom["new"] == (new_bytes > CAP).sum() == oom["base"] + 2
    assert oom["abs_change"] == 2 and oom["status"] == "changed" and bool(oom["worse"])

    total = metric_row(result, "memory.total_incl_gaps_bytes")
    assert total["abs_change"] == int((bumped - before).sum())
    assert total["rel_change"] == pytest.approx((bumped - before).sum() / base_bytes.sum(), rel=1e-12)

    fullest = metric_row(result, "memory.max_tile_incl_gaps_bytes")
    assert fullest["new"] == CAP + 5_000
    headroom = metric_row(result, "memory.max_tile_headroom_bytes")
    assert (
        headroom["new"] == -5_000 and headroom["base"] == CAP - base_bytes.max() and bool(headroom["worse"])
    )

    changed = result.tiles[result.tiles["change_bytes"] != 0]
    assert changed["tile"].tolist() == sorted(targets.tolist())
    assert changed.set_index("tile")["change_bytes"].to_dict() == dict(
        zip(targets.tolist(), (bumped - before).tolist(), strict=True)
    )
    top = result.top_tiles(2)
    assert top["tile"].tolist() == targets[np.argsort(-np.abs(bumped - before))][:2].tolist()
    # unchanged metrics stay unchanged
    assert metric_row(result, "execution.total_cycles")["status"] == "unchanged"
    # changed metrics come biggest relative change first
    rel = result.changed_metrics()["rel_change"].abs().to_numpy()
    assert (np.diff(rel[np.isfinite(rel)]) <= 0).all()


def test_more_steps_of_one_program_show_as_grown_with_exact_totals(base):
    steps = base.steps
    program = steps["program"].astype("str").value_counts().index[0]
    extra = steps[steps["program"].astype("str") == program].copy()
    extra["step"] = extra["step"] - extra["step"].min() + steps["step"].max() + 1
    new = base.copy()
    new.set_table("steps", pd.concat([steps, extra], ignore_index=True))
    result = diff(base, new)

    row = result.programs.set_index("name").loc[program]
    mine = steps["program"].astype("str") == program
    base_total = float(steps.loc[mine, "cycles"].sum())
    assert row["base_count"] == steps.loc[mine, "step"].nunique()
    assert row["new_count"] == 2 * row["base_count"]
    assert row["base_total"] == base_total and row["new_total"] == 2 * base_total
    assert row["change"] == base_total and row["rel_change"] == 1.0 and row["status"] == "grown"
    assert set(result.programs.loc[result.programs["name"] != program, "status"]) == {"unchanged"}

    cycles = metric_row(result, "execution.total_cycles")
    assert cycles["abs_change"] == base_total
    count = metric_row(result, "execution.step_count")
    assert count["new"] - count["base"] == len(extra["step"].unique())
    assert pd.isna(count["worse"])  # step count is neutral


def test_programs_added_removed_and_within_tolerance(base):
    steps = base.steps.copy()
    names = steps["program"].astype("str")
    counts = names.value_counts()
    gone, nudged = counts.index[0], counts.index[1]
    steps = steps[names != gone].copy()
    names = steps["program"].astype("str")
    # +0.5 % cycles on one program: within the default 1 % tolerance
    nudged_total = float(steps.loc[names == nudged, "cycles"].sum())
    first = steps.index[names == nudged][0]
    steps.loc[first, "cycles"] += int(nudged_total * 0.005)
    fresh = steps.iloc[[0]].copy()
    fresh["step"] = steps["step"].max() + 1
    fresh["program"] = "brand/new/Program_0"
    fresh["cycles"] = 1234
    new = base.copy()
    new.set_table(
        "steps",
        pd.concat([steps.astype({"program": "str"}), fresh.astype({"program": "str"})], ignore_index=True),
    )
    result = diff(base, new)
    by_name = result.programs.set_index("name")
    assert by_name.loc[gone, "status"] == "removed"
    assert by_name.loc[gone, "change"] == -float(
        base.steps.loc[base.steps["program"] == gone, "cycles"].sum()
    )
    assert by_name.loc["brand/new/Program_0", "status"] == "added"
    assert by_name.loc["brand/new/Program_0", "new_total"] == 1234
    assert by_name.loc[nudged, "status"] == "unchanged"
    strict = diff(base, new, tolerance=0.001).programs.set_index("name")
    assert strict.loc[nudged, "status"] == "grown"


def _events(names_durations: list[tuple[str, float]]) -> pd.DataFrame:
    n = len(names_durations)
    return pd.DataFrame(
        {
            "event_id": np.arange(n),
            "pid": np.full(n, 100),
            "tid": np.full(n, 7),
            "parent_id": [None] * n,
            "depth": np.zeros(n, dtype=np.int16),
            "name": [a for a, _ in names_durations],
            "channel": ["poptorch"] * n,
            "start_us": np.arange(n, dtype=float) * 1_000.0,
            "dur_us": [b for _, b in names_durations],
        }
    )


def test_events_matched_by_name(base):
    old = base.copy()
    old.set_table(
        "events",
        _events(
            [
                ("forward", 100.0),
                ("forward", 110.0),
                ("backward", 300.0),
                ("setOptimizer", 5.0),
                ("copyWeights", 50.0),
            ]
        ),
    )
    new = base.copy()
    new.set_table(
        "events",
        _events(
            [
                ("forward", 100.0),
                ("forward", 110.0),
                ("forward", 90.0),
                ("backward", 240.0),
                ("setOptimizer", 5.02),
                ("loadCheckpoint", 70.0),
            ]
        ),
    )
    result = diff(old, new)
    ev = result.events.set_index("name")
    assert ev.loc["forward", ["base_count", "new_count", "base_total", "new_total"]].tolist() == [
        2,
        3,
        210.0,
        300.0,
    ]
    assert ev.loc["forward", "status"] == "grown" and ev.loc["forward", "change"] == pytest.approx(90.0)
    assert ev.loc["backward", "status"] == "shrunk" and ev.loc["backward", "rel_change"] == pytest.approx(
        -0.2
    )
    assert ev.loc["setOptimizer", "status"] == "unchanged"  # +0.4 % < 1 % tolerance
    assert ev.loc["copyWeights", "status"] == "removed" and ev.loc["loadCheckpoint", "status"] == "added"
    assert "events" not in result.unavailable
    only_one = diff(base, new)
    assert "events" in only_one.unavailable and "base profile lacks" in only_one.unavailable["events"]


def test_liveness_lines_up_only_with_the_same_program_sequence(base):
    live = base.liveness.copy()
    peak = int(live["not_always_live_bytes"].idxmax())
    live.loc[peak, "not_always_live_bytes"] += 4_096
    new = base.copy()
    new.set_table("liveness", live)
    result = diff(base, new)
    changed = result.liveness[result.liveness["change_bytes"] != 0]
    assert changed["step"].tolist() == [int(base.liveness["step"].iloc[peak])]
    assert changed["change_bytes"].tolist() == [4_096]
    assert metric_row(result, "memory.peak_liveness_bytes")["abs_change"] == 4_096

    other = live.copy()
    other.loc[3, "program"] = "something/else"
    moved = base.copy()
    moved.set_table("liveness", other)
    result = diff(base, moved)
    assert result.liveness.empty
    assert "do not line up" in result.unavailable["liveness"] and "step 3" in result.unavailable["liveness"]


def test_different_ipu_counts_compare_by_global_tile_and_per_ipu():
    one = synth.make_profile(num_ipus=1, num_steps=300, num_liveness_steps=50, seed=4)
    two = synth.make_profile(num_ipus=2, num_steps=300, num_liveness_steps=50, seed=4)
    result = diff(one, two)
    assert len(result.tiles) == 1_472
    assert result.tiles["tile"].tolist() == list(range(1_472))
    expected = two.tiles["bytes_incl_gaps"].iloc[:1_472].to_numpy(dtype=np.int64) - one.tiles[
        "bytes_incl_gaps"
    ].to_numpy(dtype=np.int64)
    assert (result.tiles["change_bytes"].to_numpy(dtype=np.int64) == expected).all()
    assert result.ipus["ipu"].tolist() == [0, 1]
    ipu1 = result.ipus.set_index("ipu").loc[1]
    assert pd.isna(ipu1["base_bytes"])
    assert ipu1["new_bytes"] == int(two.tiles.loc[two.tiles["ipu"] == 1, "bytes_incl_gaps"].sum())
    assert any("num_ipus 1 -> 2" in n for n in result.notes)
    assert any("tile counts differ (1,472 -> 2,944)" in n for n in result.notes)
    # a memory category only the 2-IPU profile has is "added" from 0
    row = metric_row(result, "memory.category.globalExchangeCode_bytes")
    assert row["status"] == "added" and row["base"] == 0
    assert row["new"] == float(
        two.tile_memory.loc[two.tile_memory["category"] == "globalExchangeCode", "bytes"].sum()
    )


def test_different_architectures_are_flagged():
    mk1 = synth.make_profile(arch="ipu1", num_steps=200, num_liveness_steps=40, seed=2)
    mk2 = synth.make_profile(arch="ipu2", num_steps=200, num_liveness_steps=40, seed=2)
    result = diff(mk1, mk2)
    assert len(result.tiles) == 1_216
    assert any("ipu_arch ipu1 -> ipu2" in n for n in result.notes)
    assert any("tiles per IPU differ (1,216 -> 1,472)" in n for n in result.notes)


def text_summary_like(profile) -> popprof.Profile:
    """What the text-summary reader gives: target and memory totals, no tiles, steps or liveness."""
    tiles = profile.tiles
    totals = pd.DataFrame(
        {
            "tile": [None, None, None, None, None],
            "group": ["total", "total", "data_type", "data_type", "maximum"],
            "category": ["including_gaps", "excluding_gaps", "Vertex Code", "Control Code", "including_gaps"],
            "bytes": [
                int(tiles["bytes_incl_gaps"].sum()),
                int(tiles["bytes_excl_gaps"].sum()),
                40_000_000,
                28_000_000,
                int(tiles["bytes_incl_gaps"].max()),
            ],
        }
    )
    return popprof.Profile("summary", {"target": profile.target, "memory_totals": totals})


def test_text_summary_against_full_profile_reports_what_one_side_lacks(base):
    summary = text_summary_like(base)
    result = diff(summary, base)
    assert metric_row(result, "memory.total_incl_gaps_bytes")["status"] == "unchanged"
    assert metric_row(result, "memory.max_tile_incl_gaps_bytes")["status"] == "unchanged"
    assert metric_row(result, "execution.total_cycles")["status"] == "missing_base"
    assert metric_row(result, "memory.peak_liveness_bytes")["status"] == "missing_base"
    # categories named differently by the two sources are not compared as added/removed
    cats = result.metrics[result.metrics["name"].str.startswith("memory.category.")]
    assert set(cats["status"]) == {"missing_base", "missing_new"}
    assert any("do not overlap" in n for n in result.notes)
    for section in ("tiles", "programs", "liveness"):
        assert "base profile lacks" in result.unavailable[section]
    missing_last = result.changed_metrics()["status"].tolist()
    assert missing_last == sorted(missing_last, key=lambda s: s.startswith("missing"))


def test_step_order_does_not_matter(base):
    shuffled = base.copy()
    shuffled.set_table("steps", base.steps.sample(frac=1.0, random_state=3))
    a = diff(base, base).programs
    b = diff(base, shuffled).programs
    pd.testing.assert_frame_equal(a, b)
    assert set(b["status"]) == {"unchanged"}


def test_swapping_sides_negates_every_change():
    a = synth.make_profile(num_steps=400, num_liveness_steps=50, seed=51, oom_tiles=1)
    b = a.copy()
    tiles = b.tiles.copy()
    tiles.loc[tiles["tile"] % 7 == 0, "bytes_incl_gaps"] += 20_000
    b.set_table("tiles", tiles)
    rng = np.random.default_rng(0)
    steps = b.steps.copy()
    names = steps["program"].astype("str")
    factor = dict(zip(names.unique(), rng.choice([0.5, 0.8, 1.0, 1.25, 2.0], names.nunique()), strict=True))
    steps["cycles"] = (
        (steps["cycles"].astype("float64") * names.map(factor).to_numpy()).round().astype("int64")
    )
    steps = steps[names != names.iloc[0]]
    b.set_table("steps", steps)
    ab, ba = diff(a, b), diff(b, a)
    m1, m2 = ab.metrics.set_index("name"), ba.metrics.set_index("name")
    assert set(m1.index) == set(m2.index)
    m2 = m2.loc[m1.index]
    assert (m1["base"].to_numpy() == m2["new"].to_numpy()).all()
    assert np.allclose(m1["abs_change"], -m2["abs_change"], equal_nan=True)
    flip = {
        "added": "removed",
        "removed": "added",
        "grown": "shrunk",
        "shrunk": "grown",
        "unchanged": "unchanged",
    }
    p1, p2 = ab.programs.set_index("name"), ba.programs.set_index("name").loc[ab.programs["name"]]
    assert (p1["status"].map(flip).to_numpy() == p2["status"].to_numpy()).all()
    assert np.allclose(p1["change"], -p2["change"])
    assert {"grown", "shrunk", "removed", "unchanged"} <= set(p1["status"])
    assert (ab.tiles["change_bytes"].to_numpy() == -ba.tiles["change_bytes"].to_numpy()).all()


def test_live_pva_profile_against_its_bundle_shows_no_change(pva_double, fixtures_dir, tmp_path):
    pop = fixtures_dir / "run_dir" / "training" / "profile.pop"
    if not pop.is_file():
        pytest.skip("fixtures/run_dir not generated")
    live = popprof.open(pop)
    saved = popprof.open(popprof.export(live, str(tmp_path / "training.popprof")))
    result = diff(live, saved)
    assert set(result.metrics["status"]) == {"unchanged"}
    assert len(result.tiles) == len(live.tiles) and (result.tiles["change_bytes"] == 0).all()
    assert set(result.programs["status"]) == {"unchanged"}


def test_unknown_figures_are_missing_not_zero(base):
    """Cycles, liveness bytes or tile capacity that a profile lacks make its metrics missing, never 0."""
    new = base.copy()
    steps = new.steps.copy()
    steps["cycles"] = pd.array([pd.NA] * len(steps), dtype="Int64")
    new.set_table("steps", steps)
    liveness = new.liveness.copy()
    liveness["not_always_live_bytes"] = pd.array([pd.NA] * len(liveness), dtype="Int64")
    new.set_table("liveness", liveness)
    target = new.target.copy()
    target["bytes_per_tile"] = pd.NA
    new.set_table("target", target)
    tiles = new.tiles.copy()
    tiles["capacity_bytes"] = pd.NA
    new.set_table("tiles", tiles)

    values = popprof.metrics.compute(new)
    for name in (
        "execution.total_cycles",
        "execution.total_time_us",
        "execution.exchange_and_sync_share",
        "memory.peak_not_always_live_bytes",
        "memory.peak_liveness_bytes",
        "memory.peak_liveness_step",
        "memory.tiles_out_of_memory",
        "memory.max_tile_headroom_bytes",
    ):
        assert values[name] is None, name
    assert not any(k.startswith(("execution.cycles.", "execution.share.")) for k in values)
    assert values["execution.step_count"] == base.steps["step"].nunique()  # what is known stays known

    result = diff(base, new)
    assert result.ipus["new_tiles_out_of_memory"].isna().all()
    assert result.ipus["base_tiles_out_of_memory"].notna().all()
    for name in ("execution.total_cycles", "memory.peak_liveness_bytes", "memory.tiles_out_of_memory"):
        assert metric_row(result, name)["status"] == "missing_new", name
    cycles = result.metrics[result.metrics["name"].str.startswith("execution.cycles.")]
    assert len(cycles) == 6 and set(cycles["status"]) == {"missing_new"}
    assert result.programs.empty and "new profile lacks step cycles" in result.unavailable["programs"]


def test_fullest_tile_and_liveness_peak_found_by_position_whatever_the_index(base):
    """A table with a non-default index (a user's in-place edit) still gives the right tile and step."""
    tiles = base.tiles
    used = tiles["bytes_incl_gaps"].to_numpy(dtype=np.int64)
    expected_tile = int(tiles["tile"].to_numpy()[used.argmax()])
    lv = base.liveness
    expected_step = int(lv["step"].to_numpy()[lv["not_always_live_bytes"].to_numpy(dtype=np.int64).argmax()])
    odd = base.copy()
    odd._tables["tiles"] = tiles.iloc[::-1].set_axis(np.arange(len(tiles)) * 3 + 5)
    odd._tables["liveness"] = lv.iloc[::-1].set_axis(np.arange(len(lv)) + 1_000)
    values = popprof.metrics.compute(
        odd, ["memory.max_tile_index", "memory.max_tile_incl_gaps_bytes", "memory.peak_liveness_step"]
    )
    assert values["memory.max_tile_index"] == expected_tile
    assert values["memory.max_tile_incl_gaps_bytes"] == used.max()
    assert values["memory.peak_liveness_step"] == expected_step


def test_liveness_step_with_unknown_bytes_is_not_counted_as_changed(base):
    new = base.copy()
    liveness = new.liveness.copy()
    liveness["not_always_live_bytes"] = liveness["not_always_live_bytes"].astype("Int64")
    liveness.loc[3, "not_always_live_bytes"] = pd.NA
    liveness.loc[5, "not_always_live_bytes"] += 10
    new.set_table("liveness", liveness)
    result = diff(base, new)
    assert "liveness: 1 of 200 steps changed" in render_diff(result, None, "text")
    assert to_dict(result)["liveness"]["changed"] == 1
