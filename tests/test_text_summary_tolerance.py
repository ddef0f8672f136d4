"""The text summary reader tolerates other layouts, extra fields, missing sections, CRLF and logs around it."""

from __future__ import annotations

import json

import pytest

from popprof.model.errors import InputError
from popprof.readers import detect, open_all, open_profile
from popprof.readers import text_summary as reader
from popprof.testing import synth
from popprof.testing.writers.text_summary import render_text_summary, summary_totals

#: The invented example of the reference facts (section 4), verbatim.
FACTS_EXAMPLE = """\
Target:
  Number of IPUs:         2
  Tiles per IPU:          1,472
  Total Tiles:            2,944
  Memory Per-Tile:        624.0 kB
  Total Memory:           1,794.0 MB
  Clock Speed (approx):   1,330.0 MHz

Memory Usage:
  Total:
    Including Gaps:         812,004,112 B
    Excluding Gaps:
      By Memory Region:
        Non-interleaved:   700,114,000 B
        Interleaved:        60,000,000 B
        Overflowed:              1,024 B
      By Data Type:
          Variables:                       402,100,000 B
          Vertex Code:                      80,200,000 B
  By Tile (Excluding Gaps):
    Range (KB) Histogram (Excluding Gaps)               Count (tiles)
       200 - 300 **************************************  2,900
       600 - 700 *                                          44
    Maximum (Including Gaps): 650,112 (634.9 K) on tile 1,017
    Maximum (Excluding Gaps): 640,000 (625.0 K) on tile 1,017
    3 tile(s) out of memory
"""


def figures(profile) -> dict[tuple, int]:
    frame = profile.memory_totals
    tiles = frame["tile"].astype("Int64").fillna(-1).astype(int)
    return dict(
        zip(
            zip(tiles, frame["group"].astype(str), frame["category"].astype(str), strict=True),
            frame["bytes"].astype(int),
            strict=True,
        )
    )


@pytest.fixture(scope="module")
def profile():
    return synth.make_profile(
        num_ipus=2, oom_tiles=2, num_steps=30, num_programs=40, num_liveness_steps=20, num_variables=5, seed=3
    )


def read_text(tmp_path, text: str, name: str = "summary.txt", newline: str = "\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return open_profile(path)


def test_facts_example(tmp_path):
    p = read_text(tmp_path, FACTS_EXAMPLE)
    fig = figures(p)
    assert fig[(-1, "total", "including_gaps")] == 812_004_112
    assert fig[(-1, "region", "Non-interleaved")] == 700_114_000
    assert fig[(-1, "region", "Overflowed")] == 1_024
    # not printed: summed from the regions, and the metadata says so
    assert fig[(-1, "total", "excluding_gaps")] == 700_114_000 + 60_000_000 + 1_024
    assert "regions" in p.meta["text_summary.derived"]
    assert fig[(-1, "data_type", "Variables")] == 402_100_000
    assert fig[(-1, "data_type", "Vertex Code")] == 80_200_000
    assert fig[(1017, "maximum", "including_gaps")] == 650_112
    assert fig[(1017, "maximum", "excluding_gaps")] == 640_000
    assert p.meta["tiles_out_of_memory"] == "3"
    assert p.tile_histogram.to_dict("list") == {
        "low_bytes": [200 * 1024, 600 * 1024],
        "high_bytes": [300 * 1024, 700 * 1024],
        "num_tiles": [2900, 44],
    }
    assert p.target_value("bytes_per_tile") == 638_976  # 624.0 kB, binary
    assert p.meta["target.total_memory_bytes"] == str(1794 * 1024 * 1024)
    assert p.target_value("clock_hz") == 1.33e9
    assert p.target_value("ipu_arch") == "ipu2"
    assert p.meta["text_summary.unrecognised_count"] == "0"


def test_metrics_read_the_summary(tmp_path):
    from popprof.metrics import compute

    p = read_text(tmp_path, FACTS_EXAMPLE)
    values = compute(
        p,
        [
            "memory.total_incl_gaps_bytes",
            "memory.max_tile_index",
            "memory.tiles_out_of_memory",
            "memory.max_tile_headroom_bytes",
        ],
    )
    assert values == {
        "memory.total_incl_gaps_bytes": 812_004_112,
        "memory.max_tile_index": 1017,
        "memory.tiles_out_of_memory": 3,
        "memory.max_tile_headroom_bytes": 638_976 - 650_112,
    }


@pytest.mark.parametrize(
    "layout",
    [
        {"indent": 4},
        {"indent": 1, "value_column": 0},
        {"value_column": 70, "value_width": 25},
        {"blank_lines": 0},
        {"blank_lines": 3},
        {"vertex_type_colon": True},
        {"newline": "\r\n"},
        {"histogram_bins": 40},
    ],
    ids=lambda d: ",".join(f"{k}={v!r}" for k, v in d.items()),
)
def test_other_layouts_give_the_same_figures(tmp_path, profile, layout):
    from popprof.testing.writers.text_summary import Layout

    text = render_text_summary(profile, layout=Layout(**layout))
    path = tmp_path / "s.txt"
    path.write_bytes(text.encode())
    back = open_profile(path)
    assert figures(back) == figures_of(summary_totals(profile))
    assert back.target_value("num_tiles") == 2944
    assert back.meta["text_summary.unrecognised_count"] == "0"
    assert int(back.tile_histogram["num_tiles"].sum()) == 2944


def figures_of(frame):
    tiles = frame["tile"].astype("Int64").fillna(-1).astype(int)
    return dict(
        zip(
            zip(tiles, frame["group"].astype(str), frame["category"].astype(str), strict=True),
            frame["bytes"].astype(int),
            strict=True,
        )
    )


def test_tabs_and_trailing_spaces(tmp_path):
    text = FACTS_EXAMPLE.replace("  Number of IPUs:", "\tNumber of IPUs:").replace("\n", "   \n")
    p = read_text(tmp_path, text)
    assert p.target_value("num_ipus") == 2
    assert figures(p)[(-1, "total", "including_gaps")] == 812_004_112


def test_extra_fields_are_kept_not_failed(tmp_path, profile):
    from popprof.testing.writers.text_summary import Layout

    text = render_text_summary(
        profile, layout=Layout(extra_fields={"Tiles per Replica": "2,944", "Architecture": "ipu2 (Mk2)"})
    )
    text = text.replace(
        "Memory Usage:\n",
        "Memory Usage:\n  Fragmentation Index:   0.42\n  %% an odd line the reader does not know\n",
    )
    text = text.replace("Graph:\n", "Graph:\n  Number of programs:   1,234\n")
    p = read_text(tmp_path, text)
    extra = json.loads(p.meta["text_summary.extra"])
    assert extra["target/Tiles per Replica"] == "2,944"
    assert extra["target/Architecture"] == "ipu2 (Mk2)"
    assert extra["memory/Fragmentation Index"] == "0.42"
    assert p.meta["text_summary.unrecognised_count"] == "1"
    assert "%% an odd line" in json.loads(p.meta["text_summary.unrecognised"])[0]
    assert figures(p) == figures_of(summary_totals(profile))


def test_unknown_section_is_kept(tmp_path):
    text = FACTS_EXAMPLE.replace(
        "Memory Usage:", "Compilation Flags:\n  opt.level:   3\n  mode:   fast\n\nMemory Usage:"
    )
    p = read_text(tmp_path, text)
    extra = json.loads(p.meta["text_summary.extra"])
    assert extra["other:Compilation Flags/opt.level"] == "3"
    assert figures(p)[(-1, "total", "including_gaps")] == 812_004_112


@pytest.mark.parametrize(
    "sections",
    [("memory", "tiles"), ("target",), ("target", "blocks"), ("memory",), ("target", "graph", "tiles")],
)
def test_missing_sections(tmp_path, profile, sections):
    from popprof.testing.writers.text_summary import Layout

    p = read_text(tmp_path, render_text_summary(profile, layout=Layout(sections=sections)))
    assert json.loads(p.meta["text_summary.warnings"]) == []
    has_target = "target" in sections
    assert (p.target_value("num_tiles") == 2944) if has_target else p.target_value("num_tiles") is None
    assert p.target_value("source_format") == "text_summary"
    expected = figures_of(summary_totals(profile))
    got = figures(p) if p.has("memory_totals") else {}
    whole = {k: v for k, v in expected.items() if k[0] == -1 and k[1] != "maximum"}
    blocks = {k: v for k, v in expected.items() if k[0] != -1 and k[1] != "maximum"}
    maxima = {k: v for k, v in expected.items() if k[1] == "maximum"}
    want = {}
    if "memory" in sections:
        want |= whole
        if "tiles" in sections:
            want |= maxima
    if "blocks" in sections:
        want |= blocks
    assert got == want
    assert p.has("tile_histogram") == ("memory" in sections and "tiles" in sections)


def test_embedded_in_a_log(tmp_path, profile):
    summary = render_text_summary(profile)
    log = (
        "2026-11-30 10:00:01 INFO Compiling graph\n"
        "Graph compilation: 100%|##########| 100/100 [00:42<00:00]\n"
        "Warning: something about the host\n" + summary + "2026-11-30 10:05:13 INFO Epoch 1: loss 0.43\n"
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
    )
    path = tmp_path / "train.log"
    path.write_text(log)
    assert detect(path) is reader
    p = open_profile(path)
    assert figures(p) == figures_of(summary_totals(profile))
    assert p.meta["text_summary.first_line"] == "4"
    assert p.meta["text_summary.unrecognised_count"] == "0"


def test_line_prefix_of_poprun(tmp_path, profile):
    summary = render_text_summary(profile)
    prefixed = "".join(f"[1,0]<stdout>:{line}\n" for line in summary.splitlines())
    log = "[1,0]<stderr>: starting\n" + prefixed + "[1,0]<stdout>: done\n"
    p = read_text(tmp_path, log, name="poprun.log")
    assert p.meta["text_summary.line_prefix"] == "[1,0]<stdout>:"
    assert figures(p) == figures_of(summary_totals(profile))


def test_summary_beyond_the_sniffed_head_of_a_log(tmp_path):
    path = tmp_path / "long.log"
    path.write_text("INFO step done\n" * 8000 + FACTS_EXAMPLE)
    assert path.stat().st_size > 1 << 16
    assert detect(path) is reader
    assert figures(open_profile(path))[(-1, "total", "including_gaps")] == 812_004_112


def test_two_summaries_in_one_log(tmp_path):
    second = FACTS_EXAMPLE.replace("812,004,112", "912,004,112")
    path = tmp_path / "two.log"
    path.write_text(FACTS_EXAMPLE + "INFO next engine\n" + second)
    profiles = open_all(path)  # one profile per summary, named from the label line above it
    assert list(profiles) == ["run_1", "INFO_next_engine"]
    with pytest.raises(InputError, match="holds several profiles"):
        open_profile(path)
    first = open_profile(path, engine="run_1")
    assert figures(profiles["INFO_next_engine"])[(-1, "total", "including_gaps")] == 912_004_112
    assert figures(open_profile(path, summary=1))[(-1, "total", "including_gaps")] == 912_004_112
    assert first.meta["text_summary.summaries_in_file"] == "2"
    assert figures(first)[(-1, "total", "including_gaps")] == 812_004_112
    other = reader.read(path, summary=1)
    assert figures(other)[(-1, "total", "including_gaps")] == 912_004_112
    back_to_back = tmp_path / "b2b.txt"
    back_to_back.write_text(FACTS_EXAMPLE + second)
    assert reader.read(back_to_back, summary=1).meta["text_summary.summaries_in_file"] == "2"


def test_tile_block_with_repeated_memory_usage_heading(tmp_path):
    text = FACTS_EXAMPLE + (
        "\nTile # 1,017 memory usage:\nMemory Usage:\n  Total:\n"
        "    Including Gaps:   650,112 B\n    Excluding Gaps:\n      By Memory Region:\n"
        "        Non-interleaved:   600,000 B\n        Interleaved:   40,000 B\n"
        "        Overflowed:   0 B\n"
    )
    fig = figures(read_text(tmp_path, text))
    assert fig[(1017, "total", "including_gaps")] == 650_112
    assert fig[(1017, "total", "excluding_gaps")] == 640_000
    assert fig[(-1, "total", "including_gaps")] == 812_004_112


def test_overlapped_data_types_are_kept_apart(tmp_path):
    text = FACTS_EXAMPLE.replace(
        "      By Data Type:\n          Variables:                       402,100,000 B\n",
        "      By Data Type:\n        Not Overlapped\n          Variables:   402,100,000 B\n"
        "          Total:   402,100,000 B\n        Overlapped:\n          Variables:   1,000 B\n",
    )
    fig = figures(read_text(tmp_path, text))
    assert fig[(-1, "data_type", "Variables")] == 402_100_000
    assert fig[(-1, "data_type", "Overlapped/Variables")] == 1_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("256.0 kB", 262_144),
        ("624.0 kB", 638_976),
        ("1.5 MB", 1_572_864),
        ("1,794.0 MB", 1_881_145_344),
        ("12 B", 12),
        ("2 GB", 2 << 30),
        ("634.9 K", 650_138),
        ("7", 7),
    ],
)
def test_binary_units(text, expected):
    num, _, unit = text.partition(" ")
    assert reader._size_bytes(num, unit or None) == expected


@pytest.mark.parametrize(
    ("text", "hz"),
    [("1,330.0 MHz", 1.33e9), ("1.85 GHz", 1.85e9), ("1600", 1.6e9), ("1330000000 Hz", 1.33e9)],
)
def test_clock_units(text, hz):
    num, _, unit = text.partition(" ")
    assert reader._hz(num, unit or None) == pytest.approx(hz)


@pytest.mark.parametrize(
    ("tiles", "per_tile", "clock", "arch"),
    [
        (1216, 262_144, 1.6e9, "ipu1"),
        (1472, 638_976, 1.33e9, "ipu2"),
        (1472, 638_976, 1.85e9, "bow"),
        (1472, 638_976, None, None),
        (64, 262_144, 1e9, None),
        (None, None, None, None),
    ],
)
def test_architecture_only_when_unambiguous(tiles, per_tile, clock, arch):
    assert reader.infer_arch(tiles, per_tile, clock) == arch


#: Another shape seen in the wild (invented numbers): replicas in the target, "Total for all Replicas",
#: data types under bare "Not Overlapped" / "Overlapped" sub-headings without a colon, extra data types,
#: narrow histogram bins, blank lines inside the By Tile section.
REPLICATED = """\
Target:
  Number of IPUs:         4
  Tiles per IPU:          1,216
  Total Tiles:            4,864
  Memory Per-Tile:        256.0 kB
  Total Memory:           1,216.0 MB
  Clock Speed (approx):   1,600.0 MHz
  Number of Replicas:     2
  IPUs per Replica:       2
  Tiles per Replica:      2,432
  Memory per Replica:     608.0 MB

Graph:
  Number of vertices:           31,219
  Number of edges:              82,436
  Number of variables:          17,351
  Number of compute sets:          105

Memory Usage:
  Total for all Replicas:
    Including Gaps:         523,876,716 B
    Excluding Gaps:
      By Memory Region:
        Non-interleaved:   402,210,876 B
        Interleaved:        11,000,000 B
        Overflowed:                  0 B
      Total:               413,210,876 B
      By Data Type:
        Not Overlapped
            Variables:                             239,940,000 B
            Program and Sync IDs:                        4,848 B
            Internal Exchange Message Buffers:       3,600,036 B
            Stack:                                  97,280,000 B
            Vertex Code:                            72,385,992 B
          Total:                                   413,210,876 B
        Overlapped
            Variables:                               1,234,567 B
          Total:                                     1,234,567 B
      Vertex Data (14,624 B):
        By Category:
          Internal vertex state:          9,728 B
          Edge pointers:                  4,896 B
          Padding:                            0 B
        By Type:
          poplar_rt::ShortMemcpy                                      14,624 B

  By Tile (Excluding Gaps):
    Range (KB) Histogram (Excluding Gaps)               Count (tiles)
         0 - 8 ****************************************   4,800
         8 - 16 *                                             64

    Maximum (Including Gaps): 187,248 (182.9 K) on tile 0
    Maximum (Excluding Gaps): 110,940 (108.3 K) on tile 0
    0 tile(s) out of memory
"""


def test_replicated_shape_with_bare_subheadings(tmp_path):
    p = read_text(tmp_path, REPLICATED)
    fig = figures(p)
    assert fig[(-1, "total", "including_gaps")] == 523_876_716
    assert fig[(-1, "total", "excluding_gaps")] == 413_210_876
    assert fig[(-1, "data_type", "Variables")] == 239_940_000
    assert fig[(-1, "data_type", "Overlapped/Variables")] == 1_234_567
    assert fig[(-1, "data_type", "Internal Exchange Message Buffers")] == 3_600_036
    not_overlapped = sum(v for (t, g, c), v in fig.items() if g == "data_type" and "/" not in c)
    assert not_overlapped == 413_210_876
    assert fig[(-1, "total", "vertex_data")] == 14_624
    assert fig[(-1, "vertex_type", "poplar_rt::ShortMemcpy")] == 14_624
    assert fig[(-1, "vertex_category", "Padding")] == 0
    assert fig[(0, "maximum", "including_gaps")] == 187_248
    assert p.tile_histogram["high_bytes"].tolist() == [8 * 1024, 16 * 1024]
    assert p.target_value("num_replicas") == 2 and p.target_value("ipus_per_replica") == 2
    assert p.target_value("ipu_arch") == "ipu1"
    assert p.meta["graph.num_compute_sets"] == "105"
    assert p.meta["tiles_out_of_memory"] == "0"
    assert p.meta["text_summary.unrecognised_count"] == "0"
    extra = json.loads(p.meta["text_summary.extra"])
    assert extra["target/Memory per Replica"] == "608.0 MB"
