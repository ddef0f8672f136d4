"""The fullest tile explained (issue 42, IPU): its breakdown and the FP16 / recomputation / offloading savings,
from profile.pop files written by the pva double and from real Poplar text (fixtures/real/poplar)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from pop_helpers import report_store

import popprof
from popprof.cli import cli
from popprof.metrics import memory as mm
from popprof.metrics.tiles import fullest_tile
from popprof.rules import check
from popprof.testing.synth import make_profile

REAL_POPLAR = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "poplar"
SMALL = {"num_steps": 40, "num_programs": 40, "num_liveness_steps": 30, "num_variables": 20}
RULE = "memory.fullest-tile"


def _named_state(profile) -> pd.Series:
    """Rename variables so that the first three are optimizer state or accumulators (PopART and TF names)."""
    variables = profile.variables.copy()
    names = [f"layer{k}/weights_{k}" for k in range(len(variables))]
    names[:3] = ["Accl1___layer0/weights", "Accum___layer1/weights", "layer2/dense/Momentum"]
    variables["name"] = names
    profile.set_table("variables", variables)
    state = variables["bytes"].iloc[:3].astype("float64").sum()
    return state / variables["bytes"].astype("float64").sum()


def test_the_fullest_tile_of_a_pop_profile(tmp_path, pva_double):
    synth = make_profile(name="full", seed=5, **SMALL)
    share = _named_state(synth)
    path = tmp_path / "full" / "profile.pop"
    report_store().write_pop(synth, path)
    read = popprof.open(path)
    doc = fullest_tile(read)
    tiles = synth.tiles
    row = tiles.loc[tiles["bytes_incl_gaps"].idxmax()]
    assert doc["tile"] == int(row["tile"]) and doc["ipu"] == int(row["ipu"])
    assert doc["bytes_incl_gaps"] == float(row["bytes_incl_gaps"])
    mine = synth.tile_memory[synth.tile_memory["tile"] == row["tile"]]
    assert {c["category"]: c["bytes"] for c in doc["categories"]} == dict(
        zip(mine["category"].astype("str"), mine["bytes"].astype("float64"), strict=True)
    )
    assert [c["bytes"] for c in doc["categories"]] == sorted(mine["bytes"].astype("float64"), reverse=True)
    assert doc["gap_bytes"] == float(row["bytes_incl_gaps"] - row["bytes_excl_gaps"])
    savings = doc["savings"]
    assert savings["recomputation"]["bytes"] == float(row["not_always_live_bytes"])
    assert savings["offloading"]["bytes"] == pytest.approx(float(row["always_live_bytes"]) * share)
    assert savings["fp16"]["bytes"] is None and savings["fp16"]["basis"].startswith("unknown")
    assert doc["variables_scope"] == "graph"  # pva places no variable on a tile
    assert doc["variables"][0]["bytes"] == float(synth.variables["bytes"].max())
    # the finding: the largest saving, in bytes of the tile, with advice naming the option
    (f,) = check(read, rules=[RULE]).by_rule(RULE)
    best = max((k for k in savings if savings[k]["bytes"] is not None), key=lambda k: savings[k]["bytes"])
    assert doc["largest_saving"] == best
    gain = f.estimated_gain
    assert gain.unit == "bytes" and gain.value == savings[best]["bytes"]
    assert gain.whole == pytest.approx(max(float(row["capacity_bytes"]), float(row["bytes_incl_gaps"])))
    assert f.severity == "info" and f.where["tiles"] == [doc["tile"]]
    assert {"fp16": "FP16", "recomputation": "Recompute", "offloading": "Offload"}[best] in f.advice
    assert "FP16 storage unknown" in f.message


def test_variables_placed_on_the_tile_are_read_by_name():
    synth = make_profile(name="placed", seed=6, **SMALL)
    tile = int(mm.max_tile_index(synth))
    variables = synth.variables.copy()
    variables["name"] = ["Accl2___w", "Step___w", "layer/w"] + [
        f"layer/x_{k}" for k in range(len(variables) - 3)
    ]
    variables["tile"] = pd.array(np.where(np.arange(len(variables)) < 3, tile, tile + 1), dtype="Int32")
    synth.set_table("variables", variables)
    doc = fullest_tile(synth)
    assert doc["variables_scope"] == "tile" and [v["name"] for v in doc["variables"]] == sorted(
        ["Accl2___w", "Step___w", "layer/w"],
        key=lambda n: -float(variables.set_index("name").loc[n, "bytes"]),
    )
    on_tile = variables["bytes"].iloc[:2].astype("float64").sum()
    assert doc["savings"]["offloading"]["bytes"] == pytest.approx(min(on_tile, doc["bytes_incl_gaps"]))


def test_a_tile_with_room_is_not_explained(tmp_path, pva_double):
    synth = make_profile(name="roomy", seed=8, median_fill=0.3, hot_tiles=0, **SMALL)
    assert mm.max_tile_utilisation(synth) < 0.8
    path = tmp_path / "roomy" / "profile.pop"
    report_store().write_pop(synth, path)
    assert not check(popprof.open(path), rules=[RULE]).by_rule(RULE)


def test_the_tile_block_of_a_real_text_summary():
    """TensorFlow's logged summary (Mk1) prints tile 0's block: its Variables, regions and vertex types, all
    float: FP16 storage would halve the Variables bytes; the tile overflowed, so it is explained."""
    profile = popprof.open(REAL_POPLAR / "tensorflow_logging_tile0_block_mk1.txt")
    totals = profile.memory_totals
    block = totals[totals["tile"] == 0]
    variables = float(block.loc[block["category"] == "Variables", "bytes"].iloc[0])
    doc = fullest_tile(profile)
    assert doc["tile"] == 0 and doc["categories"][0] == {"category": "Variables", "bytes": variables}
    assert any(r["region"] == "Overflowed" and r["bytes"] > 0 for r in doc["regions"])
    types = block.loc[block["group"] == "vertex_type", "category"].astype("str")
    assert types.str.contains("float").any() and not types.str.contains("half").any()
    assert doc["vertices"][0]["type"] == types.iloc[0]
    assert doc["savings"]["fp16"]["bytes"] == variables / 2
    assert doc["savings"]["recomputation"]["bytes"] is None
    assert doc["savings"]["offloading"]["bytes"] is None
    (f,) = check(profile, rules=[RULE]).by_rule(RULE)
    assert f.estimated_gain.value == variables / 2 and f.estimated_gain.whole == doc["bytes_incl_gaps"]
    assert "FP16" in f.advice and "recomputation unknown" in f.message


@pytest.mark.parametrize(
    "name", ["tensorflow_logging_tile_histogram_mk1.txt", "tutorials_tut4_oom_message_mk2.txt"]
)
def test_without_a_breakdown_every_saving_is_unknown(name):
    profile = popprof.open(REAL_POPLAR / name)
    doc = fullest_tile(profile)
    assert doc["bytes_incl_gaps"] == mm.max_tile_bytes(profile)
    assert all(s["bytes"] is None and s["basis"].startswith("unknown") for s in doc["savings"].values())
    assert not check(profile, rules=[RULE]).by_rule(RULE)  # nothing to price: no finding


def test_summary_gives_the_fullest_tile_in_json_and_in_80_columns():
    path = REAL_POPLAR / "tensorflow_logging_tile0_block_mk1.txt"
    result = CliRunner().invoke(cli, ["-q", "summary", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output[-2000:]
    doc = json.loads(result.output)["fullest_tile"]
    assert doc == fullest_tile(popprof.open(path))
    text = CliRunner().invoke(cli, ["-q", "summary", str(path)]).output
    block = text[text.index("Fullest tile 0:") :].split("\n\n")[0].splitlines()
    assert all(len(line) <= 80 for line in block)
    assert block[1].split()[0] == "Variables"
    # an unknown saving says why, in the words of the figure's basis (what the profile lacks)
    shown = " ".join(line.strip() for line in block[block.index("  would free at most:") :])
    for key in ("recomputation", "offloading"):
        basis = doc["savings"][key]["basis"]
        assert doc["savings"][key]["bytes"] is None and basis.startswith("unknown: ")
        assert f"unknown ({basis.removeprefix('unknown: ')})" in shown
    fp16 = next(line for line in block if "FP16 storage" in line)
    assert f"{int(doc['savings']['fp16']['bytes']):,} B" in fp16
