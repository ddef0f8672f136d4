"""Issue 28: what people expect from nsys and HTA in ``summary``: top kernels with count, total, mean,
min, max and standard deviation; a per-iteration step-time table; ``--top N``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import popprof
from popprof.cli import main
from popprof.metrics.devices import top_kernels
from popprof.trace.gpu_work import exact_times

TRACE = Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "training_loop.json"
IPU = Path(__file__).resolve().parent.parent / "fixtures" / "mk2_training.popprof"


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def trace():
    return popprof.open(TRACE)


def test_top_kernels_have_nsys_statistics(trace):
    from popprof.metrics.devices import device_work  # the GPU work the device figures count (HTA's rules)

    kernels = top_kernels(trace).set_index("name")
    work = device_work(trace)
    for name in ("ampere_sgemm_128x64_tn", "Memcpy HtoD (Pageable -> Device)"):
        mine = (work["name"] == name).to_numpy()
        start, end = exact_times(work)  # the trace's own times (HTA's are rounded to whole microseconds)
        durations = (end - start)[mine]
        row = kernels.loc[name]
        assert row["count"] == len(durations)
        assert row["total_us"] == pytest.approx(durations.sum())
        assert row["mean_us"] == pytest.approx(durations.mean())
        assert row["min_us"] == durations.min() and row["max_us"] == durations.max()
        assert row["std_us"] == pytest.approx(np.std(durations, ddof=1))


def test_summary_json_and_text_show_them(capsys):
    code, out, _ = _run(capsys, "summary", TRACE, "--format", "json")
    (first, *_) = json.loads(out)["trace"]["top_kernels"]
    assert {"count", "total_us", "mean_us", "min_us", "max_us", "std_us"} <= set(first)
    code, text, _ = _run(capsys, "summary", TRACE)
    header = next(line for line in text.splitlines() if line.strip().startswith("total") and "std" in line)
    assert header.split()[:6] == ["total", "count", "mean", "min", "max", "std"]


def test_summary_has_a_per_iteration_table(capsys):
    code, out, _ = _run(capsys, "summary", TRACE, "--format", "json")
    iterations = json.loads(out)["iterations"]
    assert iterations["source"] == "ProfilerStep" and iterations["count"] == 12
    assert [s["step"] for s in iterations["steps"]] == list(range(12))
    assert all(s["dur_us"] > 0 for s in iterations["steps"])
    code, text, _ = _run(capsys, "summary", TRACE)
    lines = text.splitlines()
    at = lines.index("Iterations (12, from ProfilerStep spans)")
    assert lines[at + 1].split() == ["step", "start", "duration"]
    assert lines[at + 2].split()[0] == "0" and lines[at + 13].split()[0] == "11"


def test_ipu_profile_iterations_are_its_runs(capsys):
    code, out, _ = _run(capsys, "summary", IPU, "--format", "json")
    doc = json.loads(out)
    assert doc["iterations"]["count"] == doc["execution"]["runs"]


def test_top_n(capsys):
    code, out, _ = _run(capsys, "summary", TRACE, "--format", "json", "--top", "2")
    tr = json.loads(out)["trace"]
    assert len(tr["top_kernels"]) == 2 and len(tr["top_by_total"]) == 2
    code, out, _ = _run(capsys, "summary", IPU, "--format", "json", "--top", "3")
    assert len(json.loads(out)["execution"]["top_programs"]) == 3
    code, out, _ = _run(capsys, "summary", IPU, "--format", "json")
    assert len(json.loads(out)["execution"]["top_programs"]) == 10
    code, _, err = _run(capsys, "summary", IPU, "--top", "0")
    assert code == 2 and "--top" in err
