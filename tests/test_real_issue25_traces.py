"""Real Kineto traces of issue 25 (fixtures/real/traces; provenance and licences in the README there).

Expected values are read off the JSON by hand (counted with ``json``, not with popprof).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import popprof
from popprof.metrics.summary import summarise
from popprof.report.summary import render_text

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
KINETO_2021 = REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz"


@pytest.fixture(scope="module")
def k2021():
    return popprof.open(KINETO_2021)


def test_a_thread_written_as_a_string_and_as_a_number_is_one_thread(k2021):
    """X events carry tid "25738" / "25772" (strings), the [memory] instants 25738 / 25772 (numbers), the GPU
    stream is tid "stream 7": three threads with events."""
    events = k2021.events
    pairs = set(zip(events["pid"].tolist(), events["tid"].tolist(), strict=True))
    assert {(25738, 25738), (25738, 25772)} <= pairs
    doc = summarise(k2021)
    assert doc["trace"]["threads"] == 3
    text = render_text(doc)
    assert "on 3 threads" in text
    assert "1099511627" not in text  # no stand-in id the file does not hold
    assert "pid 0  python / stream 7" in text


def test_the_2021_trace_has_its_own_ids_in_the_threads_table(k2021):
    threads = k2021.threads
    named = threads.dropna(subset=["thread_name"]).set_index("thread_name")
    assert named.loc["stream 7", "pid"] == 0
    assert named.loc["thread 25738 (python)", "tid"] == 25738


def test_range_profiler_kernels_are_gpu_work():
    """HTA's CUPTI range-profiler trace: 77 X events of category cuda_profiler_range on pid 0 (the GPU), no
    'kernel' event; 77 cudaLaunchKernel calls on the host."""
    profile = popprof.open(REAL / "cupti_range_profiler.json.gz")
    events = profile.events
    ranged = events[events["channel"] == "cuda_profiler_range"]
    assert len(ranged) == 77 and ranged["device_category"].eq("compute").all()
    assert ranged["device"].astype(str).eq("gpu:0").all()
    doc = summarise(profile)["trace"]
    assert [(d["device"], d["platform"]) for d in doc["devices"]] == [("gpu:0", "gpu")]
    cpu_ops = {op["name"] for op in doc["top_cpu_ops_by_self"]}
    assert not cpu_ops & set(ranged["name"].astype(str))
    assert sum(k["count"] for k in doc["top_kernels"]) <= 77 and doc["top_kernels"][0]["kernel_type"]
    assert "device_side_missing" not in doc
    # the range profiler serialises kernels back to back: the device never idled, so no line explains idling
    text = render_text(summarise(profile))
    assert "Why the device idled" not in text and "kernel wait (HTA) -" not in text


def test_the_timeline_export_writes_text_ids_as_the_file_did(tmp_path):
    """The 2021 trace's 'PyTorch Profiler (0)' span is on pid "Traces", tid "PyTorch Profiler" (strings), its
    GPU stream on tid "stream 7", a global instant on pid "" and tid "": the export writes those strings, never
    the reader's stand-in numbers. The real trace's records of those ids (copied here: the whole trace takes
    seconds to export), with one kernel and one operator."""
    import json

    from popprof.trace import timeline

    records = [
        {"ph": "X", "cat": "Trace", "ts": 1623142623460016, "dur": 1065723, "pid": "Traces",
         "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
        {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
         "tid": "Trace PyTorch Profiler", "ts": 1623142623460016},
        {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 1623142624633484},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 25738, "tid": "25738",
         "ts": 1623142623460100, "dur": 50},
        {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 1623142623460200,
         "dur": 30, "args": {"stream": 7, "device": 0}},
    ]  # fmt: skip
    src = tmp_path / "k2021_ids.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": records}))
    out = tmp_path / "out.json"
    timeline.write_timeline(popprof.open(src), out)
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] != "M"]
    ids = {e["name"]: (e["pid"], e["tid"]) for e in events}
    assert ids == {
        "PyTorch Profiler (0)": ("Traces", "PyTorch Profiler"),
        "Iteration Start: PyTorch Profiler": ("Traces", "Trace PyTorch Profiler"),
        "Record Window End": ("", ""),
        "aten::mm": (25738, 25738),
        "gemm": (0, "stream 7"),
    }


def test_stall_notes_name_host_work_not_profiler_bookkeeping(k2021):
    """Every device gap of the 2021 trace lies inside the 'PyTorch Profiler (0)' span (bookkeeping) and inside a
    ProfilerStep#N marker: neither is what the host did; the notes and the check message name the ops, and the
    message names the thread they ran on."""
    from popprof.plots.timeline import stall_windows, top_host_events

    findings = popprof.check(k2021, rules=["host.device-gaps"])
    windows = stall_windows(findings)
    assert len(windows) == 6
    for window in windows:
        names = top_host_events(k2021, window)["name"].tolist()
        assert names
        assert not [n for n in names if n.startswith(("PyTorch Profiler", "ProfilerStep"))]
    (f,) = findings.items
    assert "on thread 25738 (python)" in f.message and " on ;" not in f.message
    assert "(25738)" not in f.message  # Kineto's name holds the id already: not printed twice
    # the host spent 179.9 ms of the 287.3 ms of gaps in the data loader's __next__ itself (not in its copies)
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert f"meanwhile the host was in '{loader}' (179.89 ms), 'aten::copy_'" in f.message
    assert top_host_events(k2021, windows[0])["name"].iloc[0] == loader


def test_the_timeline_plot_has_a_lane_per_real_thread(k2021):
    """The 2021 trace's "Traces" pseudo-threads and the "" instant are bookkeeping: no lane, no stand-in id; the
    plot's lanes are the device and the trace's two host threads (summary's three threads with the stream)."""
    from popprof.plots.timeline import lanes

    assert [label for label, _ in lanes(k2021)] == [
        "device",
        "python: thread 25738 (python)",
        "python: thread 25772 (python)",
    ]


def test_a_thread_label_prints_the_id_once():
    """Kineto names threads 'thread 25738 (python)': the label keeps that; other names get the id appended."""
    from popprof.trace.intervals import _thread_label_text

    assert _thread_label_text(1, 25738, "thread 25738 (python)") == "thread 25738 (python)"
    assert _thread_label_text(1, 7, "dataloader") == "dataloader (7)"
    assert _thread_label_text(1, 7, "worker 17") == "worker 17 (7)"
    assert _thread_label_text(3, 7, "") == "3:7"
