"""distributed.stragglers follows HolisticTraceAnalysis's definition (issue 25, item 1).

HTA 0.5.0 (``bash benchmarks/setup_hta.sh``; ``TraceAnalysis(trace_dir=D).get_potential_stragglers(
num_candidates=k)``), run side by side on the same directories:

- fixtures/real/traces/dlrm_8ranks (param's 8-rank DLRM step): k=1 -> [7], k=2 -> [2, 7]
- fixtures/real/traces/two_ranks (HTA's sampled ranks): k=1 -> [1], k=2 -> [0, 1]
- generated, rank 2 starts the all-reduce 3 ms late (write_late_rank_run(late={2: 3000})): k=1 -> [2]
  (k=2 -> [0, 1]: every other rank ties at the second value in every iteration and HTA's sort order
  picks among the tied counts)
- generated, ranks 1 and 3 late by 2.5 ms and 1.2 ms: k=1 -> [1], k=2 -> [1, 3]

The rule names the ranks whose late start stands out; they are HTA's candidates for that many ranks.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import popprof
from popprof.metrics.ranks import collective_late_start, straggler_candidates
from popprof.testing.rank_synth import write_late_rank_run

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
HTA_050 = {  # directory -> {num_candidates: answer}
    "dlrm_8ranks": {1: [7], 2: [2, 7]},
    "two_ranks": {1: [1], 2: [0, 1]},
    "late2": {1: [2]},
    "late13": {1: [1], 2: [1, 3]},
}
SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("ranks")
    return {
        "dlrm_8ranks": REAL / "dlrm_8ranks",
        "two_ranks": REAL / "two_ranks",
        "late2": write_late_rank_run(base / "late2", ranks=4, late={2: 3_000.0}),
        "late13": write_late_rank_run(base / "late13", ranks=4, late={1: 2_500.0, 3: 1_200.0}),
    }


def _stragglers(path: Path):
    return popprof.check(popprof.open(path), rules=["distributed.stragglers"])


@pytest.mark.parametrize("name", sorted(HTA_050))
def test_candidates_are_htas(runs, name):
    late = collective_late_start(popprof.open(runs[name]))
    for k, answer in HTA_050[name].items():
        assert sorted(straggler_candidates(late, k)) == sorted(answer), k


def test_the_real_dlrm_run_has_no_straggler_and_the_waiting_ranks_are_not_named(runs):
    """Ranks 1 and 3 start the step first (421.2 and 421.9 ms) and wait in NCCL; every rank's step ends
    within 1 ms. The old rule named ranks 1, 3, 4, 5 and 7 at error ('rank 1 step time +37.7 %')."""
    found = _stragglers(runs["dlrm_8ranks"])
    assert found.evaluated == ["distributed.stragglers"] and found.items == []


def test_the_dlrm_late_starts_are_the_trace_own(runs):
    """The last long SendRecv of step 10, read off the JSON by hand: it ends at 438,300-438,303 us on ranks
    0-3, 6 and 7; rank 7 starts it at 437,944, the others' median start is 437,789 (ranks 0, 1, 2, 3, 6:
    437,789 / 437,758 / 437,834 / 437,759 / 437,817). Ranks 4 and 5 reach the very last SendRecv last but it
    lasts 61 and 10 us there (under 1 % of an iteration), so their last long one is an earlier call."""
    late = collective_late_start(popprof.open(runs["dlrm_8ranks"])).set_index("rank")
    assert late.attrs["collective"] == SENDRECV
    assert late.loc[7, "late_us"] == 437_944 - 437_789
    assert late.loc[[4, 5], "late_us"].isna().all()
    first = json.loads(gzip.decompress((runs["dlrm_8ranks"] / "rank-7.json.gz").read_bytes()))
    starts = [e["ts"] for e in first["traceEvents"] if e.get("name") == SENDRECV]
    assert late.loc[7, "start_us"] == max(starts) == 1_694_128_201_437_944


def test_a_late_rank_is_named_alone_at_error(runs):
    (f,) = _stragglers(runs["late2"]).items
    assert f.where["ranks"] == [2] == HTA_050["late2"][1]
    assert f.severity == "error" and f.value == pytest.approx(0.30, abs=0.005) and f.threshold == 0.25
    assert "rank 2 3.00 ms (0.30 of an iteration)" in f.message and "-0.00" not in f.message


def test_two_late_ranks_are_htas_two_candidates_and_the_early_ones_are_said_apart(runs):
    (f,) = _stragglers(runs["late13"]).items
    assert f.where["ranks"] == [1, 3] == HTA_050["late13"][2]
    assert "rank 1 2.50 ms" in f.message and "rank 3 1.20 ms" in f.message
    assert "first to arrive, waiting longest (not the cause): ranks 0, 2" in f.message


def test_the_real_two_ranks_have_no_straggler(runs):
    found = _stragglers(runs["two_ranks"])
    assert found.evaluated == ["distributed.stragglers"] and found.items == []
    late = collective_late_start(popprof.open(runs["two_ranks"]))
    # step 551's SendRecv ends 134 ms apart on the two ranks (not one collective); step 552: rank 1 +22.3 ms
    assert late[late["iteration"] == 551]["late_us"].isna().all()
    assert late.set_index(["iteration", "rank"]).loc[(552, 1), "late_us"] == pytest.approx(22_328.0)
