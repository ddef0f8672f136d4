"""Limits are passed by value (issue 43, item 4): ``--limit`` and :func:`popprof.io.limits.using` set a context
variable, never ``os.environ``; a limit set in one call does not reach a later one in the same process (a
notebook), and worker threads and processes receive the caller's limits as an argument."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import popprof
from popprof.cli import main
from popprof.io import limits, parallel
from popprof.io.limits import LIMITS, LimitExceeded, Limits
from popprof.model.errors import UsageError
from popprof.readers import open_profile

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
TRACE = REAL / "amd_mi250_minitoy.json.gz"
RANKS = sorted((REAL / "two_ranks").iterdir())


@pytest.fixture(autouse=True)
def _no_limit_in_environment(monkeypatch):
    for limit in LIMITS.values():
        monkeypatch.delenv(limit.env, raising=False)
    monkeypatch.delenv(parallel.ENV, raising=False)


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("POPPROF_")}


def test_every_limit_has_a_field_and_values_come_given_then_environment_then_default(monkeypatch):
    assert {f.replace("_", "-") for f in Limits.__dataclass_fields__} == set(LIMITS)
    given = Limits().replace(text_bytes="1G", json_depth=9)
    assert given.given() == {"text-bytes": 1 << 30, "json-depth": 9}
    monkeypatch.setenv("POPPROF_MAX_JSON_DEPTH", "7")
    monkeypatch.setenv("POPPROF_MAX_LINE_BYTES", "2k")
    assert given.value("json-depth") == 9  # given wins over the environment
    assert given.value("line-bytes") == 2048  # then the environment
    assert given.value("event-bytes") == LIMITS["event-bytes"].default  # then the default


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"text_bytes": "lots"}, "limit text-bytes"),
        ({"json_depth": 0}, "limit json-depth"),
        ({"json_depth": True}, "limit json-depth"),
        ({"memory": 1}, "no limit named 'memory'"),
    ],
)
def test_a_bad_value_is_one_usage_line(change, message):
    with pytest.raises(UsageError, match=message) as caught:
        Limits().replace(**change)
    assert "\n" not in str(caught.value)


def test_the_facade_offers_the_limits():
    assert popprof.limits is limits
    with popprof.limits.using(text_bytes="2M"):
        assert limits.get("text-bytes") == 2 << 20


def test_using_holds_for_its_block_only():
    before = limits.current()
    with limits.using(json_depth=2) as inside:
        assert limits.get("json-depth") == 2 and limits.current() is inside
        with pytest.raises(LimitExceeded, match="json-depth"):
            open_profile(TRACE)
        with limits.using(text_bytes="1M"):  # nested: the outer block's limits stay
            assert limits.get("json-depth") == 2 and limits.get("text-bytes") == 1 << 20
    assert limits.current() is before
    assert limits.get("json-depth") == LIMITS["json-depth"].default
    assert len(open_profile(TRACE).events) > 0


def test_a_limit_given_to_one_cli_call_does_not_reach_later_calls(capsys):
    """A notebook runs ``popprof --limit ...`` in-process, then reads with the API and runs the CLI again."""
    environment = _environment()
    assert main(["--limit", "json-depth=2", "summary", str(TRACE)]) == 2
    assert "json-depth" in capsys.readouterr().err
    assert main(["summary", str(TRACE), "--limit", "json-depth=2"]) == 2  # the command's own --limit too
    capsys.readouterr()
    assert _environment() == environment  # nothing written to os.environ
    assert limits.current() == limits.DEFAULT
    assert len(popprof.open(TRACE).events) > 0  # the later API call reads with the defaults
    assert main(["summary", str(TRACE)]) == 0  # and so does the later CLI call
    assert "json-depth" not in capsys.readouterr().err


def test_a_usage_error_after_limit_leaves_nothing_behind(capsys):
    assert main(["--limit", "json-depth=2", "summary", "--no-such-option", str(TRACE)]) == 2
    capsys.readouterr()
    assert limits.current() == limits.DEFAULT


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_worker_process_receives_the_limits_as_an_argument(start):
    """A spawned worker inherits no memory and here no environment variable: the limit reaches it only
    through the pool's initializer argument."""
    if parallel.context(start) is None:
        pytest.skip(f"no {start} start method here")
    with limits.using(text_bytes=12345), parallel.process_pool(1, start=start) as pool:
        assert pool.submit(os.getpid).result() != os.getpid()  # the job runs in a worker process
        assert pool.submit(limits.get, "text-bytes").result() == 12345
        assert pool.submit(limits.get, "json-depth").result() == LIMITS["json-depth"].default
    with parallel.process_pool(1, start=start) as pool:  # a later pool: the defaults again
        assert pool.submit(limits.get, "text-bytes").result() == LIMITS["text-bytes"].default


def test_real_traces_read_in_worker_processes_obey_the_callers_limits():
    with limits.using(json_depth=2), pytest.raises(LimitExceeded, match="json-depth"):
        parallel.map_processes(open_profile, RANKS, 2, start="spawn")
    profiles = parallel.map_processes(open_profile, RANKS, 2, start="spawn")
    assert [len(p.events) for p in profiles] == [len(open_profile(r).events) for r in RANKS]


def test_worker_threads_receive_the_limits():
    with limits.using(line_bytes=777), parallel.thread_pool(2) as pool:
        assert pool.submit(limits.get, "line-bytes").result() == 777
    with parallel.thread_pool(2) as pool:
        assert pool.submit(limits.get, "line-bytes").result() == LIMITS["line-bytes"].default
