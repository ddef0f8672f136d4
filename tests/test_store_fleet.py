"""``popprof fleet ranks``: a rank that straggles again and again stands out; noise alone does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from store_helpers import TWO_RANKS, run

import popprof.store as store
from popprof.store.fleet import job_scores, straggling_ranks
from popprof.testing.store_history import write_rank_jobs


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "store"
    store.init(root)
    write_rank_jobs(root, 60, 16, seed=11, slow={13: 0.10}, slow_share=0.5, compacted=True)
    return root


def test_the_planted_slow_rank_leads_the_list(fleet: Path, capsys) -> None:
    code, out, _ = run(capsys, "fleet", "ranks", fleet, "--format", "json", "--figure", "step_us")
    assert code == 0
    rows = json.loads(out)
    top = rows[0]
    assert top["figure"] == "step_us"
    scores = job_scores(store.open(fleet), "step_us")
    slow_jobs = int((scores[scores["rank"] == 13]["z"] > 3.5).sum())
    assert (top["rank"], top["host"], top["jobs"], top["straggled"]) == (13, "host-1", 60, slow_jobs)
    assert 20 <= slow_jobs <= 40  # slow in about half the jobs; a 10 % slowdown at 1 % noise always shows
    assert all(r["straggled"] <= 3 for r in rows[1:])  # noise alone rarely goes past z 3.5


def test_the_default_figure_finds_the_late_rank_of_synchronous_jobs(tmp_path: Path, capsys) -> None:
    """Issue 45, item 3: with a blocking all-reduce every rank's step time is the same; late_start, the
    default, finds the planted late rank, and the output says which figure it used."""
    root = tmp_path / "store"
    store.init(root)
    write_rank_jobs(root, 40, 8, seed=5, slow={3: 0.10}, slow_share=0.5, synchronous=True)
    by_step = straggling_ranks(root, figure="step_us")
    assert by_step["straggled"].sum() <= 3  # step times cannot see it: noise alone, now and then
    code, out, _ = run(capsys, "fleet", "ranks", root)
    assert code == 0 and out.startswith("figure: late_start, how late the rank starts")
    code, out, _ = run(capsys, "fleet", "ranks", root, "--format", "json")
    rows = json.loads(out)
    planted = int((job_scores(store.open(root)).query("rank == 3")["z"] > 3.5).sum())
    assert rows[0]["figure"] == "late_start" and (rows[0]["rank"], rows[0]["straggled"]) == (3, planted)
    assert 12 <= planted <= 28 and all(r["straggled"] <= 2 for r in rows[1:])
    code, out, _ = run(capsys, "fleet", "ranks", root, "--format", "csv")
    assert out.splitlines()[0].startswith("figure,rank,host")


def test_last_and_threshold(fleet: Path) -> None:
    few = straggling_ranks(fleet, last=10)
    assert few.empty or few["jobs"].max() <= 10
    assert straggling_ranks(fleet, z=1e9).empty


def test_a_real_two_rank_trace_has_no_z_score(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store.init(root)
    store.add(root, [TWO_RANKS], run_id="t")
    scores = job_scores(store.open(root))
    assert len(scores) == 2 and scores["z"].isna().all()  # a robust z needs at least 3 ranks


def test_bad_figure_is_one_line(fleet: Path, capsys) -> None:
    code, _, err = run(capsys, "fleet", "ranks", fleet, "--figure", "nope")
    assert code == 2 and "choose one of" in err
