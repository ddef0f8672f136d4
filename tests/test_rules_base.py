"""The rule registry: selection, parameters, not-evaluated reporting, Findings views, adding a rule."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.model.errors import UsageError
from popprof.model.profile import Profile
from popprof.rules import RULES, Findings, NotEvaluated, check, parse_set, rule, select_rules
from popprof.rules.base import FRAME_COLUMNS, band, coerce_param, rank_key, resolve_params
from popprof.testing.synth import make_profile


@pytest.fixture(scope="module")
def synth():
    return make_profile(num_steps=1000, num_liveness_steps=100, oom_tiles=2, seed=5)


def test_every_rule_is_fully_described():
    assert {
        "memory.tile-oom",
        "memory.headroom",
        "memory.tile-imbalance",
        "memory.liveness-peak",
        "memory.gaps",
        "exchange.phases",
        "exchange.share",
        "host.stream-copy",
        "host.device-gaps",
        "host.long-events",
        "distributed.stragglers",
    } <= set(RULES)
    for r in RULES.values():
        assert r.description and r.advice and r.needs, r.id
        assert r.id.split(".")[0] in {"memory", "exchange", "host", "device", "distributed", "operations"}
        assert set(r.advice_by_platform) <= {"ipu", "gpu", "tpu"}


def test_trace_rules_declare_gpu_advice_and_findings_get_the_platforms_text():
    for rule_id in (
        "host.device-gaps",
        "host.long-events",
        "exchange.phases",
        "exchange.share",
        "distributed.stragglers",
    ):
        texts = RULES[rule_id].advice_by_platform
        assert texts["gpu"] and texts["ipu"] and texts["gpu"] != texts["ipu"], rule_id
    assert "tile" not in RULES["exchange.phases"].advice_for("gpu")
    assert "bucket" in RULES["exchange.phases"].advice_for("gpu")
    # a rule with one text gives it on every platform
    assert RULES["memory.gaps"].advice_for("gpu") == RULES["memory.gaps"].advice_for("ipu")
    assert RULES["memory.gaps"].advice_for("tpu") == RULES["memory.gaps"].advice_for("ipu")


def test_tpu_advice_speaks_of_jax_and_xla_and_falls_back_on_the_gpus():
    for rule_id in (
        "host.long-events",
        "exchange.phases",
        "exchange.share",
        "distributed.stragglers",
        "distributed.collective-skew",
        "operations.below-roofline",
    ):
        text = RULES[rule_id].advice_for("tpu")
        assert text != RULES[rule_id].advice_for("gpu"), rule_id
        for cuda_word in ("CUDA", "cuda", "NCCL", "pin_memory", "non_blocking", "torch", "DDP", "GPU"):
            assert cuda_word not in text, (rule_id, cuda_word)
    # no TPU text of its own: the GPU's, never the IPU's
    assert RULES["host.launch-overhead"].advice_for("tpu") == RULES["host.launch-overhead"].advice_for("gpu")


def test_selection_by_id_glob_family_and_skip():
    assert [r.id for r in select_rules(["memory.headroom"])] == ["memory.headroom"]
    assert {r.id for r in select_rules(["memory.*"])} == {r for r in RULES if r.startswith("memory.")}
    assert {r.id for r in select_rules(["host"])} == {r for r in RULES if r.startswith("host.")}
    chosen = {r.id for r in select_rules(None, skip=["exchange.*", "memory.gaps"])}
    assert "memory.gaps" not in chosen and not any(r.startswith("exchange.") for r in chosen)
    with pytest.raises(UsageError, match="unknown rule 'memory.nope'"):
        select_rules(["memory.nope"])
    with pytest.raises(UsageError):
        select_rules(None, skip=["nothing.*"])


def test_parameter_parsing_and_coercion():
    assert parse_set(["memory.headroom.warning=0.8"]) == {"memory.headroom.warning": "0.8"}
    with pytest.raises(UsageError, match="RULE.PARAM=VALUE"):
        parse_set(["memory.headroom.warning"])
    resolved = resolve_params({"memory.headroom.warning": "80%", "exchange.phases.window": "250"})
    assert resolved["memory.headroom"] == {"warning": 0.8, "error": 0.95}
    assert resolved["exchange.phases"]["window"] == 250 and isinstance(
        resolved["exchange.phases"]["window"], int
    )
    nested = resolve_params({"memory.headroom": {"error": 0.9}, "memory": {"gaps": {"warning": 0.2}}})
    assert nested["memory.headroom"]["error"] == 0.9 and nested["memory.gaps"]["warning"] == 0.2
    with pytest.raises(UsageError, match="no parameter 'warn'"):
        resolve_params({"memory.headroom.warn": 1})
    with pytest.raises(UsageError, match="expected float"):
        resolve_params({"memory.headroom.warning": "high"})
    with pytest.raises(UsageError, match="expected int"):
        coerce_param("exchange.phases.window", 100, "2.5")
    for nan in ("nan", "NaN%", float("nan")):  # a NaN threshold would never flag anything
        with pytest.raises(UsageError, match="expected float"):
            coerce_param("memory.headroom.warning", 0.85, nan)
    assert coerce_param("memory.headroom.warning", 0.85, " 2.5% ") == 0.025
    assert coerce_param("memory.headroom.warning", 0.85, 1) == 1.0


def test_band_is_inclusive():
    assert band(0.85, 0.85, 0.95) == ("warning", 0.85)
    assert band(0.95, 0.85, 0.95) == ("error", 0.95)
    assert band(0.8499999, 0.85, 0.95) == (None, None)
    assert band(None, 0.85, 0.95) == (None, None)


def test_a_single_pattern_may_be_a_string(synth):
    found = check(synth, rules="memory.tile-oom", skip="host.*")
    assert found.evaluated == ["memory.tile-oom"]


def test_check_reports_not_evaluated_with_reasons(synth):
    found = popprof.check(synth)
    assert isinstance(found, Findings)
    reasons = dict(found.not_evaluated)
    assert set(reasons) == {
        "host.device-gaps",
        "host.long-events",
        "host.launches-without-device",
        "host.launch-overhead",
        "distributed.stragglers",
        "operations.below-roofline",
        "distributed.collective-skew",
        "device.dependency-waits",
        "host.pageable-copies",
        "host.device-copies",
        "memory.device-headroom",
    }
    assert all("trace" in why for why in reasons.values())
    assert set(found.evaluated) | set(reasons) == set(RULES)


def test_findings_views(synth):
    found = check(synth)
    frame = found.frame
    assert list(frame.columns) == FRAME_COLUMNS
    assert len(frame) == len(found.items)
    assert found.worst == "error" and "error" in set(frame["severity"])
    # ranked by the estimated gain's share of its whole, findings without a gain after, worst first
    keys = [rank_key(f) for f in found.items]
    assert keys == sorted(keys)
    fractions = [f.estimated_gain.fraction for f in found.items if f.estimated_gain is not None]
    assert fractions == sorted(fractions, reverse=True)
    assert list(frame["rule_id"]) == [f.rule_id for f in found.items]
    assert found.counts()["error"] == len(found.at_least("error"))
    html = found._repr_html_()
    assert "memory.tile-oom" in html and "<table>" in html and "not evaluated" in html
    data = found.to_dict()
    assert data["passed"] == [r for r in found.evaluated if not found.by_rule(r)]
    assert all(isinstance(f["where"], dict) for f in data["findings"])


def test_findings_carry_evidence_frames(synth):
    found = check(synth, rules=["memory.tile-oom", "memory.liveness-peak"])
    for f in found.items:
        assert isinstance(f.evidence, pd.DataFrame) and not f.evidence.empty
        assert f.advice == RULES[f.rule_id].advice


def test_config_rules_section_enables_disables_and_sets_params(synth):
    config = {
        "rules": {
            "enable": ["memory.*"],
            "disable": ["memory.gaps"],
            "fail_on": "warning",
            "memory": {"headroom": {"warning": 0.5}},
        }
    }
    found = check(synth, config=config)
    assert "memory.gaps" not in found.evaluated and "exchange.phases" not in found.evaluated
    assert "memory.headroom" in found.evaluated
    explicit = check(synth, rules=["memory.gaps", "exchange.share"], config=config)
    assert explicit.evaluated == ["exchange.share", "memory.gaps"]  # named rules replace enable/disable
    assert check(synth, config=config, skip=["memory.headroom"]).by_rule("memory.headroom") == []
    with pytest.raises(UsageError):
        check(synth, config={"rules": {"memory.headroom.bogus": 1}})
    # a single pattern may be written as a string; a [rules] that is not a table is a usage error
    one = check(synth, config={"rules": {"enable": "memory", "disable": "memory.gaps"}})
    assert set(one.evaluated) | {r for r, _ in one.not_evaluated} == {
        r for r in RULES if r.startswith("memory.") and r != "memory.gaps"
    }
    with pytest.raises(UsageError, match="must be a table"):
        check(synth, config={"rules": "memory"})


def test_adding_a_rule_is_one_function():
    @rule(
        "demo.steps-count",
        "flags profiles with more than N steps",
        needs=["steps"],
        params={"limit": 10},
        advice="fewer steps",
    )
    def steps_count(profile: Profile, ctx):
        n = profile.steps["step"].nunique()
        if n > ctx.params["limit"]:
            return [
                ctx.finding("warning", "Many steps", f"{n} steps", value=n, threshold=ctx.params["limit"])
            ]
        return []

    try:
        profile = make_profile(num_steps=50, num_liveness_steps=20)
        assert check(profile, rules=["demo.*"]).items[0].message == "50 steps"
        assert check(profile, rules=["demo.*"], params={"demo.steps-count.limit": 50}).items == []
        no_steps = make_profile(execution=False, num_liveness_steps=20)
        assert check(no_steps, rules=["demo.*"]).not_evaluated[0][0] == "demo.steps-count"
    finally:
        RULES.pop("demo.steps-count", None)


def test_a_rule_raising_not_evaluated_is_reported():
    @rule("demo.never", "cannot run", needs=[], advice="-")
    def never(profile, ctx):
        raise NotEvaluated("needs something special")

    try:
        found = check(Profile("empty", {}), rules=["demo.never"])
        assert found.not_evaluated == [("demo.never", "needs something special")]
    finally:
        RULES.pop("demo.never", None)


@pytest.mark.parametrize("categorical", [True, False])
def test_the_platform_is_the_prefix_most_events_carry(categorical):
    """``events.device`` decides the platform by the prefix most events carry, counted per distinct device
    (categories never used count for nothing), on a real trace's events with their devices rewritten."""
    from popprof.rules.platform import _platform

    real = popprof.open(Path(__file__).resolve().parent.parent / "fixtures/real/traces/nccl_data.json.gz")
    assert _platform(real) == "gpu"
    events = real.events
    n = len(events)

    def with_devices(values: list) -> Profile:
        column = pd.Categorical(values, categories=["gpu:0", "ipu:1", "gpu:7"]) if categorical else values
        return Profile("rewritten", {"events": events.assign(device=column)})

    third = n // 3
    assert _platform(
        with_devices(["gpu:0"] * third + ["ipu:1"] * (third + 1) + [None] * (n - 2 * third - 1))
    ) == ("ipu")
    assert _platform(
        with_devices(["gpu:0"] * (third + 1) + ["ipu:1"] * third + [None] * (n - 2 * third - 1))
    ) == ("gpu")
