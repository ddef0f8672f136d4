"""What limits the run: one definition (``metrics/limit.py``), stated by summary and diagnosed by pilot alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.metrics.limit import DATA_MOVEMENT, HOST, IMBALANCE, LAUNCH, UNDETERMINED, limit_of

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
TRACES = FIX / "real" / "traces"
DLRM = TRACES / "dlrm_8ranks"
SGLANG = TRACES / "tracelens_mi300x_sglang_decode.json.gz"


def gpu_row(**parts: float) -> dict:
    row = {
        "basis": "device_span",
        "window_us": sum(v for k, v in parts.items() if k != "waiting_us" and v == v),
    }
    return {**row, **parts}


def test_each_part_lands_in_its_group_and_the_largest_decides():
    limit = limit_of(
        [gpu_row(compute=20, communication=30, copies=5, idle_host=25, idle_launch=15, idle_other=5)]
    )
    assert limit["limit"] == DATA_MOVEMENT and limit["share"] == pytest.approx(0.35)
    assert list(limit["groups"]) == [DATA_MOVEMENT, HOST, "device compute", LAUNCH]
    assert limit["unattributed"] == pytest.approx(0.05)


def test_the_wait_for_the_last_rank_is_imbalance_not_data_movement():
    # 30 us of communication of which 25 waiting for the last rank: data movement keeps 5 + copies 5
    limit = limit_of([gpu_row(compute=20, communication=30, copies=5, idle_host=25, waiting_us=25)])
    # (an IPU's sync is load imbalance too: tiles or IPUs waiting for each other)
    assert limit["limit"] == IMBALANCE and limit["share"] == pytest.approx(25 / 80)
    assert limit["groups"][DATA_MOVEMENT] == pytest.approx(10 / 80)
    # a wait longer than the communication it is part of moves no more than the communication
    capped = limit_of([gpu_row(compute=10, communication=5, waiting_us=50)])
    assert capped["groups"][IMBALANCE] == pytest.approx(5 / 15) and DATA_MOVEMENT not in capped["groups"]


def test_an_ipu_idle_goes_by_the_windows_basis():
    run = {
        "basis": "ipu_run",
        "window_us": 100.0,
        "compute": 30.0,
        "exchange": 10.0,
        "sync": 5.0,
        "idle": 55.0,
    }
    assert limit_of([run])["limit"] == IMBALANCE  # waiting for the busiest IPU of the run, and sync
    assert limit_of([run])["groups"] == pytest.approx(
        {IMBALANCE: 0.6, "device compute": 0.3, DATA_MOVEMENT: 0.1}
    )
    pvti = dict(run, basis="device_span")
    assert limit_of([pvti])["limit"] == HOST  # between device runs: the host had submitted nothing
    text = dict(run, basis="summary_total")
    assert limit_of([text])["limit"] == UNDETERMINED and limit_of([text])["share"] == pytest.approx(0.55)


def test_pooled_over_devices_missing_parts_and_no_window():
    rows = [gpu_row(compute=90, idle_host=10), gpu_row(compute=10, idle_host=float("nan"), idle_launch=90)]
    limit = limit_of(rows)  # 100 us of compute over 200 us of windows; a missing part counts nothing
    assert limit["limit"] == "device compute" and limit["share"] == pytest.approx(0.5)
    assert limit["groups"] == pytest.approx({"device compute": 0.5, LAUNCH: 0.45, HOST: 0.05})
    tie = limit_of([gpu_row(idle_host=50, compute=50)])  # the first of equals in LIMITS' order
    assert tie["limit"] == "device compute" and list(tie["groups"]) == ["device compute", HOST]
    assert limit_of([]) is None and limit_of([{"basis": "step", "window_us": 0.0}]) is None


def run_json(capsys, *args) -> dict:
    assert main([str(a) for a in args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("path", "limit", "share", "second"),
    [
        # 41.7 % idle with the host not submitting against 38.6 % waiting for the last rank (HTA's stragglers)
        (DLRM, HOST, 0.417, IMBALANCE),
        # SGLang's decode: its work was launched and waited on dependencies, not on the host (0.1 %)
        (SGLANG, LAUNCH, 0.979, "device compute"),
        (FIX / "mk2_training.popprof", "device compute", 0.760, DATA_MOVEMENT),
    ],
)
def test_summary_and_pilot_name_one_limit_on_real_runs(capsys, path, limit, share, second):
    summary = run_json(capsys, "summary", path, "--format", "json")
    stated = summary["what_limits"]["limit"]
    assert stated["limit"] == limit and stated["share"] == pytest.approx(share, abs=0.0005)
    assert list(stated["groups"])[1] == second
    doc = run_json(capsys, "pilot", FIX / "mk2_training.popprof", "--baseline", path, "--format", "json")
    column = doc["columns"][-1]
    assert column["diagnosis"]["limit"] == limit
    assert column["diagnosis"]["deciding"] == {"share": stated["share"], "groups": stated["groups"]}
    assert column["what_limits"]["limit"] == stated
    # check states it under the profile's heading, from the same definition
    code = main(["check", str(path), "--format", "json", "--fail-on", "never"])
    assert code == 0 and json.loads(capsys.readouterr().out)["profiles"][0]["limit"] == stated


def test_the_limit_line_fits_and_says_what_is_next(capsys):
    assert main(["summary", str(DLRM)]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("  Limit: ") :].splitlines()
    assert lines[0] == "  Limit: host, 41.7 % of the devices' windows; then load imbalance 38.6 %,"
    assert lines[1] == "    launch or dependency 10.5 %, device compute 7.6 %"
    assert all(len(line) <= 80 for line in out.splitlines())
    assert main(["check", str(DLRM), "--fail-on", "never"]) == 0
    checked = capsys.readouterr().out.splitlines()
    assert checked[1:3] == [
        "  limit: host, 41.7 % of the devices' windows; then load imbalance 38.6 %,",
        "    launch or dependency 10.5 %, device compute 7.6 %",
    ]


def test_the_html_block_states_the_same_limit():
    import popprof

    explained = popprof.explain(popprof.open(SGLANG))
    assert explained.limit == LAUNCH and explained.doc["limit"]["share"] == pytest.approx(0.979, abs=0.0005)
    assert popprof.explain(popprof.open(FIX / "mk1_noexec.popprof")).limit is None  # memory only: no account
    html = explained._repr_html_()
    assert (
        '<p class="limit">Limit: launch or dependency, 97.9 % of the window; then device compute 2.1 %'
        in html
    )


def test_diff_names_both_sides_limit_and_whether_it_changed(capsys, tmp_path):
    vllm = TRACES / "tracelens_b200_vllm_eager.json.gz"
    doc = run_json(capsys, "diff", SGLANG, vllm, "--format", "json")
    limit = doc["what_changed"]["limit"]
    assert limit["changed"] and limit["base"]["limit"] == LAUNCH and limit["new"]["limit"] == HOST
    new_summary = run_json(capsys, "summary", vllm, "--format", "json")["what_limits"]["limit"]
    assert limit["new"] == {"limit": new_summary["limit"], "share": new_summary["share"]}  # summary's own
    assert main(["diff", str(SGLANG), str(vllm)]) == 0
    text = capsys.readouterr().out
    assert "  limit: launch or dependency 97.9 % -> host 75.3 % (the run's limit changed)\n" in text
    same = FIX / "mk2_training.popprof", FIX / "mk2_training_v2.popprof"
    assert main(["diff", *map(str, same), "--format", "markdown"]) == 1  # the gate: exchange +25 %
    assert "- limit: device compute, 76.0 % → 73.7 %\n" in capsys.readouterr().out
    # a baseline keeps the account's sums, not its rows: no limit on that side, no line
    assert main(["baseline", str(same[0]), "-o", str(tmp_path / "b.json")]) == 0
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "b.json"), str(same[1]), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["what_changed"]["limit"] is None
