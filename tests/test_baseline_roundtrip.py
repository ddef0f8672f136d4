"""Baselines: written small and safe, read back exactly, diffed against bundles, and bad baselines rejected."""

from __future__ import annotations

import json

import pytest

import popprof
from popprof import metrics
from popprof.compare import diff, gate, read_baseline, write_baseline
from popprof.compare.baseline import is_baseline
from popprof.model.errors import InputError, UsageError
from popprof.readers import bundle
from popprof.testing import synth


@pytest.fixture(scope="module")
def profile():
    return synth.make_profile(num_ipus=2, num_steps=600, num_liveness_steps=80, oom_tiles=2, seed=8)


def test_baseline_is_small_sorted_and_holds_no_sensitive_metadata(tmp_path, profile):
    out = write_baseline(profile, tmp_path / "baseline.json")
    text = out.read_text()
    doc = json.loads(text)
    assert doc["format"] == "popprof-baseline" and doc["format_version"] == 1
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"  # sorted, stable layout
    assert len(text) < 8_000
    for secret in ("alice", "/home/", "corp.example.com", "tok_", "10.12.4.21", "synth:"):
        assert secret not in text
    assert doc["profile"] == profile.name
    assert doc["target"]["num_ipus"] == 2 and doc["target"]["tiles_per_ipu"] == 1_472
    assert doc["metrics"]["memory.tiles_out_of_memory"] == {"unit": "tiles", "value": 2}
    expected = {k: v for k, v in metrics.compute(profile).items() if v is not None}
    assert set(doc["metrics"]) == set(expected)
    assert doc["metrics"]["memory.total_incl_gaps_bytes"]["value"] == int(
        profile.tiles["bytes_incl_gaps"].sum()
    )
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temporary file


def test_round_trip_gives_the_same_metrics_and_no_change(tmp_path, profile):
    path = write_baseline(profile, tmp_path / "b.json")
    loaded = popprof.open(path)  # through the reader registry
    assert is_baseline(loaded) and loaded.name == profile.name
    result = diff(loaded, profile)
    compared = result.metrics
    assert set(compared["status"]) == {"unchanged"}, compared[compared["status"] != "unchanged"]
    assert len(compared) == len([v for v in metrics.compute(profile).values() if v is not None])
    for section in ("tiles", "programs", "events", "liveness"):
        assert "baseline" in result.unavailable[section]
    assert any("baseline" in n for n in result.notes)
    assert result.base_target["num_ipus"] == 2
    # a baseline of a baseline is the same document
    again = write_baseline(read_baseline(path), tmp_path / "again.json")
    assert json.loads(again.read_text()) == json.loads(path.read_text())


def test_bundle_against_baseline_gates_exact_change(tmp_path, profile):
    baseline = read_baseline(write_baseline(profile, tmp_path / "b.json"))
    changed = profile.copy()
    tiles = changed.tiles.copy()
    fits = int(tiles.index[tiles["bytes_incl_gaps"] <= 638_976][0])
    tiles.loc[fits, "bytes_incl_gaps"] = 700_000
    changed.set_table("tiles", tiles)
    saved = popprof.open(bundle.write(changed, tmp_path / "new.popprof"))
    result = diff(baseline, saved)
    oom = result.metrics.set_index("name").loc["memory.tiles_out_of_memory"]
    assert oom["base"] == 2 and oom["new"] == int((tiles["bytes_incl_gaps"] > 638_976).sum()) == 3
    verdict = gate(result)  # default budget: +0 out-of-memory tiles
    assert not verdict.passed
    assert "memory.tiles_out_of_memory" in set(verdict.violations["metric"])
    assert result.unavailable["tiles"].startswith("the base side is a baseline")


def test_baseline_refuses_to_overwrite_its_input(tmp_path, profile):
    saved = bundle.write(profile, tmp_path / "p.popprof")
    opened = popprof.open(saved)
    with pytest.raises(UsageError):
        write_baseline(opened, saved / "baseline.json")


@pytest.mark.parametrize(
    "content, problem",
    [
        ('{"format": "popprof-baseline", "format_version": 99, "metrics": {}}', "newer"),
        ('{"format": "popprof-baseline", "format_version": 1}', 'no "metrics"'),
        (
            '{"format": "popprof-baseline", "format_version": 1, "metrics": {"m": {"value": "x"}}}',
            "non-numeric",
        ),
        ('{"format": "popprof-baseline", "format_version": 1, "metrics": ', "not valid JSON"),
    ],
)
def test_bad_baselines_are_input_errors(tmp_path, content, problem):
    path = tmp_path / "baseline.json"
    path.write_text(content)
    with pytest.raises(InputError, match=problem):
        read_baseline(path)


def test_diff_accepts_paths(tmp_path, profile):
    baseline_path = write_baseline(profile, tmp_path / "b.json")
    bundle_path = bundle.write(profile, tmp_path / "p.popprof")
    result = popprof.diff(baseline_path, str(bundle_path))  # the facade opens paths
    assert set(result.metrics["status"]) == {"unchanged"}
    assert "<code>training</code>" in result._repr_html_()


def test_baseline_of_a_baseline_with_a_malformed_table_list(tmp_path, profile):
    """A hand-edited 'tables' entry that is not a list of names does not break re-baselining."""
    first = write_baseline(profile, tmp_path / "a.json")
    document = json.loads(first.read_text())
    document["tables"] = 5
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(document))
    again = json.loads(write_baseline(read_baseline(edited), tmp_path / "b.json").read_text())
    assert again["tables"] == [] and again["metrics"] == document["metrics"]
