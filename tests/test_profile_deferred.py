"""Tables a reader builds on first use (model.profile.Deferred): a trace's flows are built only by what reads
them; summary and check never do."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from real_inputs import NOT_CHROME

from popprof.metrics.summary import summarise
from popprof.model.errors import MissingTableError
from popprof.model.profile import Deferred, Profile
from popprof.readers import chrome
from popprof.readers.chrome import plan as chrome_plan
from popprof.testing import trace_synth as synth


def _counters(calls: list) -> Deferred:
    def build() -> pd.DataFrame:
        calls.append(1)
        return pd.DataFrame({"pid": [1, 1], "name": ["mem", "mem"], "series": ["a", "a"], "ts_us": [0.0, 1.0],
                             "value": [3.0, 4.0]})  # fmt: skip

    return Deferred(2, build)


def test_a_deferred_table_is_built_once_when_first_read() -> None:
    calls: list = []
    profile = Profile("p", {"counters": _counters(calls)})
    assert profile.has("counters") and "counters" in profile and profile.table_names == ["counters"]
    assert profile.rows("counters") == 2 and "counters[2]" in repr(profile)
    assert calls == []  # none of that built it
    first = profile.counters
    assert calls == [1] and len(first) == 2 and str(first["name"].dtype) == "category"  # conformed
    assert profile.get("counters") is first and profile.tables["counters"] is first and calls == [1]
    copy = profile.copy()
    assert copy.counters.equals(first)
    with pytest.raises(MissingTableError):
        profile.table("events")


def test_a_copy_builds_its_own_and_set_table_replaces_a_deferred_one() -> None:
    calls: list = []
    profile = Profile("p", {"counters": _counters(calls)})
    copy = profile.copy()
    assert calls == []
    assert len(copy.counters) == 2 and calls == [1]
    assert len(profile.counters) == 2 and calls == [1, 1]  # the original builds its own
    calls.clear()
    replaced = Profile("p", {"counters": _counters(calls)})
    replaced.set_table("counters", None)
    assert not replaced.has("counters") and "counters" not in replaced and calls == []


def test_a_traces_flows_are_built_only_when_read(tmp_path: Path) -> None:
    path = synth.write_chrome_trace(tmp_path / "k.json", 3, seed=2, args="kineto", layers=6)
    profile = chrome.read(path, parallel=False)
    rows = profile.rows("flows")
    assert rows > 0 and int(profile.meta["chrome.flows"]) == rows
    summarise(profile)
    assert "flows" in profile._deferred  # summary read everything it shows without them
    flows = profile.flows
    assert len(flows) == rows and "flows" not in profile._deferred
    assert profile.flows is flows  # built once


REAL_TRACES = sorted(
    p
    for p in (Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces").glob("*.json.gz")
    if p.name not in NOT_CHROME
)


@pytest.mark.parametrize("path", REAL_TRACES, ids=lambda p: p.name)
def test_a_read_that_counts_flows_gives_every_table_of_a_full_read(path: Path) -> None:
    """flows_on_use: the flows are counted in the pass and read from the file on first use; every table and
    every metadata entry equal those of a read that kept them (real Kineto, CUPTI, ROCm and CPU-only traces)."""
    full = chrome.read(path, parallel=False)
    counted = chrome.read(path, parallel=False, flows_on_use=True)
    assert counted.meta == full.meta
    assert counted.table_names == full.table_names
    assert counted.rows("flows") == full.rows("flows")
    for name in full.table_names:
        assert counted.table(name).equals(full.table(name)), name


def test_a_split_read_that_counts_flows_equals_a_full_one(tmp_path: Path, monkeypatch) -> None:
    from popprof.readers.chrome import split

    path = synth.write_chrome_trace(tmp_path / "k.json", 30, seed=5, args="kineto", layers=4)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(split, "MIN_PIECE_BYTES", path.stat().st_size // 20)
    full = chrome.read(path)
    counted = chrome.read(path, flows_on_use=True)
    assert int(counted.meta["chrome.parse_parts"]) > 2 and counted.meta == full.meta
    assert counted.events.equals(full.events)
    assert "flows" in counted._deferred
    assert counted.flows.equals(full.flows)


def test_flows_read_on_use_refuse_a_file_changed_since(tmp_path: Path) -> None:
    from popprof.io.files import ChangedWhileRead

    path = synth.write_chrome_trace(tmp_path / "k.json", 3, seed=2, args="kineto", layers=6)
    counted = chrome.read(path, parallel=False, flows_on_use=True)
    assert counted.rows("flows") > 0
    text = path.read_text()
    path.write_text(text.replace('"ph":"s"', '"ph":"X"', 1))  # one flow fewer: not the file that was counted
    with pytest.raises(ChangedWhileRead):
        counted.table("flows")


def test_figures_only_commands_count_flows_and_the_rest_read_them(tmp_path: Path, monkeypatch) -> None:
    """summary and check read flows on use (they never show them); export, tables and query read them."""
    from popprof.cli import main
    from popprof.readers.chrome import reading

    path = synth.write_chrome_trace(tmp_path / "k.json", 3, seed=2, args="kineto", layers=6)
    seen: list[bool] = []
    real_read = reading.read

    def spy(*args, **kwargs):
        seen.append(bool(kwargs.get("flows_on_use")))
        return real_read(*args, **kwargs)

    monkeypatch.setattr(reading, "read", spy)
    monkeypatch.setattr(chrome, "read", spy)
    for argv, counts in (
        (["summary", str(path), "--format", "json", "-q", "-o", str(tmp_path / "s.json")], True),
        (["check", str(path), "--fail-on", "never", "-q", "-o", str(tmp_path / "c.txt")], True),
        (["tables", str(path), "-q", "-o", str(tmp_path / "t.txt")], False),
        (["export", str(path), "-q", "-o", str(tmp_path / "k.popprof")], False),
    ):
        seen.clear()
        assert main(argv) == 0, argv
        assert seen and all(flag is counts for flag in seen), (argv, seen)
