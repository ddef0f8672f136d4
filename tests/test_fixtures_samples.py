"""The committed samples in fixtures/: each shows what fixtures/README.md says, and is what generate.py makes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popprof

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BUNDLES = ["mk2_training", "mk2_oom", "pod4_pipeline", "mk1_noexec", "mk2_training_v2"]


def _generate_module(fixtures_dir):
    spec = importlib.util.spec_from_file_location("fixtures_generate", fixtures_dir / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def samples():
    return {name: popprof.open(FIXTURES / f"{name}.popprof") for name in BUNDLES}


def test_every_listed_fixture_exists_and_is_documented(fixtures_dir):
    readme = (fixtures_dir / "README.md").read_text()
    for name in BUNDLES:
        assert (fixtures_dir / f"{name}.popprof" / "manifest.json").is_file()
        assert f"{name}.popprof" in readme
    for engine in ("training", "inference"):
        assert (fixtures_dir / "run_dir" / engine / "profile.pop").is_file()
    assert (fixtures_dir / "run_dir" / "debug.cbor").is_file()
    assert "run_dir/" in readme
    total = sum(f.stat().st_size for f in fixtures_dir.rglob("*") if f.is_file())
    # fixtures stay small: 8 MiB held the samples and the real Kineto traces; the real rocprofv3 file
    # (fixtures/real/traces/rocprofv3_mi350_train.json.gz, 1.6 MiB) and TraceLens's trace of a graph capture
    # (tracelens_mi300x_vllm_graph_capture.json.gz, 2.4 MiB), both bytes unchanged, took it to 12 MiB
    # then fixtures/real/xplane/jax08_conv_mi300x.xplane.pb and jax06_conv_mi300x.xplane.pb (0.5 MiB) and three
    # TraceLens traces (tracelens_mi210_gpu_only, tracelens_h100_falconsai_nsfw, tracelens_mi300x_normalization,
    # 341 KiB): 13 MiB; then the two real Nsight Systems SQLite exports (fixtures/real/nsys, 2.1 MiB, bytes
    # unchanged: SQLite cannot be read compressed): 15 MiB; then xprof's TPU profile
    # (fixtures/real/xplane/xprof_tpu_v6e_inference.xplane.pb, 0.8 MiB, bytes unchanged: the only real TPU
    # XPlane found, and the reader's TPU planes are tested on it) and TraceLens's newer JAX profile on an
    # MI355X (tracelens_te_fused_attn_mi355x.xplane.pb, 0.2 MiB): 16 MiB
    assert total < 16 * 2**20


def test_real_target_sizes(samples):
    mk2 = samples["mk2_training"]
    assert (mk2.target_value("tiles_per_ipu"), mk2.target_value("bytes_per_tile")) == (1472, 638_976)
    assert mk2.target_value("clock_hz") == pytest.approx(1.33e9)
    mk1 = samples["mk1_noexec"]
    assert (
        mk1.target_value("ipu_arch"),
        mk1.target_value("tiles_per_ipu"),
        mk1.target_value("bytes_per_tile"),
    ) == ("ipu1", 1216, 262_144)


def test_mk2_training_has_hot_tiles_and_an_exchange_heavy_phase(samples):
    p = samples["mk2_training"]
    fill = p.tiles["bytes_incl_gaps"] / p.tiles["capacity_bytes"]
    assert 1 <= int((fill >= 0.88).sum()) <= 10 and not (fill > 1).any()
    steps = p.steps[p.steps["ipu"] == 0]
    pos = steps["step"] / steps["step"].max()
    exchange = steps["category"].isin(["exchange", "sync"])
    inside = exchange[(pos >= 0.55) & (pos <= 0.65)].mean()
    outside = exchange[(pos < 0.5) | (pos > 0.7)].mean()
    assert inside > outside + 0.2
    liveness = p.liveness["not_always_live_bytes"]
    peak = int(liveness.idxmax())
    assert 0.3 * len(liveness) < peak < 0.9 * len(liveness)  # a peak inside the step range, not at an end


def test_mk2_oom_has_tiles_over_capacity(samples):
    p = samples["mk2_oom"]
    over = p.tiles[p.tiles["bytes_incl_gaps"] > p.tiles["capacity_bytes"]]
    assert len(over) == 12
    assert (over["overflowed_bytes"] > 0).all()


def test_pod4_pipeline_has_global_exchange_and_a_host_stall(samples):
    p = samples["pod4_pipeline"]
    assert p.target_value("num_ipus") == 4 and len(p.tiles) == 4 * 1472
    steps = p.steps[p.steps["ipu"] == 0]
    assert (steps["category"] == "global_exchange").sum() > 0
    pos = steps["step"] / steps["step"].max()
    host = steps["category"] == "host_io"
    assert host[(pos >= 0.45) & (pos <= 0.60)].mean() > 2 * host[pos < 0.4].mean()


def test_mk1_noexec_has_no_execution(samples):
    p = samples["mk1_noexec"]
    assert not p.has("steps") and not p.has("runs") and not p.has("operations")
    assert p.has("tiles", "liveness")


def test_v2_differs_by_the_documented_change(samples, fixtures_dir):
    gen = _generate_module(fixtures_dir)
    base, new = samples["mk2_training"], samples["mk2_training_v2"]
    exchange = base.steps["program_type"].astype(str) == "DoExchange"
    ratio = new.steps["cycles"].to_numpy(float) / base.steps["cycles"].to_numpy(float)
    assert np.allclose(ratio[exchange], gen.V2_EXCHANGE_FACTOR, rtol=1e-3)
    assert (ratio[~exchange] == 1).all()
    grown = new.tiles["bytes_incl_gaps"] - base.tiles["bytes_incl_gaps"]
    assert set(grown[grown > 0].index) == set(gen.V2_GROWN_TILES)
    assert (grown[grown > 0] == gen.V2_GROWN_BYTES).all()
    added = set(new.variables["name"]) - set(base.variables["name"])
    assert added == {gen.V2_VARIABLE}
    assert (new.runs["end_us"] - new.runs["start_us"] > base.runs["end_us"] - base.runs["start_us"]).all()


def test_fixtures_are_what_generate_py_makes(fixtures_dir, tmp_path, samples):
    gen = _generate_module(fixtures_dir)
    fresh = gen.generate_small(tmp_path, log=lambda *_: None, other_forms=True)
    for name in BUNDLES:
        for table in samples[name].table_names:
            pd.testing.assert_frame_equal(samples[name][table], fresh[name][table], obj=f"{name}.{table}")
        committed = json.loads((fixtures_dir / f"{name}.popprof" / "manifest.json").read_text())
        regenerated = json.loads((tmp_path / f"{name}.popprof" / "manifest.json").read_text())
        assert committed["tables"] == regenerated["tables"]
    for sub in ("run_dir", "text_summary", "sdk1_json"):
        made = sorted(p.relative_to(tmp_path / sub) for p in (tmp_path / sub).rglob("*") if p.is_file())
        assert made == sorted(
            p.relative_to(fixtures_dir / sub) for p in (fixtures_dir / sub).rglob("*") if p.is_file()
        ), sub
        for relative in made:
            committed = fixtures_dir / sub / relative
            assert committed.read_bytes() == (tmp_path / sub / relative).read_bytes(), committed


@pytest.mark.parametrize("name", BUNDLES)
def test_other_forms_describe_the_same_profile(samples, name):
    text = FIXTURES / "text_summary" / f"{name}.txt"
    sdk1 = FIXTURES / "sdk1_json" / f"{name}.json"
    assert text.is_file() and sdk1.is_file()  # generate.py writes both (the writers exist)
    bundle = samples[name]
    from_text = popprof.open(text)
    assert from_text.source_format == "text_summary"
    assert from_text.target_value("num_tiles") == bundle.target_value("num_tiles")
    assert from_text.target_value("bytes_per_tile") == bundle.target_value("bytes_per_tile")
    totals = from_text.memory_totals
    whole = totals[totals["tile"].isna() & (totals["group"].astype(str) == "total")]
    got = dict(zip(whole["category"].astype(str), whole["bytes"].astype(int), strict=True))
    assert got["including_gaps"] == int(bundle.tiles["bytes_incl_gaps"].sum())
    assert got["excluding_gaps"] == int(bundle.tiles["bytes_excl_gaps"].sum())
    from_json = popprof.open(sdk1)
    assert from_json.source_format == "sdk1_json"
    pd.testing.assert_series_equal(from_json.tiles["bytes_incl_gaps"], bundle.tiles["bytes_incl_gaps"])
