"""The catalogue cache (``cache/runs.parquet``): the listing of ``runs/`` stays the truth; the cache only saves
reading the files again, and a cache that is stale, broken, of other columns or a link changes no answer."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from store_helpers import run

import popprof.store as store
from popprof.store import catalogue_cache
from popprof.store.catalogue import read_parquet, write_parquet
from popprof.store.compact import compact, fsck
from popprof.store.layout import Location
from popprof.store.schemas import RUNS
from popprof.testing.store_history import write_history

SQL = "SELECT * FROM runs ORDER BY run_id, profile"


@pytest.fixture
def history(tmp_path, monkeypatch):
    """A store of 12 runs over two months (one catalogue file each); the cache written on every read."""
    monkeypatch.setattr(catalogue_cache, "REFRESH_AT", 1)
    path = tmp_path / "s"
    store.init(path)
    write_history(path, {"trace.device_idle_us": [float(i) for i in range(12)]}, every=dt.timedelta(days=5))
    return path


def rows(path) -> list[dict]:
    return store.open(path).frame(SQL, kinds=["runs"]).to_dict("records")


def uncached(path) -> list[dict]:
    """The runs as read without a cache (and without writing one)."""
    cache = Location.of(path).path(catalogue_cache.CACHE)
    saved = Path(cache).read_bytes() if os.path.isfile(cache) else None
    if saved is not None:
        os.unlink(cache)
    old = catalogue_cache.REFRESH_AT
    catalogue_cache.REFRESH_AT = 10**9
    try:
        return rows(path)
    finally:
        catalogue_cache.REFRESH_AT = old
        if saved is not None:
            Path(cache).write_bytes(saved)


def catalogue_files(path) -> list[str]:
    return Location.of(path).files("runs", "month=*/*.parquet")


def test_a_read_writes_the_cache_and_the_next_reads_from_it(history):
    before = rows(history)
    location = Location.of(history)
    assert os.path.isfile(location.path(catalogue_cache.CACHE))
    files = catalogue_files(history)
    assert len(files) == 12
    found = catalogue_cache.stats(location, files)
    assert catalogue_cache.covered(location, files, found) == (files, 0)
    assert rows(history) == before == uncached(history)
    # the runs, metrics and every view agree with a read of the files
    con = store.open(history).duckdb()
    joined = con.execute(
        "SELECT count(*) FROM metrics m JOIN runs r USING (run_id, profile, ingest_id)"
    ).fetchall()
    assert joined == [(12,)]


def test_store_query_reads_the_cache_in_its_sandbox(history, capsys):
    rows(history)
    code, out, err = run(capsys, "store", "query", history, "SELECT count(DISTINCT commit) AS n FROM runs")
    assert code == 0, err
    assert "12" in out


def test_a_removed_catalogue_file_removes_its_run_whatever_the_cache_holds(history):
    rows(history)  # writes the cache
    gone = catalogue_files(history)[3]
    os.unlink(Location.of(history).path(gone))
    after = rows(history)
    assert len(after) == 11
    assert after == uncached(history)


def test_a_file_written_again_under_its_name_is_read_again(history):
    rows(history)
    location = Location.of(history)
    rel = catalogue_files(history)[0]
    table = read_parquet(location, rel)
    table = table.set_column(table.schema.get_field_index("commit"), "commit", pa.array(["rewritten"]))
    write_parquet(location, rel, table)  # a new file (temporary name, renamed): another inode
    after = rows(history)
    assert [r["commit"] for r in after if r["run_id"] == table["run_id"][0].as_py()] == ["rewritten"]
    assert after == uncached(history)


def test_a_new_run_is_seen_beside_the_cached_ones(history):
    rows(history)
    write_history(history, {"trace.device_idle_us": [99.0]}, run_ids=["new"])
    after = rows(history)
    assert len(after) == 13 and "new" in {r["run_id"] for r in after}


@pytest.mark.parametrize("how", ["garbage", "other columns", "link"])
def test_a_broken_or_foreign_cache_is_ignored(history, tmp_path, how):
    expected = rows(history)
    cache = Location.of(history).path(catalogue_cache.CACHE)
    os.unlink(cache)
    if how == "garbage":
        with open(cache, "wb") as handle:
            handle.write(b"PAR1 not parquet")
    elif how == "other columns":
        pq.write_table(pa.table({"_rel": ["x"], "run_id": [1]}), cache)
    else:
        elsewhere = tmp_path / "elsewhere.parquet"
        pq.write_table(pa.table({"_rel": ["x"]}), elsewhere)
        os.symlink(elsewhere, cache)
    location = Location.of(history)
    files = catalogue_files(history)
    assert catalogue_cache.covered(location, files, catalogue_cache.stats(location, files)) == ([], 0)
    catalogue_cache.REFRESH_AT = 10**9  # read without rewriting it (monkeypatch restores it)
    assert rows(history) == expected


def test_a_store_that_cannot_be_written_is_read_without_a_cache(history, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr("popprof.store.catalogue.write_parquet", refused)
    assert rows(history) == uncached(history)


def test_fsck_and_compact_with_a_cache(history, capsys, monkeypatch):
    expected = rows(history)
    assert [p for p in fsck(history) if p.kind != "pending"] == []
    # two compacted files to read are too few to rewrite the cache; its 12 rows of files gone are not
    monkeypatch.setattr(catalogue_cache, "REFRESH_AT", 5)
    compact(history, before="9999-12")
    assert rows(history) == expected == uncached(history)
    # the compacted files' rows replace the per-run ones in the cache (those are gone)
    location = Location.of(history)
    files = catalogue_files(history)
    assert all("compact-" in f for f in files)
    assert catalogue_cache.covered(location, files, catalogue_cache.stats(location, files)) == (files, 0)
    assert fsck(history) == []
    code, out, _ = run(capsys, "store", "ls", history)
    assert code == 0 and out.count("train") == 12


def test_the_cache_columns_are_the_catalogue_s():
    assert [f.name for f in catalogue_cache.schema()][: len(RUNS)] == RUNS.names


def test_a_cache_with_a_page_failing_its_checksum_covers_nothing(history):
    """The cache is written with page checksums like every store file: a byte flipped in its pages (in the
    runs' commits, a column the cache's keys do not cover, where it reads without an error as another commit)
    makes it cover nothing, and the runs read are the catalogue files', never the cache's other commit."""
    before = rows(history)
    location = Location.of(history)
    cache = Path(location.path(catalogue_cache.CACHE))
    whole = cache.read_bytes()
    group = pq.read_metadata(cache).row_group(0)
    chunk = next(
        group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == "commit"
    )
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    for at in range(
        start, start + chunk.total_compressed_size
    ):  # the first flip read silently as other values
        data = bytearray(whole)
        data[at] ^= 0x01
        cache.write_bytes(bytes(data))
        try:
            misread = (
                pq.read_table(cache)["commit"].to_pylist()
                != pq.read_table(pa.BufferReader(whole))["commit"].to_pylist()
            )
        except (OSError, pa.ArrowException):
            continue
        if misread:
            break
    else:
        pytest.fail("no flipped byte of the commits read as other values")
    with pytest.raises(OSError, match="CRC"):
        pq.read_table(cache, page_checksum_verification=True)
    files = catalogue_files(history)
    assert catalogue_cache.covered(location, files, catalogue_cache.stats(location, files)) == ([], 0)
    assert rows(history) == before == uncached(history)
