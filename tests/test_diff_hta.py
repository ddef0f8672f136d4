"""popprof's per-name comparison of two traces against HolisticTraceAnalysis's ``TraceDiff`` on HTA's own test
pair (``tests/data/trace_compare``, here ``fixtures/real/traces/hta_trace_compare_{base,test}.json.gz``).

HTA's figures come from ``fixtures/real/traces/hta_reference.json`` (``trace_diffs``, written by
``make_hta_reference.py``). HTA's ``compare_traces`` counts the events of one rank in the iterations it is given
(by default the first only); popprof compares every event of the trace (every rank, per profiler step when the
step counts differ), so its per-name figures are HTA's ``get_ops_summary`` over the whole trace
(``whole_trace``), with the ``ProfilerStep#N`` annotations as one name (docs/diff.md, "HolisticTraceAnalysis's
TraceDiff").
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import popprof
from popprof.cli import main

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
BASE = REAL / "hta_trace_compare_base.json.gz"
NEW = REAL / "hta_trace_compare_test.json.gz"
HTA = json.loads((REAL / "hta_reference.json").read_text("utf-8"))["trace_diffs"]["hta_trace_compare"]


def _hta_whole(side: str) -> dict[str, tuple[int, float]]:
    """HTA's counts and summed durations per name over every event, the step annotations as one name."""
    out: dict[str, tuple[int, float]] = {}
    for name, figures in HTA["whole_trace"][side].items():
        key = "ProfilerStep#*" if name.startswith("ProfilerStep#") else name
        count, total = out.get(key, (0, 0.0))
        out[key] = (count + figures["count"], total + figures["total_us"])
    return out


@pytest.fixture(scope="module")
def result():
    return popprof.diff(BASE, NEW)


def test_the_reference_is_of_these_files() -> None:
    assert (HTA["control"], HTA["test"]) == (BASE.name, NEW.name)


@pytest.mark.parametrize(("side", "hta_side"), [("base", "control"), ("new", "test")])
def test_counts_and_totals_per_name_are_htas(result, side: str, hta_side: str) -> None:
    events = result.events.set_index("name")
    ours = {
        name: (int(row[f"{side}_count"]), float(row[f"{side}_total"]))
        for name, row in events.iterrows()
        if not math.isnan(row[f"{side}_count"])
    }
    assert ours == _hta_whole(hta_side)


def test_added_and_removed_names_are_htas(result) -> None:
    ops = HTA["ops_diff_every_iteration"]
    status = result.events.set_index("name")["status"]
    assert (
        sorted(status[status == "added"].index)
        == ops["added"]
        == sorted(["All2All_Pooled_Req", "AddmmBackward0", "CatBackward0"])
    )
    assert sorted(status[status == "removed"].index) == ops["deleted"] == []


def test_changes_inside_the_iterations_are_htas(result) -> None:
    """HTA over every iteration leaves out the events it puts in none (5 of 6 kernels of the pair): its totals
    are smaller, but on this pair every change lies inside the iterations, so the changes agree."""
    events = result.events.set_index("name")
    for name, figures in HTA["every_iteration"].items():
        if name.startswith("ProfilerStep#"):
            continue
        row = events.loc[name]
        hta_change = figures["test_total_duration"] - figures["control_total_duration"]
        assert row["change"] == hta_change, name
        ours = (0 if math.isnan(row["new_count"]) else row["new_count"]) - (
            0 if math.isnan(row["base_count"]) else row["base_count"]
        )
        assert ours == figures["test_counts"] - figures["control_counts"], name
    kernel = next(n for n in HTA["every_iteration"] if "CUDAFunctor_add<int>" in n)
    assert (events.loc[kernel, "base_count"], events.loc[kernel, "new_count"]) == (3, 2)
    assert (
        HTA["every_iteration"][kernel]["control_counts"],
        HTA["every_iteration"][kernel]["test_counts"],
    ) == (
        2,
        1,
    )


def test_device_names_are_htas_gpu_events(result) -> None:
    """HTA's ``DeviceType.GPU`` (events on a stream) against popprof's ``where``: the same names, the rest host."""
    gpu = set(HTA["whole_trace_gpu_names"]["control"]) | set(HTA["whole_trace_gpu_names"]["test"])
    where = result.events.set_index("name")["where"]
    assert set(where[where == "device"].index) == gpu and len(gpu) == 6
    assert set(where[where != "device"]) == {"host"}


def test_bookkeeping_is_left_out_of_the_names(tmp_path: Path) -> None:
    """The profiler's recording window is no work of the run; HTA drops it too. The pair has none, so it is
    added here to the real base file's events, as Kineto writes it."""
    import gzip

    doc = json.loads(gzip.decompress(BASE.read_bytes()))
    start = min(e["ts"] for e in doc["traceEvents"])
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": start,
            "dur": 900000,
        }
    )
    (tmp_path / "with_window.json").write_text(json.dumps(doc))
    result = popprof.diff(BASE, tmp_path / "with_window.json")
    assert "PyTorch Profiler (0)" not in set(result.events["name"])
    assert set(result.events["status"]) == {"unchanged"}


def test_the_cli_names_the_changes(capsys) -> None:
    assert main(["diff", str(BASE), str(NEW), "--no-gate"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    flat = " ".join(out.split())  # laid out for 80 columns: long lines wrap, names go on lines of their own
    assert "events (by name, total duration): 0 grown, 2 shrunk, 3 added, 0 removed" in flat
    assert "  All2All_Pooled_Req\n" in out and "  nccl:all_reduce\n" in out
    # a metric whose name leaves its figures no room beside it: the name alone, the figures under it
    assert "\n  trace.device_time_us.compute\n                 " in out
    # three kernels of the pair read "void at::native::vectorized_elementwise_kernel<...>(...)" shortened: the
    # one that changed is shown with the argument that tells it apart
    assert (
        "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<int>, ...>(...) 3 2 12.0 us"
        in flat
    )
    assert "kernel<...>(...)" not in out
    assert out.count("  host\n") == 4 and "  -33.33 %  shrunk  device\n" in out


def test_markdown_names_the_changed_kernel_apart_too(capsys) -> None:
    assert main(["diff", str(BASE), str(NEW), "--no-gate", "--format", "markdown"]) == 0
    assert "`void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<int>, ...>(...)`" in (
        capsys.readouterr().out
    )


def test_runs_of_different_rank_counts_are_noted() -> None:
    """HTA compares one rank of each side; popprof every rank, so two runs of 2 and 8 ranks (the real
    ``two_ranks`` and ``dlrm_8ranks``) add their totals over different numbers of ranks: a note says so."""
    result = popprof.diff(REAL / "two_ranks", REAL / "dlrm_8ranks")
    assert any(
        n.startswith("the two sides hold different numbers of ranks (base 2, new 8)") for n in result.notes
    )
    same = popprof.diff(REAL / "two_ranks" / "rank-0.json.gz", NEW)  # one rank each (rank 0, rank 1)
    assert not any("numbers of ranks" in n for n in same.notes)


def test_events_on_device_is_htas_gpu_comparison(capsys) -> None:
    gpu = set(HTA["whole_trace_gpu_names"]["control"]) | set(HTA["whole_trace_gpu_names"]["test"])
    device = popprof.diff(BASE, NEW, events_on="device")
    assert set(device.events["name"]) == gpu
    assert device.events.set_index("name")["status"].value_counts().to_dict() == {"unchanged": 5, "shrunk": 1}
    assert any(n.startswith("events: device work only") for n in device.notes)
    host = popprof.diff(BASE, NEW, events_on="host")
    assert set(host.events["name"]) == set(popprof.diff(BASE, NEW).events["name"]) - gpu
    with pytest.raises(ValueError, match="events_on"):
        popprof.diff(BASE, NEW, events_on="gpu")
    assert main(["diff", str(BASE), str(NEW), "--no-gate", "--events-on", "device"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "events (by name, total duration): 0 grown, 1 shrunk, 0 added, 0 removed, 5 unchanged" in out
    assert "nccl:all_reduce" not in out and "CUDAFunctor_add<int>" in out
