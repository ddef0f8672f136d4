"""Tables a reader builds on first use (model.profile.Deferred): a trace's flows are built only by what reads
them; summary and check never do."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from popprof.metrics.summary import summarise
from popprof.model.errors import MissingTableError
from popprof.model.profile import Deferred, Profile
from popprof.readers import chrome
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
    again = chrome.read(path, parallel=False).flows  # built again from a new read: the same table
    assert flows.equals(again)
