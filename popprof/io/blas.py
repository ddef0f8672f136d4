"""numpy's BLAS in popprof's own process: one thread, not one per core.

numpy's wheels link OpenBLAS, which starts a thread per core (up to 64) when numpy loads; each spins,
yielding, for about 0.1 s before it sleeps, waiting for work. popprof makes no BLAS call that would
share out work, so on the 2-core build machine that is about 90 ms of CPU per command for nothing (5 % of
``summary``'s CPU on the 600k trace, perf, 2026-12-06); on a host with many cores under a CPU quota
(a container) every one of those threads spends the quota. The console script asks OpenBLAS for one
thread (:func:`one_thread`) unless the user chose a number, and ``popprof record`` gives the command it
runs the environment as the user had it (:func:`as_the_user_had_it`). Library use (notebooks, scripts)
is left alone: numpy there is the user's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: OpenBLAS's documented variable for its number of threads, read once, when the library loads.
VARIABLE = "OPENBLAS_NUM_THREADS"

#: Whether :func:`one_thread` set :data:`VARIABLE` in this process (the user had not).
_set_here = False


def one_thread() -> None:
    """Ask OpenBLAS for one thread in this process, before anything imports numpy, unless the user set it."""
    global _set_here
    if VARIABLE not in os.environ:
        os.environ[VARIABLE] = "1"
        _set_here = True


def as_the_user_had_it(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``environ`` without :data:`VARIABLE` when :func:`one_thread` set it (what a command that
    popprof runs for the user gets: its own BLAS threads, as without popprof)."""
    out = dict(environ)
    if _set_here and out.get(VARIABLE) == "1":
        del out[VARIABLE]
    return out
