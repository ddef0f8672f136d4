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
    code, out, _ = run(capsys, "fleet", "ranks", fleet, "--format", "json")
    assert code == 0
    rows = json.loads(out)
    top = rows[0]
    scores = job_scores(store.open(fleet))
    slow_jobs = int((scores[scores["rank"] == 13]["z"] > 3.5).sum())
    assert (top["rank"], top["host"], top["jobs"], top["straggled"]) == (13, "host-1", 60, slow_jobs)
    assert 20 <= slow_jobs <= 40  # slow in about half the jobs; a 10 % slowdown at 1 % noise always shows
    assert all(r["straggled"] <= 3 for r in rows[1:])  # noise alone rarely goes past z 3.5


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
