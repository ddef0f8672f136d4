"""Each profiler step's own critical path (popprof.metrics.critical_path_steps), one row per (rank, step).

A row is ``critical_paths(profile, steps=(n, n))`` of that rank, never a path of its own: tested row by row
against it, and against HolisticTraceAnalysis 0.5.0's ``ProfilerStep`` windows
(``fixtures/real/traces/hta_critical_path_reference.json``, read as ``tests/test_critical_path.py`` reads it).
The summary shows the rows with ``--critical-path`` on a trace of at least 2 steps ("Critical path by step",
JSON ``trace.critical_path_by_step``), the report as a table.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_critical_path import REAL, REFERENCE, _host_marker_durations, _path

import popprof
from popprof.cli import main
from popprof.metrics.critical_path import HTA_PARTS, PARTS, critical_paths, path_steps
from popprof.metrics.critical_path_steps import STEP_COLUMNS, critical_paths_by_step, step_records
from popprof.report.summary import STEP_LINES, render_critical_path_by_step

NCCL = REAL / "nccl_data.json.gz"
RESNET = REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz"


def _by_step(path) -> tuple[popprof.Profile, pd.DataFrame]:
    profile = popprof.open(path, with_args=True)
    return profile, critical_paths_by_step(profile)


@pytest.mark.parametrize(
    "name", ["nccl_data.json.gz", "kineto2021_resnet50_worker0.pt.trace.json.gz", "dlrm_8ranks", "two_ranks"]
)
def test_each_row_is_that_steps_critical_path(name: str) -> None:
    """Every row equals ``critical_paths(profile, steps=(n, n))`` for its rank: length, each part, the first
    of ``top``; and every (rank, step) with such a path has its row."""
    profile, frame = _by_step(REAL / name)
    assert list(frame.columns) == STEP_COLUMNS
    expected = []
    for step in path_steps(profile):
        for path in critical_paths(profile, steps=(step, step)):
            top = path["top"][0]
            expected.append(
                {
                    "rank": path["rank"],
                    "step": step,
                    "length_us": path["length_us"],
                    **{f"{part}_us": path["parts_us"][part] for part in PARTS},
                    "top_name": top["name"],
                    "top_part": top["part"],
                    "top_us": top["us"],
                }
            )
    expected.sort(key=lambda r: (-1 if r["rank"] is None else r["rank"], r["step"]))
    assert step_records(frame) == expected
    assert len(frame) == len(expected) > 0


def test_without_savings_the_same_path() -> None:
    """``critical_paths(..., savings=False)`` (what the table asks for: no pass over the graph per part and
    name) is the same path, without ``savings_us`` and the top names' ``saving_us``."""
    profile = popprof.open(REAL / "dlrm_8ranks", with_args=True)
    full = critical_paths(profile, steps=(10, 10))
    bare = critical_paths(profile, steps=(10, 10), savings=False)
    for path in full:
        del path["savings_us"]
        for item in path["top"]:
            del item["saving_us"]
    assert bare == full and len(bare) == 8


#: (run, rank) of HTA's reference with one-step windows
STEP_RUNS = [
    (run, rank)
    for run, ranks in REFERENCE["runs"].items()
    for rank, figures in ranks.items()
    if any(len(s["steps"]) == 1 for s in figures["steps"])
]


@pytest.mark.parametrize(("run", "rank"), STEP_RUNS)
def test_rows_equal_htas_step_windows(run: str, rank: str) -> None:
    """The rows of a rank are HTA's one-step windows of its host ``ProfilerStep`` markers, to the microsecond:
    length and every part (HTA's windows of a marker's GPU-side copy are another window: docs/traces.md)."""
    profile, frame = _by_step(_path(run))
    mine = frame[frame["rank"].fillna(0) == int(rank)].set_index("step")
    host = _host_marker_durations(profile)
    checked = set()
    for hta in REFERENCE["runs"][run][rank]["steps"]:
        (step,) = set(hta["steps"]) if len(hta["steps"]) == 1 else (None,)
        if step is None or not any(abs(d - hta["annotation_dur"][0]) <= 2 for d in host.get(step, [])):
            continue
        row = mine.loc[step]
        assert row["length_us"] == hta["total"]
        htas = {k: us for k, us in hta["bound_by"].items() if k != "none" and us}
        assert {HTA_PARTS[p]: row[f"{p}_us"] for p in PARTS if row[f"{p}_us"]} == htas
        checked.add(step)
    assert checked == set(mine.index)  # every row of the rank is one of HTA's windows


def test_real_figures() -> None:
    """nccl_data: steps 4 and 5 (6, the last, left out as HTA does), all host; Kineto 2021's ResNet-50: steps
    5-9, the longest 8; dlrm_8ranks: one step, ranks 1, 3, 4, 5 dominated by an NCCL kernel."""
    _, nccl = _by_step(NCCL)
    assert nccl[["rank", "step", "length_us", "host_us"]].values.tolist() == [
        [0, 4, 101646.0, 101646.0],
        [0, 5, 101398.0, 101398.0],
    ]
    assert nccl["top_name"].tolist() == ["aten::cudnn_batch_norm"] * 2
    assert nccl["top_us"].tolist() == [10193.0, 10222.0]
    _, resnet = _by_step(RESNET)
    assert resnet["rank"].isna().all()
    assert resnet["step"].tolist() == [5, 6, 7, 8, 9]
    assert resnet["length_us"].tolist() == [131106.0, 129060.0, 133416.0, 133927.0, 132128.0]
    assert resnet.loc[resnet["length_us"].idxmax(), "step"] == 8
    assert (resnet["top_name"] == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__").all()
    _, dlrm = _by_step(REAL / "dlrm_8ranks")
    assert dlrm["rank"].tolist() == list(range(8)) and (dlrm["step"] == 10).all()
    nccl_ranks = dlrm[dlrm["top_part"] == "communication"]
    assert nccl_ranks["rank"].tolist() == [1, 3, 4, 5]
    assert nccl_ranks["top_name"].str.startswith("ncclKernel_SendRecv_RING_SIMPLE").all()
    one = dlrm.set_index("rank").loc[1]
    assert (one["length_us"], one["communication_us"], one["host_us"]) == (8958.0, 7635.0, 1311.0)


def test_no_steps_no_rows() -> None:
    """A trace without ProfilerStep markers, or without GPU work in its steps: an empty table, its columns."""
    for name in ("hta_simple_add.json.gz", "cpu_only_rank-34.json.gz"):
        frame = critical_paths_by_step(popprof.open(REAL / name, with_args=True))
        assert frame.empty and list(frame.columns) == STEP_COLUMNS
        assert step_records(frame) == []


def _section(text: str, title: str) -> list[str]:
    return text[text.index(title) :].split("\n\n")[0].splitlines()


def test_summary_shows_the_steps_with_critical_path_and_two_steps(capsys) -> None:
    """The text block and the JSON key come with ``--critical-path`` on a trace of 2 or more steps; not without
    the flag, not with ``--steps`` (one window), not on a trace of one step."""
    assert main(["-q", "summary", str(NCCL), "--critical-path"]) == 0
    text = capsys.readouterr().out
    assert _section(text, "  Critical path by step") == [
        "  Critical path by step (each step's own path, as --steps N; * the longest)",
        "    rank 0: longest on every step's path: aten::cudnn_batch_norm",
        "      step      length  largest part",
        "    *    4   101.65 ms  host 100.0 %",
        "         5   101.40 ms  host 100.0 %",
    ]
    assert max(len(line) for line in text.splitlines()) <= 80
    assert main(["-q", "summary", str(NCCL), "--critical-path", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    profile = popprof.open(NCCL, with_args=True)
    assert doc["trace"]["critical_path_by_step"] == step_records(critical_paths_by_step(profile))
    for options in ([], ["--steps", "4"]):
        assert main(["-q", "summary", str(NCCL), *options]) == 0
        assert "Critical path by step" not in capsys.readouterr().out
        assert main(["-q", "summary", str(NCCL), *options, "--format", "json"]) == 0
        assert "critical_path_by_step" not in json.loads(capsys.readouterr().out)["trace"]
    one_step = str(REAL / "dlrm_8ranks")
    assert main(["-q", "summary", one_step, "--critical-path", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace"]["critical_path"] and "critical_path_by_step" not in doc["trace"]


def test_summary_text_of_a_trace_without_ranks(capsys) -> None:
    """Kineto 2021's ResNet-50 (no rank): the shared longest name said once, wrapped to 80 columns."""
    assert main(["-q", "summary", str(RESNET), "--critical-path"]) == 0
    text = capsys.readouterr().out
    assert _section(text, "  Critical path by step")[1:] == [
        "    longest on every step's path:",
        "        enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        "      step      length  largest part",
        "         5   131.11 ms  host 100.0 %",
        "         6   129.06 ms  host 100.0 %",
        "         7   133.42 ms  host 100.0 %",
        "    *    8   133.93 ms  host 100.0 %",
        "         9   132.13 ms  host 100.0 %",
    ]
    assert max(len(line) for line in text.splitlines()) <= 80


def test_rendering_names_per_step_and_the_longest_steps_only() -> None:
    """Names that differ from step to step go on each row; a rank of more than STEP_LINES steps lists its
    longest, in step order, and says how many more the JSON holds."""
    rows = [
        {
            "rank": 3,
            "step": n,
            "length_us": 1000.0 + n,
            **{f"{p}_us": 0.0 for p in PARTS},
            "kernel_gap_us": 500.0,
            "communication_us": 500.0 + n,
            "top_name": f"nccl_kernel_{n % 2}",
            "top_part": "communication",
            "top_us": 500.0 + n,
        }
        for n in range(STEP_LINES + 2)
    ]
    lines = render_critical_path_by_step(rows)
    assert lines[2:5] == [
        "    rank 3",
        "      step      length  largest part           longest on it",
        "         2     1.00 ms  communication 50.1 %   nccl_kernel_0",
    ]
    assert lines[-2] == f"    *   {STEP_LINES + 1:>2}     1.01 ms  communication 50.5 %   nccl_kernel_1"
    assert lines[-1] == "      (2 shorter steps: JSON critical_path_by_step)"
    assert len(lines) == 4 + STEP_LINES + 1
    assert render_critical_path_by_step([]) == [] and render_critical_path_by_step(None) == []


def test_report_has_the_table(tmp_path) -> None:
    """``popprof report --critical-path``: the table of the steps, the rank's longest in bold."""
    out = tmp_path / "report.html"
    assert main(["-q", "report", str(NCCL), "--critical-path", "-o", str(out)]) == 0
    html = out.read_text("utf-8")
    table = html[html.index('<table class="critical-path-steps">') :].split("</table>")[0]
    assert table.count("<tr") == 3  # the header and steps 4 and 5
    assert '<tr style="font-weight:bold"><td class="num">0</td><td class="num">4</td>' in table
    assert "101.40 ms" in table and "aten::cudnn_batch_norm" in table
    assert main(["-q", "report", str(NCCL), "-o", str(out)]) == 0
    assert "critical-path-steps" not in out.read_text("utf-8")


def test_what_limits_names_the_longest_step(capsys) -> None:
    """The "What limits this run" line names the step whose own path is longest on the rank of the longest path: the
    largest row of the by-step table (ResNet-50 2021: step 8, 133.93 ms, of steps 5-9)."""
    trace = str(REAL / "kineto2021_resnet50_worker0.pt.trace.json.gz")
    assert main(["summary", trace, "--critical-path", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["trace"]["critical_path_by_step"]
    longest = max(rows, key=lambda r: r["length_us"])
    step = doc["what_limits"]["critical_path"]["longest_step"]
    assert step == {"step": longest["step"], "length_us": longest["length_us"]}
    assert step["step"] == 8 and step["length_us"] == pytest.approx(133_930, abs=10)
    assert main(["summary", trace, "--critical-path"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "; its longest step 8 (133.93 ms)" in text
    assert main(["summary", trace, "--critical-path", "--steps", "6", "--format", "json"]) == 0
    assert "longest_step" not in json.loads(capsys.readouterr().out)["what_limits"]["critical_path"]
