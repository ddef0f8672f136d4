"""The generated kineto-layout trace (what benchmarks/bench_trace_hta.py loads) and what popprof keeps of it.

The benchmark's claim "flows and correlation kept" is checked here on the same kind of trace, through
the same call (``popprof.open``), on the split (two-process) parse the benchmark's large file takes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import popprof
from popprof.readers.chrome import plan as chrome_plan
from popprof.testing import trace_synth as synth


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    return synth.write_chrome_trace(
        tmp_path_factory.mktemp("kineto") / "trace.json", 3, seed=5, args="kineto", layers=12
    )


def test_layout_is_kineto_like(trace: Path) -> None:
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert doc["distributedInfo"]["rank"] == 0 and "baseTimeNanoseconds" in doc
    steps = [e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert steps == [
        "ProfilerStep#0",
        "ProfilerStep#1",
        "ProfilerStep#2",
    ]  # a few recorded steps, not thousands
    assert sum(e.get("name") == "aten::linear" for e in events) == 3 * 12  # the model size sets the step size
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and "args" in e]
    gpu = [e for e in events if e.get("pid") == synth.GPU_PID and e.get("ph") == "X"]
    # correlation on both sides, an ac2g flow from each launch (s, on the host) to its GPU event (f)
    assert {e["args"]["correlation"] for e in launches} == {e["args"]["correlation"] for e in gpu}
    ac2g = Counter((e["ph"], e["pid"]) for e in events if e.get("cat") == "ac2g")
    assert ac2g == {("s", synth.HOST_PID): len(gpu), ("f", synth.GPU_PID): len(gpu)}
    fwdbwd = Counter(e["ph"] for e in events if e.get("cat") == "fwdbwd")
    assert fwdbwd == {"s": 3 * 12, "f": 3 * 12}
    assert any(e.get("pid") == "Spans" and e.get("name") == "PyTorch Profiler (0)" for e in events)
    assert (
        synth.events_per_step(12, "kineto") * 3 < len(events) < synth.events_per_step(12, "kineto") * 3 + 20
    )


@pytest.mark.parametrize("split", [False, True], ids=["one-pass", "two-processes"])
def test_open_keeps_flows_and_correlation(trace: Path, monkeypatch, split: bool) -> None:
    if split:
        monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    profile = popprof.open(trace)
    assert profile.meta["chrome.parse_parts"] == ("2" if split else "1")
    raw = json.loads(trace.read_text())["traceEvents"]
    flows, events = profile.flows, profile.events
    assert len(flows) == sum(e["ph"] in ("s", "f") for e in raw)
    assert Counter(zip(flows["channel"].astype(str), flows["phase"].astype(str), strict=True)) == Counter(
        (e["cat"], e["ph"]) for e in raw if e["ph"] in ("s", "f")
    )
    gpu = events[events["device"].notna()]
    assert len(gpu) == sum(e.get("pid") == synth.GPU_PID and e.get("ph") == "X" for e in raw)
    assert (gpu["device"] == "gpu:0").all() and set(gpu["stream"]) == {
        synth.COMPUTE_STREAM,
        synth.NCCL_STREAM,
    }
    launches = events[(events["channel"] == "cuda_runtime") & events["correlation"].notna()]
    assert sorted(launches["correlation"]) == sorted(gpu["correlation"])  # every kernel finds its launch
    ac2g = flows[flows["channel"] == "ac2g"]
    assert set(ac2g["id"].astype(int)) == set(gpu["correlation"])
    assert (events["rank"] == 0).all()
    spans = events[events["name"] == "PyTorch Profiler (0)"]
    assert len(spans) == 1 and bool(spans["bookkeeping"].iloc[0])


def test_members_after_the_event_array_are_kept_by_both_parses(
    trace: Path, tmp_path: Path, monkeypatch
) -> None:
    """Top-level members after ``traceEvents`` (the split's last part stops at the array's end: the plan reads
    them from the file's last megabyte) are in the metadata as a one-pass read has them."""
    doc = json.loads(trace.read_text())
    # (no array after it: a later array's "]" would also close the document, and the split falls back to one pass)
    after = {"traceName": "rank0.pt.trace.json", "displayTimeUnit": "ms", "extra": {"k": {"v": 1}, "s": "]}"}}
    moved = tmp_path / "members_after.json"
    moved.write_text(json.dumps({"schemaVersion": 1, "traceEvents": doc["traceEvents"], **after}))

    def top(profile) -> dict:
        return {k: v for k, v in profile.meta.items() if k.startswith("chrome.top.")}

    one = popprof.open(moved, parallel=False)
    monkeypatch.setattr(chrome_plan, "PARALLEL_MIN_BYTES", 0)
    both = popprof.open(moved)
    assert both.meta["chrome.parse_parts"] == "2"
    assert top(both) == top(one)
    assert {k.removeprefix("chrome.top."): json.loads(v) for k, v in top(both).items()} == {
        "schemaVersion": 1,
        **after,
    }


def test_generated_rank_traces_open_as_one_profile_with_every_rank(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    for rank in range(3):
        synth.write_chrome_trace(
            folder / f"rank-{rank}.json", 2, seed=rank, args="kineto", layers=4, rank=rank, world_size=3
        )
    doc = json.loads((folder / "rank-2.json").read_text())
    assert doc["distributedInfo"] == {"backend": "nccl", "rank": 2, "world_size": 3}
    events = popprof.open(folder).events
    assert sorted(events["rank"].dropna().unique().tolist()) == [0, 1, 2]
