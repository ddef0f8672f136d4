"""Real execution summaries (fixtures/real/poplar): every figure kept, 'Must enable' missing, shares as printed."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import popprof
import popprof.metrics
from popprof.metrics.summary import summarise
from popprof.readers import detect, text_summary
from popprof.report.summary import render_text

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "poplar"
NAN = float("nan")

#: (category, basis, cycles, printed share, estimated, printed time in us), read off the sample text by hand.
EXPECTED = {
    "examples_tut7_execution_sdk1_mk1.txt": [
        ("total", "total", 8_190_756, NAN, False, 5_119.2),
        ("compute", "total", 5_513_152, NAN, True, NAN),
        ("compute_excluding_idle", "total", 5_334_536, NAN, False, NAN),
        ("exchange", "total", 963_855, NAN, False, NAN),
        ("global_exchange", "total", NAN, NAN, False, NAN),  # "Must enable debug.instrumentExternalExchange"
        ("host_io", "total", 9_952_701_003, NAN, False, NAN),
        ("shared_structure_copy", "total", 0, NAN, False, NAN),
        ("sync", "total", 781_286, NAN, False, NAN),
    ],
    "tutorials_tut6_execution_hw_sdk3.txt": [
        ("total", "total", 25_444_984, NAN, False, 19_131.6),
        ("compute", "tile_average", 28_300.3, 0.001, False, NAN),
        ("exchange", "tile_average", 8_743.1, 0.0, False, NAN),
        ("global_exchange", "tile_average", 0.0, 0.0, False, NAN),
        ("host_io", "tile_average", 2_641_488.4, 0.104, False, NAN),
        ("sync", "tile_average", 135_849.6, 0.005, False, NAN),
    ],
    "tutorials_tut6_execution_ipumodel_sdk3.txt": [
        ("total", "total", 6_681_766, NAN, False, 5_023.9),
        ("compute", "tile_average", 3_801.8, 0.001, False, NAN),
        ("compute_excluding_idle", "tile_average", 3_717.6, 0.001, False, NAN),
        ("exchange", "tile_average", 8_697.4, 0.001, False, NAN),
        ("global_exchange", "tile_average", 0.0, 0.0, False, NAN),
        ("host_io", "tile_average", 6_663_550.8, 0.997, False, NAN),
        ("sync", "tile_average", 1_134.8, 0.0, False, NAN),
    ],
}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_execution_figure_is_kept(name):
    path = REAL / name
    assert detect(path) is text_summary
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complete real section draws no "truncated?" warning
        profile = popprof.open(path)
    totals = profile.execution_totals
    got = list(
        zip(
            totals["category"].astype(str),
            totals["basis"].astype(str),
            totals["cycles"],
            totals["share"],
            totals["estimated"].astype(bool),
            totals["time_us"],
            strict=True,
        )
    )
    assert len(got) == len(EXPECTED[name])
    for row, want in zip(got, EXPECTED[name], strict=True):
        assert row[:2] == want[:2]
        assert _same(row[2], want[2]) and _same(row[3], want[3]) and _same(row[5], want[5]), (row, want)
        assert row[4] == want[4]


def test_must_enable_is_missing_not_zero():
    profile = popprof.open(REAL / "examples_tut7_execution_sdk1_mk1.txt")
    totals = profile.execution_totals
    row = totals[totals["category"] == "global_exchange"].iloc[0]
    assert pd.isna(row["cycles"])
    assert json.loads(profile.meta["text_summary.execution_not_printed"]) == {
        "Total global exchange cycles": "Must enable debug.instrumentExternalExchange"
    }
    m = popprof.metrics.compute(profile)
    assert (
        "execution.summary_share.global_exchange" not in m
        or m["execution.summary_share.global_exchange"] is None
    )
    # exchange share over the figures printed: (963,855 + 781,286) / 8,190,756
    assert m["execution.exchange_and_sync_share"] == pytest.approx((963_855 + 781_286) / 8_190_756)


def test_vertex_cycles_of_the_sdk1_sample():
    vertices = popprof.open(REAL / "examples_tut7_execution_sdk1_mk1.txt").vertex_cycles
    assert list(zip(vertices["vertex_type"], vertices["instances"], vertices["cycles"], strict=True)) == [
        ("DotProductVertex", 50_000, 5_250_000),
        ("ReduceVertex", 10_000, 80_000),
        ("poplar_rt::ShortMemcpy", 63, 4_536),
    ]


@pytest.mark.parametrize(
    "name", ["tutorials_tut6_execution_hw_sdk3.txt", "tutorials_tut6_execution_ipumodel_sdk3.txt"]
)
def test_shares_match_poplars_printed_percentages(name):
    """Poplar's own '(P% of total)' is the reference: the unrounded shares round to it."""
    profile = popprof.open(REAL / name)
    m = popprof.metrics.compute(profile)
    totals = profile.execution_totals
    for cat, printed in zip(totals["category"].astype(str), totals["share"], strict=True):
        if cat == "total":
            continue
        assert round(m[f"execution.summary_share.{cat}"] * 100, 1) == pytest.approx(printed * 100), cat
    assert json.loads(profile.meta["text_summary.programs_executed"]) == ["<anonymous>"]
    assert m["execution.total_cycles"] == totals["cycles"].iloc[0]
    assert m["execution.total_time_us"] == totals["time_us"].iloc[0]


def test_summary_shows_the_execution_section():
    profile = popprof.open(REAL / "tutorials_tut6_execution_hw_sdk3.txt")
    data = summarise(profile)
    e = data["execution"]
    assert e["total_cycles"] == 25_444_984 and e["programs_executed"] == ["<anonymous>"]
    assert e["by_category"]["host_io"]["cycles"] == 2_641_488.4
    text = render_text(data)
    assert "25,444,984" in text and "2,641,488.4" in text and "10.4 %" in text


def test_diff_compares_summary_metrics():
    base = popprof.open(REAL / "tutorials_tut6_execution_ipumodel_sdk3.txt")
    new = popprof.open(REAL / "tutorials_tut6_execution_hw_sdk3.txt")
    metrics = popprof.diff(base, new).metrics.set_index("name")
    assert metrics.loc["execution.total_cycles", "base"] == 6_681_766
    assert metrics.loc["execution.total_cycles", "new"] == 25_444_984
    assert metrics.loc["execution.summary_share.host_io", "new"] == pytest.approx(2_641_488.4 / 25_444_984)


def test_bundle_round_trip_keeps_execution_tables(tmp_path):
    profile = popprof.open(REAL / "examples_tut7_execution_sdk1_mk1.txt")
    out = tmp_path / "exec.popprof"
    popprof.export(profile, out)
    back = popprof.open(out)
    pd.testing.assert_frame_equal(back.execution_totals, profile.execution_totals)
    pd.testing.assert_frame_equal(back.vertex_cycles, profile.vertex_cycles)
    assert popprof.metrics.compute(back)["execution.exchange_and_sync_share"] == pytest.approx(
        popprof.metrics.compute(profile)["execution.exchange_and_sync_share"]
    )


HEALTHY = sorted(EXPECTED)
OOM = [
    "devito_wave3d_oom_log2_mk2.txt",
    "devito_wave3d_oom_log_mk2.txt",
    "tutorials_tut4_oom_message_mk2.txt",
    "tutorials_tut4_oom_message_sdk2.txt",
]


#: Memory and target fragments (issue 25), neither execution summaries nor out-of-memory logs.
FRAGMENTS = [
    "eidf_ipujob_log_target_graph_mk2.txt",
    "tensorflow_logging_target_graph_memory_mk1.txt",
    "tensorflow_logging_tile0_block_mk1.txt",
    "tensorflow_logging_tile_histogram_mk1.txt",
]


def test_every_real_sample_is_covered():
    samples = [p.name for p in REAL.glob("*.txt") if not p.name.startswith("LICENSE-")]
    assert sorted(samples) == sorted(HEALTHY + OOM + FRAGMENTS)


#: A real summary whose dominant cost is an error: the IPU Model spends 99.7 % of the total cycles in host
#: exchange (host.stream-copy on the summary's execution totals).
HOST_BOUND = "tutorials_tut6_execution_ipumodel_sdk3.txt"


def test_check_fails_the_host_bound_real_sample_on_its_stream_copies():
    found = popprof.check(popprof.open(REAL / HOST_BOUND))
    assert found.worst == "error"
    assert [f.rule_id for f in found.at_least("warning")] == ["host.stream-copy"]


def test_check_passes_every_healthy_real_sample():
    healthy = [n for n in HEALTHY if n != HOST_BOUND]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "popprof",
            "check",
            *[str(REAL / n) for n in healthy],
            "--fail-on",
            "error",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert len(report["profiles"]) == len(healthy)
    assert report["totals"]["error"] == 0


def test_check_fails_every_oom_sample():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "popprof",
            "check",
            *[str(REAL / n) for n in OOM],
            "--fail-on",
            "error",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    tiles = {
        p["profile"]: f["where"].get("tiles", [])
        for p in report["profiles"]
        for f in p["findings"]
        if f["rule_id"] == "memory.tile-oom" and f["severity"] == "error"
    }
    assert tiles == {
        "devito_wave3d_oom_log2_mk2": [1465],
        "devito_wave3d_oom_log_mk2": [0, 14],
        "tutorials_tut4_oom_message_mk2": [1],
        "tutorials_tut4_oom_message_sdk2": [],
    }  # SDK 2.1+ names no tile


def test_real_sdk1_section_cut_mid_line_reads_what_is_there(tmp_path):
    text = (REAL / "examples_tut7_execution_sdk1_mk1.txt").read_text()
    cut = text.index("781,286") + len("781,2")  # "Total sync cycles: 781,2" (cut off while pasting)
    path = tmp_path / "cut.txt"
    path.write_text(text[:cut])
    with pytest.warns(text_summary.TruncatedSummaryWarning) as caught:
        profile = popprof.open(path)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "mid-line" in message and "sync" in message and str(path) in message
    totals = profile.execution_totals
    assert "sync" not in set(totals["category"].astype(str))  # the partial "781,2" is not read as 7,812
    assert totals.loc[totals["category"] == "exchange", "cycles"].iloc[0] == 963_855


def test_gzip_log_of_two_real_summaries(tmp_path):
    import gzip

    text = (
        "== IPU Model ==\n"
        + (REAL / "tutorials_tut6_execution_ipumodel_sdk3.txt").read_text()
        + "== IPU hardware ==\n"
        + (REAL / "tutorials_tut6_execution_hw_sdk3.txt").read_text()
    )
    path = tmp_path / "runs.log.gz"
    path.write_bytes(gzip.compress(text.encode()))
    profiles = popprof.open_all(path)
    assert list(profiles) == ["IPU_Model", "IPU_hardware"]
    assert [int(p.execution_totals["cycles"].iloc[0]) for p in profiles.values()] == [6_681_766, 25_444_984]


@pytest.mark.parametrize("name", HEALTHY)
def test_redacted_real_execution_summary_reads_back_the_same_figures(tmp_path, name):
    out = tmp_path / name
    result = subprocess.run(
        [sys.executable, "-m", "popprof", "redact", str(REAL / name), "-o", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "POPPROF_REDACT_KEY": "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"},
    )
    assert result.returncode == 0, result.stderr
    before, after = popprof.open(REAL / name), popprof.open(out)
    pd.testing.assert_frame_equal(after.execution_totals, before.execution_totals)
    if before.has("vertex_cycles"):
        assert after.vertex_cycles["cycles"].tolist() == before.vertex_cycles["cycles"].tolist()
