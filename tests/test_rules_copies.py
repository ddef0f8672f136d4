"""host.pageable-copies on the real traces of fixtures/real/traces (docs/rules.md says what it gives on each)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.metrics import copies
from popprof.metrics.account import run_account
from popprof.rules import RULES, check
from popprof.trace.intervals import device_label

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
RULE = "host.pageable-copies"
#: the real traces with copies between the host and a device
TRACES = [
    "kineto2021_resnet50_worker0.pt.trace.json.gz",
    "hta_alexnet_first_steps.json.gz",
    "hta_simple_add.json.gz",
    "hta_cuda_event_sync.json.gz",
    "two_ranks",
    "dlrm_8ranks",
    "tracelens_b200_vllm_eager.json.gz",
    "amd_mi250_minitoy.json.gz",
]


@pytest.fixture(scope="module")
def real() -> dict[str, popprof.Profile]:
    return {name: popprof.open(REAL / name, with_args=True) for name in TRACES}


def _found(profile: popprof.Profile, **params):
    return check(profile, rules=[RULE], params={RULE: params} if params else None)


def test_registered_with_its_parameters() -> None:
    rule = RULES[RULE]
    assert set(rule.params) == {"warning", "error", "info", "min_us", "top"}
    assert rule.params["warning"] < rule.params["error"]


def test_resnet50_pageable_input_copies_are_priced(real) -> None:
    """1.2 % of the window: info at the defaults (a warning from 5 %, as the launch-overhead rule's), priced
    all the same; a warning at a lower threshold."""
    profile = real["kineto2021_resnet50_worker0.pt.trace.json.gz"]
    (finding,) = _found(profile).by_rule(RULE)
    assert finding.severity == "info"
    assert finding.value == pytest.approx(0.0115, abs=5e-4)
    (lower,) = _found(profile, warning=0.01).by_rule(RULE)
    assert lower.severity == "warning"
    kinds = copies.copy_kinds(profile)
    pageable = kinds[kinds["memory"] == "pageable"]
    assert list(pageable["kind"]) == ["HtoD pageable"]
    (window,) = run_account(profile)["window_us"]
    assert finding.value == pytest.approx(float(pageable["copies_us"].sum()) / window)
    assert "12 copies from or to pageable host memory (HtoD 12)" in finding.message
    assert "110.3 MiB" in finding.message  # the bytes of the args: 6 x 19,267,584 + 6 x 256
    gain = finding.estimated_gain
    assert gain.unit == "us" and gain.rests_on == ("copies",)
    assert gain.value == pytest.approx(float(pageable["copies_us"].sum()))


@pytest.mark.parametrize("name", ["hta_alexnet_first_steps.json.gz", "hta_simple_add.json.gz"])
def test_start_up_traces_are_info(real, name: str) -> None:
    """Many milliseconds of pageable copies in windows that CUDA's start-up fills: under 1 % of them."""
    (finding,) = _found(real[name]).by_rule(RULE)
    assert finding.severity == "info"
    assert finding.value < RULES[RULE].params["warning"]


@pytest.mark.parametrize(
    "name",
    ["two_ranks", "dlrm_8ranks", "tracelens_b200_vllm_eager.json.gz", "hta_cuda_event_sync.json.gz"],
)
def test_quiet_where_pageable_copies_are_short(real, name: str) -> None:
    profile = real[name]
    kinds = copies.copy_kinds(profile)
    pageable = kinds[kinds["memory"] == "pageable"]
    assert len(pageable)  # they are there ...
    assert float(pageable["copies_us"].max()) < RULES[RULE].params["min_us"]  # ... but short
    assert _found(profile).by_rule(RULE) == []
    # min_us is what silences them: without it the same copies are a finding
    assert _found(profile, min_us=0.0, info=0.0).by_rule(RULE)


def test_amd_copies_do_not_say_which_memory(real) -> None:
    found = _found(real["amd_mi250_minitoy.json.gz"])
    assert RULE in dict(found.not_evaluated)
    assert "Host" in dict(found.not_evaluated)[RULE]


def test_no_error_on_a_real_trace_and_the_gain_within_the_copies(real) -> None:
    """With every rule (gains counted once), the finding's gain never exceeds the account's copies part of
    the devices it names."""
    for name, profile in real.items():
        found = check(profile)
        for finding in found.by_rule(RULE):
            assert finding.severity != "error", name
            runs = run_account(profile)
            labels = set(finding.where.get("devices") or [])
            mine = runs[
                [
                    (device_label(None if pd.isna(r) else int(r), d) in labels)
                    for r, d in zip(runs["rank"], runs["device"], strict=True)
                ]
            ]
            assert finding.estimated_gain.value <= float(mine["copies"].sum()) + 1e-6, name


def test_error_band_reachable(real) -> None:
    """The thresholds are parameters: at an error threshold under its share the ResNet-50 finding is an error."""
    (finding,) = _found(
        real["kineto2021_resnet50_worker0.pt.trace.json.gz"], error=0.005, warning=0.001
    ).by_rule(RULE)
    assert finding.severity == "error"
