"""``store query``: the views, the sandbox confined to the store, compaction and schema evolution."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from store_helpers import MK2, TWO_RANKS, run

import popprof.store as store
from popprof.store.compact import compact, fsck, outdated
from popprof.store.layout import Location
from popprof.store.schemas import schema_of
from popprof.testing.store_history import write_history


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("filled") / "store"
    store.init(root)
    for i, month in enumerate(["2026-01", "2026-01", "2026-02", "2026-03"]):
        store.add(root, [MK2], run_id=f"{i:05d}", time=f"{month}-1{i}T00:00:00Z", branch="main")
    store.add(root, [TWO_RANKS], run_id="12e45", time="2026-02-05T00:00:00Z", branch="main")
    return root


def test_query_sees_the_views(filled: Path, capsys) -> None:
    code, out, err = run(
        capsys, "store", "query", filled, "SELECT run_id FROM runs ORDER BY run_id", "--format", "json"
    )
    assert code == 0, err
    assert [r["run_id"] for r in json.loads(out)] == ["00000", "00001", "00002", "00003", "12e45"]
    code, out, _ = run(capsys, "store", "query", filled, "SELECT count(*) AS n FROM tiles", "--format", "csv")
    assert out.splitlines() == ["n", str(4 * 1472)]


def test_reading_the_store_directly_works_inside_it(filled: Path) -> None:
    sql = f"SELECT count(*) AS n FROM read_parquet('{filled}/runs/*/*.parquet')"
    assert store.open(filled).query(sql)["n"].tolist() == [5]


def test_rows_output_and_the_global_limit_as_popprof_query_has_them(
    filled: Path, tmp_path: Path, capsys
) -> None:
    sql = "SELECT run_id FROM runs ORDER BY run_id"
    code, out, err = run(capsys, "store", "query", filled, sql, "--rows", "2")
    assert code == 0 and err == "" and [line.strip() for line in out.splitlines()[1:3]] == ["00000", "00001"]
    assert "3 more rows (use --rows N" in out.splitlines()[-1]
    code, old, err = run(
        capsys, "store", "query", filled, sql, "--limit", "2"
    )  # the old spelling, with a note
    assert code == 0 and old == out and "store query --rows N" in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "store", "query", filled, sql, "--limit", "query-seconds=nope")
    assert code == 2 and "--limit query-seconds" in err and len(err.splitlines()) == 1
    target = tmp_path / "runs.csv"
    code, out, err = run(capsys, "store", "query", filled, sql, "--format", "csv", "-o", target, "-q")
    assert (
        code == 0 and out == "" and err == "" and target.read_text().splitlines()[:2] == ["run_id", "00000"]
    )


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "Permission"),
        ("SELECT * FROM read_parquet('{root}/../outside.parquet')", "Permission"),
        ("COPY (SELECT 1) TO '{root}/x.csv'", "not allowed"),
        ("SET enable_external_access = true", "not allowed"),
        ("INSTALL httpfs", "not allowed"),
        ("ATTACH '{root}/db.duckdb'", "not allowed"),
    ],
)
def test_sandbox_refuses_paths_outside_writes_and_settings(
    filled: Path, capsys, sql: str, words: str
) -> None:
    (filled.parent / "outside.parquet").write_bytes((MK2 / "target.parquet").read_bytes())
    code, out, err = run(capsys, "store", "query", filled, sql.format(root=filled))
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1
    assert not (filled / "x.csv").exists() and not (filled / "db.duckdb").exists()


def _snapshot(s: store.Store) -> dict:
    return {
        "runs": s.query("SELECT run_id, profile, ingest_id, month FROM runs ORDER BY ALL").to_dict("records"),
        "metrics": s.query("SELECT run_id, name, value FROM metrics ORDER BY ALL").to_dict("records"),
        "tiles": s.query(
            "SELECT run_id, sum(bytes_incl_gaps) AS b, count(*) AS n FROM tiles GROUP BY 1 ORDER BY 1"
        )
        .astype({"b": "int64"})
        .to_dict("records"),
        "ranks": s.query("SELECT run_id, rank, step_us FROM ranks ORDER BY ALL").to_dict("records"),
    }


def test_compaction_changes_no_answer_and_an_interrupted_one_counts_nothing_twice(
    filled: Path, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    shutil.copytree(filled, root)
    s = store.open(root)
    before = _snapshot(s)
    per_run = {p.relative_to(root): p.read_bytes() for p in root.rglob("*.parquet")}
    done = compact(root, before="2026-03")
    assert (
        "metrics/2026-01" in done and "runs/2026-02" in done and not any(d.endswith("2026-03") for d in done)
    )
    assert sorted(p.name for p in (root / "metrics" / "month=2026-01").iterdir())[0].startswith("compact-")
    assert len(list((root / "metrics" / "month=2026-01").iterdir())) == 1
    assert _snapshot(s) == before
    # a crash after the compacted file was written, before the per-run files were deleted: put them back
    for rel, data in per_run.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    assert _snapshot(s) == before
    assert {p.kind for p in fsck(root)} == {"compacted"}
    compact(root, before="2026-03")  # running it again finishes the job
    assert fsck(root) == [] and _snapshot(s) == before
    assert [p.name.split("-")[1] for p in (root / "metrics" / "month=2026-01").iterdir()] == ["000002"]


def test_schema_evolution_missing_and_unknown_columns(filled: Path, tmp_path: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(filled, root)
    s = store.open(root)
    expected = s.query("SELECT run_id, rank, step_us FROM ranks ORDER BY ALL").to_dict("records")
    (file,) = root.joinpath("ranks").rglob("*.parquet")
    table = pq.read_table(file)
    # an older writer without late_start, and a newer one with a column this popprof does not know
    table = table.drop_columns(["late_start"]).append_column(
        "future_figure", pa.array([1.5] * table.num_rows)
    )
    pq.write_table(table, file)
    got = s.query("SELECT run_id, rank, step_us, late_start FROM ranks ORDER BY ALL")
    assert got[["run_id", "rank", "step_us"]].to_dict("records") == expected
    assert got["late_start"].isna().all()
    assert "future_figure" not in s.query("SELECT * FROM ranks").columns


def test_compact_migrate_rewrites_months_with_files_of_other_columns(
    filled: Path, tmp_path: Path, capsys
) -> None:
    root = tmp_path / "store"
    shutil.copytree(filled, root)
    s = store.open(root)
    expected = s.query("SELECT run_id, rank, step_us FROM ranks ORDER BY ALL").to_dict("records")
    (file,) = root.joinpath("ranks").rglob("*.parquet")  # February: not closed below with --before 2026-02
    table = pq.read_table(file).drop_columns(["late_start"]).append_column("future", pa.array([1.5, 2.5]))
    pq.write_table(table, file)
    rel = file.relative_to(root).as_posix()
    assert outdated(Location.of(root), "ranks", [rel]) == [rel]
    code, out, _ = run(capsys, "store", "compact", root, "--before", "2026-02")
    assert code == 0 and "ranks/2026-02" not in out
    code, out, _ = run(capsys, "store", "compact", root, "--before", "2026-02", "--migrate")
    assert code == 0 and "ranks/2026-02" in out and "metrics/2026-02" not in out  # only what differs
    (migrated,) = root.joinpath("ranks").rglob("*.parquet")
    assert pq.read_schema(migrated).remove_metadata().equals(schema_of("ranks"))
    assert s.query("SELECT run_id, rank, step_us FROM ranks ORDER BY ALL").to_dict("records") == expected
    assert fsck(root) == []


def test_a_newer_store_version_is_refused(filled: Path, tmp_path: Path, capsys) -> None:
    root = tmp_path / "store"
    shutil.copytree(filled, root)
    descriptor = json.loads((root / "popprof-store.json").read_text())
    (root / "popprof-store.json").write_text(json.dumps(dict(descriptor, format_version=99)))
    code, _, err = run(capsys, "store", "ls", root)
    assert code == 2 and "newer than this popprof supports" in err and "upgrade popprof" in err


def test_ls_lists_runs_oldest_first(filled: Path, capsys) -> None:
    code, out, _ = run(capsys, "store", "ls", filled, "--last", "2", "--format", "json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == ["00002", "00003"]


def test_a_store_path_with_glob_characters_reads_its_own_files_only(tmp_path: Path, capsys) -> None:
    """Issue 45, item 7: the store path went unescaped into DuckDB's glob, so `a[b]` listed store `ab`."""
    for name, run_id in (("ab", "from-ab"), ("a[b]", "from-a[b]"), ("a*", "from-a*")):
        store.init(tmp_path / name)
        write_history(tmp_path / name, {"trace.device_idle_us": [1.0]}, run_ids=[run_id])
    for name, run_id in (("a[b]", "from-a[b]"), ("a*", "from-a*"), ("ab", "from-ab")):
        code, out, _ = run(capsys, "store", "ls", tmp_path / name, "--format", "json")
        assert code == 0 and [r["run_id"] for r in json.loads(out)] == [run_id]
        assert store.open(tmp_path / name).query("SELECT run_id FROM metrics")["run_id"].tolist() == [run_id]
    assert compact(tmp_path / "a[b]", before="2100-01") == ["metrics/2026-01", "runs/2026-01"]
    assert fsck(tmp_path / "a[b]") == [] and fsck(tmp_path / "ab") == []
    assert store.open(tmp_path / "ab").query("SELECT run_id FROM runs")["run_id"].tolist() == ["from-ab"]
