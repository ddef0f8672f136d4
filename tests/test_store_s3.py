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
