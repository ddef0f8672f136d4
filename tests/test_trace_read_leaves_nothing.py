"""Issue 43 item 2: a Chrome trace read leaves nothing behind when killed, needs no ``/dev/shm``, and reads in
one process when a second cannot start.

- ``popprof summary`` on a large generated trace (its parse worker forked before the command's imports) is
  held (SIGSTOP: it can no longer shut its worker down), then killed by SIGKILL or SIGHUP: the worker must
  end with it (``popprof.io.workers.die_with_parent``) and no file may be left in its temporary folder or
  beside its output.
- With ``/dev/shm`` read-only (a private mount namespace, ``unshare``) or missing (its semaphores failing
  as ``sem_open`` does then), the read gives the same tables in one process and says why.
"""

from __future__ import annotations

import contextlib
import errno
import json
import multiprocessing.synchronize
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.testing import trace_synth as synth

ROOT = Path(__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")
#: how long a process may take to appear or to go (a bound for a loaded machine, not a measure)
PATIENCE_SECONDS = 120.0


@pytest.fixture(scope="module")
def large_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Kineto-shaped trace above PARALLEL_MIN_BYTES (8 MiB): the automatic plan reads it on two processes."""
    path = synth.write_chrome_trace(
        tmp_path_factory.mktemp("large") / "trace.json", 700, seed=7, args="kineto"
    )
    assert path.stat().st_size > 12 << 20
    return path


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc: any thread of it may have forked them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.skipif(not LINUX, reason="the parent-death signal and /proc are Linux's")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the read starts no worker")
@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_a_killed_reader_leaves_no_process_and_no_file(large_trace: Path, tmp_path: Path, kill: int) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    out = tmp_path / "summary.json"
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT), "POPPROF_PARALLEL": "1"}
    reader = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "popprof",
            "summary",
            str(large_trace),
            "--format",
            "json",
            "-q",
            "-o",
            str(out),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _until(lambda: _children(reader.pid) or reader.poll() is not None, "no parse worker started")
        os.kill(reader.pid, signal.SIGSTOP)  # held mid-read: it can no longer end its worker itself
        workers = [pid for pid in _children(reader.pid) if _running(pid)]
        assert workers, "the reader ended before it could be killed"
        os.kill(reader.pid, kill)
        os.kill(reader.pid, signal.SIGCONT)  # a stopped process acts on SIGHUP once it runs again
        assert reader.wait(PATIENCE_SECONDS) == -kill
        _until(lambda: not any(_running(pid) for pid in workers), "a worker outlived its reader")
    finally:  # whatever failed: nothing of the session left running (an orphaned worker included)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(reader.pid, signal.SIGKILL)
        reader.wait()
    assert list(temp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["temp"]  # no output, no temporary beside it


def _events_digest(profile: popprof.Profile) -> int:
    return int(pd.util.hash_pandas_object(profile.events, index=False).sum())


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the read starts no worker")
def test_a_read_without_dev_shm_runs_in_one_process(large_trace: Path, monkeypatch) -> None:
    """``sem_open`` fails with ENOENT where there is no /dev/shm: the split's lock cannot be made, so the read
    is one pass in this process, with the same tables, and the plan says why."""
    split_read = popprof.open(large_trace, workers=2)
    assert split_read.meta["chrome.workers"] == "2"

    real = multiprocessing.synchronize._multiprocessing

    class Missing:
        def __getattr__(self, name: str) -> object:
            if name == "SemLock":
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/dev/shm")
            return getattr(real, name)

    monkeypatch.setattr(multiprocessing.synchronize, "_multiprocessing", Missing())
    alone = popprof.open(large_trace, workers=2)
    assert alone.meta["chrome.workers"] == "1"
    assert "1 process: a second one could not start" in alone.meta["chrome.plan"]
    assert _events_digest(alone) == _events_digest(split_read)
    assert not multiprocessing.active_children()


def test_a_read_when_no_process_can_be_forked_runs_in_one_process(large_trace: Path, monkeypatch) -> None:
    """fork failing (EAGAIN: a process limit reached) leaves the whole read to this process."""
    expected = _events_digest(popprof.open(large_trace, workers=1))

    def no_fork() -> int:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    alone = popprof.open(large_trace)
    assert alone.meta["chrome.workers"] == "1" and "could not start" in alone.meta["chrome.plan"]
    assert _events_digest(alone) == expected


def _unshare_works() -> bool:
    if not LINUX or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o ro tmpfs /dev/shm"], capture_output=True, timeout=60
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="no unprivileged mount namespace (unshare -rm) here")
def test_a_read_with_a_read_only_dev_shm_gives_the_same_tables(large_trace: Path) -> None:
    """In a mount namespace of its own where /dev/shm is a read-only file system (as in some containers)."""
    script = textwrap.dedent(
        f"""
        import json, pandas as pd, popprof
        p = popprof.open({str(large_trace)!r})
        digest = int(pd.util.hash_pandas_object(p.events, index=False).sum())
        print(json.dumps([p.meta["chrome.workers"], p.meta["chrome.plan"], digest]))
        """
    )
    done = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            'mount -t tmpfs -o ro tmpfs /dev/shm && exec "$0" -c "$1"',
            sys.executable,
            script,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    workers, plan, digest = json.loads(done.stdout)
    assert workers == "1" and "could not start" in plan
    assert digest == _events_digest(popprof.open(large_trace, workers=1))
