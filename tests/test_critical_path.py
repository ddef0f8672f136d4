"""The critical path (popprof.metrics.critical_path) against HolisticTraceAnalysis 0.5.0's.

``fixtures/real/traces/hta_critical_path_reference.json`` (written by ``make_hta_critical_path.py`` there, HTA 0.5.0
with pandas 2 in its own virtualenv) holds, per rank, HTA's ``critical_path_analysis`` over the whole trace: the
path's summed duration and its split by ``bound_by``, and the same per ``ProfilerStep`` window
(``annotation="ProfilerStep"``, each instance and all of them). popprof builds the same graph in its own code: the
length and every part must be equal, on eleven real runs (19 ranks: NVIDIA and AMD, ns- and us-resolution, NCCL,
CUDA event synchronisation across streams), and on every step window of a host ``ProfilerStep``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import popprof
from popprof.metrics.critical_path import HTA_PARTS, PARTS, critical_paths, path_steps

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "hta_critical_path_reference.json").read_text("utf-8"))
DIRECTORIES = {"two_ranks", "dlrm_8ranks"}
CASES = [(run, rank) for run, ranks in REFERENCE["runs"].items() for rank in ranks]


def _path(run: str) -> Path:
    return REAL / run if run in DIRECTORIES else REAL / f"{run}.json.gz"


_OPENED: dict[str, dict] = {}


def _paths(run: str) -> dict[int, dict]:
    """popprof's critical paths of a run by rank (a trace without a rank is rank 0, as HTA numbers it)."""
    if run not in _OPENED:
        path = _path(run) if run in REFERENCE["runs"] else REAL / f"{run}.json.gz"
        profile = popprof.open(path, with_args=True)
        _OPENED[run] = {(p["rank"] if p["rank"] is not None else 0): p for p in critical_paths(profile)}
    return _OPENED[run]


def test_reference_is_hta_050() -> None:
    assert (REFERENCE["tool"], REFERENCE["version"]) == ("HolisticTraceAnalysis", "0.5.0")
    assert len(CASES) == 19


@pytest.mark.parametrize(("run", "rank"), CASES)
def test_length_and_parts_equal_htas(run: str, rank: str) -> None:
    hta = REFERENCE["runs"][run][rank]
    assert hta["ok"]
    mine = _paths(run)[int(rank)]
    assert mine["length_us"] == hta["total"]
    htas = {name: us for name, us in hta["bound_by"].items() if name != "none" and us}
    assert {HTA_PARTS[part]: us for part, us in mine["parts_us"].items() if us} == htas
    assert mine["clipped_edges"] == 0


def _host_marker_durations(profile) -> dict[int, list[float]]:
    """Step number -> durations of the trace's host ``ProfilerStep#N`` markers (HTA's whole microseconds)."""
    from popprof.trace import masks
    from popprof.trace.intervals import device_tracks

    events = profile.events
    marker = masks.step_marker_mask(profile) & ~device_tracks(events)
    out: dict[int, list[float]] = {}
    for name, dur in zip(events["name"][marker], events["dur_us"][marker], strict=True):
        out.setdefault(int(str(name).rsplit("#", 1)[1]), []).append(float(dur))
    return out


#: every (run, rank, window) of HTA's ProfilerStep windows
STEP_CASES = [
    (run, rank, i)
    for run, ranks in REFERENCE["runs"].items()
    for rank, figures in ranks.items()
    for i in range(len(figures["steps"]))
]


@pytest.mark.parametrize(("run", "rank", "window"), STEP_CASES)
def test_step_windows_equal_htas(run: str, rank: str, window: int) -> None:
    """``critical_paths(profile, steps=(a, b))`` equals HTA's ``critical_path_analysis(annotation="ProfilerStep",
    instance_id=...)`` where HTA's instances are the rank's host ``ProfilerStep`` markers. Where one of HTA's
    instances is a marker's GPU-side copy (``gpu_user_annotation``: HTA counts it among the instances, in trace
    order), HTA's window is that copy's span; popprof's is always the host marker's (docs/traces.md), and its
    path is then the host window's: equal to HTA's over all instances of the step."""
    hta = REFERENCE["runs"][run][rank]["steps"][window]
    profile = popprof.open(_path(run), with_args=True)
    steps = (min(hta["steps"]), max(hta["steps"]))
    mine = {(p["rank"] if p["rank"] is not None else 0): p for p in critical_paths(profile, steps=steps)}[
        int(rank)
    ]
    assert mine["steps"] == list(steps)
    host = _host_marker_durations(profile)
    on_host = all(
        any(abs(d - dur) <= 2 for d in host.get(n, []))
        for n, dur in zip(hta["steps"], hta["annotation_dur"], strict=True)
    )
    mine_parts = {HTA_PARTS[part]: us for part, us in mine["parts_us"].items() if us}
    if on_host:
        assert mine["length_us"] == hta["total"]
        assert mine_parts == {k: us for k, us in hta["bound_by"].items() if k != "none" and us}
    else:  # HTA's window was a GPU-side copy's: popprof's equals HTA's window over all of the step's instances
        whole = next(s for s in REFERENCE["runs"][run][rank]["steps"] if len(s["steps"]) > 1)
        assert mine["length_us"] == whole["total"]
        if len(hta["steps"]) == 1:  # the GPU-side copy's window alone is another (shorter) path
            assert hta["total"] < whole["total"]


def test_a_step_window_is_shorter_than_the_whole_and_the_steps_add_up() -> None:
    """nccl_data (steps 4, 5 and 6, the last left out): each step's path is part of the whole's; the two
    steps' windows together give the whole trace's path, since nothing of step 6 is in it."""
    profile = popprof.open(REAL / "nccl_data.json.gz", with_args=True)
    assert path_steps(profile) == [4, 5]
    whole = critical_paths(profile)[0]["length_us"]
    four, five = (critical_paths(profile, steps=(n, n))[0]["length_us"] for n in (4, 5))
    assert 0 < four < whole and 0 < five < whole
    assert critical_paths(profile, steps=(4, 5))[0]["length_us"] == whole
    assert critical_paths(profile, steps=(6, 6)) == []  # the last step: no host event in HTA's window
    assert critical_paths(profile, steps=(7, 9)) == []


def test_steps_on_the_command_line(capsys) -> None:
    """``--steps`` implies ``--critical-path``, says which steps in the text and the JSON, and names the steps
    there are when it names none (exit 2, one line)."""
    from popprof.cli import main

    trace = str(REAL / "nccl_data.json.gz")
    assert main(["-q", "summary", trace, "--steps", "5", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace"]["critical_path"][0]["steps"] == [5, 5]
    assert doc["what_limits"]["critical_path"]["steps"] == [5, 5]
    assert main(["-q", "summary", trace, "--steps", "4-5"]) == 0
    text = capsys.readouterr().out
    assert "(the work of steps 4-5 only: its host events and the GPU work they launched)" in text
    assert "Critical path of steps 4-5 (rank 0): 203.04 ms, 100.0 % host" in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 80
    assert main(["-q", "summary", trace, "--steps", "6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--steps 6: nccl_data has no such ProfilerStep#N" in err[0]
    assert "(its steps: 4, 5;" in err[0]
    assert main(["-q", "summary", trace, "--steps", "5-4"]) == 2
    assert "a range A-B runs from A up to B" in capsys.readouterr().err


def test_the_shares_and_the_top_names_add_up() -> None:
    path = _paths("dlrm_8ranks")[1]
    assert sum(path["shares"].values()) == pytest.approx(1.0)
    assert list(path["parts_us"]) == list(PARTS)
    top = path["top"]
    assert [t["us"] for t in top] == sorted((t["us"] for t in top), reverse=True)
    host = path["parts_us"]["host"] + path["parts_us"]["compute"] + path["parts_us"]["communication"]
    assert sum(t["us"] for t in top) <= host + 1e-9
    assert all(t["count"] >= 1 and t["part"] in PARTS[:3] for t in top)


def test_event_sync_across_streams_needs_the_args() -> None:
    """The multi-stream trace's GPU-to-GPU waits come from the sync events' args: without them they are
    counted as unresolved, not silently dropped."""
    path = REAL / "hta_cuda_event_sync_multi_stream.json.gz"
    with_args = critical_paths(popprof.open(path, with_args=True))[0]
    without = critical_paths(popprof.open(path))[0]
    assert with_args["unresolved_syncs"] < without["unresolved_syncs"]
    assert without["unresolved_syncs"] == 4


def test_the_last_profiler_step_is_left_out_as_hta_does() -> None:
    """two_ranks holds ProfilerStep#551 and #552: HTA's path ends in #551 (267.6 ms of a 1.2 s trace)."""
    path = _paths("two_ranks")[0]
    assert path["window_us"] < 610_000
    assert path["length_us"] == 267_581.0


def test_quirk_a_launcher_op_is_not_gpu_work() -> None:
    """vLLM's trace: a Triton launcher cpu_op carries args.stream 0 and HTA takes it for GPU work on stream 0
    (its path then holds GPU parts through it); popprof keeps it a host operator, so its path differs."""
    hta = REFERENCE["quirk_runs"]["tracelens_b200_vllm_eager"]["0"]
    mine = _paths("tracelens_b200_vllm_eager")[0]
    assert hta["bound_by"]["gpu_kernel_kernel_overhead"] > 0
    assert mine["parts_us"]["host"] == mine["length_us"]
    assert mine["length_us"] == pytest.approx(hta["total"], rel=0.01)


def test_no_gpu_work_no_path() -> None:
    assert critical_paths(popprof.open(REAL / "cpu_only_rank-34.json.gz")) == []
    assert (
        critical_paths(
            popprof.open(Path(__file__).resolve().parent.parent / "fixtures" / "mk2_training.popprof")
        )
        == []
    )


def test_summary_shows_it_only_when_asked(capsys) -> None:
    """``popprof summary --critical-path``: the JSON's trace section holds each rank's path (the same figures
    as the metric), the text a section fitted to 80 columns; without the flag neither."""
    from popprof.cli import main

    trace = REAL / "two_ranks"
    assert main(["-q", "summary", str(trace), "--format", "json", "--critical-path"]) == 0
    doc = json.loads(capsys.readouterr().out)
    paths = doc["trace"]["critical_path"]
    assert [p["rank"] for p in paths] == [0, 1]
    assert [p["length_us"] for p in paths] == [REFERENCE["runs"]["two_ranks"][r]["total"] for r in ("0", "1")]
    assert len(paths[0]["top"]) == 5 and paths[0]["top"][0]["name"] == "aten::_foreach_mul_"
    # "What limits this run" names the longest path's largest part and what freeing it would buy
    assert doc["what_limits"]["critical_path"] == {
        "rank": 1,
        "ranks": 2,
        "length_us": paths[1]["length_us"],
        "part": "host",
        "share": paths[1]["shares"]["host"],
        "saving_us": paths[1]["savings_us"]["host"],
    }
    assert main(["-q", "summary", str(trace), "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "critical_path" not in plain["trace"] and "critical_path" not in plain["what_limits"]
    assert main(["-q", "summary", str(trace), "--critical-path"]) == 0
    text = capsys.readouterr().out
    section = text[text.index("  Critical path (HTA") :].split("\n\n")[0].splitlines()
    assert section[1].startswith("    rank 0: 267.58 ms: host 99.6 %, GPU compute 0.4 %")
    head = " ".join(text[: text.index("Top opportunities")].split())
    assert "Critical path (rank 1, the longest of 2): 272.74 ms, 93.6 % host; all of that free would" in head
    assert "shorten it by 88.44 ms" in head
    assert any(
        line.startswith("      made free, each would shorten it by: host 49.38 ms") for line in section
    )
    assert "      longest on it (time on it, share, shorter by if free):" in section
    assert "       117.00 ms  43.7 %   32.87 ms  aten::_foreach_mul_" in section
    assert max(len(line) for line in text.splitlines()) <= 80
    assert main(["-q", "summary", str(REAL / "cpu_only_rank-34.json.gz"), "--critical-path"]) == 0
    assert "none: no GPU work with its launch call in the trace" in capsys.readouterr().out


def test_the_edges_are_the_path() -> None:
    """critical_path_edges: the path's edges in order, each starting where the one before ended, their
    weights summing to the length; operator time owned by an event, the other kinds by none."""
    from popprof.metrics.critical_path import EDGE_COLUMNS, critical_path_edges

    profile = popprof.open(REAL / "hta_cuda_event_sync_multi_stream.json.gz", with_args=True)
    edges = critical_path_edges(profile)
    assert list(edges.columns) == EDGE_COLUMNS
    assert edges["weight_us"].sum() == critical_paths(profile)[0]["length_us"] == 1178.0
    chained = (edges["from_event_id"].to_numpy()[1:] == edges["to_event_id"].to_numpy()[:-1]) & (
        edges["from_end"].to_numpy()[1:] == edges["to_end"].to_numpy()[:-1]
    )
    assert chained.all()
    assert set(edges["kind"]) >= {"operator", "launch_delay", "kernel_gap"}
    assert edges.loc[edges["kind"] != "operator", "event_id"].isna().all()
    assert edges.loc[edges["kind"] == "operator", "event_id"].notna().all()
    empty = critical_path_edges(popprof.open(REAL / "cpu_only_rank-34.json.gz"))
    assert empty.empty and list(empty.columns) == EDGE_COLUMNS


def test_older_kineto_names_and_a_trace_without_sync_events() -> None:
    """Kineto 2021 (``Operator`` / ``Runtime`` categories, ``ProfilerStep#N`` an operator, no ``cuda_sync``
    track): its operators and launches are nodes, the step markers are not (they span the work), and the text
    says the host's waits on the GPU are not joined (HTA's graph has no nodes at all there)."""
    from popprof.report.summary import render_critical_path

    paths = critical_paths(
        popprof.open(REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz", with_args=True)
    )
    assert len(paths) == 1 and paths[0]["sync_events"] == 0
    assert paths[0]["top"][0]["name"].startswith("enumerate(DataLoader)")
    assert not any(t["name"].startswith("ProfilerStep") for t in paths[0]["top"])
    text = " ".join(" ".join(render_critical_path(paths)).split())
    assert "no CUDA sync events in the trace" in text
    assert _paths("hta_cuda_event_sync")[0]["sync_events"] == 4


@pytest.mark.parametrize(("run", "rank"), CASES)
def test_what_making_work_free_would_save_equals_htas(run: str, rank: str) -> None:
    """The savings: HTA's graph with the chosen events' time set to 0 and its path found again (networkx),
    against popprof's, for the three names with the most time on HTA's path and for all host work. A saving
    is at most the time on the path (the path may move elsewhere: two_ranks' aten::_foreach_mul_ has 117.0 ms
    on it and saves 32.9 ms)."""
    hta = REFERENCE["runs"][run][rank]
    profile = popprof.open(_path(run), with_args=True)
    mine = {(p["rank"] if p["rank"] is not None else 0): p for p in critical_paths(profile, top=50)}[
        int(rank)
    ]
    by_name = {t["name"]: t for t in mine["top"]}
    for name, figures in hta["if_free"].items():
        assert by_name[name]["us"] == figures["on_path"]
        assert by_name[name]["saving_us"] == figures["saving"]
        assert 0 <= by_name[name]["saving_us"] <= by_name[name]["us"]
    # FalconsAI (ns times, rounded as HTA rounds them): at 853 us a launch (852.951) and the memset it does not
    # launch (852.962) tie; popprof counts the launch first, HTA's unstable sort the memset, which then gets a
    # 12 us launch delay that only matters once the host is free
    tie = 12.0 if run == "tracelens_h100_falconsai_nsfw" else 0.0
    assert mine["savings_us"]["host"] == hta["host_if_free"] + tie
    assert all(0 <= mine["savings_us"][k] <= mine["parts_us"][k] for k in PARTS)
