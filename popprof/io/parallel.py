"""The one way popprof runs work beside the reading process: worker processes or threads, or none.

Every reader and redaction step that works in parallel goes through here, so that one switch turns all
of it off and every worker shuts down the same way (``docs/readers.md``, "Parallel work"):

- :func:`enabled`: ``POPPROF_PARALLEL=0`` (or ``off``, ``false``, ``no``) makes popprof start no worker
  process and no worker thread; every job then runs in the calling process, in order, with the same result.
- :func:`context`: the multiprocessing context of a start method, ``None`` when parallel work is off or
  the platform lacks the method (no ``fork`` on Windows or macOS' default): callers then work serially.
  ``fork`` is the default: a forked worker re-imports nothing and shares the parent's pages.
  ``spawn`` is for work whose parent holds a C extension's state mid-use (the ``profile.pop`` reader has a
  report open in pva when its worker starts; a forked copy would inherit pva's threads' locks and file
  state as they were at that instant): a spawned worker starts a fresh interpreter and opens its own.
  A spawned worker re-imports the main module, which only some programs survive (:func:`spawn_is_safe`).
- :func:`process_pool`: a :class:`ProcessPool` whose workers run :func:`.workers.quiet_worker` first (no
  traceback on SIGTERM, Ctrl-C left to the parent); leaving its ``with`` block by an exception (an error,
  ``KeyboardInterrupt``, the CLI's SIGTERM) terminates and joins the workers, so none is left behind.
- :func:`map_processes`: ``fn`` over jobs on worker processes, in order, with the serial fallback: a pool
  that cannot start or breaks (a worker killed) leaves the jobs not done to this process; an exception
  raised by ``fn`` in a worker propagates here, as it would have run here.
- :func:`shared_int`: a counter in shared memory that forked workers add to (the progress bar's bytes).
- :func:`thread_pool`: a thread pool for work that releases the GIL (NumPy, pyarrow, zlib), or a
  :class:`SerialExecutor` running each job at once when parallel work is off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from . import limits
from .workers import quiet_worker

if TYPE_CHECKING:  # imported when a pool is made: every reader imports this module, few start workers
    import concurrent.futures
    from multiprocessing.context import BaseContext

T = TypeVar("T")
R = TypeVar("R")

#: The switch: set to one of :data:`OFF` to run everything in the calling process.
ENV = "POPPROF_PARALLEL"
OFF = frozenset({"0", "off", "false", "no"})
#: Seconds :meth:`ProcessPool.close` waits for a terminated worker to end before killing it.
JOIN_SECONDS = 5.0
#: Main programs a spawned worker may safely re-import (they guard their entry point).
SAFE_MAINS = frozenset({"popprof", "pytest", "py.test", "ipykernel_launcher"})


def enabled() -> bool:
    """Whether popprof may start worker processes and threads (:data:`ENV` is not one of :data:`OFF`)."""
    return os.environ.get(ENV, "").strip().lower() not in OFF


def context(start: str = "fork") -> BaseContext | None:
    """The multiprocessing context of ``start``; ``None`` when parallel work is off or ``start`` is unavailable."""
    import multiprocessing

    if not enabled() or start not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context(start)


def shared_int(value: int = 0) -> Any:
    """A 64-bit integer in shared memory (``.value``, ``.get_lock()``) that forked workers can add to."""
    import multiprocessing

    return (context() or multiprocessing.get_context()).Value("q", value)


def cores() -> int:
    """Cores this process may use for workers: 1 when parallel work is off."""
    return (os.cpu_count() or 1) if enabled() else 1


def spawn_is_safe() -> bool:
    """Whether starting ``spawn`` workers is free of side effects in this process.

    A spawned worker re-imports the main script; that is harmless for the popprof CLI, ``python -m``
    packages, pytest, notebooks and interactive sessions, but could re-run an arbitrary user script
    without a ``__main__`` guard. Inside a worker it is never done (no workers of workers).
    """
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return False
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return spec.name.endswith("__main__") or spec.name.split(".")[0] in SAFE_MAINS
    file = getattr(main, "__file__", None)
    if file is None:
        return True  # interactive session, python -c, notebook kernels
    return Path(file).stem in SAFE_MAINS and Path(file).is_file()


class ProcessPool:
    """A process pool (a :class:`concurrent.futures.ProcessPoolExecutor`) that leaves no worker behind."""

    def __init__(self, executor: concurrent.futures.ProcessPoolExecutor) -> None:
        self.executor = executor
        self._started: list = []  # the workers, kept past a shutdown that did not wait for them
        self._manager = None  # the executor's thread that reaps them, likewise

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[R]:
        """Schedule ``fn(*args, **kwargs)`` on a worker (the first call starts the workers)."""
        return self.executor.submit(fn, *args, **kwargs)

    def processes(self) -> list:
        """The worker processes started so far (``multiprocessing.Process`` objects)."""
        return list((getattr(self.executor, "_processes", None) or {}).values())

    def close(self, terminate: bool = False, wait: bool = True) -> None:
        """Shut down: cancel the jobs not started; with ``terminate``, also end the workers still working
        (SIGTERM, which :func:`.workers.quiet_worker` makes silent) and wait until every one has ended.
        With ``wait`` false the workers end after their current job, without this process waiting for them
        (a later ``close()`` waits until they have; one with ``terminate`` ends any worker left)."""
        processes = self._started = self.processes() or self._started  # shutdown forgets them
        manager = getattr(self.executor, "_executor_manager_thread", None) or self._manager
        self._manager = manager  # shutdown forgets it too; it joins the workers once they have left
        self.executor.shutdown(wait=wait and not terminate, cancel_futures=True)
        if not terminate:
            if wait and manager is not None:  # after a shutdown that did not wait: they are leaving
                # the thread that reaps them, joined (not the processes: two threads waiting for one child
                # race, and the loser sees it as still running)
                manager.join(JOIN_SECONDS)
            return
        _end_processes(processes)
        if manager is not None:
            # the executor's thread reaps the workers (it waits for each child): once it has ended, every
            # exit is recorded; this thread never waits for a child itself, so the two never race
            manager.join(JOIN_SECONDS)
        else:  # no thread of the executor's: this one is the only one waiting for them
            for process in processes:
                with contextlib.suppress(Exception):
                    process.join(JOIN_SECONDS)

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        self.close(terminate=exc_type is not None)
        return False


def _end_processes(processes: list) -> None:
    """SIGTERM to each of ``processes`` still running, SIGKILL to any still running :data:`JOIN_SECONDS` later.

    Whether a process has ended is read from its sentinel (a pipe the child holds until it exits), never
    from ``waitpid``: the executor's own thread reaps the children, and a second thread's ``waitpid`` on a
    child it reaped fails as if the child still ran (``is_alive`` true for a process that has gone).
    A signal goes only to a process whose sentinel says it runs, so never to a pid already reaped."""
    from multiprocessing.connection import wait as ready

    running = {}
    for process in processes:
        with contextlib.suppress(Exception):  # a process never started, or closed, has no sentinel
            running[process.sentinel] = process
    for signal_name in ("terminate", "kill"):
        running = {fd: p for fd, p in running.items() if fd not in ready(list(running), 0)}
        for process in running.values():
            with contextlib.suppress(Exception):
                getattr(process, signal_name)()
        deadline = time.monotonic() + JOIN_SECONDS
        while running and (left := deadline - time.monotonic()) > 0:
            for fd in ready(list(running), left):
                running.pop(fd, None)
        if not running:
            return


def process_pool(
    workers: int,
    *,
    start: str = "fork",
    initializer: Callable[..., None] | None = None,
    initargs: tuple = (),
) -> ProcessPool | None:
    """A pool of ``workers`` processes started with ``start``, or ``None`` (work here) when parallel work is
    off, ``start`` is unavailable or no pool can be made. Each worker runs :func:`.workers.quiet_worker`,
    then ``initializer(*initargs)``. Processes start with the first job; a start that fails then raises
    ``OSError`` or :class:`BrokenProcessPool` from ``submit``."""
    mp_context = context(start)
    if mp_context is None or workers < 1:
        return None
    import concurrent.futures

    initializer, initargs = limits.enter_then, (limits.current(), initializer, *initargs)  # limits by value
    try:
        return ProcessPool(
            concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=mp_context, initializer=quiet_worker, initargs=(initializer, *initargs)
            )
        )
    except (OSError, RuntimeError, ValueError):
        return None


def map_processes(
    fn: Callable[[T], R],
    jobs: Iterable[T],
    workers: int,
    *,
    start: str = "fork",
    initializer: Callable[..., None] | None = None,
    initargs: tuple = (),
) -> list[R]:
    """``[fn(job) for job in jobs]``, computed on up to ``workers`` processes when that is possible.

    Serial in this process when parallel work is off, fewer than two workers or jobs, or no pool starts;
    jobs a broken pool (a worker killed) did not finish are run here. An exception raised by ``fn``
    propagates (from the first failing job in order) and the workers are stopped.
    """
    from concurrent.futures.process import BrokenProcessPool

    jobs = list(jobs)
    workers = min(workers, len(jobs))
    pool = (
        process_pool(workers, start=start, initializer=initializer, initargs=initargs)
        if workers > 1
        else None
    )
    if pool is None:
        return [fn(job) for job in jobs]
    done: dict[int, R] = {}
    with pool:
        try:
            futures = [pool.submit(fn, job) for job in jobs]
        except (OSError, BrokenProcessPool):
            futures = []
        for i, future in enumerate(futures):
            try:
                done[i] = future.result()
            except BrokenProcessPool:
                break
    return [done[i] if i in done else fn(job) for i, job in enumerate(jobs)]


class SerialExecutor:
    """Runs each job when it is submitted, in the calling thread (parallel work off); used like the
    :class:`concurrent.futures.ThreadPoolExecutor` it replaces."""

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[R]:
        """Run ``fn(*args, **kwargs)`` now; its result or exception is in the returned future."""
        import concurrent.futures

        future: concurrent.futures.Future[R] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - delivered by future.result(), as a pool would (Ctrl-C is not)
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to shut down."""

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def thread_pool(workers: int) -> concurrent.futures.ThreadPoolExecutor | SerialExecutor:
    """A pool of ``workers`` threads (at least one), or a :class:`SerialExecutor` when parallel work is off."""
    if not enabled():
        return SerialExecutor()
    import concurrent.futures

    return concurrent.futures.ThreadPoolExecutor(
        max(1, workers), initializer=limits.enter, initargs=(limits.current(),)
    )
