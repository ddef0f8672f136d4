"""The distributed path: a real Spark local-mode session reads the same store files as DuckDB."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from store_helpers import MK2, TWO_RANKS

import popprof.store as store
from popprof.store.compact import compact

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture(scope="session")
def spark():
    """One local[1] session for the whole test run (UI off, 127.0.0.1, 512 MiB): ~20 s on 2 cores."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'popprof[spark]')")
    from popprof.store.engine_spark import has_java, local_session

    if not has_java():
        pytest.skip("no Java runtime (Spark needs Java 17+)")
    session = local_session("popprof-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("spark") / "store"
    store.init(root)
    store.add(root, [MK2], run_id="00123", time="2026-01-05T00:00:00Z", commit="a")
    store.add(root, [MK2], run_id="12e45", time="2026-01-06T00:00:00Z", commit="b")
    store.add(root, [TWO_RANKS], run_id="7", time="2026-02-01T00:00:00Z")
    return root


TREND = (
    "SELECT m.run_id, r.commit, m.value FROM metrics m JOIN runs r "
    "ON m.run_id = r.run_id AND m.profile = r.profile AND m.ingest_id = r.ingest_id "
    "WHERE m.name = 'memory.total_incl_gaps_bytes' ORDER BY m.run_id"
)


def _same_in_both(spark, s: store.Store) -> None:
    s.spark(spark)
    con = s.duckdb()
    try:
        for sql in (
            TREND,
            "SELECT run_id, profile, month FROM runs ORDER BY run_id",
            "SELECT run_id, count(*) AS n FROM tiles GROUP BY run_id ORDER BY run_id",
            "SELECT run_id, rank, step_us FROM ranks ORDER BY run_id, rank",
        ):
            assert spark.sql(sql).toArrow().to_pylist() == con.sql(sql).to_arrow_table().to_pylist(), sql
    finally:
        con.close()


def test_spark_views_equal_duckdb_and_ids_stay_strings(spark, filled: Path) -> None:
    s = store.open(filled)
    _same_in_both(spark, s)
    runs = spark.sql("SELECT run_id FROM runs ORDER BY run_id").toArrow()
    assert runs.schema.field("run_id").type == "string" and runs["run_id"].to_pylist() == [
        "00123",
        "12e45",
        "7",
    ]


def test_spark_counts_nothing_twice_after_an_interrupted_compaction(
    spark, filled: Path, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    shutil.copytree(filled, root)
    per_run = {p.relative_to(root): p.read_bytes() for p in (root / "tables" / "tiles").rglob("*.parquet")}
    compact(root, before="2026-02")
    for rel, data in per_run.items():  # the per-run files come back: the compaction "crashed" before deleting
        (root / rel).write_bytes(data)
    s = store.open(root)
    _same_in_both(spark, s)
    assert spark.sql("SELECT count(*) AS n FROM tiles").toArrow()["n"].to_pylist() == [2 * 1472]
