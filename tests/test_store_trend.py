"""``popprof trend``: exact change logs with the range to bisect, budgeted change points, the gate, acks."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from store_helpers import run

import popprof.store as store
from popprof.store import changepoints
from popprof.testing.store_history import shifted_series, write_history

IDLE = "trace.device_idle_us"  # noisy; default budget +5 %
MEMORY = "memory.total_incl_gaps_bytes"  # exact; default budget +1 %


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("trend") / "store"
    store.init(root)
    memory = [1_000_000] * 40 + [1_004_000] * 30 + [1_050_000] * 30  # +0.4 % (within budget), then +4.6 %
    idle = shifted_series(100, seed=4, noise=0.01, shifts={60: 0.03, 95: 0.10})  # +3 % (within), +10 %
    ids = write_history(root, {MEMORY: memory, IDLE: idle}, compacted=True)
    return root, ids


def test_exact_mode_lists_every_change_with_the_range_to_bisect(history, capsys) -> None:
    root, ids = history
    code, out, _ = run(capsys, "trend", root, MEMORY, "--format", "json")
    assert code == 0
    (series,) = json.loads(out)["series"]
    assert series["mode"] == "exact" and len(series["values"]) == 100
    changes = series["changes"]
    assert [(c["last_old_run"], c["first_new_run"]) for c in changes] == [
        (ids[39], ids[40]),
        (ids[69], ids[70]),
    ]
    assert [c["beyond_budget"] for c in changes] == [False, True]
    assert [c["regression"] for c in changes] == [False, True]
    assert (
        changes[0]["last_old_commit"] == series["commits"][39]
        and changes[0]["first_new_commit"] == series["commits"][40]
    )
    assert changes[1]["rel_change"] == pytest.approx(1_050_000 / 1_004_000 - 1)
    # an exact change's bisect range is the two runs either side of it
    assert [(c["bisect_from_run"], c["bisect_to_run"]) for c in changes] == [
        (ids[39], ids[40]),
        (ids[69], ids[70]),
    ]


def test_noisy_mode_keeps_only_changes_beyond_the_budget(history, capsys, monkeypatch) -> None:
    root, ids = history
    code, out, _ = run(capsys, "trend", root, IDLE, "--format", "json", "--fail-on", "regression")
    (series,) = json.loads(out)["series"]
    assert series["mode"] == "noisy"
    assert [c["first_new_run"] for c in series["changes"]] == [ids[95]]  # the +3 % shift is within +5 %
    change = series["changes"][0]
    assert change["regression"] and change["recent"]
    assert code == 1
    # a noisy change's bisect range spans the runs where the new level may start: it holds run 95
    first, last = ids.index(change["bisect_from_run"]) + 1, ids.index(change["bisect_to_run"])
    assert first <= 95 <= last and last - first <= 4
    assert (change["bisect_from_commit"], change["bisect_to_commit"]) == (
        series["commits"][first - 1],
        series["commits"][last],
    )
    monkeypatch.delenv("COLUMNS", raising=False)
    _, out, _ = run(capsys, "trend", root, IDLE)  # piped: 80 columns, too few for two 40-digit hashes
    old, new = change["bisect_from_commit"], change["bisect_to_commit"]
    assert (
        len(old) == len(new) == 40
        and f"bisect {old[:12]}..{new[:12]};" in " ".join(out.split())
        and old not in out
    )
    assert max(len(line) for line in out.splitlines()) <= 80
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = run(capsys, "trend", root, IDLE)  # wide enough: the whole hashes, on the change's one line
    assert f"bisect {old}..{new};" in out and len(out.splitlines()) == 2


def test_a_regression_outside_the_recent_runs_does_not_fail(history, capsys) -> None:
    root, _ = history
    code, out, _ = run(capsys, "trend", root, MEMORY, "--fail-on", "regression", "--recent", "5")
    assert code == 0 and "regression:" in out
    code, _, _ = run(capsys, "trend", root, MEMORY, "--fail-on", "regression", "--recent", "40")
    assert code == 1


def test_ack_stops_the_gate_failing_on_that_change(history, tmp_path: Path, capsys) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(history[0], root)
    ids = history[1]
    assert run(capsys, "trend", root, IDLE, "--fail-on", "regression")[0] == 1
    code, out, _ = run(capsys, "trend", "ack", root, IDLE, ids[95], "--note", "new kernel, accepted")
    assert code == 0 and "acknowledged" in out
    code, out, _ = run(capsys, "trend", root, IDLE, "--fail-on", "regression")
    assert code == 0 and "acknowledged" in out
    code, _, err = run(capsys, "trend", "ack", root, IDLE, "no-such-run")
    assert code == 2 and "no run" in err


def test_markdown_junit_and_plot(history, tmp_path: Path, capsys) -> None:
    root, ids = history
    code, out, _ = run(capsys, "trend", root, IDLE, MEMORY, "--format", "markdown", "-o", tmp_path / "t.png")
    assert code == 0 and out.startswith("### popprof trend: 1 unacknowledged recent regression")
    assert out.count("\n| `") == 3 and (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    code, out, _ = run(capsys, "trend", root, IDLE, MEMORY, "--format", "junit")
    suites = ET.fromstring(out)
    assert suites.get("tests") == "2" and suites.get("failures") == "1"
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(Path(__file__).resolve().parent / "schemas" / "junit-10.xsd")).validate(out)
    failed = suites.find(".//failure")
    assert failed is not None and ids[95] in failed.get("message")


def test_without_ruptures_exact_mode_works_and_noisy_metrics_say_what_to_install(
    history, monkeypatch, capsys
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ruptures(name, *args, **kwargs):
        if name == "ruptures" or name.startswith("ruptures."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ruptures)
    code, out, err = run(capsys, "trend", history[0], MEMORY, IDLE)
    assert code == 0
    assert "memory.total_incl_gaps_bytes [train] exact" in out and "REGRESSION" not in out.split(IDLE)[1]
    assert err.strip() == f"popprof: note: {changepoints.INSTALL_HINT}"


def test_unknown_metric_and_bad_store_are_one_line(history, tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, "trend", history[0], "no.such.metric")
    assert code == 2 and "no runs of metric" in err
    code, _, err = run(capsys, "trend", tmp_path, MEMORY)
    assert code == 2 and "not a popprof store" in err


def test_the_p_value_is_mann_whitney_with_ties() -> None:
    import numpy as np

    stats = pytest.importorskip("scipy.stats")
    from popprof.store.trend import _p_value

    rng = np.random.default_rng(0)
    for before, after in [
        (rng.normal(0, 1, 30), rng.normal(0.5, 1, 40)),
        (np.array([1.0, 1, 2, 2, 3]), np.array([2.0, 3, 3, 4, 4, 4])),
    ]:
        expected = stats.mannwhitneyu(before, after, alternative="two-sided", method="asymptotic").pvalue
        assert _p_value(before, after) == pytest.approx(expected, rel=1e-9)


def test_reruns_of_one_commit_are_one_point_their_median(tmp_path: Path, capsys) -> None:
    root = tmp_path / "store"
    store.init(root)
    # commit c1 re-run three times (one re-run hit a bad machine), a run without a commit, then c2 and c3
    commits = ["c0", "c1", "c1", None, "c1", "c2", "c3"]
    memory = [100.0, 100.0, 200.0, 100.0, 100.0, 100.0, 150.0]
    ids = write_history(root, {MEMORY: memory}, commits=commits)
    code, out, _ = run(capsys, "trend", root, MEMORY, "--format", "json")
    (series,) = json.loads(out)["series"]
    assert code == 0 and series["mode"] == "exact" and series["commits"] == ["c0", "c1", None, "c2", "c3"]
    assert series["runs"] == [ids[0], ids[1], ids[3], ids[5], ids[6]]  # a commit at its first run
    assert series["values"] == [100.0, 100.0, 100.0, 100.0, 150.0] and series["runs_per_point"] == [
        1,
        3,
        1,
        1,
        1,
    ]
    assert [(c["last_old_commit"], c["first_new_commit"]) for c in series["changes"]] == [("c2", "c3")]
    code, out, _ = run(capsys, "trend", root, MEMORY)
    assert "5 commits (7 runs)" in out
    code, out, _ = run(capsys, "trend", root, MEMORY, "--format", "json", "--each-run")
    (series,) = json.loads(out)["series"]
    # run by run, the memory metric stays exact (the registry knows bytes are), so each change of value shows
    assert len(series["values"]) == 7 and series["mode"] == "exact"
    assert [c["index"] for c in series["changes"]] == [2, 3, 6]


def test_trend_config_sets_modes_and_its_own_thresholds(history, tmp_path: Path, capsys) -> None:
    root, ids = history
    config = tmp_path / "popprof.toml"
    config.write_text('[trend]\nexact = ["trace.*"]\n[trend.budgets]\n"trace.device_idle_us" = "+2%"\n')
    code, out, _ = run(capsys, "trend", root, IDLE, "--format", "json", "--config", config)
    (series,) = json.loads(out)["series"]
    assert code == 0 and series["mode"] == "exact" and len(series["changes"]) > 50  # every value change
    code, out, _ = run(capsys, "trend", root, IDLE, "--format", "json", "--config", config, "--mode", "noisy")
    (series,) = json.loads(out)["series"]
    # with trend's own +2 % the +3 % shift at run 60 is kept too (the gate's default budget is +5 %)
    assert [c["first_new_run"] for c in series["changes"]] == [ids[60], ids[95]]
    assert {c["budget"] for c in series["changes"]} == {"+2 %"}
    # the +3 % shift (3 sigma) may start at run 59 or 60: the text gives the range and the most likely run
    assert (series["changes"][0]["bisect_from_run"], series["changes"][0]["bisect_to_run"]) == (
        ids[58],
        ids[60],
    )
    _, out, _ = run(capsys, "trend", root, IDLE, "--config", config, "--mode", "noisy")
    assert f"between runs {ids[58]} and {ids[60]} (most likely from {ids[60]})" in " ".join(out.split())
    for bad, words in (("[trend]\nexact = 3\n", "trend.exact"), ('[trend.budgets]\n"x.*" = "lots"\n', "x.*")):
        config.write_text(bad)
        code, _, err = run(capsys, "trend", root, IDLE, "--config", config)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1


ISSUE_45 = [6.68e6, 25.44e6, 25.94e6]  # three runs of a cycle count: +281 %, then +2 %


def test_a_cycle_count_is_exact_by_definition_whatever_its_spread(tmp_path: Path, capsys) -> None:
    """Issue 45, item 2: the registry knows cycles are exact; auto must not take three values for noise."""
    from popprof.store.trend import exact_by_definition

    root = tmp_path / "store"
    store.init(root)
    ids = write_history(root, {"execution.total_cycles": ISSUE_45})
    code, out, _ = run(capsys, "trend", root, "execution.total_cycles", "--format", "json")
    assert code == 0
    (series,) = json.loads(out)["series"]
    assert series["mode"] == "exact"
    first = series["changes"][0]
    assert (first["last_old_run"], first["first_new_run"]) == (ids[0], ids[1])
    assert first["rel_change"] == pytest.approx(25.44 / 6.68 - 1) and first["regression"]
    code, _, _ = run(capsys, "trend", root, "execution.total_cycles", "--fail-on", "regression")
    assert code == 1
    assert all(
        exact_by_definition(m)
        for m in ("execution.total_cycles", "memory.total_incl_gaps_bytes", "execution.cycles.compute")
    )
    assert not any(exact_by_definition(m) for m in (IDLE, "trace.span_us", "account.compute_us", "nope"))


def test_a_noisy_series_reports_a_jump_far_beyond_its_noise_with_three_runs(tmp_path: Path, capsys) -> None:
    root = tmp_path / "store"
    store.init(root)
    ids = write_history(root, {IDLE: ISSUE_45})
    code, out, _ = run(capsys, "trend", root, IDLE, "--format", "json", "--fail-on", "regression")
    (series,) = json.loads(out)["series"]
    assert code == 1 and series["mode"] == "noisy"
    assert [(c["first_new_run"], c["regression"]) for c in series["changes"]] == [(ids[1], True)]


def test_far_jumps_are_not_found_in_noise() -> None:
    """No far jump in stationary or spiky 500-run series, nor in short ones without a step; a step in the
    last two runs of a long series (too recent for the change points) is found."""
    for seed in range(50):
        assert changepoints.far_jump(shifted_series(500, seed=seed)) is None
        assert changepoints.far_jump(shifted_series(500, seed=1000 + seed, spikes=0.02)) is None
        assert changepoints.far_jump(shifted_series(12, seed=seed)) is None
    assert changepoints.far_jump([100.0, 125.0]) is None  # one new run is a spike until confirmed
    assert changepoints.far_jump([100.0, 101.0, 125.0]) is None
    late = shifted_series(200, seed=3, noise=0.01, shifts={198: 1.0})
    assert changepoints.change_points(late) == [] and changepoints.far_jump(late) == 198


def test_a_non_finite_metric_is_left_out_with_a_note(tmp_path: Path, capsys) -> None:
    root = tmp_path / "store"
    store.init(root)
    write_history(root, {IDLE: [100.0, float("inf"), 101.0, 100.0]})
    code, out, err = run(capsys, "trend", root, IDLE, "--format", "json")
    assert code == 0 and json.loads(out)["series"][0]["values"] == [100.0, 101.0, 100.0]
    assert "not a finite number" in err
