"""The IPU count comes from the target: an SDK 1.x JSON profile of 4 IPUs attributes every step to IPU 0."""

from __future__ import annotations

import json
from pathlib import Path

import popprof
from popprof.cli import main
from popprof.metrics.execution import ipu_count

POD4 = Path(__file__).resolve().parent.parent / "fixtures" / "sdk1_json" / "pod4_pipeline.json"


def test_sdk1_steps_name_one_ipu_but_the_target_has_four():
    profile = popprof.open(POD4)
    assert profile.steps["ipu"].nunique() == 1 and profile.target_value("num_ipus") == 4
    assert ipu_count(profile) == 4


def test_summary_and_check_say_four_ipus(capsys):
    assert main(["summary", str(POD4), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["execution"]["ipus"] == 4
    assert main(["summary", str(POD4)]) == 0
    assert "steps on 4 IPUs" in capsys.readouterr().out
    main(["check", str(POD4), "--fail-on", "never", "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["profiles"][0]["findings"]
    share = next(f for f in findings if f["rule_id"] == "exchange.share")
    assert "over 4 IPUs" in share["message"]


def test_without_a_target_count_the_steps_decide():
    profile = popprof.open(POD4)
    target = profile.target.copy()
    target["num_ipus"] = None
    profile.set_table("target", target)
    assert ipu_count(profile) == 1
