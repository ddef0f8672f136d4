"""SDK 1.x JSON: synthetic profile -> write_sdk1_json -> reader gives the same tables (combined and split)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from popprof.metrics import compute
from popprof.readers import detect, open_profile
from popprof.readers import sdk1_json as reader
from popprof.testing import synth
from popprof.testing.writers.sdk1_json import write_sdk1_json


@pytest.fixture(scope="module")
def profile():
    p = synth.make_profile(
        num_ipus=2,
        oom_tiles=3,
        num_steps=80,
        num_programs=60,
        num_liveness_steps=20,
        num_variables=10,
        seed=11,
    )
    p.update_metadata({"graph.num_vertices": 4_321, "graph.num_edges": 9_876})
    return p


@pytest.fixture(scope="module")
def files(profile, tmp_path_factory):
    out = tmp_path_factory.mktemp("sdk1")
    combined = write_sdk1_json(profile, out / "profile.json", profiler_mode="COMPUTE_SETS")[0]
    graph, execution = write_sdk1_json(profile, out / "split.json", split=True)
    return {"combined": combined, "graph": graph, "execution": execution}


def expected_steps(profile) -> pd.DataFrame:
    """One row per global step: its program and type, and the cycles of its slowest IPU."""
    steps = profile.steps
    first = steps[steps["ipu"] == 0].set_index("step")
    slowest = steps.groupby("step")["cycles"].max()
    return pd.DataFrame(
        {
            "program": first["program"].astype(str),
            "type": first["program_type"].astype(str),
            "cycles": slowest.astype("int64"),
        }
    )


def check_graph(back, profile) -> None:
    pd.testing.assert_frame_equal(back.tiles, profile.tiles)
    for column in (
        "num_ipus",
        "tiles_per_ipu",
        "num_tiles",
        "bytes_per_tile",
        "clock_hz",
        "num_replicas",
        "ipus_per_replica",
    ):
        assert back.target_value(column) == profile.target_value(column), column
    assert back.target_value("ipu_arch") == "ipu2"
    assert back.target_value("source_format") == "sdk1_json"
    tm = back.tile_memory
    original = profile.tile_memory.assign(category=lambda f: f["category"].astype(str))
    others = tm[tm["category"] != "variables"].assign(category=lambda f: f["category"].astype(str))
    key = ["tile", "category"]
    pd.testing.assert_frame_equal(
        others.sort_values(key).reset_index(drop=True), original.sort_values(key).reset_index(drop=True)
    )
    variables = tm[tm["category"] == "variables"].set_index("tile")["bytes"]
    tiles = profile.tiles.set_index("tile")
    expected_vars = tiles["bytes_excl_gaps"] - profile.tile_memory.groupby("tile")["bytes"].sum()
    assert variables.reindex(tiles.index, fill_value=0).astype("int64").equals(expected_vars.astype("int64"))
    programs = back.programs
    assert programs["name"].tolist() == profile.programs["name"].tolist()
    assert programs["type"].astype(str).tolist() == profile.programs["type"].astype(str).tolist()
    assert programs["category"].astype(str).tolist() == profile.programs["category"].astype(str).tolist()
    regions = back.memory_totals.set_index("category")["bytes"]
    assert int(regions["Overflowed"]) == int(profile.tiles["overflowed_bytes"].sum())
    assert int(regions.sum()) == int(profile.tiles["bytes_excl_gaps"].sum())
    assert back.meta["graph.num_vertices"] == "4321"


def check_execution(back, profile) -> None:
    want = expected_steps(profile)
    steps = back.steps
    assert steps["step"].tolist() == list(range(len(want)))
    assert (steps["ipu"] == 0).all() and (steps["run"] == 0).all()
    assert steps["program"].astype(str).tolist() == want["program"].tolist()
    assert steps["program_type"].astype(str).tolist() == want["type"].tolist()
    assert steps["cycles"].astype("int64").tolist() == want["cycles"].tolist()
    categories = dict(zip(steps["program_type"].astype(str), steps["category"].astype(str), strict=False))
    assert categories["OnTileExecute"] == "compute" and categories["DoExchange"] == "exchange"
    assert back.meta["execution.total_cycles"] == str(int(want["cycles"].sum()))


def test_combined(files, profile):
    assert detect(files["combined"]) is reader
    back = open_profile(files["combined"])
    check_graph(back, profile)
    check_execution(back, profile)
    assert back.meta["profiler_mode"] == "COMPUTE_SETS"
    assert json.loads(back.meta["source_files"])[0]["name"] == "profile.json"


@pytest.mark.parametrize("start", ["graph", "execution"])
def test_split_halves_find_each_other(files, profile, start):
    assert detect(files[start]) is reader
    back = open_profile(files[start])
    check_graph(back, profile)
    check_execution(back, profile)
    assert back.name == "split"
    assert sorted(s["name"] for s in json.loads(back.meta["source_files"])) == [
        "split.execution.json",
        "split.graph.json",
    ]


def test_graph_half_alone(files, profile, tmp_path):
    alone = tmp_path / "graph_only.json"
    alone.write_bytes(files["graph"].read_bytes())
    back = open_profile(alone)
    check_graph(back, profile)
    assert not back.has("steps")


def test_execution_half_alone(files, profile, tmp_path):
    alone = tmp_path / "exec.json"
    alone.write_bytes(files["execution"].read_bytes())
    back = open_profile(alone)
    check_execution(back, profile)
    assert not back.has("tiles")
    assert back.target_value("source_format") == "sdk1_json"


def test_explicit_other_half(files, profile, tmp_path):
    g = tmp_path / "a.json"
    e = tmp_path / "b.json"
    g.write_bytes(files["graph"].read_bytes())
    e.write_bytes(files["execution"].read_bytes())
    back = reader.read(g, execution=e)
    check_execution(back, profile)


def test_wrapped_halves_in_separate_files(files, profile, tmp_path):
    document = json.loads(files["combined"].read_bytes())
    g = tmp_path / "run_graph.json"
    e = tmp_path / "run_execution.json"
    g.write_text(json.dumps({"graphProfile": document["graphProfile"]}))
    e.write_text(json.dumps({"executionProfile": document["executionProfile"]}))
    back = open_profile(g)
    check_graph(back, profile)
    check_execution(back, profile)
    assert back.name == "run"


def test_streaming_gives_the_same_tables(files):
    whole = reader.read(files["combined"])
    streamed = reader.read(files["combined"], stream_threshold_bytes=0)
    for name in whole.table_names:
        if name != "metadata":
            pd.testing.assert_frame_equal(streamed[name], whole[name], obj=name)
    for start in ("graph", "execution"):
        split_whole = reader.read(files[start])
        split_streamed = reader.read(files[start], stream_threshold_bytes=0)
        pd.testing.assert_frame_equal(split_streamed.tiles, split_whole.tiles)
        pd.testing.assert_frame_equal(split_streamed.steps, split_whole.steps)


def test_streaming_skips_per_tile_step_arrays(tmp_path):
    steps = [
        {"type": "OnTileExecute", "name": f"cs{k}", "cycles": 100 + k, "cyclesByTile": [k] * 1216}
        for k in range(50)
    ]
    path = tmp_path / "exec.json"
    path.write_text(json.dumps({"executionProfile": {"simulation": {"cycles": 9999, "steps": steps}}}))
    back = reader.read(path, stream_threshold_bytes=0)
    assert back.steps["cycles"].astype(int).tolist() == [100 + k for k in range(50)]
    assert back.meta["execution.total_cycles"] == "9999"


def test_gzip(files, tmp_path):
    path = tmp_path / "profile.json.gz"
    path.write_bytes(gzip.compress(files["combined"].read_bytes()))
    assert detect(path) is reader
    assert len(open_profile(path).tiles) == 2944


def test_metrics_from_sdk1(files, profile):
    back = open_profile(files["combined"])
    names = ["memory.tiles_out_of_memory", "memory.max_tile_index", "memory.total_incl_gaps_bytes"]
    assert compute(back, names) == compute(profile, names)
    assert compute(back, names)["memory.tiles_out_of_memory"] == 3


def test_mk1_target_without_tiles_per_ipu(tmp_path):
    n = 1216
    doc = {
        "graphProfile": {
            "target": {"numIPUs": 1, "bytesPerTile": 262144, "clockFrequency": 1.6e9},
            "memory": {"byTile": {"total": list(range(n))}},
        }
    }
    path = tmp_path / "mk1.json"
    path.write_text(json.dumps(doc))
    back = open_profile(path)
    assert back.target_value("num_tiles") == n and back.target_value("tiles_per_ipu") == n
    assert back.target_value("ipu_arch") == "ipu1"
    assert back.tiles["bytes_excl_gaps"].tolist() == list(range(n))
    assert back.tiles["bytes_incl_gaps"].isna().all()
    assert np.all(back.tiles["capacity_bytes"] == 262144)
