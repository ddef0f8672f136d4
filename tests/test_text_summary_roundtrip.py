"""Round trip: synthetic profile -> write_text_summary -> text summary reader gives the same numbers.

Expected figures are computed here from the synthetic tables (tiles, tile_memory,
steps) with plain pandas, independently of the writer's own derivation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from popprof.readers import detect, open_profile
from popprof.readers import text_summary as reader
from popprof.testing import synth
from popprof.testing.writers.text_summary import render_text_summary, summary_totals, write_text_summary

VERTEX_TYPES = {
    "poplin::ConvPartial1x1Out<half,float,true,false>": 12_345_678,
    "popops::ScaledAddSupervisor<half,half,half,true>": 2_000_000,
}


def figures(frame: pd.DataFrame) -> dict[tuple, int]:
    """memory_totals as {(tile or -1, group, category): bytes}."""
    tiles = frame["tile"].astype("Int64").fillna(-1).astype(int)
    return dict(
        zip(
            zip(tiles, frame["group"].astype(str), frame["category"].astype(str), strict=True),
            frame["bytes"].astype(int),
            strict=True,
        )
    )


@pytest.fixture(scope="module")
def profile():
    p = synth.make_profile(
        num_ipus=2,
        oom_tiles=3,
        hot_tiles=5,
        num_steps=60,
        num_programs=80,
        num_liveness_steps=50,
        num_variables=20,
        seed=7,
    )
    p.update_metadata(
        {
            "graph.num_vertices": 123_456,
            "graph.num_edges": 345_678,
            "graph.num_variables": 9_876,
            "graph.num_compute_sets": 432,
        }
    )
    rows = pd.DataFrame(
        {
            "tile": pd.array([None, None], dtype="Int32"),
            "group": ["vertex_type"] * 2,
            "category": list(VERTEX_TYPES),
            "bytes": list(VERTEX_TYPES.values()),
        }
    )
    p.set_table("memory_totals", rows)
    return p


@pytest.fixture(scope="module")
def read_back(profile, tmp_path_factory):
    path = tmp_path_factory.mktemp("ts") / "summary.txt"
    write_text_summary(profile, path, per_tile_blocks=5, show_execution_steps=True)
    return path, open_profile(path)


def whole(fig: dict, group: str, category: str) -> int:
    return fig[(-1, group, category)]


def test_detected_by_content(read_back):
    path, _ = read_back
    assert detect(path) is reader


def test_every_figure_matches_the_writer(profile, read_back):
    _, back = read_back
    assert figures(back.memory_totals) == figures(summary_totals(profile, 5))


def test_totals_and_data_types_match_the_tables(profile, read_back):
    fig = figures(read_back[1].memory_totals)
    tiles, tm = profile.tiles, profile.tile_memory
    assert whole(fig, "total", "including_gaps") == int(tiles["bytes_incl_gaps"].sum())
    assert whole(fig, "total", "excluding_gaps") == int(tiles["bytes_excl_gaps"].sum())
    assert whole(fig, "region", "Overflowed") == int(tiles["overflowed_bytes"].sum())
    by_cat = tm.groupby("category", observed=True)["bytes"].sum()
    assert whole(fig, "data_type", "Vertex Code") == int(by_cat["vertexCode"])
    assert whole(fig, "data_type", "Control Code") == int(by_cat["controlCode"])
    assert whole(fig, "data_type", "Constants") == int(by_cat["constant"])
    assert whole(fig, "data_type", "Variables") == int(
        (tiles["always_live_bytes"] + tiles["not_always_live_bytes"]).sum()
    )
    data_types = sum(v for (t, g, _), v in fig.items() if t == -1 and g == "data_type")
    assert data_types == whole(fig, "total", "excluding_gaps")
    for name, size in VERTEX_TYPES.items():
        assert whole(fig, "vertex_type", name) == size


def test_maxima_and_out_of_memory(profile, read_back):
    back = read_back[1]
    tiles = profile.tiles
    maxima = back.memory_totals[back.memory_totals["group"] == "maximum"].set_index("category")
    top = tiles.loc[tiles["bytes_incl_gaps"].idxmax()]
    assert int(maxima.loc["including_gaps", "tile"]) == int(top["tile"])
    assert int(maxima.loc["including_gaps", "bytes"]) == int(top["bytes_incl_gaps"])
    top_excl = tiles.loc[tiles["bytes_excl_gaps"].idxmax()]
    assert int(maxima.loc["excluding_gaps", "bytes"]) == int(top_excl["bytes_excl_gaps"])
    oom = int((tiles["bytes_incl_gaps"] > tiles["capacity_bytes"]).sum())
    assert oom == 3
    assert back.meta["tiles_out_of_memory"] == "3"


def test_histogram_bins_count_every_tile(profile, read_back):
    hist = read_back[1].tile_histogram
    excl = profile.tiles["bytes_excl_gaps"].to_numpy()
    assert int(hist["num_tiles"].sum()) == len(excl)
    for low, high, count in zip(hist["low_bytes"], hist["high_bytes"], hist["num_tiles"], strict=True):
        assert low % 1024 == 0 and high > low
        assert count == int(((excl >= low) & (excl < high)).sum())


def test_per_tile_blocks_are_the_fullest_tiles(profile, read_back):
    fig = figures(read_back[1].memory_totals)
    tiles = profile.tiles.sort_values(["bytes_incl_gaps", "tile"], ascending=[False, True])
    expected = tiles["tile"].head(5).tolist()
    blocks = sorted({t for (t, g, _) in fig if t != -1 and g != "maximum"})
    assert blocks == sorted(expected)
    tm = profile.tile_memory
    for tile in expected:
        row = profile.tiles.set_index("tile").loc[tile]
        assert fig[(tile, "total", "including_gaps")] == int(row["bytes_incl_gaps"])
        assert fig[(tile, "total", "excluding_gaps")] == int(row["bytes_excl_gaps"])
        assert fig[(tile, "region", "Overflowed")] == int(row["overflowed_bytes"])
        code = tm[(tm["tile"] == tile) & (tm["category"] == "vertexCode")]["bytes"].sum()
        assert fig[(tile, "data_type", "Vertex Code")] == int(code)


def test_target_and_graph(profile, read_back):
    back = read_back[1]
    for column in (
        "num_ipus",
        "tiles_per_ipu",
        "num_tiles",
        "bytes_per_tile",
        "num_replicas",
        "ipus_per_replica",
    ):
        assert back.target_value(column) == profile.target_value(column), column
    assert back.target_value("clock_hz") == pytest.approx(1.33e9)
    assert back.target_value("ipu_arch") == "ipu2"
    assert back.target_value("source_format") == "text_summary"
    assert back.meta["graph.num_vertices"] == "123456"
    assert back.meta["graph.num_compute_sets"] == "432"
    assert back.meta["text_summary.unrecognised_count"] == "0"


def test_execution_step_lines_become_programs(profile, read_back):
    back = read_back[1]
    steps = profile.steps[profile.steps["ipu"] == 0]
    expected = set(zip(steps["program_type"].astype(str), steps["program"].astype(str), strict=True))
    got = set(zip(back.programs["type"].astype(str), back.programs["name"].astype(str), strict=True))
    assert got == expected
    assert back.meta["text_summary.execution_step_lines"] == str(len(steps))
    categories = dict(
        zip(back.programs["type"].astype(str), back.programs["category"].astype(str), strict=True)
    )
    assert categories.get("OnTileExecute", "compute") == "compute"
    assert categories.get("DoExchange", "exchange") == "exchange"


def test_reading_back_and_writing_again_gives_the_same_text(profile, read_back):
    assert render_text_summary(read_back[1]) == render_text_summary(profile)


@pytest.mark.parametrize(
    ("arch", "per_tile", "clock"), [("ipu1", "256.0 kB", "1,600.0 MHz"), ("bow", "624.0 kB", "1,850.0 MHz")]
)
def test_other_architectures(tmp_path, arch, per_tile, clock):
    p = synth.make_profile(
        arch=arch,
        num_steps=20,
        num_programs=30,
        num_liveness_steps=20,
        num_variables=5,
        execution=False,
        debug=False,
    )
    path = write_text_summary(p, tmp_path / "s.txt")
    text = path.read_text()
    assert per_tile in text and clock in text
    back = open_profile(path)
    assert back.target_value("ipu_arch") == arch
    assert back.target_value("bytes_per_tile") == p.target_value("bytes_per_tile")
    assert figures(back.memory_totals) == figures(summary_totals(p))


def test_many_ipus_keep_large_numbers(tmp_path):
    p = synth.make_profile(
        num_ipus=16,
        num_steps=10,
        num_programs=20,
        num_liveness_steps=10,
        num_variables=5,
        execution=False,
        debug=False,
        oom_tiles=2,
    )
    back = open_profile(write_text_summary(p, tmp_path / "s.txt"))
    assert back.target_value("num_tiles") == 16 * 1472
    assert back.meta["target.total_memory_bytes"] == str(16 * 1472 * 638_976)
    fig = figures(back.memory_totals)
    assert whole(fig, "total", "including_gaps") == int(p.tiles["bytes_incl_gaps"].sum())
    assert int(back.tile_histogram["num_tiles"].sum()) == 16 * 1472


def test_written_atomically_and_idempotent(profile, tmp_path):
    path = tmp_path / "out.txt"
    write_text_summary(profile, path)
    first = path.read_bytes()
    write_text_summary(profile, path)
    assert path.read_bytes() == first
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    assert np.all(np.frombuffer(first, dtype=np.uint8) != 0)


def test_region_split_of_an_sdk1_profile_is_printed(tmp_path):
    import json

    n = 4
    doc = {
        "graphProfile": {
            "target": {"numIPUs": 1, "tilesPerIpu": n, "bytesPerTile": 1000, "clockFrequency": 1.33e9},
            "memory": {
                "byTile": {"total": [100, 200, 300, 400], "totalIncludingGaps": [110, 220, 330, 440]},
                "byCategory": {
                    "variables": {
                        "nonInterleaved": {"nonOverlapped": [60, 150, 200, 300]},
                        "interleaved": {"nonOverlapped": [40, 50, 100, 90]},
                        "overflowed": {"nonOverlapped": [0, 0, 0, 10]},
                    }
                },
            },
        }
    }
    source = tmp_path / "p.json"
    source.write_text(json.dumps(doc))
    sdk1 = open_profile(source)
    back = open_profile(write_text_summary(sdk1, tmp_path / "s.txt"))
    fig = figures(back.memory_totals)
    assert fig[(-1, "region", "Interleaved")] == 280
    assert fig[(-1, "region", "Non-interleaved")] == 710
    assert fig[(-1, "region", "Overflowed")] == 10
    assert fig[(-1, "total", "excluding_gaps")] == 1000
    assert fig[(3, "total", "including_gaps")] == 440
