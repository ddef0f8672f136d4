"""One busy, one idle, one communication figure per device and window: every consumer reads the time account.

On real traces (HTA's public test traces: one GPU, two ranks, eight ranks) and a real Poplar summary, the
account's run rows pooled over devices give the same busy time, idle share and communication share in the
summary's JSON and text, the baseline, a diff, the HTML report, the pilot and check's findings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import popprof
from popprof.cli import cli
from popprof.compare.baseline import baseline_document
from popprof.io import units
from popprof.metrics import account
from popprof.pilot.figures import side
from popprof.report.html import render as render_html

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "real" / "traces"
INPUTS = [
    TRACES / "nccl_data.json.gz",
    TRACES / "two_ranks",
    TRACES / "dlrm_8ranks",
    ROOT / "fixtures" / "real" / "poplar" / "tutorials_tut6_execution_ipumodel_sdk3.txt",
]


def _pooled(profile: popprof.Profile) -> tuple[float, float, float, float]:
    """(window, busy, idle share, communication share) of the account's run rows, pooled over devices."""
    runs = account.run_account(profile)
    window = float(runs["window_us"].sum())
    busy = sum(account.busy_us(r) for _, r in runs.iterrows())
    idle = sum(account.idle_us(r) for _, r in runs.iterrows())
    comm = sum(account.communication_us(r) for _, r in runs.iterrows())
    return window, busy, idle / window, comm / window


@pytest.fixture(scope="module", params=INPUTS, ids=lambda p: p.name)
def case(request):
    path = request.param
    return path, popprof.open(path)


def test_summary_json_rows_are_the_account(case):
    path, profile = case
    result = CliRunner().invoke(cli, ["-q", "summary", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output[-1000:]
    doc = json.loads(result.stdout)
    runs = [r for r in doc["time_account"] if r["step"] is None]
    window, busy, idle_share, comm_share = _pooled(profile)
    assert sum(r["window_us"] for r in runs) == pytest.approx(window)
    limits = doc["what_limits"]["devices"]
    assert len(limits) == len(runs)
    pooled_idle = sum(
        d["window_us"] * sum(v for k, v in d["shares"].items() if k.startswith("idle")) for d in limits
    )
    assert pooled_idle / window == pytest.approx(idle_share)


def test_the_registry_baseline_and_diff_read_the_account(case):
    _, profile = case
    window, busy, idle_share, comm_share = _pooled(profile)
    metrics = baseline_document(profile)["metrics"]
    assert metrics["account.window_us"]["value"] == pytest.approx(window)
    if profile.has("events"):
        assert metrics["trace.device_busy_us"]["value"] == pytest.approx(busy)
        assert metrics["trace.device_idle_share"]["value"] == pytest.approx(idle_share)
        assert metrics["trace.device_communication_share"]["value"] == pytest.approx(comm_share)
        rows = popprof.diff(profile, profile).metrics.set_index("name")
        assert rows.loc["trace.device_idle_share", "base"] == pytest.approx(idle_share)
        assert rows.loc["trace.device_communication_share", "new"] == pytest.approx(comm_share)


def test_the_html_report_and_the_pilot_show_the_same_shares(case):
    _, profile = case
    window, busy, idle_share, comm_share = _pooled(profile)
    html = render_html(profile, plots=False)
    assert "What limits this run" in html
    runs = account.run_account(profile)
    first = runs.iloc[0]
    assert units.duration(first["window_us"]) in html
    col = side(profile, "x", role="ipu")
    assert col["shares_source"] == "time_account"
    assert col["figures"]["busy_pct"]["value"] == pytest.approx(100 * (1 - idle_share))
    assert col["figures"]["communication_pct"]["value"] == pytest.approx(100 * comm_share)


def test_summary_text_states_the_account_shares(case):
    path, profile = case
    result = CliRunner().invoke(cli, ["-q", "summary", str(path)])
    assert result.exit_code == 0
    text = result.output
    assert "What limits this run" in text
    runs = account.run_account(profile)
    if len(runs) == 1:
        row = runs.iloc[0]
        top = max((p for p in account.PARTS if not _missing(row[p])), key=lambda p: row[p])
        assert f"{account.PART_WORDS[top]} {units.percent(row[top] / row['window_us'])}" in text


def _missing(value) -> bool:
    return value != value  # NaN


def test_check_states_the_accounts_communication_and_window(case):
    path, profile = case
    if not profile.has("events"):
        return
    found = popprof.check(profile)
    runs = account.run_account(profile)
    by_label = {
        (f"rank {int(r['rank'])} {r['device']}" if r["rank"] == r["rank"] else str(r["device"])): r
        for r in runs.to_dict("records")
    }
    share = found.by_rule("exchange.share")
    if share:
        evidence = share[0].evidence
        for row in evidence.to_dict("records"):
            label = (
                f"rank {int(row['rank'])} {row['device']}" if row["rank"] is not None else str(row["device"])
            )
            mine = by_label[label]
            assert row["exchange_us"] == pytest.approx(account.communication_us(mine))
            assert row["busy_us"] == pytest.approx(account.busy_us(mine))
    for gaps in found.by_rule("host.device-gaps"):
        windows = [units.duration(r["window_us"]) for r in by_label.values()]
        assert any(f"of its window {w}" in gaps.message for w in windows), gaps.message


@pytest.mark.parametrize(
    "path",
    sorted(p for p in TRACES.glob("*.json*") if not p.name.endswith("_reference.json"))
    + [TRACES / "two_ranks"],
    ids=lambda p: p.name,
)
def test_the_time_gains_of_a_device_never_exceed_its_window(path):
    """Counted once (rules/pricing.py): per device the time gains sum to at most its window and, per part,
    to at most the account's time of the parts they rest on; pooled, to at most the devices' windows."""
    profile = popprof.open(path)
    found = popprof.check(profile)
    runs = account.run_account(profile)
    if runs.empty:
        return
    window = float(runs["window_us"].sum())
    gains = [
        f.estimated_gain
        for f in found.items
        if f.estimated_gain is not None and f.estimated_gain.unit == "us"
    ]
    assert sum(g.value for g in gains) <= window * (1 + 1e-9)
    for part in account.PARTS:
        resting = [g.value for g in gains if g.rests_on == (part,)]
        if resting:
            assert sum(resting) <= float(runs[part].sum()) * (1 + 1e-9) + 1e-6, part
    ordered = [f.estimated_gain.fraction for f in found.items if f.estimated_gain is not None]
    assert ordered == sorted(ordered, reverse=True)


def test_the_notebook_explanation_is_the_summarys(case):
    path, profile = case
    shown = popprof.explain(profile)
    doc = popprof.summary(profile)["what_limits"]
    assert shown.doc == doc
    assert repr(shown).startswith("What limits this run")
    assert "What limits this run" in shown._repr_html_()
