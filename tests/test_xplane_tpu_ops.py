"""TPU ops against the roofline from XLA's cost analysis in an XPlane profile (``metrics/tpu_operations.py``).

The figures are read here independently from the protobuf of xprof's TPU v6e profile
(``fixtures/real/xplane/xprof_tpu_v6e_inference.xplane.pb``, Apache 2.0; 4 chips): per HLO op on the ``XLA Ops``
lines, the events' count and summed ``device_duration_ps`` (the device's clock, which xprof's op profile reads),
and its event metadata's ``flops`` and ``bytes_accessed``; then compared with popprof's operations rows.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("google.protobuf")

import popprof  # noqa: E402
from popprof.metrics import operations, peaks, tpu_operations  # noqa: E402
from popprof.readers.xplane.proto import parse  # noqa: E402
from popprof.rules.operations import roofline_frame  # noqa: E402

TPU = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "real"
    / "xplane"
    / "xprof_tpu_v6e_inference.xplane.pb"
)


@pytest.fixture(scope="module")
def expected() -> dict[str, dict]:
    """Per op name over the four chips: ``count``, ``device_ps`` (summed ``device_duration_ps``), ``flops`` and
    ``bytes`` (the metadata's, per call: the same on every chip here) and ``category``."""
    space = parse(TPU, TPU.read_bytes())
    found: dict[str, dict] = defaultdict(lambda: {"count": 0, "device_ps": 0})
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            if line.name != "XLA Ops":
                continue
            for event in line.events:
                metadata = plane.event_metadata[event.metadata_id]
                row = found[metadata.display_name or metadata.name]
                stats = {stat_names[s.metadata_id]: s for s in event.stats}
                row["count"] += 1
                row["device_ps"] += (
                    stats["device_duration_ps"].uint64_value or stats["device_duration_ps"].int64_value
                )
                costs = {stat_names[s.metadata_id]: s for s in metadata.stats}
                row["flops"] = costs["flops"].int64_value
                row["bytes"] = costs["bytes_accessed"].int64_value
                row["category"] = costs["hlo_category"].str_value
    return dict(found)


@pytest.fixture(scope="module")
def profile():
    return popprof.open(TPU)


def test_one_row_per_hlo_op_with_xlas_flops_bytes_and_device_time(expected, profile):
    """Counts, FLOPs and bytes per call exact; the device time to the picosecond; rates within float error."""
    table = operations.operations(profile).set_index("name")
    assert sorted(table.index) == sorted(expected)
    for name, want in expected.items():
        row = table.loc[name]
        assert row["count"] == want["count"], name
        assert row["flops_per_call"] == want["flops"], name
        assert row["bytes_per_call"] == want["bytes"], name
        assert row["category"] == want["category"], name
        assert row["device_time_us"] == pytest.approx(want["device_ps"] / 1e6, rel=1e-12), name
        seconds = want["device_ps"] / 1e12
        assert row["tflops"] == pytest.approx(want["flops"] * want["count"] / seconds / 1e12, rel=1e-9), name
        assert row["tbps"] == pytest.approx(want["bytes"] * want["count"] / seconds / 1e12, rel=1e-9), name


def test_the_real_figures_of_the_top_ops(profile):
    """The host-offload stress test: four ``copy-done`` waits for 5 GiB DMAs to and from host memory take most of
    the time at ~0.028 TB/s (the host link's rate, not HBM's); the three add fusions run at 0.165-0.170 TFLOP/s
    and 1.32-1.36 TB/s, 80-83 % of the chip's HBM bandwidth: memory-bound (0.125 FLOP per byte)."""
    table = operations.operations(profile)
    assert list(table["name"].head(4)) == ["copy-done.4", "copy-done.2", "copy-done", "copy-done.5"]
    fusion = table.set_index("name").loc["broadcast_add_fusion.1"]
    assert fusion["tflops"] == pytest.approx(0.1646, abs=5e-4)
    assert fusion["tbps"] == pytest.approx(1.3166, abs=5e-4)
    assert fusion["intensity"] == pytest.approx(0.125)
    assert fusion["bound"] == "memory"
    assert fusion["peak_tflops"] == 918 and fusion["peak_tbps"] == pytest.approx(1.638)
    records = operations.operation_records(profile, 3)
    assert [r["name"] for r in records] == ["copy-done.4", "copy-done.2", "copy-done"]
    assert set(records[0]) == set(operations.COLUMNS)


def test_the_rows_and_the_events_share_the_device_clock(expected, profile):
    """The events' host-synchronised durations move time between neighbouring ops (14 zero-length ops on TPU 0
    written at the start of a long ``copy-done``; ``copy-done.2`` 22.03 s there, 19.41 s on the device's clock):
    the rows read ``device_duration_ps``, as xprof's op profile, and so do the events (one time per op), which
    then never overlap on a chip."""
    events = profile.events
    on_tpu = events["device"].astype("string").str.startswith("tpu:").fillna(False).to_numpy(dtype=bool)
    timeline = events[on_tpu].groupby(events["name"][on_tpu].astype(str), observed=True)["dur_us"].sum()
    rows = operations.operations(profile).set_index("name")["device_time_us"]
    # every op's device time in total: the same work
    assert rows.sum() == pytest.approx(sum(v["device_ps"] for v in expected.values()) / 1e6, rel=1e-12)
    assert rows.sum() == pytest.approx(timeline.sum(), rel=1e-3)
    # per op the same: each row's time is its events' (a copy's events carry its direction in their name)
    by_op = timeline.rename(
        lambda name: name.split("(")[-1].rstrip(")") if name.startswith("Memcpy") else name
    )
    by_op = by_op.groupby(level=0).sum()
    assert rows.sort_index().to_numpy() == pytest.approx(
        by_op.reindex(rows.sort_index().index).to_numpy(), abs=1e-3
    )
    assert rows["copy-done.2"] == pytest.approx(77.643e6, abs=1e3)
    for _, mine in events[on_tpu].groupby(events["device"][on_tpu].astype(str), observed=True):
        start = mine["start_us"].to_numpy()
        order = start.argsort(kind="stable")
        end = (start + mine["dur_us"].to_numpy())[order]
        assert (start[order][1:] >= end[:-1] - 1e-6).all()  # one op after another


def test_ops_without_cost_stats_keep_their_time(profile):
    """An op whose event metadata carries no cost analysis keeps its count and time, with null FLOPs and bytes,
    rates and bound; a name one chip lacks the figure for is not summed from the others."""
    records = json.loads(profile.meta["xplane.tpu_ops"])
    for record in records:
        if record["name"] == "broadcast_add_fusion":
            for key in ("flops", "bytes_accessed", "model_flops"):
                record.pop(key)
        if record["name"] == "all-reduce" and record["device"] == "tpu:1":
            record.pop("flops")
    bare = popprof.Profile(profile.name, {"events": profile.events}, metadata={**profile.meta})
    bare.update_metadata({"xplane.tpu_ops": json.dumps(records)})
    table = tpu_operations.tpu_operations(bare).set_index("name")
    full = operations.operations(profile).set_index("name")
    row = table.loc["broadcast_add_fusion"]
    assert row["count"] == full.loc["broadcast_add_fusion", "count"]
    assert row["device_time_us"] == full.loc["broadcast_add_fusion", "device_time_us"]
    for key in ("flops_per_call", "bytes_per_call", "tflops", "tbps", "intensity"):
        assert pd.isna(row[key]), key
    assert row["bound"] is None
    assert pd.isna(table.loc["all-reduce", "flops_per_call"])
    assert table.loc["all-reduce", "bytes_per_call"] == full.loc["all-reduce", "bytes_per_call"]


def test_the_chip_resolves_to_its_peak_with_a_source(profile):
    """The TPU plane names the chip ``TPU v6 Lite``; it matches the v6e row, whose source is Google's TPU v6e
    page (918 TFLOP/s bf16, 1638 GB/s), as the plane's own stats say (918, 1637.99 GB/s)."""
    assert peaks.profile_device(profile) == ("TPU v6 Lite", "TPU v6e")
    table = peaks.device_peaks()
    row = table[(table["device"] == "TPU v6e") & (table["dtype"] == "bf16")].iloc[0]
    assert row["source"].endswith("https://docs.cloud.google.com/tpu/docs/v6e")
    assert (row["tflops"], row["memory_tbps"]) == (918, 1.638)
    planes = json.loads(profile.meta["xplane.gpus"])
    assert planes[0]["peak_teraflops_per_second"] == row["tflops"]
    assert planes[0]["peak_hbm_bw_gigabytes_per_second"] / 1e3 == pytest.approx(row["memory_tbps"], abs=1e-3)


@pytest.mark.parametrize(
    ("name", "device"),
    [
        ("TPU v6 Lite", "TPU v6e"),
        ("TPU v6e", "TPU v6e"),
        ("TPU v5 lite", "TPU v5e"),
        ("TPU v5e", "TPU v5e"),
        ("TPU v5", "TPU v5p"),  # JAX's name of a v5p
        ("TPU v5p", "TPU v5p"),
        ("TPU v4", "TPU v4"),
        ("TPU v4 lite", None),  # v4i: not a v4
        ("TPU v3", None),
    ],
)
def test_tpu_chip_kinds_match_their_rows(name, device):
    assert peaks.match_device(name) == device


def test_the_roofline_rule_judges_the_fusions_and_leaves_copies_and_collectives_out(profile):
    """The rule reads the same rows: the fusions at 80-83 % of their roofline (memory) are not slow; copies and
    the all-reduce (the host link's and the interconnect's rate) are left out; no finding on this profile."""
    frame = roofline_frame(profile)
    fusions = frame[frame["category"] == "loop fusion"]
    assert len(fusions) == 3 and (fusions["efficiency"] > 0.8).all()
    found = popprof.check(profile)
    assert not found.by_rule("operations.below-roofline")
    assert "operations.below-roofline" in found.evaluated


def test_summary_json_text_and_report_show_the_tpu_ops(capsys, tmp_path):
    """``summary --format json`` holds the rows (exactly the operations keys); the text names them as a TPU's
    HLO ops from XLA's cost analysis; the HTML report's table likewise."""
    from popprof.cli import main

    assert main(["summary", "--format", "json", str(TPU)]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["operations"]
    assert [r["name"] for r in rows[:4]] == ["copy-done.4", "copy-done.2", "copy-done", "copy-done.5"]
    assert all(set(r) == set(operations.COLUMNS) for r in rows)
    assert doc.get("operations_note") is None
    assert main(["summary", str(TPU)]) == 0
    out = capsys.readouterr().out
    assert "Top TPU ops (device time; FLOPs and bytes: XLA's cost analysis)" in out
    assert "memory  broadcast_add_fusion.1" in out
    assert main(["report", str(TPU), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text("utf-8")
    assert "<h3>TPU ops</h3>" in page and "<th>HLO op</th>" in page
    capsys.readouterr()


def test_the_roofline_plot_draws_the_tpu_ops_under_the_chips_roof(profile):
    """Points coloured by HLO category (``loop fusion``, ``all-reduce``: the ops with FLOPs), the v6e's bf16
    roofline, and a title that says where the figures come from."""
    pytest.importorskip("matplotlib")
    from popprof.plots.roofline import roofline

    fig = roofline(profile)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["loop fusion", "all-reduce", "bf16 roofline"]
    assert "TPU ops (XLA's cost analysis) against the roofline (TPU v6e)" in ax.get_title()


def test_an_unknown_chip_keeps_the_rates_without_a_bound(profile):
    """A chip kind no row matches (``TPU v3``): the rows keep XLA's FLOPs, bytes and the achieved rates; the peak
    and ``bound`` are null, so the rule has nothing to judge."""
    planes = json.loads(profile.meta["xplane.gpus"])
    for plane in planes:
        plane["device_type_string"] = "TPU v3"
    other = popprof.Profile(profile.name, {"events": profile.events}, metadata={**profile.meta})
    other.update_metadata({"xplane.gpus": json.dumps(planes)})
    table = operations.operations(other).set_index("name")
    fusion = table.loc["broadcast_add_fusion.1"]
    assert fusion["tflops"] == pytest.approx(0.1646, abs=5e-4)
    assert fusion["bound"] is None and pd.isna(fusion["peak_tflops"])
    assert roofline_frame(other).empty


def test_slow_tpu_ops_are_named_as_tpu_ops_with_tpu_advice(profile):
    """Fusions made ten times slower (their records' device time) fall to about 8 % of their roofline: the rule
    names them as TPU ops, with advice for a TPU (none of the GPU's CUDA switches)."""
    records = json.loads(profile.meta["xplane.tpu_ops"])
    for record in records:
        if record.get("hlo_category") == "loop fusion":
            record["device_time_ps"] *= 10
    slow = popprof.Profile(profile.name, {"events": profile.events}, metadata={**profile.meta})
    slow.update_metadata({"xplane.tpu_ops": json.dumps(records)})
    (finding,) = popprof.check(slow).by_rule("operations.below-roofline")
    assert finding.title == "TPU ops far below the roofline"
    assert "broadcast_add_fusion" in finding.message and "all-reduce" not in finding.message
    assert "xprof's op profile" in finding.advice and "torch" not in finding.advice
