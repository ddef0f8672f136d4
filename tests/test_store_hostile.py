"""Issue 45, item 7: faults and hostile stores. Each case failed on the main branch before the fix: data lost
silently, an internal error (exit 3), a secret printed, or a store reading another one's files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from store_helpers import MK2, run

import popprof.store as store
from popprof.store import ingest
from popprof.store.compact import fsck
from popprof.testing.store_history import write_history

IDLE = "trace.device_idle_us"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store.init(path)
    return path


def _changed_copy(tmp_path: Path) -> Path:
    """The Mk2 fixture with the first tile using 64 bytes more (the same run id, other content)."""
    import popprof
    from popprof.readers import bundle

    profile = popprof.open(MK2)
    profile.tiles.loc[0, "bytes_incl_gaps"] += 64
    return bundle.write(profile, tmp_path / "changed" / MK2.name)


def test_concurrent_adds_of_one_run_with_other_content_never_lose_one_silently(
    root: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Two adds of run 7 at once, other content, no --replace: the second to finish fails with one line and
    withdraws; the first stays whole. (On main both exited 0 and one run was gone.)"""
    changed = _changed_copy(tmp_path)
    real_write_row = ingest.write_row
    calls = []

    def other_add_first(location, month, row):  # the other add runs from start to end in between
        if not calls:
            calls.append(row)
            assert store.add(root, [changed], run_id="7", time="2026-11-02T00:00:00Z")[0].status == "added"
        return real_write_row(location, month, row)

    monkeypatch.setattr(ingest, "write_row", other_add_first)
    code, out, err = run(capsys, "store", "add", root, MK2, "--run-id", "7", "--time", "2026-11-02T00:00:00Z")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "at the same time" in err and "--replace" in err
    s = store.open(root)
    assert s.query("SELECT count(*) AS n FROM runs")["n"].tolist() == [1]
    first = s.query("SELECT bytes_incl_gaps FROM tiles WHERE tile = 0")["bytes_incl_gaps"].tolist()
    assert first == [pq.read_table(MK2 / "tiles.parquet")["bytes_incl_gaps"][0].as_py() + 64]
    assert s.query("SELECT count(*) AS n FROM tiles")["n"].tolist() == [1472]
    assert fsck(root) == []  # the withdrawn add left nothing behind


def test_fsck_fix_during_an_add_leaves_its_files_alone(root: Path, monkeypatch, capsys) -> None:
    """On main fsck --fix deleted the table files of an add under way; the add exited 0, its run was listed
    with empty tables and fsck then said 0 problems."""
    real_write_row = ingest.write_row
    seen = []

    def fsck_first(location, month, row):
        seen.append(fsck(root, fix=True))
        return real_write_row(location, month, row)

    monkeypatch.setattr(ingest, "write_row", fsck_first)
    code, out, _ = run(capsys, "store", "add", root, MK2, "--run-id", "r1")
    assert code == 0 and out.startswith("added: run r1")
    (problems,) = seen
    assert problems and {p.kind for p in problems} == {"pending"} and not any(p.fixed for p in problems)
    s = store.open(root)
    assert s.query("SELECT count(*) AS n FROM tiles")["n"].tolist() == [1472]
    assert fsck(root) == [] and not list((root / "pending").glob("*"))


def test_an_add_whose_files_were_removed_meanwhile_is_withdrawn(root: Path, monkeypatch, capsys) -> None:
    real_write_row = ingest.write_row

    def remove_one(location, month, row):
        next(root.glob("tables/tiles/month=*/*.parquet")).unlink()  # an older popprof's fsck --fix
        return real_write_row(location, month, row)

    monkeypatch.setattr(ingest, "write_row", remove_one)
    code, out, err = run(capsys, "store", "add", root, MK2, "--run-id", "r1")
    assert code == 2 and out == "" and "were removed while it ran" in err
    assert store.open(root).query("SELECT count(*) AS n FROM runs")["n"].tolist() == [0]


def test_fsck_reports_a_live_run_missing_a_file_and_cannot_fix_it(root: Path, capsys) -> None:
    store.add(root, [MK2], run_id="r1")
    next(root.glob("tables/tiles/month=*/*.parquet")).unlink()
    code, out, _ = run(capsys, "store", "fsck", root, "--fix")
    assert code == 1 and "missing: tables/tiles/" in out and "not fixable" in out


def test_a_stale_pending_marker_is_an_orphan(root: Path) -> None:
    (root / "pending").mkdir()
    (root / "pending" / "0123456789abcdef.json").write_text('{"started": "2026-01-01T00:00:00+00:00"}')
    assert [(p.kind, p.path) for p in fsck(root)] == [("orphan", "pending/0123456789abcdef.json")]
    fsck(root, fix=True)
    assert fsck(root) == []


def test_symlinked_parquet_files_are_not_read_and_fsck_reports_them(
    root: Path, tmp_path: Path, capsys
) -> None:
    """On main `ls` read a planted link and `compact` copied it in; fsck said nothing."""
    write_history(root, {IDLE: [1.0]}, run_ids=["mine"])
    outside = tmp_path / "outside"
    outside.mkdir()
    store.init(outside / "store")
    write_history(outside / "store", {IDLE: [2.0]}, run_ids=["planted"])
    for planted in (outside / "store").rglob("*.parquet"):
        link = root / planted.relative_to(outside / "store").parent / ("x" + planted.name)
        link.symlink_to(planted)
    linked_month = root / "metrics" / "month=2025-01"
    linked_month.symlink_to(next((outside / "store" / "metrics").iterdir()), target_is_directory=True)
    code, out, err = run(capsys, "store", "ls", root, "--format", "json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == ["mine"]
    assert re.search(r"\d+ symbolic links? in the store not read", err)
    code, out, _ = run(capsys, "store", "compact", root, "--before", "2100-01")
    assert code == 0
    with pytest.warns(UserWarning, match="symbolic link"):
        assert store.open(root).query("SELECT run_id FROM metrics")["run_id"].tolist() == ["mine"]
    code, out, _ = run(capsys, "store", "fsck", root)
    assert code == 1 and out.count("symlink: ") == 3 and "metrics/month=2025-01" in out
    code, out, _ = run(capsys, "store", "fsck", root, "--fix")
    assert code == 0 and not linked_month.is_symlink() and not any(p.is_symlink() for p in root.rglob("*"))
    assert len(list((outside / "store").rglob("*.parquet"))) == 2  # the targets are untouched


def test_a_truncated_parquet_file_is_one_line_and_fsck_reports_it(root: Path, capsys) -> None:
    write_history(root, {IDLE: [1.0, 2.0, 3.0]})
    victims = [sorted(root.glob(f"{kind}/month=*/*.parquet"))[1] for kind in ("metrics", "runs")]
    for victim in victims:
        victim.write_bytes(victim.read_bytes()[:40])
    for args in (
        ["store", "ls", root],
        ["trend", root, IDLE],
        ["store", "compact", root, "--before", "2100-01"],
        ["fleet", "ranks", root],
        ["store", "query", root, "SELECT count(*) FROM metrics"],
    ):
        code, out, err = run(capsys, *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "internal error" not in err, args
    code, out, err = run(capsys, "store", "fsck", root, "--fix")
    assert code == 1 and "unreadable: metrics/" in out and "unreadable: runs/" in out
    assert all(victim.exists() for victim in victims)  # data: reported, never removed


def test_a_catalogue_file_with_another_column_type_is_one_line_and_fsck_reports_it(
    root: Path, capsys
) -> None:
    write_history(root, {IDLE: [1.0, 2.0]})
    victim = sorted(root.glob("runs/month=*/*.parquet"))[0]
    table = pq.read_table(victim)
    index = table.schema.get_field_index("created")
    pq.write_table(table.set_column(index, "created", pa.array(["not a time"])), victim)
    code, _, err = run(capsys, "store", "ls", root)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "internal error" not in err
    code, out, _ = run(capsys, "store", "fsck", root)
    assert code == 1 and "unreadable: runs/" in out and "1 problem\n" in out


def test_an_inf_metric_does_not_break_trend_json(root: Path, capsys) -> None:
    write_history(root, {IDLE: [1.0, float("inf"), 1.0]})
    code, out, err = run(capsys, "trend", root, IDLE, "--format", "json")
    assert code == 0 and json.loads(out)["series"][0]["values"] == [1.0, 1.0]
    assert "internal error" not in err


@pytest.mark.parametrize("command", [["store", "ls"], ["store", "init"], ["store", "fsck"], ["trend"]])
def test_credentials_in_an_s3_url_are_refused_and_never_printed(command: list[str], capsys) -> None:
    url = "s3://AKIAEXAMPLEKEY:VerySecretValue@bucket/prefix"
    args = [*command, url] + (["trace.device_idle_us"] if command == ["trend"] else [])
    code, out, err = run(capsys, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "VerySecretValue" not in out + err and "AKIAEXAMPLEKEY" not in out + err
    assert "s3://***@bucket/prefix" in err


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint on 127.0.0.1 where nothing listens, one attempt, no instance metadata lookups."""
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'popprof[s3]')")
    import socket

    with socket.socket() as probe:  # a free port, closed again: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for key, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_CONFIG_FILE": "/nonexistent",
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    import fsspec

    fsspec.config.conf.setdefault("s3", {})["skip_instance_cache"] = True
    yield
    fsspec.config.conf["s3"].pop("skip_instance_cache", None)


@pytest.mark.s3
def test_missing_credentials_and_an_unreachable_endpoint_are_one_line(
    no_server, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    code, _, err = run(capsys, "store", "ls", "s3://bucket/prefix")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cannot reach the store (NoCredentialsError" in err
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code, _, err = run(capsys, "store", "init", "s3://bucket/prefix")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot reach the store" in err


def test_a_store_file_that_expands_far_beyond_its_size_is_bounded(root: Path, monkeypatch, capsys) -> None:
    """On main a 28 KB store file holding a 400 MB string took compact to 2 GB; the Parquet limit of
    bundles (parquet-ratio) now bounds store files from their footer before they are read (here a 64 MiB
    string under a floor lowered to 1 MiB, so the test stays small)."""
    from popprof.io import limits

    monkeypatch.setattr(limits, "PARQUET_RATIO_FLOOR", 1 << 20)
    write_history(root, {IDLE: [1.0, 2.0]})
    victim = sorted(root.glob("runs/month=*/*.parquet"))[0]
    table = pq.read_table(victim)
    index = table.schema.get_field_index("manifest")
    pq.write_table(
        table.set_column(index, "manifest", pa.array(["a" * (64 << 20)])), victim, compression="zstd"
    )
    code, _, err = run(capsys, "store", "compact", root, "--before", "2100-01")
    assert code == 2 and "parquet-ratio" in err and len(err.strip().splitlines()) == 1
    code, out, _ = run(capsys, "store", "fsck", root)
    assert code == 1 and "unreadable: runs/" in out and "too large to read" in out
