"""The one parallel helper (popprof/io/parallel.py): workers, the serial fallback, the switch, shutdown."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from popprof.io import parallel

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="the worker cases need fork"
)


def _pid(_job: object) -> int:
    return os.getpid()


def _fail_on_two(job: int) -> int:
    if job == 2:
        raise ValueError(f"job {job} failed")
    return job * 10


def _die_in_a_worker(job: int) -> int:
    if multiprocessing.parent_process() is not None:
        os._exit(3)  # a worker killed mid-job: the pool breaks
    return job


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_jobs_run_on_worker_processes_in_order():
    assert parallel.map_processes(abs, [-3, -1, -2], 2) == [3, 1, 2]
    pids = parallel.map_processes(_pid, range(4), 2)
    assert os.getpid() not in pids
    assert not multiprocessing.active_children()  # the pool's workers have ended


def test_spawn_is_supported_explicitly():
    """(Starting a spawned worker takes seconds on a loaded machine: tests/test_pop_reader.py does it.)"""
    assert parallel.context("spawn").get_start_method() == "spawn"
    assert parallel.context("fork").get_start_method() == "fork"
    assert parallel.spawn_is_safe()  # under pytest; never inside a worker


def test_the_switch_turns_every_worker_off(monkeypatch):
    monkeypatch.setenv(parallel.ENV, "0")
    assert not parallel.enabled()
    assert parallel.context() is None and parallel.process_pool(2) is None
    assert parallel.cores() == 1
    assert parallel.map_processes(_pid, range(3), 2) == [os.getpid()] * 3
    with parallel.thread_pool(4) as pool:
        assert isinstance(pool, parallel.SerialExecutor)
        assert pool.submit(threading.get_ident).result() == threading.get_ident()
    monkeypatch.setenv(parallel.ENV, "1")
    assert parallel.enabled() and parallel.context() is not None


def test_without_the_start_method_the_work_runs_here(monkeypatch):
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert parallel.context("fork") is None
    assert parallel.map_processes(_pid, range(3), 2) == [os.getpid()] * 3


def test_one_job_or_one_worker_runs_here():
    assert parallel.map_processes(_pid, [0], 4) == [os.getpid()]
    assert parallel.map_processes(_pid, range(3), 1) == [os.getpid()] * 3


def test_an_exception_in_a_worker_propagates_and_stops_the_workers():
    with pytest.raises(ValueError, match="job 2 failed"):
        parallel.map_processes(_fail_on_two, [1, 2, 3], 2)
    assert not multiprocessing.active_children()


def test_a_killed_worker_leaves_its_jobs_to_this_process():
    assert parallel.map_processes(_die_in_a_worker, [1, 2, 3], 2) == [1, 2, 3]
    assert not multiprocessing.active_children()


def _say_then_sleep(job: tuple[str, float]) -> None:
    """Write a line to the pipe ``job[0]`` (the job has started in a worker), then sleep ``job[1]`` seconds."""
    with open(job[0], "w") as pipe:
        pipe.write("started\n")
    time.sleep(job[1])


def test_leaving_the_pool_by_an_interrupt_ends_busy_workers_quietly(capfd, tmp_path):
    """Both workers are inside a job (each has said so through a FIFO: no polling of the pool's state) when
    the interrupt leaves the block; both are ended, none is left, and nothing is printed. The pool's close
    reads each exit from the worker's sentinel, never from a second waitpid racing the executor's thread."""
    fifos = [tmp_path / f"started-{i}" for i in range(2)]
    for fifo in fifos:
        os.mkfifo(fifo)
    with pytest.raises(KeyboardInterrupt), parallel.process_pool(2) as pool:
        for fifo in fifos:
            pool.submit(_say_then_sleep, (str(fifo), 300))
        for fifo in fifos:  # blocks until that job runs in a worker
            with open(fifo) as pipe:
                assert pipe.readline() == "started\n"
        processes = pool.processes()
        raise KeyboardInterrupt
    assert len(processes) == 2 and not any(p.is_alive() for p in processes)
    assert all(p.exitcode == -15 for p in processes)  # SIGTERM, not the SIGKILL after JOIN_SECONDS
    assert not multiprocessing.active_children()
    assert "Traceback" not in capfd.readouterr().err  # SIGTERM ends a worker silently (quiet_worker)


def test_a_thread_pool_runs_jobs_on_other_threads():
    with parallel.thread_pool(2) as pool:
        assert pool.submit(threading.get_ident).result() != threading.get_ident()


def test_the_serial_executor_delivers_exceptions_through_the_future():
    future = parallel.SerialExecutor().submit(_fail_on_two, 2)
    with pytest.raises(ValueError, match="job 2 failed"):
        future.result()
