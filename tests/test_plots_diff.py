"""Diff plots: the metrics that changed most and the per-tile memory change, from a real ProfileDiff."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import popprof  # noqa: E402
from popprof.plots import diff_metrics, diff_tiles  # noqa: E402
from popprof.testing import synth  # noqa: E402


@pytest.fixture(scope="module")
def change():
    base = synth.make_profile(num_ipus=2, debug=False, seed=4)
    tiles = base.tiles.copy()
    grown = tiles["tile"].isin([5, 6, 7, 2000])
    tiles.loc[grown, "bytes_incl_gaps"] += 20_000
    tiles.loc[tiles["tile"] == 9, "bytes_incl_gaps"] -= 7_000
    new = base.copy("new")
    new.set_table("tiles", tiles)
    steps = new.steps.copy()
    steps.loc[steps["category"] == "exchange", "cycles"] *= 2
    new.set_table("steps", steps)
    return popprof.diff(base, new)


def test_metric_bars_are_the_largest_relative_changes(change):
    ax = diff_metrics(change, top=6).axes[0]
    (bars,) = [c for c in ax.containers]
    widths = [b.get_width() for b in bars]
    changed = change.metrics[(change.metrics["status"] == "changed") & change.metrics["rel_change"].notna()]
    expected = changed.reindex(
        changed["rel_change"].abs().sort_values(ascending=False, kind="stable").index
    ).head(6)
    np.testing.assert_allclose(widths, expected["rel_change"].to_numpy(float) * 100)
    assert [t.get_text() for t in ax.get_yticklabels()] == expected["name"].tolist()
    # exchange cycles doubled: worse (red) since lower is better
    row = expected["name"].tolist().index("execution.cycles.exchange")
    assert matplotlib.colors.to_hex(bars[row].get_facecolor()) == "#d62728"
    assert widths[row] == pytest.approx(100.0)  # doubled: +100 %, independently of the diff's arithmetic
    assert "%" in ax.get_xlabel()


def test_per_tile_change(change):
    ax = diff_tiles(change, max_bars=5000).axes[0]
    (patch,) = [p for p in ax.patches if p.get_gid() == "tile-change"]
    values, edges, _ = patch.get_data()
    np.testing.assert_array_equal(edges[:-1], change.tiles["tile"])
    np.testing.assert_array_equal(values, change.tiles["change_bytes"].to_numpy(float))
    assert values[[5, 6, 7, 2000]].tolist() == [20_000] * 4 and values[9] == -7_000
    assert "4 tiles grew, 1 shrank" in ax.get_title()


def test_per_tile_change_binned_keeps_extremes(change):
    ax = diff_tiles(change, max_bars=100).axes[0]
    (grow,) = [p for p in ax.patches if p.get_gid() == "tile-growth"]
    (shrink,) = [p for p in ax.patches if p.get_gid() == "tile-shrink"]
    width = -(-len(change.tiles) // 100)
    assert grow.get_data().values[5 // width] == 20_000 and grow.get_data().values[2000 // width] == 20_000
    assert shrink.get_data().values[9 // width] == -7_000
    assert np.count_nonzero(grow.get_data().values) == len({5 // width, 2000 // width})


def test_nothing_changed():
    p = synth.make_profile(execution=False, debug=False)
    fig = diff_metrics(popprof.diff(p, p.copy("same")))
    assert "no metric changed" in [t.get_text() for t in fig.axes[0].texts]
