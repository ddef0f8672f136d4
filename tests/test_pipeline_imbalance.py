"""Pipeline-stage imbalance (issue 42, IPU): stage times per step and IPU read back from profile.pop files
written by the pva double with known cycles; the rule prices (slowest - mean) per step, summed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from pop_helpers import report_store

import popprof
from popprof.cli import cli
from popprof.io import units
from popprof.metrics.pipeline import pipeline_imbalance, stage_times, step_imbalance
from popprof.rules import check
from popprof.testing.synth import make_profile

SMALL = {"num_steps": 60, "num_programs": 40, "num_liveness_steps": 30, "num_variables": 20}
CLOCK = 1_330_000_000.0  # the Mk2 clock the synth target has


def _with_stages(name: str, stage_cycles: list[int], replicas: int = 1, sync_cycles: int = 0):
    """A synth profile whose compute steps take ``stage_cycles[i]`` on IPU i (of each replica), its sync
    steps ``sync_cycles`` on every IPU and its other steps one cycle per IPU."""
    ipus = len(stage_cycles) * replicas
    profile = make_profile(name=name, num_ipus=ipus, num_replicas=replicas, seed=7, **SMALL)
    steps = profile.steps.copy()
    per_ipu = np.tile(np.asarray(stage_cycles, dtype=np.int64), replicas)[steps["ipu"].to_numpy()]
    category = steps["category"].astype("str")
    cycles = np.where(category == "compute", per_ipu, np.where(category == "sync", sync_cycles, 0))
    steps["cycles"] = pd.array(cycles, dtype="Int64")
    profile.set_table("steps", steps)
    return profile


def _written(tmp_path, profile):
    path = tmp_path / profile.name / "profile.pop"
    report_store().write_pop(profile, path)
    return popprof.open(path)


def _compute_steps(profile) -> int:
    steps = profile.steps
    return int(steps.loc[steps["category"].astype("str") == "compute", "step"].nunique())


def test_known_stage_times_give_slowest_minus_mean_per_step(tmp_path, pva_double):
    synth = _with_stages("unbalanced", [1_000, 3_000, 2_000, 2_000], sync_cycles=5_000)
    read = _written(tmp_path, synth)
    n = _compute_steps(synth)
    stages = stage_times(read)
    assert set(stages["ipu"]) == {0, 1, 2, 3} and stages["step"].nunique() == n  # sync is not stage work
    per_step = step_imbalance(read)
    assert (per_step["slowest_ipu"] == 1).all()
    assert per_step["slowest_us"].to_numpy() == pytest.approx(3_000 / CLOCK * 1e6)
    assert per_step["mean_us"].to_numpy() == pytest.approx(2_000 / CLOCK * 1e6)
    found = pipeline_imbalance(read)
    assert found["steps"] == n and found["ipus"] == 4
    assert found["imbalance_us"] == pytest.approx(n * 1_000 / CLOCK * 1e6)
    totals = {s["ipu"]: s["stage_us"] for s in found["stages"]}
    assert totals[1] == pytest.approx(n * 3_000 / CLOCK * 1e6)
    assert {s["ipu"]: s["slowest_steps"] for s in found["stages"]} == {0: 0, 1: n, 2: 0, 3: 0}


def test_the_rule_prices_the_imbalance_on_the_idle_and_sync_time(tmp_path, pva_double):
    read = _written(tmp_path, _with_stages("unbalanced", [1_000, 3_000, 2_000, 2_000], sync_cycles=5_000))
    found = check(read, rules=["distributed.stage-imbalance"])
    (f,) = found.by_rule("distributed.stage-imbalance")
    figure = pipeline_imbalance(read)
    gain = f.estimated_gain
    assert gain.unit == "us" and gain.rests_on == ("idle", "sync")
    assert gain.value == pytest.approx(figure["imbalance_us"]) and gain.value <= gain.whole
    # the window is the busiest IPU: its compute (3,000 per step) and every sync (5,000 per step)
    assert gain.whole == pytest.approx(figure["window_us"])
    assert f.share == pytest.approx(figure["imbalance_us"] / figure["window_us"])
    assert f.severity == ("error" if f.share >= 0.30 else "warning")
    assert "IPU 1 is the slowest in total" in f.message
    assert f.where["ipus"] == [0, 1, 2, 3]


def test_balanced_stages_give_no_finding(tmp_path, pva_double):
    read = _written(tmp_path, _with_stages("balanced", [2_000, 2_000, 2_000, 2_000], sync_cycles=500))
    assert pipeline_imbalance(read)["imbalance_us"] == pytest.approx(0.0)
    assert not check(read, rules=["distributed.stage-imbalance"]).by_rule("distributed.stage-imbalance")


def test_replicas_of_one_ipu_are_not_stages(tmp_path, pva_double):
    """Data parallel: four replicas of one IPU each; their differences are no pipeline."""
    synth = _with_stages("replicated", [1_000], replicas=4)
    steps = synth.steps.copy()  # make the replicas differ: still no stages to balance
    steps["cycles"] = steps["cycles"] * (steps["ipu"].astype("int64") + 1)
    synth.set_table("steps", steps)
    read = _written(tmp_path, synth)
    assert stage_times(read).empty and pipeline_imbalance(read) is None
    assert not check(read, rules=["distributed.stage-imbalance"]).by_rule("distributed.stage-imbalance")


def test_with_replicas_a_step_is_balanced_within_its_replica(tmp_path, pva_double):
    """Two replicas of a two-stage pipeline: balancing moves work within a replica, so the balanced step
    takes the larger replica mean."""
    synth = _with_stages("pipelined", [1_000, 3_000], replicas=2)
    steps = synth.steps.copy()
    ipu = steps["ipu"].astype("int64")
    compute = steps["category"].astype("str") == "compute"
    steps.loc[compute & (ipu == 2), "cycles"] = 2_000  # replica 1: 2,000 and 3,000 (mean 2,500)
    synth.set_table("steps", steps)
    read = _written(tmp_path, synth)
    per_step = step_imbalance(read)
    assert per_step["mean_us"].to_numpy() == pytest.approx(2_500 / CLOCK * 1e6)
    assert per_step["imbalance_us"].to_numpy() == pytest.approx(500 / CLOCK * 1e6)


def test_single_ipu_and_profiles_without_execution_give_nothing(tmp_path, pva_double):
    single = _written(tmp_path, make_profile(name="single", seed=3, **SMALL))
    assert pipeline_imbalance(single) is None
    noexec = _written(tmp_path, make_profile(name="noexec", num_ipus=2, execution=False, seed=3, **SMALL))
    assert pipeline_imbalance(noexec) is None
    assert check(noexec, rules=["distributed.stage-imbalance"]).not_evaluated


def _close(got: object, expected: object, key: str = "") -> bool:
    """``got`` (read back from JSON) equals ``expected`` with floats compared approximately, at any depth
    (``pytest.approx`` takes no nested dicts or lists of dicts); a time (``*_us``) as JSON gives it, to the ns."""
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and got.keys() == expected.keys()
            and all(_close(got[k], expected[k], k) for k in expected)
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(got, list)
            and len(got) == len(expected)
            and all(_close(g, e, key) for g, e in zip(got, expected, strict=True))
        )
    if key.endswith("_us") and isinstance(expected, float):
        return got == round(expected, units.TIME_DECIMALS)
    if isinstance(expected, float) or isinstance(got, float):
        return got == pytest.approx(expected)
    return got == expected


def test_summary_gives_the_pipeline_in_json_and_in_80_columns(tmp_path, pva_double):
    read_path = tmp_path / "pipe" / "profile.pop"
    report_store().write_pop(_with_stages("pipe", [1_000, 3_000, 2_000, 2_000], sync_cycles=5_000), read_path)
    result = CliRunner().invoke(cli, ["-q", "summary", str(read_path), "--format", "json"])
    assert result.exit_code == 0, result.output[-2000:]
    doc = json.loads(result.output)["pipeline"]
    assert _close(doc, pipeline_imbalance(popprof.open(read_path)))
    text = CliRunner().invoke(cli, ["-q", "summary", str(read_path)]).output
    block = text[text.index("Pipeline:") :].split("\n\n")[0].splitlines()
    assert block[0] == f"Pipeline: {doc['steps']} steps on 4 IPUs"
    assert len(block) == 4 + 4 and all(len(line) <= 80 for line in block)
    assert "IPU 1" in block[5] and f"({doc['steps']} steps)" in block[5]


def test_check_prints_both_findings_in_80_columns(tmp_path, pva_double):
    """The findings read in ``check``'s text (where, evidence) and its JSON, on a pipelined profile whose
    fullest tile is explained too."""
    path = tmp_path / "pipe" / "profile.pop"
    report_store().write_pop(_with_stages("pipe", [1_000, 3_000, 2_000, 2_000], sync_cycles=5_000), path)
    rules = ["--rule", "distributed.stage-imbalance", "--rule", "memory.fullest-tile", "--fail-on", "never"]
    text = CliRunner().invoke(cli, ["-q", "check", str(path), *rules])
    assert text.exit_code == 0, text.output[-2000:]
    assert "Pipeline stages out of balance" in text.output and "Fullest tile:" in text.output
    assert all(len(line) <= 80 for line in text.output.splitlines())
    result = CliRunner().invoke(cli, ["-q", "check", str(path), *rules, "--format", "json"])
    findings = {f["rule_id"]: f for f in json.loads(result.output)["profiles"][0]["findings"]}
    steps = step_imbalance(popprof.open(path))["step"]
    assert findings["distributed.stage-imbalance"]["where"]["steps"] == [int(steps.min()), int(steps.max())]
    assert findings["memory.fullest-tile"]["estimated_gain"]["unit"] == "bytes"
