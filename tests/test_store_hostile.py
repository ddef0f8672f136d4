"""Issue 45, item 7: faults and hostile stores. Each case failed on the main branch before the fix: data lost
silently, an internal error (exit 3), a secret printed, or a store reading another one's files."""

from __future__ import annotations

import pytest
from store_helpers import run


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
