"""Spark sees the store's ``findings`` and ``account`` as DuckDB does: the same rows, and empty, typed views
over a store written before they were kept (a real local Spark session: slow, so one test)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from store_helpers import MK2, ROOT

import popprof.store as store

pytestmark = [
    pytest.mark.spark,
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

TRACE = ROOT / "fixtures" / "real" / "traces" / "tracelens_h100_bert_small.json.gz"
FINDINGS = (
    "SELECT run_id, position, rule_id, severity, figure, gain_value, gain_unit, share, rules_sha256 "
    "FROM findings ORDER BY run_id, position"
)
ACCOUNT = (
    "SELECT run_id, platform, rank, device, step, basis, window_us, compute, idle_host, idle_launch, sync, idle "
    "FROM account ORDER BY run_id, device"
)


@pytest.fixture(scope="module")
def spark():
    """One local[1] session for this module (UI off, 127.0.0.1, 512 MiB, small JVM)."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'popprof[spark]')")
    from popprof.store.engine_spark import has_java, local_session

    if not has_java():
        pytest.skip("no Java runtime (Spark needs Java 17+)")
    session = local_session("popprof-tests")
    yield session
    session.stop()


def test_spark_sees_findings_and_account_as_duckdb_and_an_older_store_empty(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store.init(root)
    store.add(root, [MK2], run_id="1", time="2026-01-05T00:00:00Z")
    store.add(root, [TRACE], run_id="2", time="2026-02-05T00:00:00Z")
    s = store.open(root)
    s.spark(spark)
    con = s.duckdb()
    for sql in (FINDINGS, ACCOUNT):
        rows = spark.sql(sql).toArrow().to_pylist()
        assert rows == con.sql(sql).to_arrow_table().to_pylist(), sql
        assert {r["run_id"] for r in rows} == {"1", "2"}
    con.close()

    old = tmp_path / "old"
    shutil.copytree(root, old)
    shutil.rmtree(old / "findings")
    shutil.rmtree(old / "account")
    store.open(old).spark(spark)
    for view in ("findings", "account"):
        frame = spark.sql(f"SELECT * FROM {view}")
        assert frame.count() == 0
        types = dict(frame.dtypes)
        assert types["run_id"] == "string" and types["rank" if view == "account" else "position"] == "bigint"
    assert spark.sql("SELECT count(*) AS n FROM runs").toArrow().to_pylist() == [{"n": 2}]
