"""``popprof record -- CMD``: run a program with profiling on, then export and check what it left."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from ..io.config import EMPTY, load_config
from ..io.plural import plural
from .check import FAIL_CHOICES, _fail_on
from .common import reader_options, reading_options, said_wrote


@click.command("record", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    metavar="DIR",
    help="Directory for everything recorded (must not exist, or be empty) "
    "[default: ./popprof-record-DATE-TIME-MICROSECONDS-PID].",
)
@click.option(
    "--graph/--no-graph",
    default=True,
    show_default=True,
    help="Poplar graph profile (memory, programs, liveness) in profile.pop.",
)
@click.option(
    "--execution/--no-execution",
    default=True,
    show_default=True,
    help="Poplar execution profile (cycles per step) in profile.pop.",
)
@click.option(
    "--run-count",
    type=click.IntRange(1, None),
    default=None,
    metavar="N",
    help="Execution-profile N runs of each program (autoReport.executionProfileProgramRunCount; "
    "Poplar's default is 2).",
)
@click.option(
    "--trace/--no-trace",
    default=True,
    show_default=True,
    help="System Analyser host trace (.pvti) through PVTI_OPTIONS.",
)
@click.option(
    "--check/--no-check",
    default=True,
    show_default=True,
    help="Run the rule checks; write findings.json and report.html.",
)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_CHOICES),
    default=None,
    help="Exit 1 when CMD succeeded and a finding is at or above this severity "
    "[default: error, or rules.fail_on].",
)
@click.option("--plots/--no-plots", default=True, show_default=True, help="Plots in report.html.")
@click.option(
    "--exit-code",
    "exit_code_from",
    type=click.Choice(["popprof", "command"]),
    default="popprof",
    show_default=True,
    help="popprof: the exit codes below; command: CMD's own exit code (128+N when a signal N "
    "killed it), as `nsys profile` returns it.",
)
@click.option(
    "--kill-after",
    type=click.FloatRange(0, None),
    default=None,
    metavar="SECONDS",
    help="After a SIGINT/SIGTERM forwarded to CMD, kill CMD (SIGKILL, with its process group and the "
    "processes it started) if it is still running this long later [default: 30].",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Config for the rule checks (default: nearest popprof.toml or pyproject.toml).",
)
@reading_options()
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
def record_command(
    out_dir: Path | None,
    graph: bool,
    execution: bool,
    run_count: int | None,
    trace: bool,
    check: bool,
    fail_on: str | None,
    plots: bool,
    exit_code_from: str,
    kill_after: float | None,
    config_file: Path | None,
    device_map: str | None,
    cmd: tuple[str, ...],
) -> None:
    """Run CMD with IPU profiling switched on, then export and check what it wrote.

    Profiling is switched on only through Poplar's and libpvti's documented
    environment variables (POPLAR_ENGINE_OPTIONS, PVTI_OPTIONS), merged into
    any values already set (your keys win); CMD and its files are never
    edited. CMD's output is shown live and saved in DIR. When CMD ends (also
    when it fails or is interrupted) its reports are exported to bundles
    (needs the Poplar SDK), the Poplar summaries and out-of-memory messages in
    its output are read, and the rule checks run over all of it.

    \b
    Exit codes: 0 CMD succeeded, no finding at --fail-on; 1 CMD succeeded,
    findings at --fail-on; 2 nothing ran (bad usage or environment);
    4 CMD failed (its own exit code is printed and in DIR/record.json);
    128+N popprof received signal N (forwarded to CMD; partial results kept;
    CMD still running --kill-after seconds later is killed).
    With --exit-code=command: CMD's own exit code instead (findings never
    change it; 2 still means nothing ran).

    \b
    Examples:
      popprof record -- python train.py --epochs 1
      popprof record -o runs/bert --no-execution -- python run_glue.py ...
      popprof record --run-count 1 --fail-on warning -- ./my_poplar_app
    """
    from ..record.env import ProfilingChoice
    from ..record.pipeline import RecordOptions, default_out_dir, record
    from ..record.run import KILL_AFTER_S

    config = load_config(explicit=config_file) if check else EMPTY
    level = _fail_on(fail_on, config) if check else (fail_on or "error")
    if check:
        from ..rules.base import plan

        plan(config=config)  # a bad [rules] config fails before CMD runs, not after
    options = RecordOptions(
        choice=ProfilingChoice(graph=graph, execution=execution, trace=trace, run_count=run_count),
        check=check,
        fail_on=level,
        config=config,
        plots=plots,
        device_map=reader_options(device_map, config).get("device_map"),
        kill_after=KILL_AFTER_S if kill_after is None else kill_after,
    )
    target = out_dir if out_dir is not None else default_out_dir()
    result = record(list(cmd), target, options, say=lambda line: click.echo(line, err=True))
    if check and result.findings:
        from ..report.findings import RENDERERS

        rich = sys.stdout.isatty()
        click.echo(
            RENDERERS["text"](
                result.findings, level, rich=rich, width=shutil.get_terminal_size((120, 40)).columns
            ),
            nl=False,
        )
    written = [str(p) for p in result.written] + (
        [f"{plural(len(result.collected.bundles), 'bundle')} in {target / 'bundles'}"]
        if result.collected.bundles
        else []
    )
    said_wrote(target, ", ".join(written))
    code = result.exit_code
    if exit_code_from == "command":
        run = result.run
        code = 128 + run.signal_number if run.signal_number is not None else run.returncode
        if code:
            raise click.exceptions.Exit(code)
        return
    if code == 4:
        click.echo(
            f"popprof: exit code 4: CMD failed ({result.run.describe()}); findings above, if any, may be "
            "partial",
            err=True,
        )
    if code:
        raise click.exceptions.Exit(code)
