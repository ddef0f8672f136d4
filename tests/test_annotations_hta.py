"""Time by user annotation (popprof.metrics.annotations) against HolisticTraceAnalysis 0.5.0's.

``fixtures/real/traces/hta_annotations_reference.json`` (written by ``make_hta_annotations.py`` there, HTA
0.5.0 in its own virtualenv) holds HTA's ``get_gpu_user_annotation_breakdown`` rows: at its defaults on the
real traces with ``gpu_user_annotation`` events (``gpu``), on the host's ``user_annotation`` events of three
(``cpu``), and with its tail grouped into ``others`` on one trace's GPU annotations and on ``two_ranks``' host
ones (``tail``: two ranks, an allowlist). Each row: rank, name, count (the events in HTA's frame), sum, max,
min, std, mean. popprof computes the same in its own code: equal names and counts, the figures within 1e-9
relative (whole microseconds: HTA's rounding); through ``popprof summary --format json`` (times written to
the nanosecond) within half a nanosecond.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.metrics.annotations import COLUMNS, annotation_breakdown, annotation_records
from popprof.report.gpu_analyses import render_gpu_annotations

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "hta_annotations_reference.json").read_text("utf-8"))
FIGURES = ["sum_us", "max_us", "min_us", "std_us", "mean_us"]
_OPENED: dict[str, popprof.Profile] = {}


def _path(files: list[str]) -> Path:
    return REAL / files[0] if len(files) == 1 else REAL / Path(files[0]).parent


def _profile(path: Path) -> popprof.Profile:
    if str(path) not in _OPENED:
        _OPENED[str(path)] = popprof.open(path)
    return _OPENED[str(path)]


def _run(run: str) -> popprof.Profile:
    return _profile(REAL / f"{run}.json.gz")


def _rows(table) -> list[list]:
    """popprof's table as the reference's rows (a trace without a rank is rank 0, as HTA numbers it)."""
    ranks = table["rank"].fillna(0).to_numpy(dtype=np.int64)
    figures = table[FIGURES].to_numpy(dtype=np.float64)
    return [
        [int(r), str(n), int(c), *f.tolist()]
        for r, n, c, f in zip(ranks, table["name"], table["count"], figures, strict=True)
    ]


def _assert_equal(mine: list[list], hta: list[list], rel: float = 1e-9, tol: float = 0.0) -> None:
    assert [row[:3] for row in mine] == [row[:3] for row in hta]  # rank, name, count, in HTA's order
    assert np.allclose(np.array([r[3:] for r in mine]), np.array([r[3:] for r in hta]), rtol=rel, atol=tol)


def test_reference_is_hta_050_on_the_required_traces() -> None:
    assert (REFERENCE["tool"], REFERENCE["version"]) == ("HolisticTraceAnalysis", "0.5.0")
    required = {
        "nccl_data",
        "tracelens_mi300x_normalization",
        "amd_mi250_minitoy",
        "tracelens_b200_vllm_eager",
    }
    assert required <= set(REFERENCE["gpu"])
    assert all(REFERENCE["gpu"][run] for run in REFERENCE["gpu"])  # HTA found annotations in each
    assert REFERENCE["cpu"] and set(REFERENCE["tail"]) == {"nccl_data_gpu", "two_ranks_cpu"}
    assert len(REFERENCE["gpu"]["tracelens_mi300x_normalization"]) == 10
    assert {row[0] for row in REFERENCE["tail"]["two_ranks_cpu"]["rows"]} == {0, 1}


@pytest.mark.parametrize("run", sorted(REFERENCE["gpu"]))
def test_gpu_annotations_equal_htas(run: str) -> None:
    table = annotation_breakdown(_run(run))
    assert list(table.columns) == COLUMNS
    _assert_equal(_rows(table), REFERENCE["gpu"][run])


@pytest.mark.parametrize("run", sorted(REFERENCE["cpu"]))
def test_cpu_annotations_equal_htas(run: str) -> None:
    _assert_equal(_rows(annotation_breakdown(_run(run), use_gpu_annotation=False)), REFERENCE["cpu"][run])


@pytest.mark.parametrize("case", sorted(REFERENCE["tail"]))
def test_the_tail_grouped_as_htas(case: str) -> None:
    """HTA's ``others``: past the ``duration_ratio`` quantile of the running sum or the first ``num_kernels``
    names, unless allowlisted; every row of such a rank then holds statistics of the names' sums."""
    spec = REFERENCE["tail"][case]
    table = annotation_breakdown(
        _profile(_path(spec["files"])),
        use_gpu_annotation=spec["use_gpu_annotation"],
        duration_ratio=spec["duration_ratio"],
        num_kernels=spec["num_kernels"],
        allowlist_patterns=spec["allowlist_patterns"],
    )
    assert "others" in set(table["name"])
    _assert_equal(_rows(table), spec["rows"])


def test_the_last_profiler_step_is_left_out_as_hta_does() -> None:
    """nccl_data holds three steps' annotations (3 forward ranges on the GPU); HTA's window, and popprof's,
    leaves the last step out: 2."""
    with gzip.open(REAL / "nccl_data.json.gz", "rt") as f:
        events = json.load(f)["traceEvents"]
    forward = [e for e in events if e.get("cat") == "gpu_user_annotation" and e["name"].endswith(".forward")]
    assert len(forward) == 3
    table = annotation_breakdown(_run("nccl_data"))
    assert table.loc[table["name"] == "DistributedDataParallel.forward", "count"].tolist() == [2]


def _summary(path: Path, *options: str) -> str:
    from click.testing import CliRunner

    from popprof.cli import cli

    result = CliRunner().invoke(cli, ["summary", str(path), *options], env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("run", sorted(REFERENCE["gpu"]))
def test_summary_json_holds_htas_figures(run: str) -> None:
    rows = json.loads(_summary(REAL / f"{run}.json.gz", "--format", "json"))["trace"]["gpu_annotations"]
    assert [(r["rank"], r["name"]) for r in rows] == [
        (r["rank"], r["name"]) for r in annotation_records(_run(run))
    ]
    sums = [row["sum_us"] for row in rows]
    assert sums == sorted(sums, reverse=True)  # largest first
    mine = sorted([[row["rank"] or 0, row["name"], row["count"], *(row[k] for k in FIGURES)] for row in rows])
    _assert_equal(mine, sorted(REFERENCE["gpu"][run]), rel=0.0, tol=5e-4)  # the JSON's nanoseconds


@pytest.mark.parametrize("run", ["nccl_data", "tracelens_b200_vllm_eager", "tracelens_mi300x_normalization"])
def test_summary_text_block_fits_80_columns(run: str) -> None:
    text = _summary(REAL / f"{run}.json.gz")
    assert "GPU time by annotation (HTA's user-annotation breakdown)" in text
    assert "do not add up to the device time" in " ".join(text.split())  # the note, wrapped
    assert not [line for line in text.splitlines() if len(line) > 80]
    block = text.split("GPU time by annotation")[1].split("\n\n")[0]
    largest = max(REFERENCE["gpu"][run], key=lambda row: row[3])
    assert largest[1][:20] in block or largest[1].split("(")[0] in block


def test_no_block_without_gpu_annotations() -> None:
    """``two_ranks`` has host annotations only: no ``trace.gpu_annotations``, no text block."""
    assert annotation_breakdown(_profile(REAL / "two_ranks")).empty
    assert not annotation_breakdown(_profile(REAL / "two_ranks"), use_gpu_annotation=False).empty
    doc = json.loads(_summary(REAL / "two_ranks", "--format", "json"))
    assert "gpu_annotations" not in doc["trace"]
    assert "GPU time by annotation" not in _summary(REAL / "two_ranks")


def test_text_of_many_ranks_fits_and_says_what_it_leaves_out() -> None:
    """Six ranks of ten annotations with long names: four ranks shown, four rows each, every line <= 80."""
    name = "## a_very_long_record_function_name_of_a_training_loop_phase_{} ##"
    rows = [
        {"rank": r, "name": name.format(i), "count": 3, "sum_us": 9e5 - i, "mean_us": 3e5, "std_us": 1.0}
        for r in range(6)
        for i in range(10)
    ]
    lines = render_gpu_annotations(rows, steps_left_out=True)
    assert not [line for line in lines if len(line) > 80]
    assert [line.strip() for line in lines if line.strip().startswith("rank ")] == [
        f"rank {r}" for r in range(4)
    ]
    assert sum("(6 more in --format json)" in line for line in lines) == 4
    assert lines[-1].strip() == "(2 more ranks in --format json)"
    assert "the last ProfilerStep left out" in " ".join(lines)
    assert render_gpu_annotations([]) == []


def test_the_html_report_shows_the_summarys_rows(tmp_path):
    """The report's table holds one row per row of the summary's JSON, names escaped, times as the report
    prints them (``nccl_data``: five annotations on rank 0)."""
    import html as _html

    from click.testing import CliRunner

    from popprof.cli import cli

    path = REAL / "nccl_data.json.gz"
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["-q", "report", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text("utf-8")
    table = page[page.index('<table class="gpu-annotations">') :]
    table = table[: table.index("</table>")]
    summary = CliRunner().invoke(cli, ["-q", "summary", str(path), "--format", "json"])
    rows = json.loads(summary.stdout)["trace"]["gpu_annotations"]
    assert len(rows) == 5 and table.count("<tr>") == len(rows) + 1
    for row in rows:
        assert f"<td>{_html.escape(row['name'])}</td>" in table
