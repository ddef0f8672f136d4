"""Device gaps that began with the host blocked on the device (``metrics.gaps.gaps_after_waits``), as
``host.device-gaps`` says them, on real traces.

A synchronisation (a synchronous ``cudaMemcpy``, ``cudaStreamSynchronize`` under ``.item()``) returns when the
device has run out of work, and nothing was launched ahead of it: the gap that follows is the queue the wait
drained. Each figure is recomputed here from the events with a plain loop over the finding's gaps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from popprof.metrics.gaps import gaps_after_waits
from popprof.readers import read_path
from popprof.rules import RULES, check
from popprof.rules.host import DRAINED_ADVICE
from popprof.trace.intervals import HostEvents

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
SAXPY = REAL / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
SIMPLE_ADD = REAL / "traces" / "hta_simple_add.json.gz"
RESNET = REAL / "traces" / "kineto2021_resnet50_worker0.pt.trace.json.gz"


def _device_gaps(path: Path):
    profile = read_path(path)
    (finding,) = [f for f in check(profile) if f.rule_id == "host.device-gaps"]
    return profile, finding


def _after_waits_by_loop(profile, gaps: pd.DataFrame) -> list[str | None]:
    """For each gap, the name of the host call blocking on the device that began at or before the gap's start
    and returned inside it (the earliest begun), else None: the definition, one gap and one call at a time."""
    events = profile.events
    waits = events[events["device_category"] == "host_wait"]
    out = []
    for gap in gaps.itertuples():
        best = None
        for call in waits.itertuples():
            end = call.start_us + (0.0 if pd.isna(call.dur_us) else call.dur_us)
            if call.start_us <= gap.start_us <= end <= gap.end_us and (
                best is None or call.start_us < best[0]
            ):
                best = (call.start_us, str(call.name))
        out.append(None if best is None else best[1])
    return out


def test_every_gap_of_the_saxpy_export_follows_its_synchronous_copy() -> None:
    """pipit's MPI + CUDA saxpy copies back with a synchronous ``cudaMemcpy`` (pageable): each of its four gaps
    of 1 ms and more begins as that copy returns, so the advice leads with the drained queue."""
    profile, finding = _device_gaps(SAXPY)
    gaps = finding.evidence
    expected = _after_waits_by_loop(profile, gaps)
    assert expected == ["cudaMemcpy"] * 4
    assert [None if pd.isna(v) else str(v) for v in gaps["after_wait"]] == expected
    idle = gaps["dur_us"].sum()
    assert round(idle / 1000, 2) == 723.59
    flat = " ".join(finding.message.split())
    assert (
        "4 gaps (723.59 ms, 100.0 % of that idle) began with the host blocked on device (cudaMemcpy outside any "
        "operator 723.59 ms): nothing had been launched ahead of the wait" in flat
    )
    assert finding.advice == f"{DRAINED_ADVICE} {RULES['host.device-gaps'].advice_for('gpu')}"


def test_hta_simple_add_gaps_after_its_synchronisations() -> None:
    """HTA's simple-add trace synchronises with ``cudaStreamSynchronize`` and ``cudaDeviceSynchronize``: 10 of
    its 23 counted gaps begin in one, a minority of the idle time, so the rule's own advice stands."""
    profile, finding = _device_gaps(SIMPLE_ADD)
    gaps = finding.evidence
    expected = _after_waits_by_loop(profile, gaps)
    got = [None if pd.isna(v) else str(v) for v in gaps["after_wait"]]
    assert got == expected
    named = pd.Series([v for v in expected if v is not None]).value_counts().to_dict()
    assert named == {"cudaStreamSynchronize": 6, "cudaDeviceSynchronize": 4}
    drained = float(gaps.loc[gaps["after_wait"].notna(), "dur_us"].sum())
    share = drained / float(gaps["dur_us"].sum())
    assert 0 < share < 0.5
    assert (
        f"10 gaps ({drained / 1e6:.3f} s, {100 * share:.1f} % of that idle) began with the host blocked"
        in (" ".join(finding.message.split()))
    )
    assert finding.advice == RULES["host.device-gaps"].advice_for("gpu")


def test_no_gap_of_resnet50_follows_a_wait() -> None:
    """The 2021 ResNet-50 trace's gaps are the data loader's: none begins with the host blocked."""
    profile, finding = _device_gaps(RESNET)
    assert _after_waits_by_loop(profile, finding.evidence) == [None] * len(finding.evidence)
    assert finding.evidence["after_wait"].isna().all()
    assert "began with the host blocked" not in finding.message


def _waits(start: list[float], dur: list[float], names: list[str]) -> HostEvents:
    n = len(start)
    return HostEvents(
        event_id=np.arange(n, dtype=np.int64),
        parent_id=np.full(n, np.nan),
        depth=np.zeros(n, dtype=np.int16),
        pid=np.ones(n, dtype=np.int64),
        tid=np.ones(n, dtype=np.int64),
        name=pd.Categorical(names),
        start=np.array(start, dtype=np.float64),
        dur=np.array(dur, dtype=np.float64),
        rank=np.full(n, -1, dtype=np.int64),
        waits=np.ones(n, dtype=bool),
    )


@pytest.mark.parametrize(
    ("start", "dur", "expected"),
    [
        ([5.0], [5.0], [0, -1]),  # in progress at gap 0's start (10), returned inside it (at 10)
        ([10.0], [3.0], [0, -1]),  # begun exactly at the gap's start: in progress then
        ([11.0], [2.0], [-1, -1]),  # begun inside the gap: the calls' own cost, not a drained queue
        ([5.0], [20.0], [-1, -1]),  # returned after the gap's end: the host was blocked through it
        ([5.0], [4.0], [-1, -1]),  # returned before the gap began: the device was still busy
        ([25.0, 28.0, 29.0], [10.0, 3.0, 6.0], [-1, 0]),  # two in progress at gap 1: the first begun
    ],
)
def test_gaps_after_waits_cases(start: list[float], dur: list[float], expected: list[int]) -> None:
    gs, ge = np.array([10.0, 30.0]), np.array([20.0, 40.0])
    got = gaps_after_waits(_waits(start, dur, [f"c{i}" for i in range(len(start))]), gs, ge)
    assert got.tolist() == expected


def _what_limits(path: Path) -> dict:
    from popprof.report.explain import explained_summary

    return explained_summary(read_path(path))["what_limits"]


def test_what_limits_names_the_drained_gaps_with_the_findings_figures() -> None:
    """The summary's "What limits this run" names the gaps a synchronisation drained from the finding's own
    evidence: the same count, time and share as ``host.device-gaps`` says (one definition), in 80 columns."""
    from popprof.report.explain import render_what_limits

    profile, finding = _device_gaps(SIMPLE_ADD)
    gaps = finding.evidence
    after = gaps["after_wait"].notna()
    limits = _what_limits(SIMPLE_ADD)
    (entry,) = limits["drained_gaps"]
    assert (entry["rank"], entry["device"], entry["gaps"], entry["of_gaps"]) == (0, "gpu:0", 10, 23)
    assert entry["drained_us"] == pytest.approx(float(gaps.loc[after, "dur_us"].sum()))
    assert entry["idle_us"] == pytest.approx(float(gaps["dur_us"].sum()))
    by_call = gaps[after].groupby("after_wait", observed=True)["dur_us"].sum().sort_values(ascending=False)
    assert [c["call"] for c in entry["calls"]] == ["cudaDeviceSynchronize", "cudaStreamSynchronize"]
    assert [c["us"] for c in entry["calls"]] == pytest.approx(by_call.to_list())
    lines = render_what_limits(limits)
    assert all(len(line) <= 80 for line in lines)
    text = " ".join(" ".join(lines).split())
    share = entry["drained_us"] / entry["idle_us"]
    assert (
        f"Idle after a wait on rank 0 gpu:0 (host.device-gaps): 10 of 23 gaps ({entry['drained_us'] / 1e6:.3f} s, "
        f"{100 * share:.1f} % of that idle) began with the host blocked on device (cudaDeviceSynchronize"
        in text
    )
    # the rule's message says the same figures
    assert f"({entry['drained_us'] / 1e6:.3f} s, {100 * share:.1f} % of that idle)" in " ".join(
        finding.message.split()
    )


def test_what_limits_says_every_saxpy_gap_followed_its_copy_and_nothing_for_resnet() -> None:
    """pipit's saxpy: all 4 gaps follow the synchronous ``cudaMemcpy``; ResNet-50's data-loader gaps follow no
    wait, and HTA's AlexNet steps drain under the note's 10 %: neither gets the line."""
    (entry,) = _what_limits(SAXPY)["drained_gaps"]
    assert (entry["gaps"], entry["of_gaps"], round(entry["share"], 6)) == (4, 4, 1.0)
    assert round(entry["drained_us"] / 1000, 2) == 723.59
    assert [c["call"] for c in entry["calls"]] == ["cudaMemcpy"]
    assert "drained_gaps" not in _what_limits(RESNET)
    alexnet = REAL / "traces" / "hta_alexnet_first_steps.json.gz"
    _, finding = _device_gaps(alexnet)
    after = finding.evidence["after_wait"].notna()
    assert after.sum() > 0  # it has drained gaps, too few of its idle to be named
    assert finding.evidence.loc[after, "dur_us"].sum() < 0.10 * finding.evidence["dur_us"].sum()
    assert "drained_gaps" not in _what_limits(alexnet)
