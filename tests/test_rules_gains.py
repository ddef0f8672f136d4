"""Findings priced and ranked (issue 41 item 3): every finding on the real artefacts carries an estimated gain
no larger than the figure it rests on nor its whole, ``check`` orders findings by that gain, and
``host.stream-copy`` judges a Poplar text summary's host exchange share."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from real_inputs import REAL, real_inputs

import popprof
from popprof.metrics import account
from popprof.metrics.account import PARTS
from popprof.metrics.phases import exposed_exchange_per_device
from popprof.rules import check

ROOT = Path(__file__).resolve().parent.parent
REAL_POPLAR = ROOT / "fixtures" / "real" / "poplar"


def test_stream_copy_flags_a_summary_dominated_by_host_exchange():
    found = check(popprof.open(REAL_POPLAR / "tutorials_tut6_execution_ipumodel_sdk3.txt"))
    (f,) = found.by_rule("host.stream-copy")
    assert f.severity == "error" and f.value == pytest.approx(0.997, abs=1e-3)
    assert "99.7 % of the average tile's cycles" in f.message and "error at >= 20 %" in f.message
    gain = f.estimated_gain
    assert gain.unit == "us" and gain.rests_on == ("stream_copies",)
    assert gain.whole == pytest.approx(5023.9)  # the summary's "approx 5,023.9 microseconds"
    assert gain.value == pytest.approx(0.99727 * 5023.9, rel=1e-4) and gain.value <= gain.whole
    assert f.figure == "execution.summary_share.host_io" and f.share == pytest.approx(f.value)
    assert found.items[0] is f  # the largest gain comes first
    assert found.worst == "error"


def test_stream_copy_on_the_healthy_hardware_summary_is_no_error():
    found = check(popprof.open(REAL_POPLAR / "tutorials_tut6_execution_hw_sdk3.txt"))
    assert found.worst != "error"
    (f,) = found.by_rule("host.stream-copy")
    assert f.severity == "warning" and f.estimated_gain.value == pytest.approx(0.1038 * 19131.6, rel=1e-3)


def test_stream_copy_is_not_evaluated_where_host_exchange_is_summed_over_tiles():
    found = check(
        popprof.open(REAL_POPLAR / "examples_tut7_execution_sdk1_mk1.txt"), rules=["host.stream-copy"]
    )
    assert found.not_evaluated and "summed over all tiles" in found.not_evaluated[0][1]


#: Findings that cannot be priced: their source prints no figure to price them by (rule, file).
UNPRICED = {
    # Poplar saved a profile instead of naming a tile and its bytes
    ("memory.tile-oom", "tutorials_tut4_oom_message_sdk2.txt"),
    # the log gives the fullest tile's bytes but no tile capacity (Mk1)
    ("memory.tile-oom", "tensorflow_logging_tile0_block_mk1.txt"),
    ("memory.tile-oom", "tensorflow_logging_tile_histogram_mk1.txt"),
    # GPUs named, no device time recorded at all: nothing to price (an info finding saying so)
    ("host.launches-without-device", "hta_a100_no_device_activity.json.gz"),
}


def _real_inputs() -> list[Path]:
    return real_inputs(roots=(REAL, Path("/work/shared/real")))


def _windows(profile) -> dict[str | None, float]:
    """Each device's window in the time account, by the label a gain names it with, and (None) their sum."""
    runs = account.run_account(profile)
    out: dict[str | None, float] = {None: float(runs["window_us"].sum())} if len(runs) else {}
    for row in runs.to_dict("records"):
        label = f"rank {int(row['rank'])} {row['device']}" if pd.notna(row["rank"]) else str(row["device"])
        out[label] = float(row["window_us"])
    return out


@pytest.mark.parametrize("path", _real_inputs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_finding_is_priced_and_ranked(path):
    for name, profile in popprof.open_all(path).items():
        found = check(profile)
        windows = _windows(profile)
        for f in found:
            gain = f.estimated_gain
            if (f.rule_id, path.name) in UNPRICED:
                assert gain is None, (name, f.rule_id)
                continue
            assert gain is not None, (name, f.rule_id, f.message)
            assert f.figure and f.share is not None and 0.0 <= f.share <= 1.0, (name, f.rule_id, f.share)
            assert gain.basis and gain.unit in ("us", "bytes") and gain.whole and gain.whole > 0
            assert 0.0 <= gain.value <= gain.whole, (name, f.rule_id, gain)
            assert set(gain.rests_on) <= set(PARTS)  # the time account's part names
            if gain.unit == "us":
                assert gain.rests_on, (name, f.rule_id)
                # no error for a sliver of the run: an error on time rests on at least 30 % of its whole (the
                # B200 decode's exchange.phases was one at 0.8 %); memory errors (out of memory, no headroom)
                # are errors whatever their share
                assert f.severity != "error" or f.share >= 0.3, (name, f.rule_id, f.share)
                # the share's words are true: of the named device's window, or of the devices' windows pooled
                if gain.of is None:
                    window = windows[gain.device]
                    assert gain.whole == pytest.approx(window, rel=1e-9), (name, f.rule_id)
            else:  # a byte gain says whose memory: a tile's, the target's, one replica's
                assert gain.of and gain.whole_words != "the memory", (name, f.rule_id, gain)
            assert f"of {gain.whole_words})" in gain.text() and gain.to_dict()["of"] == gain.whole_words
        priced = [f.estimated_gain.fraction for f in found if f.estimated_gain is not None]
        assert priced == sorted(priced, reverse=True)
        unpriced_at = [i for i, f in enumerate(found) if f.estimated_gain is None]
        assert unpriced_at == list(range(len(priced), len(found.items)))  # after every priced finding


KINETO = ROOT / "fixtures" / "real" / "traces" / "kineto2021_resnet50_worker0.pt.trace.json.gz"


def test_gains_rest_on_the_figures_of_the_real_traces():
    """The gain of each trace finding is no more than the figure it rests on: the device idle time in gaps is
    the message's idle time, exposed communication at most the device's busy time."""
    found = check(popprof.open(KINETO))
    (gaps,) = found.by_rule("host.device-gaps")
    assert gaps.estimated_gain.value == pytest.approx(float(gaps.evidence["dur_us"].sum()))
    assert gaps.estimated_gain.fraction == pytest.approx(gaps.value)
    (long,) = found.by_rule("host.long-events")
    assert long.estimated_gain.value <= gaps.estimated_gain.whole
    # the same idle time is not sold twice: the long events' gain rests on the idle time the gaps' gain
    # (ranked first) has claimed, so it is cut to what is left of the idle parts, and says so
    alone = check(found_profile := popprof.open(KINETO), rules=["host.long-events"]).items[0]
    assert alone.estimated_gain.fraction == pytest.approx(alone.value)
    assert (
        long.estimated_gain.value < alone.estimated_gain.value and "Counted once" in long.estimated_gain.basis
    )
    run_row = account.run_account(found_profile).iloc[0]
    idle = account.idle_us(run_row)
    assert gaps.estimated_gain.value + long.estimated_gain.value <= idle + 1e-6
    run = popprof.open(ROOT / "fixtures" / "real" / "traces" / "two_ranks")
    (share,) = check(run, rules=["exchange.share"]).items
    busy = share.evidence["busy_us"].max()
    # what hiding could remove: the exposed communication less the waits for the last rank (the skew's)
    assert share.estimated_gain.value <= busy and share.estimated_gain.value == pytest.approx(
        share.evidence["transfer_us"].max()
    )
    assert (share.evidence["transfer_us"] < share.evidence["exchange_us"]).all()


def test_two_findings_priced_on_one_device_do_not_sell_its_time_twice():
    """exchange.phases and exchange.share both price the exposed communication that hiding could remove on the
    device with the most of it (rank 4 gpu:4 of the real 8-rank DLRM step: its communication less its waits
    for the last rank); each names that device in its gain, so counted once the two together never exceed that
    device's transfer, however many devices the finding lists."""
    run = popprof.open(ROOT / "fixtures" / "real" / "traces" / "dlrm_8ranks")
    found = check(run, rules=["exchange.phases", "exchange.share"])
    (phases,) = found.by_rule("exchange.phases")
    (share,) = found.by_rule("exchange.share")
    assert phases.estimated_gain.device == share.estimated_gain.device == "rank 4 gpu:4"
    assert len(share.where["devices"]) == 8  # the finding lists every device; its gain is one device's
    per_device = exposed_exchange_per_device(run).set_index("label")
    transfer = float(per_device.loc["rank 4 gpu:4", "transfer_us"])
    claimed = phases.estimated_gain.value + share.estimated_gain.value
    assert claimed <= transfer + 1e-6
    # the phases' transfer lies in the device's: the first ranked takes all of it, the other nothing
    first, second = (
        (share, phases) if found.items.index(share) < found.items.index(phases) else (phases, share)
    )
    assert first.estimated_gain.value == pytest.approx(transfer) and second.estimated_gain.value == 0.0
    assert "Counted once" in second.estimated_gain.basis
    assert share.estimated_gain.to_dict()["device"] == "rank 4 gpu:4"


def test_what_the_subtractions_leave_below_a_picosecond_is_no_gain():
    """On the bundled Mk2 sample exchange.share claims all the exchange + sync time of the mean IPU first; its
    exchange-heavy phases rest on the same time, and what is left for them is the subtractions' rounding
    (3e-13 us before ``RESIDUE_US``): exactly no gain, not a gain of 0.0 us that is not zero."""
    found = check(popprof.open(ROOT / "fixtures" / "mk2_training.popprof"), rules=["exchange.*"])
    (share,) = found.by_rule("exchange.share")
    (phases,) = found.by_rule("exchange.phases")
    assert share.estimated_gain.value > 1000
    assert phases.estimated_gain.value == 0.0 and "Counted once" in phases.estimated_gain.basis
    assert phases.severity == "info" and phases.share == pytest.approx(0.024, abs=0.001)


def test_a_gain_says_whose_window_its_share_is_of():
    """Gains rank by their share of their whole: on the 8-rank DLRM step the collective skew's 45.32 ms (38.6 %
    of the eight windows pooled) ranks above the exposed communication's 213 us (1.3 % of rank 4 gpu:4's window:
    its exposed communication less its waits for the last rank); the text says whose window each share is of,
    so the order reads right."""
    from popprof.report.explain import explained_summary, render_what_limits

    run = popprof.open(ROOT / "fixtures" / "real" / "traces" / "dlrm_8ranks")
    found = check(run, rules=["exchange.share", "distributed.collective-skew"])
    (share,) = found.by_rule("exchange.share")
    (skew,) = found.by_rule("distributed.collective-skew")
    assert share.estimated_gain.device == "rank 4 gpu:4" and skew.estimated_gain.device is None
    text = "\n".join(render_what_limits(explained_summary(run)["what_limits"], 200))
    assert "1. up to 45.32 ms (38.6 % of the devices' windows)  distributed.collective-skew" in text
    # third, the exposed transfer on rank 4 (its phases' and its share's: the same time, counted once)
    assert "3. up to 213.0 us (1.3 % of rank 4 gpu:4's window)  exchange." in text
    # one device: every time gain is taken from its account, and says so
    one = check(popprof.open(ROOT / "fixtures" / "real" / "traces" / "nccl_data.json.gz"))
    timed = [f.estimated_gain for f in one.items if f.estimated_gain and f.estimated_gain.unit == "us"]
    assert timed and {g.device for g in timed} == {"rank 0 gpu:0"}


def test_gains_on_the_same_gaps_count_them_once():
    """host.device-gaps (the gaps of 1 ms and more), host.long-events (the idle during long host events) and
    host.launch-overhead (the gaps under 1 ms before short kernels) say which device time they rest on
    (``Gain.spans``). Counting once takes each gain's spans less those of the gains ranked before it: on
    nccl_data the long events' 87.09 ms of idle lie in the long gaps (all but 0.02 ms), so that gain is cut to
    what is left, while the launch overhead's short gaps, at other times, keep all of theirs. On the 2021
    ResNet-50 the part budgets alone had cut the launch overhead to nothing."""
    from popprof.metrics.launches import launch_overview

    nccl = popprof.open(REAL / "traces" / "nccl_data.json.gz")
    found = check(nccl)
    (gaps,) = found.by_rule("host.device-gaps")
    (long,) = found.by_rule("host.long-events")
    (launch,) = found.by_rule("host.launch-overhead")
    assert launch.estimated_gain.value == pytest.approx(launch_overview(nccl)["short_gaps_us"])
    assert gaps.estimated_gain.value == pytest.approx(float(gaps.evidence["dur_us"].sum()))
    assert (
        long.estimated_gain.value == pytest.approx(20.0, abs=10.0)
        and "Counted once" in long.estimated_gain.basis
    )
    resnet = check(popprof.open(KINETO))
    (launch,) = resnet.by_rule("host.launch-overhead")
    assert launch.estimated_gain.value > 49_000  # of its 51.58 ms of short gaps; the part budgets left 0


@pytest.mark.parametrize(
    "name", ["tracelens_b200_vllm_eager.json.gz", "nccl_data.json.gz", "two_ranks", "dlrm_8ranks"]
)
def test_gains_with_spans_never_sum_above_the_union_of_their_spans(name):
    """Whatever the order, the gains that say where their time lies promise together no more than the device
    time of all those places (per device)."""
    import numpy as np

    from popprof.trace.spans import merge_intervals

    profile = popprof.open(REAL / "traces" / name)
    by_device: dict[str, list] = {}
    promised = 0.0
    for f in check(profile):
        gain = f.estimated_gain
        if gain is None or not gain.spans:
            continue
        promised += gain.value
        for device, (start, end) in gain.spans.items():
            by_device.setdefault(device or gain.device, []).append((start, end))
    assert by_device
    union = 0.0
    for pieces in by_device.values():
        union_start, union_end = merge_intervals(
            np.concatenate([s for s, _ in pieces]), np.concatenate([e for _, e in pieces])
        )
        union += float((union_end - union_start).sum())
    assert promised <= union + 1e-6, name


def test_the_idle_spans_during_events_are_the_idle_during_them():
    from popprof.metrics.gaps import idle_during, idle_spans_during
    from popprof.trace.intervals import device_activities

    profile = popprof.open(KINETO)
    (activity,) = device_activities(profile)
    start = profile.events["start_us"].to_numpy()[:5000]
    end = start + profile.events["dur_us"].to_numpy(na_value=0.0)[:5000]
    spans_start, spans_end = idle_spans_during(activity, start, end)
    assert float((spans_end - spans_start).sum()) == pytest.approx(idle_during(activity, start, end))
    assert (spans_end > spans_start).all() and (spans_start[1:] >= spans_end[:-1]).all()


def test_a_pooled_gain_that_says_where_its_time_lies_is_taken_off_those_devices():
    """distributed.collective-skew is pooled over the ranks but says where its waits lie (per device); counting
    once takes each device's share off that device's budget too. So a later gain on one device's communication
    that does not say where its time lies gets only what the waits left there: on rank 1 of the DLRM step,
    its transfer (0.20 ms of its 11.06 ms of communication), not the whole part again."""
    from popprof.rules.base import Finding, Gain
    from popprof.rules.pricing import count_once

    run = popprof.open(REAL / "traces" / "dlrm_8ranks")
    (skew,) = check(run, rules=["distributed.collective-skew"]).items
    row = account.run_account(run).set_index("rank").loc[1]
    probe = Finding(
        "probe",
        "warning",
        "all of rank 1's communication",
        "",
        estimated_gain=Gain(
            float(row["communication"]),
            "us",
            "rank 1's communication",
            whole=float(row["window_us"]),
            rests_on=("communication",),
            device="rank 1 gpu:1",
        ),
    )
    count_once(run, [skew, probe])
    transfer = exposed_exchange_per_device(run).set_index("label").loc["rank 1 gpu:1", "transfer_us"]
    assert probe.estimated_gain.value == pytest.approx(transfer) == pytest.approx(202.0)
    assert "Counted once" in probe.estimated_gain.basis


def test_the_phases_gain_lies_in_the_phases_less_the_waits():
    """exchange.phases' spans are the exposed communication inside its flagged phases less the waits for the
    last rank: as long as the phases' ``exchange_us`` less their ``skew_us`` on that device."""
    import numpy as np

    from popprof.metrics.collectives import skew_spans
    from popprof.metrics.phases import device_phases, phase_spans
    from popprof.trace.intervals import device_activities

    run = popprof.open(REAL / "traces" / "dlrm_8ranks")
    skew = skew_spans(run)
    checked = 0
    for activity in device_activities(run):
        found, _ = device_phases(
            activity, window_us=0.0, moderate=0.30, high=0.50, top=3, skew=skew.get(activity.label)
        )
        if not found:
            continue
        start, end = phase_spans(activity, found, skew.get(activity.label))
        expected = sum(ph["exchange_us"] - ph["skew_us"] for ph in found)
        # the phases' windows start at t0 + k x width on timestamps of 1.7e15 us, where a double's step is
        # 0.25 us: their sums round by that much per window edge, the spans (whole-us events) do not
        assert float(np.sum(end - start)) == pytest.approx(expected, abs=0.5)
        assert sum(ph["skew_us"] for ph in found) > 0
        checked += 1
    assert checked >= 5


def test_the_account_says_how_much_communication_is_waiting_and_the_skew_gain_is_that_time():
    """ "What limits this run" tells the waits for the last rank apart inside communication, from the same
    spans the collective skew's gain rests on: one figure, read twice (dlrm_8ranks: 38.6 % of the eight
    windows, all but 0.8 % of its 40.0 % of communication)."""
    from popprof.report.explain import explained_summary, render_what_limits

    run = popprof.open(REAL / "traces" / "dlrm_8ranks")
    doc = explained_summary(run)["what_limits"]
    waited = sum(d["waiting_share"] * d["window_us"] for d in doc["devices"])
    (skew,) = [o for o in doc["opportunities"] if o["rule_id"] == "distributed.collective-skew"]
    assert skew["estimated_gain"]["value"] == pytest.approx(waited)
    for d in doc["devices"]:
        assert 0 < d["waiting_share"] <= d["shares"]["communication"]
    text = "\n".join(render_what_limits(doc, 80))
    assert "communication 40.0 % (38.6 % waiting for the last rank)" in text
    # one rank waits for nobody: no such words
    single = explained_summary(popprof.open(REAL / "traces" / "nccl_data.json.gz"))["what_limits"]
    assert all("waiting_share" not in d for d in single["devices"])
    assert "waiting for the last rank" not in "\n".join(render_what_limits(single, 80))
