"""What every forked worker process of popprof does first: leave signals to the process that forked it.

The CLI turns SIGTERM into an exception that unwinds the reading process (its atomic writes remove
their temporaries, exit 143). A forked worker inherits that handler: on ``kill -TERM`` of the process
group it raised inside the pool's machinery and printed a 25-line traceback. :func:`quiet_worker`, which
every worker of :mod:`popprof.io.parallel` runs first (forked or spawned), makes a worker end silently on
SIGTERM and ignore SIGINT (Ctrl-C reaches the whole group; the reading process handles it and shuts its
pools down).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable


def quiet_worker(then: Callable[..., None] | None = None, *args: object) -> None:
    """Pool initializer: default SIGTERM (end without a traceback), ignore SIGINT; then ``then(*args)``."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if then is not None:
        then(*args)


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
