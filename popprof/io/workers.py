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
from collections.abc import Callable


def quiet_worker(then: Callable[..., None] | None = None, *args: object) -> None:
    """Pool initializer: default SIGTERM (end without a traceback), ignore SIGINT; then ``then(*args)``."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if then is not None:
        then(*args)
