"""One definition of a tile's memory split (``popprof.metrics.tile_parts``): the tile memory plot, the diff's
"What changed in memory", the fullest tile and the ``memory.gaps`` rule read the same numbers.

Inputs: ``fixtures/mk2_training.popprof`` / ``mk2_training_v2.popprof`` (pva-shaped: the categories hold the
bytes that are not variables), ``fixtures/sdk1_json/mk2_training.json`` (a ``variables`` category: no liveness
parts) and a variant of the mk2 bundle in ``tmp_path`` whose categories overlap on one tile (``other``
negative there: never on a fixture).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof
from popprof.metrics import tile_parts as tp
from popprof.metrics.tiles import fullest_tile

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.patches import StepPatch  # noqa: E402

from popprof.plots import tile_memory  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BASE = FIXTURES / "mk2_training.popprof"
NEW = FIXTURES / "mk2_training_v2.popprof"
SDK1 = FIXTURES / "sdk1_json" / "mk2_training.json"


def _heights(profile) -> dict[str, np.ndarray]:
    """Each stacked band's height per tile, by legend label, read from the plot's artists."""
    ax = tile_memory(profile, max_bars=5000).axes[0]
    bands = {}
    for patch in ax.patches:
        if isinstance(patch, StepPatch) and patch.get_gid() is None:
            values, _, baseline = patch.get_data()
            bands[patch.get_label()] = values - baseline
    return bands


def test_the_parts_partition_each_tile_exactly():
    profile = popprof.open(BASE)
    split = tp.tile_parts(profile)
    tiles = profile.tiles
    assert split.parts[-3:] == (tp.ALWAYS_LIVE, tp.NOT_ALWAYS_LIVE, tp.GAPS)  # other is 0 on pva's tiles
    sums = split.frame[list(split.parts)].sum(axis=1).to_numpy()
    np.testing.assert_array_equal(sums, tiles["bytes_incl_gaps"].to_numpy(dtype=np.int64))
    np.testing.assert_array_equal(
        split.frame[tp.GAPS], (tiles["bytes_incl_gaps"] - tiles["bytes_excl_gaps"]).to_numpy(dtype=np.int64)
    )


def test_the_plot_and_the_diff_read_the_same_numbers():
    base, new = popprof.open(BASE), popprof.open(NEW)
    memory = popprof.diff(base, new).memory
    for profile, frame in ((base, memory.base), (new, memory.new)):
        split = tp.tile_parts(profile)
        assert split.parts == memory.parts
        pd.testing.assert_frame_equal(split.frame, frame)
        bands = _heights(profile)
        assert list(bands) == [memory.words(p) for p in memory.parts]
        order = profile.tiles.sort_values("tile")["tile"].to_numpy()
        for part in memory.parts:
            np.testing.assert_array_equal(bands[memory.words(part)], frame.loc[order, part].to_numpy(float))


def test_the_fullest_tile_reads_the_parts():
    profile = popprof.open(BASE)
    doc = fullest_tile(profile)
    row = tp.tile_parts(profile).frame.loc[doc["tile"]]
    assert doc["gap_bytes"] == row[tp.GAPS]
    assert {c["category"]: c["bytes"] for c in doc["categories"]} == {
        c: float(row[c]) for c in tp.categories(profile) if row[c] > 0
    }


def test_a_variables_category_leaves_the_liveness_parts_out():
    profile = popprof.open(SDK1)
    split = tp.tile_parts(profile)
    assert "variables" in split.parts and tp.ALWAYS_LIVE not in split.parts and tp.OTHER not in split.parts
    assert list(_heights(profile)) == [split.words(p) for p in split.parts]


def test_overlapping_categories_give_a_negative_other_drawn_and_named(tmp_path):
    """Categories holding more than a tile's bytes excluding gaps (never on a fixture): ``other`` is negative
    on that tile, nothing is clipped, the stack still tops at the bytes including gaps, and the legend says it."""
    out = tmp_path / "overlap.popprof"
    shutil.copytree(BASE, out)
    memory = pd.read_parquet(out / "tile_memory.parquet")
    tiles = pd.read_parquet(out / "tiles.parquet")
    first = memory.index[memory["tile"] == 7][0]
    memory.loc[first, "bytes"] += int(tiles.loc[tiles["tile"] == 7, "bytes_excl_gaps"].iloc[0])
    memory.to_parquet(out / "tile_memory.parquet", index=False)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["profile_name"] = "overlap"
    (out / "manifest.json").write_text(json.dumps(manifest))
    profile = popprof.open(out)
    split = tp.tile_parts(profile)
    assert tp.ALWAYS_LIVE not in split.parts  # the liveness no longer fits beside the categories on tile 7
    other = split.frame[tp.OTHER]
    assert (other < 0).sum() == 1 and other.loc[7] < 0
    sums = split.frame[list(split.parts)].sum(axis=1).to_numpy()
    np.testing.assert_array_equal(sums, tiles["bytes_incl_gaps"].to_numpy(dtype=np.int64))
    bands = _heights(profile)
    label = f"{tp.WORDS[tp.OTHER]} (negative on 1 tile)"
    assert label in bands and bands[label][7] == other.loc[7]
    assert np.sum(list(bands.values()), axis=0)[7] == tiles.loc[tiles["tile"] == 7, "bytes_incl_gaps"].iloc[0]


@pytest.mark.parametrize(
    "path",
    [BASE, NEW, FIXTURES / "pod4_pipeline.popprof", FIXTURES / "mk2_oom.popprof", SDK1],
    ids=lambda p: p.name,
)
def test_the_registrys_memory_totals_are_the_parts_sums(path: Path) -> None:
    """The whole-target figures the gate reads (``memory.total_incl_gaps_bytes``, ``memory.gap_bytes``,
    ``memory.category.<cat>_bytes``) are sums of their own tables; they equal the tile parts' sums exactly, so
    the diff's memory block explains the very figure the gate judged."""
    from popprof.metrics import compute

    profile = popprof.open(path)
    split = tp.tile_parts(profile)
    assert split.reason is None, split.reason
    metrics = compute(profile)
    sums = split.frame[list(split.parts)].sum()
    assert int(sums.sum()) == metrics["memory.total_incl_gaps_bytes"]
    assert int(sums[tp.GAPS]) == metrics["memory.gap_bytes"]
    for part in split.parts:
        if split.kinds[part] == "category":
            assert int(sums[part]) == metrics[f"memory.category.{part}_bytes"], part
    categories = {k for k in metrics if k.startswith("memory.category.")}
    assert categories == {f"memory.category.{p}_bytes" for p in split.parts if split.kinds[p] == "category"}
