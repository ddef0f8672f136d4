"""The console script's first step: ``popprof --version`` answered without the CLI, everything else to it.

click and the CLI package take about 20 ms to import, two thirds of ``popprof --version``'s start
(issue 28: within 3x of a bare ``python -c pass``, about 8 ms, on a regular install). The version is
known here, so that one answer needs neither. ``--help`` is click's own, drawn by the CLI (a stored copy
of it saved about 20 ms a help but had to be regenerated on every change of a command's text: issue 43).
"""

from __future__ import annotations

import os
import sys

from ._version import __version__
from .io.blas import one_thread

#: exit code when stdout is closed before all output was written (as ``popprof.cli.EXIT_BROKEN_PIPE``: 128 +
#: SIGPIPE, what a shell reports; a test checks they agree)
EXIT_BROKEN_PIPE = 141


def _stdout_as_closed_pipe() -> None:
    """A stdout closed before the start (``popprof ... >&-``; Python then sets ``sys.stdout`` to None and
    click drops what it writes) becomes a pipe whose reader is gone: a write fails as it does after
    ``| head`` has exited, and the launcher and the CLI answer it the same way (:data:`EXIT_BROKEN_PIPE`)."""
    if sys.stdout is not None:
        return
    try:
        read_end, write_end = os.pipe()  # the lowest free descriptors: the read end may be 1 itself
        os.dup2(write_end, 1)  # closes fd 1 if it was the read end: the pipe then has no reader
        for fd in {read_end, write_end} - {1}:
            os.close(fd)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (lives as long as the process)
    except OSError:
        return


def _answer(text: str) -> None:
    """Write ``text`` to stdout and exit 0, or end as the CLI does when stdout fails: silent with
    :data:`EXIT_BROKEN_PIPE` when its reader is gone (``| head -1``), one ``popprof: error:`` line with
    exit 2 for another write error (``> /dev/full``). Never a traceback."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    except OSError as exc:
        sys.stderr.write(f"popprof: error: {exc.strerror or exc}\n")
        code = 2
    else:
        raise SystemExit(0)
    try:  # what is left in the buffer is dropped: no "Exception ignored" when Python flushes stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(code)


def run() -> None:
    """Entry point of the ``popprof`` console script and ``python -m popprof``."""
    _stdout_as_closed_pipe()
    args = sys.argv[1:]
    if args == ["--version"]:
        _answer(f"popprof, version {__version__}\n")  # click.version_option's line
    one_thread()  # before numpy loads: OpenBLAS's threads spin for work popprof never gives them
    from .cli import run as run_cli

    run_cli()
