"""What every worker process of popprof does first: leave signals to the process that started it, and end
with it.

The CLI turns SIGTERM into an exception that unwinds the reading process (its atomic writes remove
their temporaries, exit 143). A forked worker inherits that handler: on ``kill -TERM`` of the process
group it raised inside the pool's machinery and printed a 25-line traceback. :func:`quiet_worker`, which
every worker of :mod:`popprof.io.parallel` runs first (forked or spawned), makes a worker end silently on
SIGTERM and ignore SIGINT (Ctrl-C reaches the whole group; the reading process handles it and shuts its
pools down).

A reading process killed outright (SIGKILL, or SIGHUP when its terminal goes) runs no shutdown: its worker
was left running as an orphan. :func:`die_with_parent` asks Linux to kill the worker when its parent
ends (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through ctypes; strictly, when the parent's thread that started
it ends: popprof starts its workers from the thread that uses them, which outlives them). Elsewhere it
does nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

#: prctl(2)'s option: the signal this process gets when its parent ends (linux/prctl.h)
PR_SET_PDEATHSIG = 1


def quiet_worker(then: Callable[..., None] | None = None, *args: object) -> None:
    """Pool initializer: end with the parent (:func:`die_with_parent`), default SIGTERM (end without a
    traceback), ignore SIGINT; then ``then(*args)``."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    die_with_parent(parent.pid if parent is not None else None)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if then is not None:
        then(*args)


def die_with_parent(parent_pid: int | None) -> bool:
    """On Linux, have this process killed (SIGKILL) when its parent ends; whether that was set.

    A parent that ended before the setting took hold (``getppid`` is no longer ``parent_pid``) ends this
    process at once: the signal would never come."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the C library already loaded: no search on disk
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)
    return True


class _Refused:
    """A meta path finder that makes ``import NAME`` (and its submodules) fail in this process."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == self.name or fullname.startswith(self.name + "."):
            raise ImportError(f"{self.name} is not imported in this worker", name=fullname)


def refuse_import(name: str) -> None:
    """In a worker that does not need module ``name``, make importing it fail, when it is not imported yet.

    For a library that imports ``name`` on its own when it can (pyarrow imports pandas on its first conversion
    to numpy, for an interop the parse never uses: 0.15 s of a worker forked before pandas was imported).
    :func:`allow_import` lifts it (for a job that does need it).
    """
    if name not in sys.modules and not any(isinstance(f, _Refused) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _Refused(name))


def allow_import(name: str) -> None:
    """Lift :func:`refuse_import` of ``name``."""
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, _Refused) and f.name == name)]
