"""SDK 2.x/3.x memory layouts (built from the format facts): every figure kept, unknown labels as rows."""

from __future__ import annotations

import json
import warnings

import popprof
import popprof.metrics

NEWER = """\
Target:
  Number of IPUs:          1
  Tiles per IPU:       1,472
  Total Tiles:         1,472
  Memory Per-Tile:   624.0 kB
  Clock Speed (approx): 1,330.0 MHz

Memory Usage:
  Total for all IPUs:
    Including Gaps:                   120,000,000 B
    Excluding Gaps:
      By Memory Region:
        Non-interleaved:               80,000,000 B
        Interleaved:                   10,000,000 B
        Overflowed:                     3,000,000 B
      Total:                           93,000,000 B
      By Data Type:
        Not Overlapped
            Variables:                 40,000,000 B
            Program and Sync IDs:           4,416 B
            Internal Exchange Message Buffers: 2,000,000 B
            Host Exchange Message Buffers:     500,000 B
            Constants:                    100,000 B
            Vertex Code:               20,000,000 B
            Control Code:              10,000,000 B
            Stack:                     15,000,000 B
          Total:                       87,604,416 B
        Overlapped
            Variables:                  6,000,000 B
            Internal Exchange Message Buffers: 1,000,000 B
          Total:                        7,000,000 B
          Total After Overlapping:      5,395,584 B
      Vertex Data (3,000,000 B):
        By Category:
          Internal vertex state:        1,000,000 B
          Edge pointers:                2,000,000 B
        By Type:
          poplin::ConvPartial1x1Out<half,float,true,false>   2,500,000 B
          popops::ScaledAdd2D<float>                           500,000 B
      Vertex Code (20,000,000 B):
        By Type:
          poplin::ConvPartial1x1Out<half,float,true,false> (asm):  12,000,000 B
          popops::ScaledAdd2D<float> (c++):                          8,000,000 B
      Instrumentation Results:          6,004 B
  By Tile (Excluding Gaps):
    Range (KB)      Histogram (Excluding Gaps)               Count (tiles)
         0 -    100 ****                                               472
       100 -    200 **********                                       1,000
    Maximum (Including Gaps): 120,000 (117.2 K) on tile 0
    Maximum (Excluding Gaps): 110,000 (107.4 K) on tile 0
    0 tile(s) out of memory
"""


def _figures(profile):
    t = profile.memory_totals
    return {(str(g), str(c)): int(b) for g, c, b in zip(t["group"], t["category"], t["bytes"], strict=True)}


def test_every_figure_of_the_newer_layout_is_kept(tmp_path):
    path = tmp_path / "sdk3.txt"
    path.write_text(NEWER)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = popprof.open(path)
    f = _figures(profile)
    assert f[("total", "including_gaps")] == 120_000_000
    assert f[("total", "excluding_gaps")] == 93_000_000
    assert f[("region", "Non-interleaved")] == 80_000_000
    assert f[("region", "Overflowed")] == 3_000_000
    assert f[("data_type", "Program and Sync IDs")] == 4_416
    assert f[("data_type", "Internal Exchange Message Buffers")] == 2_000_000
    assert f[("data_type", "Host Exchange Message Buffers")] == 500_000
    assert f[("data_type", "Stack")] == 15_000_000
    assert f[("data_type", "Overlapped/Variables")] == 6_000_000
    assert f[("data_type", "Overlapped/Internal Exchange Message Buffers")] == 1_000_000
    assert f[("data_type_total", "Not Overlapped/Total")] == 87_604_416
    assert f[("data_type_total", "Overlapped/Total")] == 7_000_000
    assert f[("data_type_total", "Overlapped/Total After Overlapping")] == 5_395_584
    assert f[("total", "vertex_data")] == 3_000_000
    assert f[("vertex_category", "Edge pointers")] == 2_000_000
    assert f[("vertex_type", "poplin::ConvPartial1x1Out<half,float,true,false>")] == 2_500_000
    assert f[("total", "vertex_code")] == 20_000_000
    assert f[("vertex_code_type", "poplin::ConvPartial1x1Out<half,float,true,false> (asm)")] == 12_000_000
    assert f[("vertex_code_type", "popops::ScaledAdd2D<float> (c++)")] == 8_000_000
    assert f[("other", "Total for all IPUs/Excluding Gaps/Instrumentation Results")] == 6_004
    assert f[("maximum", "including_gaps")] == 120_000
    assert profile.meta["tiles_out_of_memory"] == "0"
    assert json.loads(profile.meta["text_summary.warnings"]) == []
    assert profile.meta["text_summary.unrecognised_count"] == "0"
    m = popprof.metrics.compute(profile)
    assert m["memory.gap_share"] == (120_000_000 - 93_000_000) / 120_000_000
    assert m["memory.category.Stack_bytes"] == 15_000_000
    assert "memory.category.Not Overlapped/Total_bytes" not in m  # subtotals are not categories


def test_bundle_round_trip_keeps_the_newer_rows(tmp_path):
    path = tmp_path / "sdk3.txt"
    path.write_text(NEWER)
    profile = popprof.open(path)
    popprof.export(profile, tmp_path / "b.popprof")
    assert _figures(popprof.open(tmp_path / "b.popprof")) == _figures(profile)
