"""The ``popprof`` command group. Each command lives in its own module, loaded on first use.

Exit codes: 0 fine, 1 findings or regressions at or above ``--fail-on``,
2 bad usage or unreadable input (one line on stderr, never a traceback).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import signal
import sys
import warnings
from functools import partial

import click

from .._version import __version__
from ..io.progress import quiet, set_quiet
from ..io.progress import quiet as progress_quiet
from ..model.errors import PopprofError
from .common import LIMIT_HELP, QUIET_HELP, _apply_limits, global_options

#: exit code when stdout is closed before all output was written (128 + SIGPIPE, as a shell reports it).
EXIT_BROKEN_PIPE = 141

#: command name -> module under popprof.cli that defines a click command of that name.
COMMANDS: dict[str, str] = {
    "summary": "summary",
    "tables": "tables",
    "query": "query",
    "export": "export",
    "timeline": "timeline",
    "check": "check",
    "rules": "check",
    "diff": "diff",
    "baseline": "diff",
    "redact": "redact",
    "scan": "redact",
    "plot": "plot",
    "report": "plot",
    "record": "record",
    "pilot": "pilot",
    "store": "store",
    "trend": "trend",
    "fleet": "fleet",
}


#: command name -> its one-line help, so that ``popprof --help`` lists the commands without importing
#: them (tests/test_cli_flags.py checks each against the command's own help).
SHORT_HELP: dict[str, str] = {
    "summary": "Summarise a profile: target, memory, execution and trace figures.",
    "tables": "List the tables of a profile with row counts and columns.",
    "query": "Run DuckDB SQL over the profile's tables (target, tiles, steps, events, ...).",
    "export": "Export a profile as a bundle that needs no Poplar SDK to read.",
    "timeline": "Export PATH as Chrome trace JSON for ui.perfetto.dev or chrome://tracing.",
    "check": "Flag memory peaks, exchange- or communication-heavy phases and host stalls.",
    "rules": "List the rules with what they need, their parameters and defaults.",
    "diff": "Compare two profiles (or a baseline JSON and a profile) and gate regressions.",
    "baseline": "Write a profile's metrics as a small, diff-friendly JSON baseline, safe to commit.",
    "redact": "Redact a profile so it can be shared; the leak scan then proves nothing sensitive remains.",
    "scan": "Leak-scan a redacted output against its original; exit 1 when anything sensitive remains.",
    "plot": "Draw one plot of a profile to an image file.",
    "report": "Write one self-contained HTML report (summary, findings, plots) to attach to a bug.",
    "record": "Run CMD with IPU profiling switched on, then export and check what it wrote.",
    "pilot": "Compare an IPU run with the platform it replaces: the same figures side by side.",
    "store": "Keep many runs in one store (a directory or s3:// prefix of Parquet) and query them (docs/store.md).",
    "trend": "How metrics moved over the runs of a store: every change of an exact metric (with the range to "
    "bisect), change points of a noisy one beyond its gate budget (docs/trend.md).",
    "fleet": "Questions across the jobs of a run store (docs/store.md).",
}


class LazyGroup(click.Group):
    """A group that imports a command's module only when the command runs (fast start-up).

    ``popprof --help`` lists the commands from :data:`SHORT_HELP` and imports none of them.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            limit = formatter.width - 6 - len(name)
            text = SHORT_HELP.get(name)
            if text is None:  # a command without a line here: ask it (imports its module)
                command = self._load(name)
                if command is None or command.hidden:
                    continue
                text = command.get_short_help_str(limit=limit)
            # shortened as click shortens a command's help (its public path: make_default_short_help is deprecated)
            rows.append((name, click.Command(name, help=text).get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        module_name = COMMANDS.get(name)
        if module_name is None:
            return None
        full = f"{__name__}.{module_name}"
        try:
            module = importlib.import_module(full)
        except ModuleNotFoundError as exc:
            if exc.name == full:
                return None
            raise
        command = getattr(module, name.replace("-", "_") + "_command", None)
        if not isinstance(command, click.Command):
            return None
        add_global_options(command)
        return command


def add_global_options(command: click.Command) -> None:
    """Give ``command`` (and a group's subcommands) ``-q`` and ``--limit`` unless it has them.

    Commands declare them with :func:`popprof.cli.common.global_options`; this covers any that does
    not, so ``popprof CMD ... -q`` works for every command. An option name a command already uses
    for something else (``store query --limit N``) is left to it.
    """
    taken = {name for param in command.params for name in getattr(param, "opts", ())}
    if not {"-q", "--quiet", "--limit"} <= taken:
        probe = global_options(click.Command(command.name or ""))
        command.params.extend(p for p in probe.params if not taken & set(p.opts))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="popprof")
@click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)
@click.option(
    "--limit",
    "limit_values",
    multiple=True,
    metavar="NAME=VALUE",
    callback=_apply_limits,
    help=LIMIT_HELP,
)
def cli(quiet: bool, limit_values: tuple[str, ...]) -> None:
    """Scriptable analysis of Graphcore IPU profiles (PopVision profile.pop, .pvti, and more).

    \b
    Examples:
      popprof summary fixtures/mk2_training.popprof
      popprof check run_dir/ --fail-on error --format junit > findings.xml
      popprof diff baseline.json new/profile.pop
      popprof query profile.popprof "SELECT category, sum(cycles) FROM steps GROUP BY 1"
    """
    # each run starts from its own -q (a command's -q may set it again) and gives the caller's setting back
    # when it ends, also when it is invoked without main() (click's test runner, another click program)
    click.get_current_context().call_on_close(partial(set_quiet, progress_quiet()))
    set_quiet(quiet)
    from .common import reset_read_warnings

    reset_read_warnings()


#: exit code after SIGTERM (128 + 15, as a shell reports it); SIGINT gives 130.
EXIT_TERMINATED = 143


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like KeyboardInterrupt, so atomic writes remove their temporaries."""


def _on_sigterm(signum: int, frame: object) -> None:
    signal.signal(
        signal.SIGTERM, signal.SIG_DFL
    )  # a second SIGTERM ends the process at once (a later run removes what it leaves)
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the CLI, mapping expected errors to one line and exit code 2.

    SIGTERM is handled like SIGINT: temporaries are removed and the exit code is 143.
    """
    from ..io import limits

    # --limit sets the limits in force for this run (a context variable, never os.environ), and -q silences
    # progress; an in-process caller (a notebook, a test) gets its own limits and progress back afterwards.
    saved = limits.current()
    was_quiet = quiet()
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        with warnings.catch_warnings():
            if not os.environ.get("POPPROF_DEBUG"):
                warnings.showwarning = _show_warning
            return _main(argv)
    except Terminated:
        click.echo("popprof: terminated", err=True)
        return EXIT_TERMINATED
    finally:
        _end_early_reads()
        set_quiet(was_quiet)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        limits.enter(saved)


def _end_early_reads() -> None:
    """End a parse worker the command started (``common.start_reading``) and did not read from: it failed
    first, or the path was not a trace after all. (Looked up, not imported: most commands start none.)"""
    early = sys.modules.get("popprof.readers.chrome.early")
    if early is not None:
        early.discard()


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """A Python warning (from popprof or a library) as one line on stderr, without the source line."""
    text = " ".join(str(message).split())
    click.echo(f"popprof: warning: {text}", err=True)


def _main(argv: list[str] | None) -> int:
    try:
        code = cli.main(args=argv, prog_name="popprof", standalone_mode=False)
    except PopprofError as exc:
        click.echo(f"popprof: error: {_one_line(exc)}", err=True)
        return exc.exit_code
    except RecursionError:  # a bounded fallback: nesting deeper than any guard expected
        if os.environ.get("POPPROF_DEBUG"):
            raise
        click.echo(
            "popprof: error: the input is nested too deeply to process (RecursionError); see docs/limits.md",
            err=True,
        )
        return 2

    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:  # `popprof` or a group alone: its help, exit 2
        exc.show()
        return 2
    except click.UsageError as exc:
        click.echo(f"popprof: error: {_usage_line(exc)}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"popprof: error: {_first_lower(_one_line(exc.format_message()))}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("popprof: aborted", err=True)
        return 130
    except BrokenPipeError:
        return _broken_pipe()
    except SystemExit as exc:
        if isinstance(sys.stdout, click.utils.PacifyFlushWrapper):  # click's way of reporting a closed stdout
            return _broken_pipe()
        raise exc
    except OSError as exc:
        if os.environ.get("POPPROF_DEBUG"):
            raise
        where = f"{exc.filename}: " if exc.filename is not None else ""
        click.echo(f"popprof: error: {where}{exc.strerror or exc}", err=True)
        return 2
    except Exception as exc:  # last resort: one line, not a traceback
        if os.environ.get("POPPROF_DEBUG"):
            raise
        click.echo(
            f"popprof: internal error: {type(exc).__name__}: {_one_line(exc)} "
            "(set POPPROF_DEBUG=1 for a traceback and please report it)",
            err=True,
        )
        return 3
    # click returns an Exit's code (e.g. 1 for findings) instead of raising it when not standalone
    return code if isinstance(code, int) else 0


def _one_line(exc: BaseException) -> str:
    """An error message on one line, whatever a library put in it."""
    return " ".join(str(exc).split())


def _first_lower(text: str) -> str:
    """click's "No such option ..." in popprof's voice ("no such option ..."); "PATH ..." stays as it is."""
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def _usage_line(exc: click.UsageError) -> str:
    """A usage error on one line, with the hint click puts on a line of its own: "no such option '--bogus'
    (try 'popprof summary --help')" (README: one line, exit 2)."""
    text = _first_lower(_one_line(exc.format_message())).rstrip(".")
    if exc.ctx is not None:
        text += f" (try '{exc.ctx.command_path} --help')"
    return text


def _broken_pipe() -> int:
    """stdout was closed early (``popprof ... | head``): stay silent and exit like a process killed by SIGPIPE.

    128 + SIGPIPE (141) is what a shell reports for ``cat big | head``; it cannot be mistaken
    for 0 (all output delivered) or 1 (findings), since the verdict may not have been reached.
    """
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no "Exception ignored" when Python flushes stdout at exit
    return EXIT_BROKEN_PIPE


def run() -> None:
    """Entry point of the ``popprof`` console script and ``python -m popprof``: :func:`main`, then exit.

    The process is the command's. The cyclic garbage collector is off while it runs (reference counting
    still frees everything that is not in a cycle): its collections would otherwise walk, again and again,
    the objects pandas and pyarrow make at import, which live as long as the process (169 collections and
    about 20 ms of each ``popprof summary`` of a trace, measured 2026-12-05). And once the command has
    returned, the process ends without the interpreter's teardown (:func:`_end_now`, as mypy's fast exit
    does): unloading pandas, pyarrow and numpy object by object costs about 22 ms and frees nothing the
    process's end does not. :func:`main` called in-process (tests, notebooks) is not affected.
    """
    gc.disable()
    returned: list[int] = []
    atexit.register(_end_now, returned)  # before any handler the command registers: so it runs after them
    code = main()
    returned.append(code)
    sys.exit(code)


def _end_now(returned: list[int]) -> None:
    """The last exit handler: end the process with the command's code, stdout and stderr flushed.

    Every handler registered while the command ran has run by then (multiprocessing's, temporary
    files'). The interpreter's own end is kept when the command did not return (an exception on its
    way out), when a flush fails (it reports that as ever), and when a tool watches the process (a
    tracer or profiler such as coverage or a debugger, which save their results at the end).
    """
    if not returned or _watched():
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(returned[0])


def _watched() -> bool:
    """Whether a tracer or profiler is attached (``sys.settrace``, ``sys.setprofile``, ``sys.monitoring``)."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: coverage's and debuggers' tool ids
    return monitoring is not None and any(
        monitoring.get_tool(tool) is not None
        for tool in (monitoring.DEBUGGER_ID, monitoring.COVERAGE_ID, monitoring.PROFILER_ID)
    )
