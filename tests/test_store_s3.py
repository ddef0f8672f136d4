"""A store on an object store: moto's S3 server on 127.0.0.1, read by DuckDB (fsspec), pyarrow and trend."""

from __future__ import annotations

import socket

import pytest
from store_helpers import MK2

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def s3_store():
    """``s3://popprof-test/store`` on a moto server bound to 127.0.0.1 (no other network)."""
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'popprof[s3]')")
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    patch = pytest.MonkeyPatch()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }.items():
        patch.setenv(key, value)
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("popprof-test")
    fs.pipe("popprof-test/outside/secret.csv", b"a\n1\n")
    yield "s3://popprof-test/store"
    patch.undo()
    server.stop()


def test_add_query_trend_and_sandbox_on_s3(s3_store: str) -> None:
    import popprof.store as store
    from popprof.store.trend import trend

    store.init(s3_store)
    for i, run_id in enumerate(["00123", "12e45"]):  # two runs: every upload is a round trip to the server
        assert (
            store.add(s3_store, [MK2], run_id=run_id, time=f"2026-0{i + 1}-01T00:00:00Z")[0].status == "added"
        )
    assert store.add(s3_store, [MK2], run_id="00123", time="2026-01-01T00:00:00Z")[0].status == "unchanged"
    s = store.open(s3_store)
    runs = s.query("SELECT run_id, month FROM runs ORDER BY month")
    assert runs["run_id"].tolist() == ["00123", "12e45"]
    assert runs["month"].tolist() == ["2026-01", "2026-02"]
    assert s.query("SELECT count(*) AS n FROM tiles")["n"].tolist() == [2 * 1472]
    assert set(s.arrow_dataset("runs").to_table()["run_id"].to_pylist()) == {"00123", "12e45"}
    (series,) = trend(s, ["memory.total_incl_gaps_bytes"])
    assert series.mode == "exact" and series.runs == ["00123", "12e45"] and series.changes == []
    from popprof.model.errors import UsageError

    for outside in ("s3://popprof-test/outside/secret.csv", "/etc/passwd"):
        with pytest.raises(UsageError, match="Permission"):
            s.query(f"SELECT * FROM read_csv('{outside}')")


def test_s3_reads_check_page_checksums_once_per_object(s3_store: str, tmp_path, capsys) -> None:
    """DuckDB (through fsspec) and pyarrow read objects without checking page checksums: a byte flipped in a
    metrics data page was read as it came. Each read now checks the objects it reads once, recorded by key,
    size, last-modified time and ETag in the store's own ``cache/verified.parquet``: the next read checks none
    again, an object written again (a new ETag) is checked again, and a damaged one is one line, exit 2."""
    import fsspec
    from cli_helpers import one_error
    from store_helpers import flip_in_data_page

    import popprof.store as store
    from popprof.model.errors import InputError
    from popprof.store import verified
    from popprof.store.layout import Location

    root = s3_store.replace("/store", "/checked")
    store.init(root)
    store.add(root, [MK2], run_id="1", time="2026-01-05T00:00:00Z")
    s = store.open(root)
    sql = "SELECT name, value FROM metrics ORDER BY name"
    plain = s.duckdb(verify=False).sql(sql).fetchall()
    location = Location.of(root)
    assert verified._recorded(location) == {}
    assert s.frame(sql, kinds=["metrics"]).values.tolist() == [
        list(row) for row in plain
    ]  # the same figures, checked
    files = location.files("runs", "month=*/*.parquet") + location.files("metrics", "month=*/*.parquet")
    assert set(verified._recorded(location)) == set(files)
    assert all(ident[3] for ident in verified._recorded(location).values())  # an ETag each
    assert verified.check(location, files) == 0  # once per object: the record covers them all
    assert s.arrow_dataset("metrics").to_table().num_rows == len(plain)

    (metrics,) = location.files("metrics", "month=*/*.parquet")
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    sound = fs.cat(location._bare(metrics))
    local = tmp_path / "metrics.parquet"
    local.write_bytes(sound)
    flip_in_data_page(local)
    fs.pipe(location._bare(metrics), local.read_bytes())  # written again: a new ETag
    damaged = f"popprof: error: {root}/{metrics}: damaged store file: a data page fails its checksum"
    line = one_error(capsys, "store", "query", root, sql)
    assert line.startswith(damaged) and line.endswith(
        "(popprof store fsck lists the files it cannot read)"
    ), line
    assert one_error(capsys, "trend", root, "memory.total_incl_gaps_bytes").startswith(damaged)
    with pytest.raises(InputError, match="damaged store file: a data page fails its checksum"):
        s.arrow_dataset("metrics")
    fs.pipe(location._bare(metrics), sound)
    assert s.frame(sql, kinds=["metrics"]).values.tolist() == [list(row) for row in plain]
    assert verified.check(location, files) == 0
