"""Replication: pva's liveness is per replica while compilation.tiles spans every replica.

Public code multiplies the liveness peak by ``target.numReplicas`` for the whole target
(see tests/pva_double/README.md); these tests read replicated profiles (2 and 4 replicas)
through the pva double and check every memory figure says which it is and is consistent.
"""

from __future__ import annotations

import pytest
from pop_helpers import report_store

import popprof
from popprof.metrics import memory as mm
from popprof.model.schema import TABLES
from popprof.readers import pop
from popprof.testing.synth import make_profile

SPEC = {"num_steps": 60, "num_programs": 60, "num_liveness_steps": 80, "num_variables": 30, "seed": 21}


@pytest.fixture(scope="module", params=[2, 4], ids=["2-replicas", "4-replicas"])
def replicated(request, tmp_path_factory):
    replicas = request.param
    profile = make_profile(name=f"rep{replicas}", num_ipus=4, num_replicas=replicas, **SPEC)
    path = tmp_path_factory.mktemp(f"rep{replicas}") / "profile.pop"
    report_store().write_pop(profile, path)
    return replicas, path


def test_target_says_how_many_replicas(pva_double, replicated):
    replicas, path = replicated
    profile = pop.read(path)
    assert profile.target_value("num_replicas") == replicas
    assert profile.target_value("ipus_per_replica") == 4 // replicas
    assert profile.target_value("num_tiles") == 4 * 1472  # every tile of every replica


def test_peak_liveness_is_whole_target(pva_double, replicated):
    replicas, path = replicated
    profile = pop.read(path)
    always_all_tiles = float(profile.tiles["always_live_bytes"].sum())
    peak_per_replica = float(profile.liveness["not_always_live_bytes"].max())
    assert mm.always_live_bytes(profile) == always_all_tiles
    assert mm.peak_not_always_live(profile) == peak_per_replica
    assert mm.peak_liveness(profile) == always_all_tiles + replicas * peak_per_replica
    assert mm.peak_liveness_per_replica(profile) == pytest.approx(
        always_all_tiles / replicas + peak_per_replica
    )


def test_always_live_from_variables_is_scaled_to_the_whole_target(pva_double, replicated):
    replicas, path = replicated
    profile = pop.read(path)
    tiles = profile.tiles.assign(always_live_bytes=profile.tiles["always_live_bytes"].astype("Int64") * 0)
    tiles["always_live_bytes"] = tiles["always_live_bytes"].mask(tiles["always_live_bytes"] == 0)
    profile.set_table("tiles", tiles)  # no per-tile figure: fall back to alwaysLiveVariables (one replica's)
    per_replica = float(profile.variables["bytes"].sum())
    assert mm.always_live_bytes(profile) == per_replica * replicas


def test_liveness_rule_compares_a_replica_with_a_replica(pva_double, replicated):
    replicas, path = replicated
    profile = pop.read(path)
    finding = next(f for f in popprof.check(profile) if f.rule_id == "memory.liveness-peak")
    capacity_whole = 4 * 1472 * 638_976
    expected = mm.peak_liveness(profile) / capacity_whole  # whole vs whole == replica vs replica
    assert finding.value == pytest.approx(expected)
    assert "per replica" in finding.message and f"of {replicas})" in finding.message


def test_every_memory_figure_says_what_it_covers():
    from popprof.metrics import METRICS

    for name in (
        "memory.total_incl_gaps_bytes",
        "memory.total_excl_gaps_bytes",
        "memory.always_live_bytes",
        "memory.peak_liveness_bytes",
    ):
        assert "whole target" in METRICS[name].description, name
    for name in ("memory.peak_not_always_live_bytes", "memory.peak_liveness_per_replica_bytes"):
        assert "replica" in METRICS[name].description, name
    liveness = {c.name: c.description for c in TABLES["liveness"].columns}
    assert "per replica" in liveness["not_always_live_bytes"]
    tiles = {c.name: c.description for c in TABLES["tiles"].columns}
    assert "whole target" in TABLES["tiles"].description or "every replica" in TABLES["tiles"].description
    assert "replica" in tiles["always_live_bytes"]
