"""Tile memory, histogram and tile map plots, checked by the data their artists hold."""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.patches import StepPatch  # noqa: E402

from popprof.model.errors import MissingTableError, UsageError  # noqa: E402
from popprof.model.profile import Profile  # noqa: E402
from popprof.plots import tile_histogram, tile_map, tile_memory  # noqa: E402
from popprof.plots import tilemap as tilemap_module  # noqa: E402
from popprof.testing import synth  # noqa: E402

CAP = 638_976


@pytest.fixture(scope="module")
def one_ipu():
    return synth.make_profile(num_ipus=1, oom_tiles=3, hot_tiles=5, execution=False, debug=False, seed=3)


@pytest.fixture(scope="module")
def two_ipus():
    return synth.make_profile(num_ipus=2, oom_tiles=4, execution=False, debug=False, seed=5)


def patches_by_label(ax) -> dict[str, StepPatch]:
    return {p.get_label(): p for p in ax.patches if isinstance(p, StepPatch)}


def hline_y(ax, gid: str) -> float:
    (line,) = [ln for ln in ax.lines if ln.get_gid() == gid]
    ys = set(np.asarray(line.get_ydata(), dtype=float))
    assert len(ys) == 1
    return ys.pop()


def test_stacked_categories_equal_per_tile_sums(one_ipu):
    fig = tile_memory(one_ipu, max_bars=5000)
    ax = fig.axes[0]
    patches = patches_by_label(ax)
    expected = (
        one_ipu.tile_memory.groupby(["tile", "category"], observed=True)["bytes"].sum().unstack(fill_value=0)
    )
    tiles = one_ipu.tiles
    for cat in expected.columns:
        values, edges, baseline = patches[cat].get_data()
        np.testing.assert_array_equal(values - baseline, expected[cat].reindex(tiles["tile"], fill_value=0))
        np.testing.assert_array_equal(edges[:-1], tiles["tile"])
    np.testing.assert_array_equal(
        patches["always-live variables"].get_data().values
        - patches["always-live variables"].get_data().baseline,
        tiles["always_live_bytes"].to_numpy(float),
    )
    # the top of the stack (gaps, drawn last) is the tile's memory including gaps
    np.testing.assert_array_equal(patches["gaps"].get_data().values, tiles["bytes_incl_gaps"].to_numpy(float))


def test_capacity_and_headroom_lines(one_ipu):
    from popprof.rules import RULES

    ax = tile_memory(one_ipu).axes[0]
    assert hline_y(ax, "capacity") == CAP
    warning = RULES["memory.headroom"].params["warning"]
    assert hline_y(ax, "threshold:warning") == pytest.approx(CAP * warning)
    assert "bytes" in ax.get_ylabel() and "tile" in ax.get_xlabel()
    # thresholds can be overridden (e.g. from a config)
    ax = tile_memory(one_ipu, thresholds={"warning": 0.5}).axes[0]
    assert hline_y(ax, "threshold:warning") == pytest.approx(CAP * 0.5)


def test_flagged_tiles_are_marked(one_ipu):
    import popprof

    findings = popprof.check(one_ipu, rules=["memory.tile-oom", "memory.headroom"])
    ax = tile_memory(one_ipu, findings).axes[0]
    (oom_marks,) = [ln for ln in ax.lines if ln.get_gid() == "flagged:memory.tile-oom"]
    tiles = one_ipu.tiles.set_index("tile")
    over = tiles.index[tiles["bytes_incl_gaps"] > CAP]
    assert sorted(oom_marks.get_xdata() - 0.5) == sorted(over)
    np.testing.assert_array_equal(
        oom_marks.get_ydata(), tiles.loc[oom_marks.get_xdata() - 0.5, "bytes_incl_gaps"]
    )
    (hot_marks,) = [ln for ln in ax.lines if ln.get_gid() == "flagged:memory.headroom"]
    (headroom,) = findings.by_rule("memory.headroom")
    assert set(hot_marks.get_xdata() - 0.5) == set(headroom.where["tiles"]) - set(over)


def test_binned_tiles_keep_the_fullest_tile_per_bin(two_ipus):
    fig = tile_memory(two_ipus, max_bars=200)
    ax = fig.axes[0]
    (bin_max,) = [p for p in ax.patches if p.get_gid() == "bin-max"]
    values, edges, _ = bin_max.get_data()
    tiles = two_ipus.tiles
    width = math.ceil(1472 / 100)  # 200 bars over 2 IPUs, bins never straddle an IPU
    expected = tiles.groupby([tiles["ipu"], tiles["tile_in_ipu"] // width])["bytes_incl_gaps"].max()
    np.testing.assert_array_equal(values, expected.to_numpy(float))
    assert values.max() == tiles["bytes_incl_gaps"].max() > CAP  # the out-of-memory tile is not averaged away
    assert len(values) <= 200
    # mean per category per bin
    patches = patches_by_label(ax)
    mean_gaps = (
        (tiles["bytes_incl_gaps"] - tiles["bytes_excl_gaps"])
        .groupby([tiles["ipu"], tiles["tile_in_ipu"] // width])
        .mean()
    )
    gaps = patches["gaps"].get_data()
    np.testing.assert_allclose(gaps.values - gaps.baseline, mean_gaps.to_numpy(float))
    # the IPU boundary is drawn at the first tile of IPU 1
    (boundary,) = [ln for ln in ax.lines if ln.get_gid() == "ipu-boundary:1"]
    assert set(boundary.get_xdata()) == {1472}


def test_histogram_counts_every_tile(two_ipus):
    ax = tile_histogram(two_ipus, bins=40).axes[0]
    (hist,) = [p for p in ax.patches if p.get_gid() == "histogram"]
    counts, edges, _ = hist.get_data()
    data = two_ipus.tiles["bytes_incl_gaps"].to_numpy(float)
    assert counts.sum() == len(data)
    np.testing.assert_array_equal(counts, np.histogram(data, bins=edges)[0])
    (cap,) = [ln for ln in ax.lines if ln.get_gid() == "capacity"]
    assert set(cap.get_xdata()) == {CAP}
    over = counts[edges[:-1] >= CAP].sum()
    assert over == (data > CAP).sum() == 4


def test_histogram_from_text_summary_bins():
    hist = pd.DataFrame(
        {
            "low_bytes": [200 * 1024, 300 * 1024, 600 * 1024],
            "high_bytes": [300 * 1024, 400 * 1024, 700 * 1024],
            "num_tiles": [2900, 40, 4],
        }
    )
    profile = Profile("summary", {"target": pd.DataFrame({"bytes_per_tile": [CAP]}), "tile_histogram": hist})
    ax = tile_histogram(profile).axes[0]
    (patch,) = [p for p in ax.patches if p.get_gid() == "histogram"]
    counts, edges, _ = patch.get_data()
    np.testing.assert_array_equal(counts, [2900, 40, 4])
    np.testing.assert_array_equal(edges, [200 * 1024, 300 * 1024, 600 * 1024, 700 * 1024])


def test_tile_map_cells_are_fill_ratios(two_ipus):
    fig = tile_map(two_ipus)
    (image,) = [im for im in fig.axes[0].images if im.get_gid() == "tilemap"]
    data = np.ma.filled(image.get_array(), np.nan)
    rows, cols = tilemap_module.grid_shape(1472)
    across = tilemap_module.ipus_per_row(2)
    tiles = two_ipus.tiles
    r = (tiles["ipu"] // across) * (rows + 1) + tiles["tile_in_ipu"] // cols
    c = (tiles["ipu"] % across) * (cols + 1) + tiles["tile_in_ipu"] % cols
    np.testing.assert_allclose(
        data[r.to_numpy(), c.to_numpy()], tiles["bytes_incl_gaps"].to_numpy(float) / CAP
    )
    assert np.sum(data > 1.0) == 4  # over-capacity tiles are above the colour scale (drawn red)
    assert np.isfinite(data).sum() == len(tiles)
    assert image.get_clim() == (0.0, 1.0)
    assert "4 over capacity" in fig.axes[0].get_title()


def test_missing_tables_and_matplotlib(monkeypatch):
    empty = Profile("no tiles", {"target": pd.DataFrame({"bytes_per_tile": [CAP]})})
    for func in (tile_memory, tile_map, tile_histogram):
        with pytest.raises(MissingTableError):
            func(empty)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    from popprof.plots import require_matplotlib

    with pytest.raises(UsageError, match=r"pip install 'popprof\[plots\]'"):
        require_matplotlib()


def test_unknown_capacity_draws_no_capacity_line(one_ipu):
    """Without bytes_per_tile and per-tile capacities the plot still draws the stack, with no made-up line."""
    profile = one_ipu.copy()
    target = profile.target.copy()
    target["bytes_per_tile"] = pd.NA
    profile.set_table("target", target)
    tiles = profile.tiles.copy()
    tiles["capacity_bytes"] = pd.NA
    profile.set_table("tiles", tiles)
    ax = tile_memory(profile).axes[0]
    assert not [ln for ln in ax.lines if str(ln.get_gid()).startswith(("capacity", "threshold:"))]
    np.testing.assert_array_equal(
        patches_by_label(ax)["gaps"].get_data().values, tiles["bytes_incl_gaps"].to_numpy(float)
    )
    with pytest.raises(UsageError, match="no tile capacity"):
        tile_map(profile)  # fill ratios need a capacity
    # per-tile capacities stand in for the target's
    tiles["capacity_bytes"] = CAP
    profile.set_table("tiles", tiles)
    assert hline_y(tile_memory(profile).axes[0], "capacity") == CAP
