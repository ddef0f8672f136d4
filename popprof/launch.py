"""The console script's first step: ``popprof --version`` and ``popprof [COMMAND] --help`` answered without
the CLI.

click and the CLI package take about 20 ms to import, two thirds of ``popprof --version``'s start
(issue 28: within 3x of a bare ``python -c pass``, about 8 ms, on a regular install). The version is
known here; the help of ``popprof`` and of each command is click's own rendering stored in the package
(``help/``) for the two widths it is usually drawn at (78 columns: not a terminal, or one of 80; 98: a terminal of 100
or more), and a test renders it with click at both widths and compares. Anything else (another width,
``COLUMNS``, any other argument) goes to :func:`popprof.cli.run` as before.
"""

from __future__ import annotations

import os
import sys

from ._version import __version__

#: the top-level help's widths stored in ``help/`` (click: terminal columns up to ``max_content_width`` 100,
#: minus 2; 80 columns when stdout is not a terminal)
STORED_HELP_WIDTHS = (78, 98)
HELP_DIR = os.path.join(os.path.dirname(__file__), "help")


def help_width() -> int:
    """The width click draws ``popprof --help`` at here (its HelpFormatter: columns up to 100, minus 2)."""
    import shutil

    return max(min(shutil.get_terminal_size().columns, 100) - 2, 50)


def stored_help_path(width: int, command: str | None = None) -> str:
    """Where the help of ``popprof`` (or of ``command``) drawn at ``width`` columns is stored."""
    return os.path.join(HELP_DIR, f"{command or 'popprof'}-{width}.txt")


def _stored_help(command: str | None) -> str | None:
    width = help_width()
    if width not in STORED_HELP_WIDTHS or (command is not None and not command.isidentifier()):
        return None
    if command == "popprof":  # the top-level help's own file, not a command: the CLI says "no such command"
        return None
    try:
        with open(stored_help_path(width, command), encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def _help_asked(args: list[str]) -> tuple[bool, str | None]:
    """Whether ``args`` only ask for help, and of which command (``None``: popprof's own)."""
    if args in (["--help"], ["-h"]):
        return True, None
    if len(args) == 2 and args[1] in ("--help", "-h") and not args[0].startswith("-"):
        return True, args[0]
    return False, None


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
    asked, command = _help_asked(args)
    if asked and (text := _stored_help(command)) is not None:
        _answer(text)
    from .cli import run as run_cli

    run_cli()


def write_stored_help() -> None:
    """Store the help of ``popprof`` and of each command for :data:`STORED_HELP_WIDTHS`, as click draws it
    (after a change of a command, its options or its help: ``python -c 'import popprof.launch as l;
    l.write_stored_help()'``; ``tests/test_cli_flags.py`` fails until then)."""
    from .cli import COMMANDS, render_help

    for width in STORED_HELP_WIDTHS:
        for command in (None, *COMMANDS):
            with open(stored_help_path(width, command), "w", encoding="utf-8") as handle:
                handle.write(render_help(width, command))
