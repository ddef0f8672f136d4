"""The run store: idempotent, append-only adds, conflicts, crashes, CI identities, string run ids."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from store_helpers import MK2, TWO_RANKS, run

import popprof.store as store
from popprof.compare.baseline import write_baseline
from popprof.store import identity, ingest
from popprof.store.compact import fsck


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store.init(path)
    return path


def _parquet_files(root: Path) -> list[Path]:
    """The store's data files (not popprof's caches under ``cache/``, which its reads write)."""
    return sorted(p for p in root.rglob("*.parquet") if p.relative_to(root).parts[0] != "cache")


def test_same_run_twice_is_a_no_op(root: Path, capsys) -> None:
    code, out, _ = run(capsys, "store", "add", root, MK2, "--run-id", "00123", "--commit", "c1")
    assert code == 0 and out.startswith("added: run 00123")
    files = {p: p.stat().st_mtime_ns for p in _parquet_files(root)}
    code, out, _ = run(capsys, "store", "add", root, MK2, "--run-id", "00123", "--commit", "c1")
    assert code == 0 and out.startswith("unchanged: run 00123")
    assert {p: p.stat().st_mtime_ns for p in _parquet_files(root)} == files  # nothing written
    runs = store.open(root).query("SELECT run_id, commit, month FROM runs")
    assert runs.to_dict("records") == [{"run_id": "00123", "commit": "c1", "month": "2026-11"}]


def _changed_copy(tmp_path: Path) -> Path:
    """The Mk2 fixture under its own name with the first tile using 64 bytes more."""
    import popprof
    from popprof.readers import bundle

    profile = popprof.open(MK2)
    profile.tiles.loc[0, "bytes_incl_gaps"] += 64
    return bundle.write(profile, tmp_path / "changed" / MK2.name)


def test_same_id_other_content_is_refused_unless_replace(root: Path, tmp_path: Path, capsys) -> None:
    changed = _changed_copy(tmp_path)
    run(capsys, "store", "add", root, MK2, "--run-id", "7", "--time", "2026-11-02T00:00:00Z")
    before = _parquet_files(root)
    code, out, err = run(
        capsys, "store", "add", root, changed, "--run-id", "7", "--time", "2026-11-02T00:00:00Z"
    )
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--replace" in err and "Traceback" not in err
    assert _parquet_files(root) == before
    code, out, _ = run(
        capsys, "store", "add", root, changed, "--run-id", "7", "--time", "2026-11-02T00:00:00Z", "--replace"
    )
    assert code == 0 and out.startswith("replaced: run 7")
    s = store.open(root)
    assert s.query("SELECT count(*) AS n FROM runs")["n"].tolist() == [1]
    # the tables show the new content once, and the replaced run's files are gone
    first = s.query("SELECT bytes_incl_gaps FROM tiles WHERE tile = 0")["bytes_incl_gaps"].tolist()
    assert first == [pq.read_table(MK2 / "tiles.parquet")["bytes_incl_gaps"][0].as_py() + 64]
    assert s.query("SELECT count(*) AS n FROM tiles")["n"].tolist() == [1472]
    assert len(_parquet_files(root)) == len(before)
    assert fsck(root) == []


def test_a_crash_before_the_catalogue_row_leaves_nothing_visible(root: Path, monkeypatch) -> None:
    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest, "write_row", crash)
    with pytest.raises(KeyboardInterrupt):
        store.add(root, [MK2], run_id="r1")
    monkeypatch.undo()
    assert any(root.joinpath("tables").rglob("*.parquet"))  # the table files were written ...
    s = store.open(root)
    for view in ("runs", "metrics", "tiles", "steps"):  # ... and no view shows them
        assert s.query(f"SELECT count(*) AS n FROM {view}")["n"].tolist() == [0]
    problems = fsck(root)
    assert problems and {p.kind for p in problems} == {"orphan"}
    fsck(root, fix=True)
    assert fsck(root) == [] and not _parquet_files(root)
    assert store.add(root, [MK2], run_id="r1")[0].status == "added"
    assert s.query("SELECT count(*) AS n FROM tiles")["n"].tolist() == [1472]


def test_month_comes_from_the_run_time_and_ids_stay_strings(root: Path) -> None:
    store.add(root, [MK2], run_id="00123", time="2026-05-31T23:30:00-02:00")
    store.add(root, [MK2], run_id="12e45", time="2026-06-02T00:00:00Z")
    assert sorted(p.name for p in (root / "runs").iterdir()) == ["month=2026-06"]
    s = store.open(root)
    runs = s.query("SELECT run_id, month FROM runs ORDER BY run_id")
    assert runs["run_id"].tolist() == ["00123", "12e45"] and runs["month"].tolist() == ["2026-06", "2026-06"]
    dataset = s.arrow_dataset("metrics").to_table()
    assert dataset.schema.field("run_id").type == "string"
    assert set(dataset["run_id"].to_pylist()) == {"00123", "12e45"}
    for path in root.rglob("*.parquet"):  # no run id is a directory name anywhere
        assert "00123" not in str(path.parent) and "12e45" not in str(path.parent)


def test_a_baseline_json_stores_exactly_its_metrics(root: Path, tmp_path: Path) -> None:
    import popprof

    baseline = write_baseline(popprof.open(MK2), tmp_path / "base.json")
    stored = store.add(root, [baseline], run_id="b1")
    assert stored[0].status == "added"
    expected = {k: v["value"] for k, v in json.loads(baseline.read_text())["metrics"].items()}
    got = store.open(root).query("SELECT name, value FROM metrics")
    assert dict(zip(got["name"], got["value"], strict=True)) == pytest.approx(expected)
    assert store.open(root).query("SELECT kind FROM runs")["kind"].tolist() == ["baseline"]


def test_a_trace_gets_per_rank_rows_from_the_straggler_figures(root: Path) -> None:
    import popprof
    from popprof.metrics.ranks import rank_figures

    store.add(root, [TWO_RANKS], run_id="t1")
    ranks = store.open(root).query("SELECT rank, step_us, idle_share FROM ranks ORDER BY rank")
    figures = rank_figures(popprof.open(TWO_RANKS))
    assert ranks["rank"].tolist() == figures["rank"].tolist()
    assert ranks["step_us"].tolist() == pytest.approx(figures["step_us"].tolist())
    assert ranks["idle_share"].tolist() == pytest.approx(figures["idle_share"].tolist())


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {
                "GITHUB_RUN_ID": "99",
                "GITHUB_RUN_ATTEMPT": "2",
                "GITHUB_SHA": "abc",
                "GITHUB_REF_NAME": "main",
            },
            ("99.2", "abc", "main"),
        ),
        (
            {"GITLAB_CI": "true", "CI_PIPELINE_ID": "5", "CI_JOB_ID": "77", "CI_COMMIT_SHA": "d"},
            ("5.77", "d", None),
        ),
        (
            {"BUILD_TAG": "jenkins-x-3", "GIT_COMMIT": "e", "GIT_BRANCH": "origin/dev"},
            ("jenkins-x-3", "e", "dev"),
        ),
        ({}, (None, None, None)),
    ],
)
def test_run_identity_from_ci_variables(env: dict, expected: tuple) -> None:
    found = identity.from_ci(env)
    assert (found.run_id, found.commit, found.branch) == expected


def test_ci_run_id_is_used_when_none_is_given(root: Path) -> None:
    result = store.add(root, [MK2], env={"GITHUB_RUN_ID": "00042", "GITHUB_RUN_ATTEMPT": "1"})
    assert result[0].run_id == "00042.1"
    assert store.open(root).query("SELECT run_id FROM runs")["run_id"].tolist() == ["00042.1"]


def test_bad_store_and_bad_options_are_one_line(tmp_path: Path, root: Path, capsys) -> None:
    code, _, err = run(capsys, "store", "add", tmp_path / "nowhere", MK2)
    assert code == 2 and "not a popprof store" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "store", "add", root, MK2, "--time", "yesterday")
    assert code == 2 and "ISO 8601" in err
    code, _, err = run(capsys, "store", "add", root, MK2, "--label", "novalue")
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = run(capsys, "store", "add", root, tmp_path / "missing.popprof")
    assert code == 2 and "Traceback" not in err


def test_ranks_take_their_host_from_the_trace_else_from_the_host_label(root: Path, tmp_path: Path) -> None:
    # PyTorch's tensorboard_trace_handler names a file <hostname>_<pid>.<time>.pt.trace.json.gz
    traces = tmp_path / "job"
    traces.mkdir()
    (traces / "gpu_node_3_4037.1682725897.pt.trace.json.gz").write_bytes(
        (TWO_RANKS / "rank-0.json.gz").read_bytes()
    )
    (traces / "rank-1.json.gz").write_bytes((TWO_RANKS / "rank-1.json.gz").read_bytes())
    store.add(root, [traces], run_id="t1", labels={"host": "from-label"})
    ranks = store.open(root).query("SELECT rank, host FROM ranks ORDER BY rank")
    assert ranks.to_dict("records") == [{"rank": 0, "host": "gpu_node_3"}, {"rank": 1, "host": "from-label"}]


def test_keep_bundle_keeps_the_source_bundle_and_replace_and_fsck_look_after_it(
    root: Path, tmp_path: Path
) -> None:
    import popprof

    store.add(root, [MK2], run_id="k1", time="2026-11-02T00:00:00Z", keep_bundle=True)
    kept = Path(store.open(root).bundle("k1"))
    assert (
        kept.name.endswith(".popprof")
        and (kept / "manifest.json").read_bytes() == (MK2 / "manifest.json").read_bytes()
    )
    assert popprof.open(kept).tiles.equals(popprof.open(MK2).tiles)  # `popprof diff` takes it as any bundle
    assert store.open(root).query("SELECT count(*) AS n FROM tiles")["n"].tolist() == [
        1472
    ]  # views ignore it
    store.add(
        root,
        [_changed_copy(tmp_path)],
        run_id="k1",
        time="2026-11-02T00:00:00Z",
        replace=True,
        keep_bundle=True,
    )
    new = Path(store.open(root).bundle("k1"))
    assert new != kept and not kept.exists() and new.is_dir() and fsck(root) == []
    orphan = root / "bundles" / "month=2026-11" / "x--train--00000000--0123456789abcdef.popprof"
    orphan.mkdir()
    (orphan / "manifest.json").write_text("{}")
    assert [(p.kind, p.path.split("/")[-1]) for p in fsck(root)] == [("orphan", orphan.name)]
    fsck(root, fix=True)
    assert not orphan.exists() and fsck(root) == [] and store.open(root).bundle("nope") is None


def test_profile_pins_the_series_and_a_new_series_is_said(root: Path, tmp_path: Path, capsys) -> None:
    """Issue 45, item 1: a renamed artefact continues its series with --profile; a new series is said."""
    import popprof
    from popprof.readers import bundle

    profile = popprof.open(MK2)
    profile.name = "model_v2"  # the same program's profile, written under the next version's name
    renamed = bundle.write(profile, tmp_path / "model_v2.popprof")
    code, out, _ = run(capsys, "store", "add", root, MK2, "--run-id", "1", "--time", "2026-11-01T00:00:00Z")
    assert code == 0 and "new series: no earlier run of profile mk2_training" in out
    code, out, _ = run(capsys, "store", "add", root, renamed, "--run-id", "2")  # a new series without a pin
    assert code == 0 and "new series" in out and "model_v2" in out.splitlines()[0]
    code, out, _ = run(capsys, "store", "add", root, renamed, "--run-id", "3", "--profile", "mk2_training")
    assert code == 0 and out.startswith("added: run 3 profile mk2_training") and "new series" not in out
    profiles = store.open(root).query("SELECT run_id, profile FROM runs ORDER BY run_id")
    assert profiles.to_dict("records") == [
        {"run_id": "1", "profile": "mk2_training"},
        {"run_id": "2", "profile": "model_v2"},
        {"run_id": "3", "profile": "mk2_training"},
    ]
    result = store.add(root, [renamed], run_id="4", profile="pinned")
    assert [(r.profile, r.new_series) for r in result] == [("pinned", True)]
    assert [r.new_series for r in store.add(root, [MK2], run_id="5", profile="pinned")] == [False]
    code, _, err = run(capsys, "store", "add", root, MK2, "--profile", " ")
    assert code == 2 and "--profile" in err


def test_time_in_the_year_1_is_filed_under_a_month_compaction_sees(root: Path, capsys) -> None:
    """Issue 45, item 7: --time 0001-01-01 went under month=1-01, which compaction never saw."""
    code, out, _ = run(capsys, "store", "add", root, MK2, "--run-id", "a", "--time", "0001-01-01")
    assert code == 0 and "(month 0001-01)" in out
    assert (root / "runs" / "month=0001-01").is_dir() and not (root / "runs" / "month=1-01").exists()
    code, out, _ = run(capsys, "store", "compact", root)
    assert code == 0 and "runs/0001-01" in out
    code, out, err = run(
        capsys, "store", "add", root, MK2, "--run-id", "b", "--time", "0001-01-01T00:00+05:00"
    )
    assert code == 2 and "outside the years" in err and out == ""
