"""Real out-of-memory logs (fixtures/real/poplar): every message read, every number kept; check names the tiles."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import popprof
import popprof.metrics
from popprof.model.errors import InputError
from popprof.readers import detect, oom_log

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "poplar"

#: (compilation, tile, bytes used, capacity, over, line), read off the sample text by hand.
EXPECTED = {
    "tutorials_tut4_oom_message_mk2.txt": [(0, 1, 674_752, 638_976, 35_776, 2)],
    "devito_wave3d_oom_log2_mk2.txt": [(0, 1465, 732_960, 638_976, 93_984, 18)],
    "devito_wave3d_oom_log_mk2.txt": [
        (0, 14, 653_544, 638_976, 14_568, 66),
        (1, 0, 681_240, 638_976, 42_264, 84),
        (2, 0, 736_624, 638_976, 97_648, 102),
    ],
}


def _rows(profile: popprof.Profile) -> list[tuple[int, ...]]:
    frame = profile.out_of_memory
    return [
        tuple(None if pd.isna(v) else int(v) for v in row)
        for row in frame[
            ["compilation", "tile", "bytes_used", "capacity_bytes", "over_bytes", "line"]
        ].itertuples(index=False)
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_message_is_read_with_every_number(name):
    path = REAL / name
    assert detect(path) is oom_log
    profile = popprof.open(path)
    assert _rows(profile) == EXPECTED[name]
    assert profile.target_value("bytes_per_tile") == 638_976
    assert profile.source_format == "oom_log"


def test_metrics_come_from_the_messages():
    profile = popprof.open(REAL / "devito_wave3d_oom_log2_mk2.txt")  # one failed compilation
    m = popprof.metrics.compute(profile)
    assert m["memory.max_tile_incl_gaps_bytes"] == 732_960
    assert m["memory.max_tile_index"] == 1465
    assert m["memory.max_tile_headroom_bytes"] == 638_976 - 732_960
    assert m["memory.tiles_out_of_memory"] == 1  # Poplar names one tile per failed compilation
    assert m["memory.total_incl_gaps_bytes"] is None  # a message gives no totals: unknown, not 0


def test_several_compilations_have_figures_per_compilation_never_one_across_them():
    """The real log's three failures are three benchmarks (4 IPUs of side 302, then 1 and 2 IPUs of other
    sizes): different graphs. No fullest tile, headroom or tile count across them (issue 25 item 9): the
    figures are per compilation, in the out_of_memory table and the summary."""
    from popprof.metrics.summary import summarise
    from popprof.report.summary import render_text

    profile = popprof.open(REAL / "devito_wave3d_oom_log_mk2.txt")
    m = popprof.metrics.compute(profile)
    for key in (
        "max_tile_incl_gaps_bytes",
        "max_tile_index",
        "max_tile_headroom_bytes",
        "tiles_out_of_memory",
    ):
        assert m[f"memory.{key}"] is None, key
    doc = summarise(profile)
    assert doc["memory"]["failed_compilations"] == 3
    assert [(r["compilation"], r["tile"], r["bytes_used"]) for r in doc["memory"]["out_of_memory"]] == [
        (0, 14, 653_544),
        (1, 0, 681_240),
        (2, 0, 736_624),
    ]
    text = render_text(doc)
    assert "failed compilations    3" in text and "fullest tile" not in text
    assert "n/a" not in text  # an out-of-memory log gives the bytes per tile, no totals: no rows of n/a
    assert "  638,976 B (624 KiB) per tile\n" in text
    assert "compilation 2: tile 0 needs 736,624 B" in text


def test_gzip_log_reads_the_same(tmp_path):
    src = REAL / "devito_wave3d_oom_log_mk2.txt"
    gz = tmp_path / "event.log.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert _rows(popprof.open(gz)) == EXPECTED[src.name]


def test_message_deep_in_a_long_log_is_found(tmp_path):
    filler = "".join(f"epoch {i}: loss 0.{i % 97:02d}\n" for i in range(20_000))
    path = tmp_path / "train.log"
    path.write_text(filler + (REAL / "tutorials_tut4_oom_message_mk2.txt").read_text())
    rows = _rows(popprof.open(path))
    assert rows == [(0, 1, 674_752, 638_976, 35_776, 20_002)]


def test_message_repeated_by_a_python_traceback_is_one_failure(tmp_path):
    message = "Out of memory on tile 7: 700,000 bytes used but tiles only have 638,976 bytes of memory"
    text = (
        f"[1,0]<stderr>: terminate called after throwing an instance of 'poplar::graph_memory_allocation_error'\n"
        f"[1,0]<stderr>:   what():  {message}\n"
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        f"poptorch.poptorch_core.Error: In poplar/src/Graph.cpp: {message}\n"
    )
    path = tmp_path / "run.log"
    path.write_text(text)
    profile = popprof.open(path)
    assert _rows(profile) == [(0, 7, 700_000, 638_976, 61_024, 2)]
    assert profile.meta["oom_log.repeated_messages"] == "1"


def test_text_without_a_message_is_not_recognised(tmp_path):
    path = tmp_path / "fine.log"
    path.write_text(
        (REAL / "devito_wave3d_oom_log2_mk2.txt").read_text().replace("Out of memory", "Ran fine")
    )
    with pytest.raises(InputError, match="not a recognised profile format"):
        popprof.open(path)


@pytest.mark.parametrize(
    "line",
    [
        "Out of memory on tile 3: -5 bytes used but tiles only have 638976 bytes of memory",
        "Out of memory on tile 3: 700000 bytes used but tiles only have 0 bytes of memory",
        "Out of memory on tile 3: 99999999999999999 bytes used but tiles only have 638976 bytes of memory",
        "Out of memory on tile 3: 1000 bytes used but tiles only have 638976 bytes of memory",
    ],
)
def test_negative_or_absurd_numbers_exit_2_with_one_line(tmp_path, line):
    path = tmp_path / "bad.log"
    path.write_text("starting\n" + line + "\n")
    before = path.read_bytes()
    result = subprocess.run(
        [sys.executable, "-m", "popprof", "summary", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "line 2" in lines[0]
    assert "Traceback" not in result.stderr
    assert path.read_bytes() == before


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_check_fails_naming_the_tiles(name):
    path = REAL / name
    result = subprocess.run(
        [sys.executable, "-m", "popprof", "check", str(path), "--fail-on", "error", "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    findings = report["profiles"][0]["findings"]
    oom = [f for f in findings if f["rule_id"] == "memory.tile-oom"]
    assert len(oom) == 1 and oom[0]["severity"] == "error"
    tiles = {t for _, t, *_ in EXPECTED[name]}
    assert set(oom[0]["where"]["tiles"]) == tiles
    for _, tile, used, capacity, over, _ in EXPECTED[name]:
        # bytes print as docs/figures.md says: the exact count, then the binary size from 1 KiB on
        size = r"(?: \([0-9.]+ [KMG]iB\))?"
        pattern = rf"tile {tile:,} uses {used:,} B{size} of {capacity:,} B{size} \(over by {over:,} B{size}\)"
        assert re.search(pattern, oom[0]["message"]), oom[0]["message"]


def test_bundle_round_trip_keeps_the_messages(tmp_path):
    profile = popprof.open(REAL / "devito_wave3d_oom_log_mk2.txt")
    out = tmp_path / "oom.popprof"
    popprof.export(profile, out)
    back = popprof.open(out)
    assert _rows(back) == _rows(profile)


def test_sdk2_message_names_no_tile_but_is_an_out_of_memory_failure():
    """SDK 2.1+: 'Out of memory: Cannot fit ... Profile saved to: PATH' (real text, graphcore/tutorials)."""
    path = REAL / "tutorials_tut4_oom_message_sdk2.txt"
    assert detect(path) is oom_log
    profile = popprof.open(path)
    assert _rows(profile) == [(0, None, None, None, None, 2)]
    row = profile.out_of_memory.iloc[0]
    assert row["reason"] == "Cannot fit all variable data onto one or more tiles"
    assert row["profile_path"] == "./report_OOM/profile.pop"
    m = popprof.metrics.compute(profile)
    assert m["memory.tiles_out_of_memory"] == 1  # "one or more tiles": at least one
    assert m["memory.max_tile_incl_gaps_bytes"] is None and m["memory.max_tile_index"] is None
    finding = popprof.check(profile, rules=["memory.tile-oom"]).items[0]
    assert finding.severity == "error" and "tiles" not in finding.where
    assert "Cannot fit all variable data onto one or more tiles" in finding.message
    assert "./report_OOM/profile.pop" in finding.message


def test_a_linux_oom_killer_line_is_not_a_poplar_message(tmp_path):
    path = tmp_path / "kern.log"
    path.write_text("Out of memory: Killed process 4242 (python3) total-vm:9000000kB\n")
    with pytest.raises(InputError, match="not a recognised profile format"):
        popprof.open(path)
