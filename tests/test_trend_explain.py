"""``popprof trend``: a change of a time metric explained by the time account of the runs either side."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
from store_helpers import MK2, ROOT, run

import popprof.store as store
from popprof.metrics.account import GPU_PARTS, IPU_PARTS, PART_WORDS
from popprof.store.api import open_store

MK2_V2 = ROOT / "fixtures" / "mk2_training_v2.popprof"
TRACES = ROOT / "fixtures" / "real" / "traces"
GPU_BASE = TRACES / "hta_trace_compare_base.json.gz"  # 2 profiler steps
GPU_NEW = TRACES / "kineto2021_resnet50_worker0.pt.trace.json.gz"  # 6 profiler steps


def _store(root: Path, sources: list[Path], profile: str) -> Path:
    """A store of one run per source, oldest first: run ``r<i>`` of commit ``c<i>`` on day ``i``."""
    store.init(root)
    for i, source in enumerate(sources, start=1):
        store.add(
            root, [source], run_id=f"r{i}", commit=f"c{i}", time=f"2026-11-{i:02d}T00:00:00Z", profile=profile
        )
    return root


def _stored(root: Path) -> pd.DataFrame:
    """Every stored metric of every run: run_id x name -> value."""
    frame = open_store(root).query("SELECT run_id, name, value FROM metrics")
    return frame.pivot_table(index="run_id", columns="name", values="value", aggfunc="last")


def _json(capsys, root: Path, *metrics: str) -> list[dict]:
    code, out, err = run(capsys, "trend", root, *metrics, "--format", "json")
    assert code == 0, err
    return json.loads(out)["series"]


@pytest.fixture(scope="module")
def mk2_store(tmp_path_factory) -> Path:
    """3 runs of mk2_training, then 3 of mk2_training_v2 (whose exchange grows by +565.1 us, per the diff)."""
    return _store(tmp_path_factory.mktemp("trend_explain") / "store", [MK2] * 3 + [MK2_V2] * 3, "mk2")


def test_a_change_point_is_explained_by_the_account_means_of_the_runs_either_side(
    mk2_store, capsys, monkeypatch
) -> None:
    root = mk2_store
    stored = _stored(root)
    before, after = stored.loc[["r1", "r2", "r3"]], stored.loc[["r4", "r5", "r6"]]
    for series in _json(capsys, root, "account.window_us", "execution.total_time_us", "account.exchange_us"):
        (change,) = series["changes"]
        assert (change["before_from"], change["index"], change["after_to"]) == (0, 3, 6)
        doc = change["what_changed"]
        assert doc["available"] and doc["platform"] == "ipu" and doc["basis"] == "total"
        assert (doc["runs_before"], doc["runs_after"]) == (3, 3)
        window = doc["window"]
        assert window["base_us"] == pytest.approx(before["account.window_us"].mean(), abs=1e-9)
        assert window["new_us"] == pytest.approx(after["account.window_us"].mean(), abs=1e-9)
        change_us = after["account.window_us"].mean() - before["account.window_us"].mean()
        assert window["change_us"] == pytest.approx(change_us, abs=1e-9)
        # only exchange moved: +565.1 us, all of the window's change
        (part,) = doc["parts"]
        name = "account.exchange_us"
        assert part["part"] == "exchange" and part["words"] == PART_WORDS["exchange"]
        assert part["change_us"] == pytest.approx(after[name].mean() - before[name].mean(), abs=1e-9)
        assert round(part["change_us"], 1) == 565.1
        assert part["share_of_change"] == pytest.approx(1.0) and not part["offsetting"]
        # the parts (with the rest within noise) add up to the window's change
        assert sum(p["change_us"] for p in doc["parts"]) + doc["rest_us"] == pytest.approx(
            change_us, abs=1e-6
        )
        parts = [f"account.{p}_us" for p in IPU_PARTS]
        assert (after[parts].mean() - before[parts].mean()).sum() == pytest.approx(change_us, abs=1e-6)
    # the same decomposition as popprof diff's "What changed" of the two profiles
    code, out, _ = run(capsys, "diff", MK2, MK2_V2, "--format", "json")
    diff_parts = json.loads(out)["what_changed"]["parts"]
    assert [p["part"] for p in diff_parts] == [p["part"] for p in doc["parts"]]
    # the diff's JSON holds times to the nanosecond
    assert [p["change_us"] for p in diff_parts] == [
        pytest.approx(p["change_us"], abs=5e-4) for p in doc["parts"]
    ]
    # text: a few lines under the change, within 80 columns
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "trend", root, "execution.total_time_us")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    at = next(i for i, line in enumerate(lines) if line.startswith("    time account"))
    assert lines[at] == "    time account (mean of 3 runs before and 3 after):"
    assert " ".join(lines[at + 1].split()) == "window 18.14 ms -> 18.71 ms: +565.1 us (+3.11 %), of which:"
    assert lines[at + 3].split() == ["exchange", "+565.1", "us", "100.0", "%"]
    # Markdown: one item per change; JUnit: the text as the case's output
    code, out, _ = run(capsys, "trend", root, "execution.total_time_us", "--format", "markdown")
    assert (
        "- `execution.total_time_us` [mk2] from run `r4`: window 18.14 ms → 18.71 ms, +565.1 us (+3.11 %)"
        in out
    )
    assert "exchange +565.1 us (100.0 %)" in out
    code, out, _ = run(capsys, "trend", root, "execution.total_time_us", "--format", "junit")
    case = ET.fromstring(out).find(".//testcase")
    assert "time account (mean of 3 runs before and 3 after)" in case.find("system-out").text


def test_a_metric_that_is_not_a_time_is_not_explained(mk2_store, capsys) -> None:
    root = mk2_store
    (series,) = _json(capsys, root, "memory.total_incl_gaps_bytes")
    assert all(c["what_changed"] is None for c in series["changes"])
    code, out, _ = run(capsys, "trend", root, "memory.total_incl_gaps_bytes")
    assert "time account" not in out


def test_runs_of_different_step_counts_are_explained_per_step(tmp_path, capsys, monkeypatch) -> None:
    root = _store(tmp_path / "store", [GPU_BASE] * 3 + [GPU_NEW] * 3, "gpu")
    stored = _stored(root)
    steps = stored["trace.profiler_step_count"]
    assert set(steps.loc[["r1", "r2", "r3"]]) == {2} and set(steps.loc[["r4", "r5", "r6"]]) == {6}
    per_step = stored.filter(like="account.").div(steps, axis=0)
    before, after = per_step.loc[["r1", "r2", "r3"]], per_step.loc[["r4", "r5", "r6"]]
    (series,) = _json(capsys, root, "trace.step_time_us")
    (change,) = series["changes"]
    doc = change["what_changed"]
    assert doc["platform"] == "gpu" and doc["basis"] == "per profiler step"
    window = after["account.window_us"].mean() - before["account.window_us"].mean()
    assert doc["window"]["base_us"] == pytest.approx(before["account.window_us"].mean())
    assert doc["window"]["change_us"] == pytest.approx(window)
    for part in doc["parts"]:
        name = f"account.{part['part']}_us"
        assert part["change_us"] == pytest.approx(after[name].mean() - before[name].mean())
        assert part["share_of_change"] == pytest.approx(part["change_us"] / window)
        assert part["offsetting"] == (part["change_us"] * window < 0)
    assert any(p["offsetting"] for p in doc["parts"])  # idle, cause unknown shrank as the window grew
    assert sum(p["change_us"] for p in doc["parts"]) + doc["rest_us"] == pytest.approx(window)
    parts = [f"account.{p}_us" for p in GPU_PARTS]
    assert (after[parts].mean() - before[parts].mean()).sum() == pytest.approx(window)
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "trend", root, "trace.step_time_us")
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "    time account (mean of 3 runs before and 3 after, per profiler step):" in out.splitlines()
    assert any(line.rstrip().endswith("offsetting") for line in out.splitlines())


def test_runs_without_the_account_are_named_and_nothing_is_explained(tmp_path, capsys, monkeypatch) -> None:
    # older runs: the baseline JSON of mk2_training without its account rows, as a store written before them
    code, _, _ = run(capsys, "baseline", MK2, "-o", tmp_path / "full.json")
    document = json.loads((tmp_path / "full.json").read_text())
    document["metrics"] = {k: v for k, v in document["metrics"].items() if not k.startswith("account.")}
    old = tmp_path / "mk2_training.json"
    old.write_text(json.dumps(document))
    root = _store(tmp_path / "store", [old] * 3 + [MK2_V2] * 3, "mk2")
    (series,) = _json(capsys, root, "execution.total_time_us")
    (change,) = series["changes"]
    assert change["what_changed"] == {
        "available": False,
        "reason": "3 of the 6 runs either side lack the time account (r1, r2, r3)",
    }
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "trend", root, "execution.total_time_us")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    at = next(i for i, line in enumerate(lines) if line.startswith("    time account"))
    assert " ".join(" ".join(lines[at:]).split()) == (
        "time account: not explained: 3 of the 6 runs either side lack the time account (r1, r2, r3)"
    )


def test_re_runs_of_a_commit_count_as_runs_of_their_level(tmp_path, capsys) -> None:
    # commits c1 (2 runs), c2 | c3 (2 runs), c4: 4 points, 6 runs; a noisy series' far jump between c2 and c3
    root = tmp_path / "store"
    store.init(root)
    runs = [("r1", "c1", MK2), ("r2", "c1", MK2), ("r3", "c2", MK2)]
    runs += [("r4", "c3", MK2_V2), ("r5", "c3", MK2_V2), ("r6", "c4", MK2_V2)]
    for day, (run_id, commit, source) in enumerate(runs, start=1):
        store.add(
            root, [source], run_id=run_id, commit=commit, time=f"2026-11-{day:02d}T00:00:00Z", profile="mk2"
        )
    stored = _stored(root)
    code, out, err = run(capsys, "trend", root, "account.window_us", "--mode", "noisy", "--format", "json")
    (series,) = json.loads(out)["series"]
    assert series["mode"] == "noisy" and series["runs_per_point"] == [2, 1, 2, 1]
    (change,) = series["changes"]
    assert (change["before_from"], change["index"], change["after_to"]) == (0, 2, 4)
    doc = change["what_changed"]
    assert (doc["runs_before"], doc["runs_after"]) == (3, 3)
    window = stored["account.window_us"]
    assert doc["window"]["base_us"] == pytest.approx(window.loc[["r1", "r2", "r3"]].mean())
    assert doc["window"]["new_us"] == pytest.approx(window.loc[["r4", "r5", "r6"]].mean())
    assert [p["part"] for p in doc["parts"]] == ["exchange"]


# -- the programs or device work under a change, named as popprof diff names them -------------------------------


def _contributors_of_diff(capsys, base: Path, new: Path) -> dict:
    code, out, err = run(capsys, "diff", base, new, "--format", "json", "--no-gate")
    assert code == 0, err
    return json.loads(out)["what_changed"]["contributors"]


def test_a_change_names_the_programs_diff_names_with_the_same_figures(mk2_store, capsys, monkeypatch) -> None:
    expected = _contributors_of_diff(capsys, MK2, MK2_V2)
    assert [r["name"].rsplit("/", 1)[-1] for r in expected["rows"]] == ["ExchangePre"] * 3
    for series in _json(capsys, mk2_store, "execution.total_time_us", "account.exchange_us"):
        (change,) = series["changes"]
        assert "named" not in change  # the section's names stay out of the JSON
        who = change["what_changed"]["contributors"]
        assert (who.pop("runs_before"), who.pop("runs_after")) == (3, 3)
        # the means of 3 identical runs either side: the diff's rows, figures exactly
        assert who == expected
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "trend", mk2_store, "execution.total_time_us")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    at = lines.index("      exchange +565.1 us: its programs (IPU-cycles, means) that changed most:")
    assert [line.split() for line in lines[at + 1 :]] == [
        ["+17,810", "grown", "encoder/layer_10/intermediate/Add_383/ExchangePre"],
        ["+15,686", "grown", "encoder/layer_1/attention/self/Softmax_306/ExchangePre"],
        ["+15,277", "grown", "encoder/layer_2/intermediate/Dropout_360/ExchangePre"],
    ]
    code, out, _ = run(capsys, "trend", mk2_store, "execution.total_time_us", "--format", "markdown")
    assert (
        "exchange +565.1 us, its programs (IPU-cycles, means) that changed most: "
        "`encoder/layer_10/intermediate/Add_383/ExchangePre` +17,810, " in out
    )


def test_a_gpu_change_names_the_device_work_diff_names(tmp_path, capsys, monkeypatch) -> None:
    base, new = TRACES / "hta_trace_compare_base.json.gz", TRACES / "hta_trace_compare_test.json.gz"
    root = _store(tmp_path / "store", [base] * 3 + [new] * 3, "gpu")
    expected = _contributors_of_diff(capsys, base, new)
    assert expected["part"] == "compute" and len(expected["rows"]) == 1
    (series,) = _json(capsys, root, "account.window_us")
    (change,) = series["changes"]
    who = change["what_changed"]["contributors"]
    assert (who.pop("runs_before"), who.pop("runs_after")) == (3, 3)
    assert who == expected
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "trend", root, "account.window_us")
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "      compute -4.0 us: its device work (events, means) that changed most:" in out.splitlines()
    # the kernel's name shortened as the diff's text shortens it (kept apart from the trace's other names)
    code, diff_out, _ = run(capsys, "diff", base, new, "--no-gate")
    kernel = diff_out.splitlines()[
        diff_out.splitlines().index("  compute -4.0 us: its device work (events by name) that changed most:")
        + 1
    ]
    assert " ".join(kernel.split()) in " ".join(out.split())


def test_runs_of_different_step_counts_name_their_device_work_per_step(tmp_path, capsys) -> None:
    root = _store(tmp_path / "store", [GPU_BASE] * 3 + [GPU_NEW] * 3, "gpu")
    expected = _contributors_of_diff(capsys, GPU_BASE, GPU_NEW)  # per profiler step: 2 against 6
    (series,) = _json(capsys, root, "trace.step_time_us")
    (change,) = series["changes"]
    who = change["what_changed"]["contributors"]
    assert who["part"] == expected["part"] == "compute" and len(who["rows"]) == 3
    assert [(r["name"], r["status"]) for r in who["rows"]] == [
        (r["name"], r["status"]) for r in expected["rows"]
    ]
    assert [r["change"] for r in who["rows"]] == [
        pytest.approx(r["change"], rel=1e-12) for r in expected["rows"]
    ]


def test_runs_added_from_a_baseline_leave_the_programs_unknown_in_one_line(
    tmp_path, capsys, monkeypatch
) -> None:
    code, _, _ = run(capsys, "baseline", MK2, "-o", tmp_path / "mk2_training.json")
    root = _store(tmp_path / "store", [tmp_path / "mk2_training.json"] * 3 + [MK2_V2] * 3, "mk2")
    (series,) = _json(capsys, root, "execution.total_time_us")
    (change,) = series["changes"]
    doc = change["what_changed"]
    assert [p["part"] for p in doc["parts"]] == ["exchange"]  # the account is there: the baseline holds it
    reason = (
        "3 of the 6 runs either side were added from a baseline JSON, which holds metrics only (r1, r2, r3)"
    )
    assert doc["contributors"] == {
        "part": "exchange",
        "section": "programs",
        "unit": "cycles",
        "unavailable": True,
        "reason": reason,
        "rows": [],
        "runs_before": 3,
        "runs_after": 3,
    }
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "trend", root, "execution.total_time_us")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    at = next(i for i, line in enumerate(lines) if "programs unknown" in line)
    assert " ".join(" ".join(lines[at:]).split()) == f"exchange +565.1 us: programs unknown: {reason}"


def test_a_level_s_names_are_the_means_of_its_runs() -> None:
    from popprof.store.trend_named import _mean_totals

    rows = pd.DataFrame(  # the query's rows: a run's steps of one program, their number and summed cycles
        {
            "profile": "p",
            "run_id": ["a", "b", "b"],
            "program": ["P", "P", "Q"],
            "category": ["exchange"] * 3,
            "steps": [2, 1, 1],
            "cycles": [10.0, 30.0, 6.0],
        }
    )
    totals = _mean_totals(rows, "programs", ["a", "b"], [None, None])
    assert totals.loc["P", "count"] == 1.5 and totals.loc["P", "total"] == 20.0  # (2 + 1) / 2, (10 + 30) / 2
    assert totals.loc["Q", "count"] == 0.5 and totals.loc["Q", "total"] == 3.0  # absent from run a: 0 there
    per = _mean_totals(rows, "programs", ["a", "b"], [2, 1])  # run a divided by its 2 runs first
    assert (
        per.loc["P", "total"] == 17.5 and per.loc["P", "count"] == 1.0
    )  # (10 / 2 + 30) / 2, (2 / 2 + 1) / 2


def test_the_names_are_the_means_of_the_runs_nearest_the_change(mk2_store, capsys, monkeypatch) -> None:
    import popprof.store.trend_explain as trend_explain

    monkeypatch.setattr(trend_explain, "NAMED_PER_LEVEL", 2)  # 50 in use: a long level's tables cost seconds
    (series,) = _json(capsys, mk2_store, "execution.total_time_us")
    doc = series["changes"][0]["what_changed"]
    who = doc["contributors"]
    assert (doc["runs_before"], doc["runs_after"]) == (3, 3)  # the account: every run of the levels
    assert (who["runs_before"], who["runs_after"]) == (2, 2)
    assert [r["change"] for r in who["rows"]] == [17810.0, 15686.0, 15277.0]
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "trend", mk2_store, "execution.total_time_us")
    assert max(len(line) for line in out.splitlines()) <= 80
    flat = " ".join(out.split())
    assert (
        "exchange +565.1 us: its programs (IPU-cycles, means of 2 runs before and 2 after) that changed"
        in flat
    )


def test_the_names_are_read_through_the_stores_page_checks(mk2_store, tmp_path, capsys) -> None:
    """A byte flipped in a run's steps file, where DuckDB alone would read another value: the names' read checks
    the pages of the files it hands to DuckDB (``store/verified.py``) and refuses it, one line, exit 2; a metric
    whose change names nothing does not read the tables."""
    import shutil

    from test_damaged_inputs_more import _flip_in_column

    root = tmp_path / "store"
    shutil.copytree(mk2_store, root)
    (root / "cache" / "verified.parquet").unlink(missing_ok=True)
    file = sorted((root / "tables" / "steps").glob("month=*/*.parquet"))[0]
    _flip_in_column(file, "cycles")
    code, out, err = run(capsys, "trend", root, "execution.total_time_us")
    assert code == 2 and out == ""
    assert err.startswith(f"popprof: error: {file}: damaged store file: a data page fails its checksum"), err
    code, out, err = run(capsys, "trend", root, "memory.total_incl_gaps_bytes")
    assert code == 0, err
