"""CUPTI range-profiler traces: each kernel's hardware counters and operators, equal to HTA 0.5.0's counter
analysis on its own test trace (fixtures/real/traces/hta_counters_reference.json), and the summary saying the
trace's times are the profiler's."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.cli import main
from popprof.metrics import counters
from popprof.metrics.trace_summary import trace_summary

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
TRACE = REAL / "cupti_range_profiler.json.gz"
REFERENCE = json.loads((REAL / "hta_counters_reference.json").read_text())


@pytest.fixture(scope="module")
def profile() -> popprof.Profile:
    return popprof.open(TRACE, with_args=True)


@pytest.fixture(scope="module")
def kernels(profile) -> object:
    return counters.kernel_counters(profile)


def test_the_reference_is_htas_on_this_trace() -> None:
    assert (REFERENCE["tool"], REFERENCE["version"]) == ("HolisticTraceAnalysis", "0.5.0")
    assert REFERENCE["trace"] == TRACE.name and len(REFERENCE["kernels"]) == 77


def test_every_kernel_equals_htas(kernels) -> None:
    """Name, operator stack (outermost first), top- and bottom-level operator and every counter, in order."""
    assert len(kernels) == len(REFERENCE["kernels"])
    for row, ref in zip(kernels.to_dict("records"), REFERENCE["kernels"], strict=True):
        assert len(row["name"]) == ref["name"]["length"]
        assert hashlib.sha256(row["name"].encode()).hexdigest() == ref["name"]["sha256"]
        assert row["op_stack"] == ref["op_stack"]
        assert (row["top_level_op"], row["bottom_level_op"]) == (ref["top_level_op"], ref["bottom_level_op"])
        for name, value in ref["counters"].items():
            assert row[name] == value


def test_flops_weigh_the_sass_counters_as_hta_does(kernels) -> None:
    weights = {name: float(w) for name, (w, _) in counters.SASS_FLOP_COUNTERS.items()}
    assert weights == REFERENCE["flop_weights"]
    for row, ref in zip(kernels.to_dict("records"), REFERENCE["kernels"], strict=True):
        by_hand = {p: 0.0 for p in counters.PRECISIONS}
        for name, value in ref["counters"].items():
            precision = {"h": "fp16", "f": "fp32", "d": "fp64"}[name.split("_op_")[1][0]]
            by_hand[precision] += REFERENCE["flop_weights"][name] * value
        for precision, value in by_hand.items():
            assert row[f"flops_{precision}"] == value
        assert row["flops"] == sum(by_hand.values())


def test_operators_sum_their_kernels(kernels) -> None:
    table = counters.operator_counters(kernels)
    # HTA's top-level operators of the 77 kernels (the reference's counts)
    expected = {}
    for ref in REFERENCE["kernels"]:
        expected[ref["top_level_op"]] = expected.get(ref["top_level_op"], 0) + 1
    assert dict(zip(table["top_level_op"], table["kernels"], strict=True)) == expected
    assert table["top_level_op"].tolist()[:2] == ["aten::conv2d", "aten::linear"]
    conv = table.iloc[0]
    mine = kernels[kernels["top_level_op"] == "aten::conv2d"]
    assert conv["flops"] == mine["flops"].sum() == pytest.approx(4.987339e10, rel=1e-6)
    assert table["flops"].is_monotonic_decreasing


def test_kernels_without_as_many_launches_are_not_paired(tmp_path: Path) -> None:
    """HTA's pairing needs one cudaLaunchKernel per range: with one launch missing nothing is paired (HTA drops
    the rank), the counters stay."""
    data = json.loads(gzip.decompress(TRACE.read_bytes()))
    events = data["traceEvents"]
    first = next(i for i, e in enumerate(events) if e.get("name") == "cudaLaunchKernel")
    del events[first]
    path = tmp_path / "one_launch_less.json"
    path.write_text(json.dumps(data))
    table = counters.kernel_counters(popprof.open(path, with_args=True))
    assert len(table) == 77 and (table["launch_row"] == -1).all()
    assert table["top_level_op"].isna().all() and table["op_stack"].isna().all()
    assert table["flops"].sum() == pytest.approx(8.023103e10, rel=1e-6)
    section = counters.counters_section(popprof.open(path, with_args=True))
    assert section["paired"] == 0 and section["operators"][0]["top_level_op"] is None


def test_a_trace_without_ranges_has_no_counters() -> None:
    other = popprof.open(REAL / "hta_simple_add.json.gz", with_args=True)
    assert len(counters.range_rows(other)) == 0
    assert counters.kernel_counters(other).empty
    assert counters.counters_section(other) is None and counters.replay_section(other) is None
    assert "counters" not in trace_summary(other)


def test_read_without_args_says_so() -> None:
    """The reader always reads a range-profiler trace's args; a profile whose events lack them (a bundle
    exported from one read elsewhere without them) says so, and still what the replay was."""
    events = popprof.open(TRACE).events
    assert events["args"].notna().any()  # read without being asked
    bare = popprof.Profile("bare", {"events": events.drop(columns="args")})
    assert counters.counters_section(bare) == {"read": False, "kernels": 77}
    assert counters.replay_section(bare) == {"kernels": 77, "ranks": [0], "median_range_us": 121431.0}


def test_summary_reads_the_args_and_says_the_times_are_the_profilers(capsys) -> None:
    assert main(["summary", str(TRACE)]) == 0
    text = capsys.readouterr().out
    assert "Counter replay: 77 kernels recorded by CUPTI's range profiler" in text
    block = text[text.index("Hardware counters (CUPTI range profiler, 77 kernels)") :].splitlines()
    assert "77 of 77 kernels paired with their launch call" in block[1]
    conv = next(line for line in block if line.endswith("aten::conv2d"))
    assert conv.split()[:4] == ["49.9", "GFLOP", "38", "kernels"]
    assert all(len(line) <= 80 for line in block[:12])
    assert main(["summary", str(TRACE), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    section = doc["trace"]["counters"]
    assert section["read"] and section["paired"] == 77 and len(section["counters"]) == 9
    assert section["flops"]["fp64"] == 0.0
    assert section["flops"]["fp16"] + section["flops"]["fp32"] == pytest.approx(
        sum(o["flops"] for o in section["operators"])
    )
    assert doc["what_limits"]["counter_replay"]["median_range_us"] == 121431.0
    assert (
        main(["summary", str(TRACE), "--no-shapes", "--format", "json"]) == 0
    )  # the counters are read anyway
    assert json.loads(capsys.readouterr().out)["trace"]["counters"] == section


def test_the_report_shows_the_counters(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(TRACE), "-o", str(out)]) == 0
    html = out.read_text()
    assert "Counter replay: 77 kernels" in html
    assert '<table class="counters">' in html and "<code>aten::linear</code>" in html
    assert np.isfinite(float(html.split('<td class="num">38</td><td class="num">')[1].split(" GFLOP")[0]))


def test_no_rule_judges_the_replayed_times(profile) -> None:
    """Every rule that reads the trace's events is not evaluated on a range-profiler trace, with the reason;
    the same rules run on an ordinary trace."""
    from popprof.rules import check

    result = check(profile)
    reasons = dict(result.not_evaluated)
    for rule in ("host.device-gaps", "host.launch-overhead", "operations.below-roofline", "host.long-events"):
        assert rule not in result.evaluated
        assert reasons[rule].startswith(
            "needs the run's times: the trace's 77 kernels were replayed by CUPTI"
        )
    assert result.items == []
    ordinary = check(popprof.open(REAL / "hta_simple_add.json.gz"))
    assert {"host.device-gaps", "host.launch-overhead"} <= set(ordinary.evaluated)


def test_names_as_plain_strings_give_the_same_table(kernels) -> None:
    """A table whose names are not the readers' categorical (a frame built by hand) pairs the same launches."""
    again = popprof.open(TRACE, with_args=True)
    events = again.events.copy()
    events["name"] = events["name"].astype(str)
    again.set_table("events", events)
    table = counters.kernel_counters(again)
    assert table["launch_row"].tolist() == kernels["launch_row"].tolist()
    assert table["op_stack"].tolist() == kernels["op_stack"].tolist()
