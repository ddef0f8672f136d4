"""Real Poplar fragments (issue 25, items 2 and 3): a per-tile block is a tile, a histogram fragment is read.

Files: fixtures/real/poplar (provenance and licences in the README there). Expected values are read off the
files by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import popprof
from popprof.metrics import compute
from popprof.readers import detect

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "poplar"
TILE0 = REAL / "tensorflow_logging_tile0_block_mk1.txt"
HISTOGRAM = REAL / "tensorflow_logging_tile_histogram_mk1.txt"
MK1 = REAL / "tensorflow_logging_target_graph_memory_mk1.txt"


def test_a_tile_block_is_that_tile_not_the_device():
    """'Tile # 0 memory usage:' then 'Including Gaps: 834,416 B' and 'Overflowed: 580,387 B'."""
    profile = popprof.open(TILE0)
    totals = profile.memory_totals
    assert totals["tile"].notna().all() and set(totals["tile"]) == {0}
    m = compute(profile)
    assert m.get("memory.total_incl_gaps_bytes") is None  # nothing of the whole device is printed
    assert m["memory.max_tile_incl_gaps_bytes"] == 834_416 and m["memory.max_tile_index"] == 0
    assert m["memory.tiles_out_of_memory"] == 1  # tile 0 overflowed
    (oom,) = popprof.check(profile, rules=["memory.tile-oom"]).items
    assert oom.severity == "error" and oom.where["tiles"] == [0]


def test_a_histogram_fragment_is_read():
    assert detect(HISTOGRAM).FORMAT == "text_summary"
    profile = popprof.open(HISTOGRAM)
    histogram = profile.tile_histogram
    # the rows as printed (KB ranges, tiles), elided '.' rows aside
    assert histogram["num_tiles"].tolist() == [20, 1192, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    assert histogram["low_bytes"].iloc[-1] == 808 * 1024 and histogram["high_bytes"].iloc[-1] == 816 * 1024
    m = compute(profile)
    assert m["memory.max_tile_incl_gaps_bytes"] == 834_416 and m["memory.max_tile_index"] == 0
    assert m["memory.tiles_out_of_memory"] == 2
    (oom,) = popprof.check(profile, rules=["memory.tile-oom"]).items
    assert oom.severity == "error" and oom.value == 2


def test_the_mk1_target_graph_and_memory_sections():
    profile = popprof.open(MK1)
    assert profile.target_value("num_tiles") == 1_216 and profile.target_value("bytes_per_tile") == 256 * 1024
    m = compute(profile)
    assert m["memory.total_incl_gaps_bytes"] == 23_878_396 and m["memory.total_excl_gaps_bytes"] == 5_355_604
    assert m["memory.max_tile_incl_gaps_bytes"] == 49_184 and m["memory.tiles_out_of_memory"] == 0
    assert popprof.check(profile, rules=["memory.tile-oom"]).items == []


@pytest.mark.parametrize("path", [TILE0, HISTOGRAM, MK1], ids=lambda p: p.name)
def test_fragments_check_with_exit_0_or_1(path):
    from click.testing import CliRunner

    from popprof.cli import cli

    result = CliRunner().invoke(cli, ["-q", "check", str(path), "--fail-on", "never"])
    assert result.exit_code == 0, result.output


def test_summary_shows_graph_counts_and_the_data_type_breakdown():
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    mk2 = summarise(popprof.open(REAL / "eidf_ipujob_log_target_graph_mk2.txt"))
    assert mk2["graph"] == {"vertices": 5_466, "edges": 16_256, "variables": 41_059, "compute_sets": 20}
    mk1 = summarise(popprof.open(MK1))
    assert mk1["graph"] == {"vertices": 1_219, "edges": 1_223, "variables": 30_562, "compute_sets": 4}
    by_type = {row["category"]: row["bytes"] for row in mk1["memory"]["by_data_type"]}
    assert by_type["Stack"] == 3_852_288 and by_type["Control Code"] == 851_272 and by_type["Constants"] == 0
    text = render_text(mk1)
    assert "1,219 vertices, 1,223 edges, 30,562 variables, 4 compute sets" in text
    assert "Stack" in text and "3,852,288 B" in text


@pytest.mark.parametrize(
    "path",
    [
        p for p in sorted(REAL.glob("*_mk[12].txt")) if "execution" not in p.name
    ],  # SDK 1.x shares: n/a by design
    ids=lambda p: p.name,
)
def test_summary_prints_no_rows_of_n_a(path):
    """Fragments and logs give a few target and memory figures: summary prints those, no row (or heading)
    without a figure. The
    job log has a Target and a Graph section only: no Memory heading; a tile block has no capacity: its fullest
    tile has no share of a capacity."""
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    text = render_text(summarise(popprof.open(path)))
    assert "n/a" not in text
    if path.name.startswith("eidf_"):
        assert "\nMemory\n" not in text and "\nGraph\n" in text
    if path == TILE0:
        assert "  fullest tile           834,416 B (814.9 KiB) on tile 0\n" in text


def test_a_directory_of_text_summaries_reads_each_and_reports_the_unreadable_one(tmp_path):
    import shutil
    import warnings

    from click.testing import CliRunner

    from popprof.cli import cli
    from popprof.readers import SkippedInputWarning

    for name in (MK1.name, "tutorials_tut6_execution_hw_sdk3.txt"):
        shutil.copy(REAL / name, tmp_path / name)
    (tmp_path / "notes.txt").write_text("not a profile\n", encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiles = popprof.open_all(tmp_path)
    assert sorted(profiles) == [
        "tensorflow_logging_target_graph_memory_mk1",
        "tutorials_tut6_execution_hw_sdk3",
    ]
    (skip,) = [w for w in caught if issubclass(w.category, SkippedInputWarning)]
    assert "notes.txt" in str(skip.message)
    result = CliRunner().invoke(cli, ["-q", "check", str(tmp_path), "--fail-on", "never"])
    assert result.exit_code == 0, result.output


def test_a_directory_with_nothing_readable_is_one_line_exit_2(tmp_path):
    import subprocess
    import sys

    (tmp_path / "notes.txt").write_text("not a profile\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "popprof", "-q", "summary", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 2 and "holds no profile" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_graph_count_out_of_range_is_reported_not_written(tmp_path, capsys):
    """A real log's ``Graph:`` counts with one made 23 digits and one negative (found by a fuzz of the real
    logs): the JSON summary ended in an internal error (``Integer exceeds 64-bit range``) and the text printed
    ``-1 compute sets``. Each is now a figure that does not parse, named in the read's warning; the others
    stay."""
    import json

    from popprof.cli import main

    text = (REAL / "eidf_ipujob_log_target_graph_mk2.txt").read_text()
    text = text.replace(
        "Number of edges:              16,256", "Number of edges:              99999999999999999999999"
    )
    text = text.replace("Number of compute sets:           20", "Number of compute sets:           -1")
    damaged = tmp_path / "log.txt"
    damaged.write_text(text)
    out = tmp_path / "summary.json"
    assert main(["summary", str(damaged), "--format", "json", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "'Number of edges: 99999999999999999999999 (too large)'" in err, err
    assert "'Number of compute sets: -1 (negative)'" in err, err
    assert json.loads(out.read_text())["graph"] == {"vertices": 5466, "variables": 41059}
