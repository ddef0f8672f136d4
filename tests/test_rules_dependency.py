"""The device idle with its work already launched (device.dependency-waits), told apart from the host not
submitting (host.device-gaps) and from host work (host.long-events), on real traces (fixtures/real/traces).

SGLang's decode on an MI300X (TraceLens's test trace): a ``hipStreamWaitEvent``, then a kernel launched at
+0.12 ms that starts 463 ms later while the host sits blocked in a synchronous copy. Before this, popprof said
"Device idle waiting on the host" (an error, 463 ms "were the host to submit work ahead of the device") and
flagged the blocking ``aten::copy_`` as long host work.
"""

from __future__ import annotations

import numpy as np
import pytest
from real_inputs import REAL

import popprof
from popprof.metrics.account import run_account
from popprof.metrics.gaps import device_gaps, split_gaps
from popprof.report.explain import explained_summary
from popprof.rules import check
from popprof.trace.intervals import device_activities

TRACES = REAL / "traces"
SGLANG = TRACES / "tracelens_mi300x_sglang_decode.json.gz"
VLLM_GRAPH = TRACES / "tracelens_mi300x_vllm_decode_graph.json.gz"


@pytest.fixture(scope="module")
def sglang():
    return popprof.open(SGLANG)


def test_a_kernel_waiting_on_an_event_is_a_dependency_wait_not_the_host(sglang):
    found = check(sglang)
    ids = [f.rule_id for f in found.items]
    assert ids == ["device.dependency-waits"]  # no host.device-gaps, no host.long-events
    (f,) = found.items
    assert f.severity == "error" and f.value == pytest.approx(0.978, abs=0.001)
    assert f.estimated_gain.value == pytest.approx(463_252, abs=10)
    assert f.estimated_gain.rests_on == ("idle_launch",)
    assert "ended by 'void (anonymous namespace)::resolve_future_token_ids_kernel<" in f.message
    assert "after a 'hipStreamWaitEvent' at +102.0 us (a stream waiting on an event)" in f.message
    assert "blocked on the device for 463.02 ms of it" in f.message
    # the account holds that time in idle_launch, and "What limits this run" names it first
    row = run_account(sglang).iloc[0]
    assert f.estimated_gain.value <= row["idle_launch"]
    top = explained_summary(sglang)["what_limits"]["opportunities"][0]
    assert top["rule_id"] == "device.dependency-waits"


def test_the_gaps_split_where_the_launch_returned(sglang):
    """Each gap's host part runs until the launch call of the work that ended it returned; the rest waited,
    launched. Together they are the gap; the waiting part lies in the account's idle_launch."""
    for path in (SGLANG, TRACES / "two_ranks", TRACES / "amd_mi250_minitoy.json.gz"):
        profile = popprof.open(path)
        runs = run_account(profile)
        for activity in device_activities(profile):
            gs, ge = device_gaps(activity, 1000.0)
            split = split_gaps(profile, activity, gs, ge)
            assert (split.host_end >= gs).all() and (split.host_end <= ge).all()
            assert np.allclose(split.host_us(gs) + split.waiting_us(ge), ge - gs)
            label = runs["rank"].isna() if activity.rank is None else runs["rank"] == activity.rank
            row = runs[label & (runs["device"] == activity.device)].iloc[0]
            assert split.waiting_us(ge).sum() <= row["idle_launch"] + 1e-6
    # MI250: the one long gap is a 6.54 ms launch call (the host launching), not a dependency
    mi250 = popprof.open(TRACES / "amd_mi250_minitoy.json.gz")
    (activity,) = device_activities(mi250)
    gs, ge = device_gaps(activity, 1000.0)
    split = split_gaps(mi250, activity, gs, ge)
    assert split.host_us(gs).sum() == pytest.approx(6_628, abs=5) and split.waiting_us(ge).sum() < 10


def test_device_gaps_price_only_the_host_part():
    """two_ranks: of rank 1's 556.18 ms in gaps of 1 ms and more, 291.94 ms came before the host had launched the
    work that ended them (the warning and its gain); the other 264.24 ms the work was launched and waited, said
    and priced by device.dependency-waits. The two rules' spans are disjoint."""
    found = check(popprof.open(TRACES / "two_ranks"), rules=["host.device-gaps", "device.dependency-waits"])
    (gaps,) = found.by_rule("host.device-gaps")
    (waits,) = found.by_rule("device.dependency-waits")
    assert gaps.severity == "warning" and gaps.estimated_gain.device == "rank 1 gpu:1"
    assert gaps.estimated_gain.value == pytest.approx(291_936, abs=5)
    assert "another 264.24 ms in those gaps after the work that ended them had been launched" in gaps.message
    assert waits.estimated_gain.device == "rank 0 gpu:0"
    assert waits.estimated_gain.value == pytest.approx(302_382, abs=5)
    assert "Counted once" not in gaps.estimated_gain.basis + waits.estimated_gain.basis


def test_a_host_event_blocked_on_the_device_is_not_long_host_work(sglang):
    """The 463 ms ``aten::copy_`` is a blocking ``hipMemcpyWithStream`` for all but 0.3 ms: host.long-events
    does not flag it (it did, as an error, before)."""
    found = check(sglang, rules=["host.long-events"])
    assert found.evaluated == ["host.long-events"] and found.items == []


def test_a_decode_in_full_graphs_is_healthy():
    """vLLM's decode with full graphs on an MI300X keeps the device busy 99.8 % of its window: no finding."""
    found = check(popprof.open(VLLM_GRAPH))
    assert found.items == []
    row = run_account(popprof.open(VLLM_GRAPH)).iloc[0]
    assert row["compute"] / row["window_us"] > 0.99
