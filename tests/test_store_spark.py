"""The distributed path: a real Spark local-mode session reads the same store files as DuckDB.

One session for the module (the JVM's start is most of the cost: ``local_session``'s small JVM, C1 JIT and
serial GC) and one small store (two Mk2 runs and a two-rank trace) registered once; each check is one Spark query.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from store_helpers import MK2, ROOT, TWO_RANKS

import popprof.store as store
from popprof.store.compact import compact

pytestmark = [
    pytest.mark.spark,
    # one worker runs the module under pytest-xdist, so one JVM starts
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


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
RUNS = "SELECT run_id, profile, month FROM runs ORDER BY run_id"
TILES = "SELECT run_id, count(*) AS n FROM tiles GROUP BY run_id ORDER BY run_id"
RANKS = "SELECT run_id, rank, step_us FROM ranks ORDER BY run_id, rank"


def _same_in_both(spark, s: store.Store, queries: tuple[str, ...]) -> dict[str, list[dict]]:
    """Each query's rows from Spark, after checking they equal DuckDB's."""
    s.spark(spark)
    con = s.duckdb()
    out = {}
    try:
        for sql in queries:
            out[sql] = spark.sql(sql).toArrow().to_pylist()
            assert out[sql] == con.sql(sql).to_arrow_table().to_pylist(), sql
    finally:
        con.close()
    return out


def test_spark_views_equal_duckdb_ids_stay_strings_and_nothing_counts_twice(spark, filled: Path) -> None:
    # January compacted, then its per-run tiles files put back (a compaction "crashed" before deleting them);
    # February per-run: the views' one-pass path (one file generation per month) and their generation
    # choice (two generations of tiles in January) in one registration
    per_run = {
        p.relative_to(filled): p.read_bytes() for p in (filled / "tables" / "tiles").rglob("*.parquet")
    }
    compact(filled, before="2026-02")
    for rel, data in per_run.items():
        (filled / rel).write_bytes(data)
    rows = _same_in_both(spark, store.open(filled), (TREND, RUNS, RANKS, TILES))
    assert [r["run_id"] for r in rows[RUNS]] == ["00123", "12e45", "7"]  # strings, never 123.0 or 1.2e46
    assert [r["commit"] for r in rows[TREND]] == ["a", "b"]
    assert {r["run_id"] for r in rows[RANKS]} == {"7"} and len(rows[RANKS]) == 2
    assert rows[TILES] == [{"run_id": "00123", "n": 1472}, {"run_id": "12e45", "n": 1472}]


def test_add_spark_adds_on_the_executors_and_reports_what_it_could_not(spark, tmp_path: Path) -> None:
    """Issue 45, item 4: ``popprof.store.add_spark`` runs ``store.add`` in the executors' Python workers
    (local mode: the same machine, popprof importable there as on a cluster with it installed)."""
    from popprof.store.distributed import SparkAddError

    root = tmp_path / "store"
    store.init(root)
    results = store.add_spark(
        spark, root, [MK2, TWO_RANKS], run_ids={str(MK2): "mk2-1"}, time="2026-03-01T00:00:00Z", commit="c"
    )
    assert [(r.run_id, r.profile, r.status, r.month) for r in results] == [
        ("mk2-1", "mk2_training", "added", "2026-03"),
        (results[1].run_id, results[1].profile, "added", "2026-03"),
    ]
    s = store.open(root)
    assert s.query("SELECT count(*) AS n FROM runs")["n"].tolist() == [2]
    assert s.query("SELECT count(*) AS n FROM tiles WHERE run_id = 'mk2-1'")["n"].tolist() == [1472]
    assert s.query("SELECT DISTINCT commit FROM runs")["commit"].tolist() == ["c"]
    again = store.add_spark(
        spark, root, [MK2], run_ids={str(MK2): "mk2-1"}, time="2026-03-01T00:00:00Z", commit="c"
    )
    assert [r.status for r in again] == ["unchanged"]
    with pytest.raises(SparkAddError) as caught:  # other content under a stored id: that source only fails
        store.add_spark(spark, root, [MK2, TWO_RANKS], run_ids={str(MK2): "mk2-1"}, commit="other")
    assert len(caught.value.failures) == 1 and "--replace" in caught.value.failures[0][1]
    assert [r.profile for r in caught.value.results] == [results[1].profile]


def test_spark_reads_a_store_at_a_path_with_glob_characters_and_no_symbolic_link(
    spark, tmp_path: Path
) -> None:
    """Issue 45, item 7, in Spark too: Hadoop globs the paths it is given, and lists symbolic links."""
    import warnings

    from popprof.testing.store_history import write_history

    for name in ("ab", "a[b]"):
        store.init(tmp_path / name)
        write_history(tmp_path / name, {"trace.device_idle_us": [1.0]}, run_ids=[f"from-{name}"])
    other = tmp_path / "a[b]"
    for planted in list(other.rglob("*.parquet")):  # a whole run of another store, linked into 'ab'
        (tmp_path / "ab" / planted.relative_to(other).parent / ("x" + planted.name)).symlink_to(planted)
    for name in ("a[b]", "ab"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store.open(tmp_path / name).spark(spark)
        got = spark.sql("SELECT run_id FROM metrics").toArrow()["run_id"].to_pylist()
        assert got == [f"from-{name}"], name


def test_spark_checks_page_checksums_as_it_reads_and_a_damaged_page_is_one_line(
    spark, tmp_path: Path
) -> None:
    """Spark's Parquet reader checks no page checksum unless told (parquet-mr's
    ``parquet.page.verify-checksum.enabled``, off by default): a byte flipped in a metrics data page failed the
    job with an ArrayIndexOutOfBoundsException, or read as other values. Each read of the views now turns the
    check on, and ``Store.spark_table`` turns the failing page into popprof's one line naming the file."""
    from store_helpers import flip_in_data_page

    from popprof.model.errors import InputError
    from popprof.store.engine_spark import VERIFY_CHECKSUMS

    root = tmp_path / "store"
    store.init(root)
    store.add(root, [MK2], run_id="1", time="2026-01-05T00:00:00Z")
    s = store.open(root)
    sql = "SELECT name, value FROM metrics ORDER BY name"
    con = s.duckdb(verify=False)
    try:
        plain = con.sql(sql).to_arrow_table().to_pylist()
    finally:
        con.close()
    s.spark(spark)
    assert s.spark_table(spark, sql).to_pylist() == plain  # the same figures with the check on
    (metrics,) = root.glob("metrics/month=*/*.parquet")
    flip_in_data_page(metrics)
    s.spark(spark)
    with pytest.raises(InputError) as refused:
        s.spark_table(spark, sql)
    line = str(refused.value)
    assert line == (
        f"{metrics}: damaged store file: a data page fails its checksum: changed since it was written (could not "
        "verify page integrity, CRC checksum verification failed) (popprof store fsck lists the files it cannot "
        "read)"
    ), line
    # the check is Spark's own, given with each read: the same file read without it is not refused so
    unchecked = spark.read.schema("name STRING, value DOUBLE").parquet(str(metrics))
    checked = (
        spark.read.option(VERIFY_CHECKSUMS, "true").schema("name STRING, value DOUBLE").parquet(str(metrics))
    )
    with pytest.raises(Exception, match="CRC checksum verification failed"):
        checked.toArrow()
    try:
        unchecked.toArrow()
    except Exception as exc:  # the damage may also fail the decoding, but never as a checksum
        assert "CRC checksum" not in str(exc)


# -- the findings and the time account (kept since 2026-12-07) ---------------------------------------------------

BERT_TRACE = ROOT / "fixtures" / "real" / "traces" / "tracelens_h100_bert_small.json.gz"
FINDINGS_SQL = (
    "SELECT run_id, position, rule_id, severity, figure, gain_value, gain_unit, share, rules_sha256 "
    "FROM findings ORDER BY run_id, position"
)
ACCOUNT_SQL = (
    "SELECT run_id, platform, rank, device, step, basis, window_us, compute, idle_host, idle_launch, sync, idle "
    "FROM account ORDER BY run_id, device"
)


def test_spark_sees_findings_and_account_as_duckdb_and_an_older_store_empty(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store.init(root)
    store.add(root, [MK2], run_id="1", time="2026-01-05T00:00:00Z")
    store.add(root, [BERT_TRACE], run_id="2", time="2026-02-05T00:00:00Z")
    s = store.open(root)
    s.spark(spark)
    con = s.duckdb()
    for sql in (FINDINGS_SQL, ACCOUNT_SQL):
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
