"""``popprof record -- CMD``: run a program with profiling on, then collect, export and check what it left.

The steps (each in its own module):

1. :mod:`popprof.record.env` merges popprof's keys into the user's
   ``POPLAR_ENGINE_OPTIONS`` / ``PVTI_OPTIONS`` (the user's keys win);
2. :mod:`popprof.record.run` runs CMD, passing its output through live and
   saving it in the output directory, forwarding SIGINT/SIGTERM;
3. :mod:`popprof.record.collect` opens the reports and traces CMD wrote and the
   Poplar text (summaries, out-of-memory messages) in its saved output;
4. here: export bundles, run the rule checks, write ``findings.json``,
   ``report.html`` and ``record.json``, and pick the exit code
   (:func:`exit_code`; the rule is in docs/record.md).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._version import __version__
from ..io.atomic import write_text_atomic
from ..io.blas import as_the_user_had_it
from ..model.errors import UsageError
from .collect import Collected, export_bundles, find_reports, find_traces, open_files, read_log, sdk_available
from .env import ProfilingChoice, RecordEnvironment, build_environment
from .run import KILL_AFTER_S, RunResult, run_command

#: popprof record's own exit codes (CMD's status is reported, never passed on as is: see docs/record.md).
EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_NOT_RUN = 2
EXIT_CMD_FAILED = 4
RECORD_SCHEMA = "popprof.record/1"

STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
FINDINGS_JSON = "findings.json"
REPORT_HTML = "report.html"
RECORD_JSON = "record.json"
BUNDLES_DIR = "bundles"


@dataclass
class RecordOptions:
    """What ``popprof record`` was asked to do besides running CMD."""

    choice: ProfilingChoice = field(default_factory=ProfilingChoice)
    check: bool = True
    fail_on: str = "error"
    config: Mapping[str, object] | None = None
    plots: bool = True
    device_map: Mapping[str, str | None] | None = None  # --device-map, else the config's [device_map]
    kill_after: float = KILL_AFTER_S  # --kill-after: grace period after a signal before CMD is killed


@dataclass
class RecordResult:
    """The outcome of one recording."""

    out_dir: Path
    run: RunResult
    env: RecordEnvironment
    collected: Collected
    findings: list = field(default_factory=list)  # popprof.rules.Findings per profile
    failed_check: bool = False
    sdk: bool = False
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what popprof could not do, one line each
    command: list[str] = field(default_factory=list)  # CMD as given

    @property
    def exit_code(self) -> int:
        return exit_code(self.run, self.failed_check)


def exit_code(run: RunResult, failed_check: bool) -> int:
    """popprof record's exit code: interrupted > CMD failed > findings > fine.

    128 + N when popprof received signal N (forwarded to CMD; partial results
    were processed); 4 when CMD exited non-zero or was killed; 1 when CMD
    succeeded and a finding reached ``--fail-on``; else 0. (2, nothing ran,
    is raised as a UsageError before any of this.)
    """
    if run.interrupted_by is not None:
        return 128 + run.interrupted_by
    if run.returncode != 0:
        return EXIT_CMD_FAILED
    return EXIT_FINDINGS if failed_check else EXIT_OK


def default_out_dir(now: _dt.datetime | None = None, pid: int | None = None) -> Path:
    """``popprof-record-YYYYmmdd-HHMMSS-ffffff-PID`` in the current directory: unique per run (two records
    started in the same second by one user get different directories; :func:`prepare_out_dir` creates it
    exclusively, so even a clash is refused rather than shared)."""
    now = now or _dt.datetime.now()
    return Path(f"popprof-record-{now:%Y%m%d-%H%M%S-%f}-{os.getpid() if pid is None else pid}")


def prepare_out_dir(out_dir: Path) -> None:
    """Create ``out_dir`` and its ``reports`` directory; refuse (UsageError) one that exists and is not empty.

    ``reports`` is created exclusively: of two runs given the same empty directory, one gets it and the
    other is refused, so two jobs never write their logs into one directory.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir}: exists and is not a directory; choose another -o DIR")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise UsageError(
            f"{out_dir}: exists and is not empty; choose another -o DIR (record never overwrites)"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "reports").mkdir()
    except FileExistsError:
        raise UsageError(
            f"{out_dir}: another run started using it just now; choose another -o DIR (record never shares one)"
        ) from None
    except OSError as exc:
        raise UsageError(f"{out_dir}: cannot create the output directory ({exc.strerror or exc})") from None


def record(
    cmd: Sequence[str],
    out_dir: Path,
    options: RecordOptions,
    environ: Mapping[str, str] | None = None,
    say: Callable[[str], None] | None = None,
) -> RecordResult:
    """Run ``cmd`` with profiling on and process what it left in ``out_dir``.

    ``say`` prints popprof's own lines (default: stderr). Raises UsageError
    (nothing ran) for an invalid environment value, an unusable ``out_dir`` or
    a command that cannot be started.
    """
    if not cmd:
        raise UsageError("no command given: popprof record [OPTIONS] -- CMD [ARGS...]")
    say = say or _to_stderr
    environ = as_the_user_had_it(os.environ) if environ is None else dict(environ)
    env = build_environment(environ, options.choice, out_dir.resolve())  # before anything is created
    created = not out_dir.exists()
    prepare_out_dir(out_dir)
    try:
        run = run_command(
            cmd,
            env.apply(environ),
            out_dir / STDOUT_LOG,
            out_dir / STDERR_LOG,
            kill_after=options.kill_after,
            say=say,
        )
    except UsageError:  # CMD could not start: leave no trace of the attempt
        _remove_what_was_made(out_dir, created)
        raise
    say(
        f"popprof: CMD ended: {run.describe()} after {run.ended - run.started:.1f} s"
        + (
            f" (popprof received {', '.join(run.received)}; forwarded: {', '.join(run.forwarded) or 'none'}"
            + (
                f"; killed by popprof {options.kill_after:g} s after the first)"
                if run.killed_by_popprof
                else ")"
            )
            if run.received
            else ""
        )
    )
    result = RecordResult(out_dir, run, env, Collected(), sdk=sdk_available(), command=list(cmd))
    _collect(result, options)
    if options.check:
        _check(result, options)
    _write_record_json(result, cmd, options)
    _say_notes(result, say)
    return result


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _remove_what_was_made(out_dir: Path, created: bool) -> None:
    """Remove the empty logs and report directory made for a CMD that never started (and DIR if new)."""
    for name in (STDOUT_LOG, STDERR_LOG):
        (out_dir / name).unlink(missing_ok=True)
    for directory in (out_dir / "reports", *([out_dir] if created else [])):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _collect(result: RecordResult, options: RecordOptions) -> None:
    collected, run, env = result.collected, result.run, result.env
    reports = find_reports(env.report_dir, run.started) if env.report_dir else []
    traces = find_traces(env.trace_dir, run.started) if env.trace_dir else []
    collected.reports = [path for _, path in reports]
    collected.traces = traces
    open_files(reports, collected, result.sdk)
    trace_entries = [(path.stem, path) for path in traces]
    open_files(trace_entries, collected, result.sdk, device_map=options.device_map)
    exported = list(collected.profiles)  # reports and traces: what needed the SDK to read
    if exported:
        export_bundles(collected, exported, result.out_dir / BUNDLES_DIR)
    if options.check:  # the logs' Poplar text is only worth reading (a full scan of each log) to check it
        read_log(result.out_dir / STDOUT_LOG, "stdout", collected)
        read_log(result.out_dir / STDERR_LOG, "stderr", collected)
    if collected.needs_sdk:
        result.notes.append(
            f"the Poplar SDK's pva module cannot be imported, so {_count(collected.reports, 'report')} and "
            f"{_count(collected.traces, '.pvti trace')} were collected but not exported or checked; run "
            f"`popprof export {_where(env.report_dir, result.out_dir)} -o {result.out_dir / BUNDLES_DIR}` "
            "where the SDK is enabled (`source poplar_sdk/enable`)"
        )
    if not run.output_complete:
        result.notes.append(
            "a process started by CMD kept its output open after CMD ended; what it printed "
            "later was shown but not saved"
        )
    result.notes.extend(f"could not save CMD's output: {e}" for e in run.log_errors)
    result.notes.extend(collected.problems)


def _count(items: list, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _where(report_dir: Path | None, out_dir: Path) -> str:
    return shlex.quote(str(report_dir if report_dir is not None else out_dir / "reports"))


def _check(result: RecordResult, options: RecordOptions) -> None:
    from ..report.findings import failed, render_json
    from ..rules import check

    profiles = result.collected.profiles
    for name, profile in profiles.items():
        findings = check(profile, config=options.config)
        findings.profile_name = name
        result.findings.append(findings)
    result.failed_check = failed(result.findings, options.fail_on)
    path = result.out_dir / FINDINGS_JSON
    write_text_atomic(path, render_json(result.findings, options.fail_on))
    result.written.append(path)
    if not profiles:
        collected = result.collected
        if not (collected.reports or collected.traces):  # otherwise the notes say why they were not read
            result.notes.append(
                "CMD left no report, trace, Poplar summary or out-of-memory message: nothing to "
                "check (is it a Poplar program? were POPLAR_ENGINE_OPTIONS / PVTI_OPTIONS "
                "overridden?)"
            )
        return
    _write_report(result, options)


def _write_report(result: RecordResult, options: RecordOptions) -> None:
    from ..report import html as htmlreport

    plots = options.plots
    if plots:
        try:
            from ..plots import require_matplotlib

            require_matplotlib().use("Agg")
        except (ImportError, UsageError) as exc:
            result.notes.append(f"report.html has no plots ({exc})")
            plots = False
    path = result.out_dir / REPORT_HTML
    by_name = {f.profile_name: f for f in result.findings}
    htmlreport.write(
        list(result.collected.profiles.values()),
        str(path),
        findings=by_name,
        plots=plots,
        config=options.config,
        title=f"popprof record: {result.out_dir.name}",
        run=_run_context(result),
    )
    result.written.append(path)


def _run_context(result: RecordResult) -> dict:
    """What report.html says of CMD: the command line, how it ended, how long it ran, when it started."""
    import datetime as dt

    run = result.run
    return {
        "command": shlex.join(result.command),
        "outcome": run.describe(),
        "duration_us": (run.ended - run.started) * 1e6,
        "started": dt.datetime.fromtimestamp(run.started, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _signal_name(number: int | None) -> str | None:
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _write_record_json(result: RecordResult, cmd: Sequence[str], options: RecordOptions) -> None:
    """``record.json``: what ran, how it ended, what was collected and written (paths relative to DIR)."""
    out, run, collected = result.out_dir, result.run, result.collected

    def rel(path: Path) -> str:
        try:
            return str(path.resolve().relative_to(out.resolve()))
        except ValueError:
            return str(path)

    doc = {
        "schema": RECORD_SCHEMA,
        "tool_version": __version__,
        "command": list(cmd),
        "started": _dt.datetime.fromtimestamp(run.started, _dt.UTC).isoformat(timespec="seconds"),
        "duration_s": round(run.ended - run.started, 3),
        "cmd_exit_code": run.returncode if run.returncode >= 0 else None,
        "cmd_killed_by": _signal_name(run.signal_number),
        "signals_received": run.received,
        "signals_forwarded": run.forwarded,
        "cmd_killed_by_popprof": run.killed_by_popprof,
        "kill_after_s": options.kill_after,
        "environment": result.env.variables,
        "user_keys_kept": result.env.user_keys,
        "report_directory": str(result.env.report_dir) if result.env.report_dir else None,
        "trace_directory": str(result.env.trace_dir) if result.env.trace_dir else None,
        "sdk_available": result.sdk,
        "reports": [rel(p) for p in collected.reports],
        "traces": [rel(p) for p in collected.traces],
        "logs": {
            STDOUT_LOG: collected.log_profiles.get(STDOUT_LOG, []),
            STDERR_LOG: collected.log_profiles.get(STDERR_LOG, []),
        },
        "profiles": {name: p.source_format for name, p in collected.profiles.items()},
        "bundles": [rel(p) for p in collected.bundles],
        "not_read_without_sdk": [rel(p) for p in collected.needs_sdk],
        "checked": options.check,
        "fail_on": options.fail_on,
        "failed_check": result.failed_check,
        "outputs": [rel(p) for p in result.written],
        "notes": result.notes,
        "exit_code": result.exit_code,
    }
    write_text_atomic(out / RECORD_JSON, json.dumps(doc, indent=2) + "\n")
    result.written.append(out / RECORD_JSON)


def _say_notes(result: RecordResult, say: Callable[[str], None]) -> None:
    for note in result.notes:
        say(f"popprof: note: {note}")
