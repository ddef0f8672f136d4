"""The console entry (``popprof.cli.run``): main's exit code, complete output, the exit handlers the command
registered, and the end without the interpreter's teardown (kept when a tracer watches the process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "fixtures" / "traces" / "training_loop.json"

#: runs the entry as the console script does. ``During`` registers an exit handler while the command runs (as
#: multiprocessing or a temporary directory does); ``Teardown`` says when the interpreter's teardown frees a
#: module global; ``--traced`` attaches a tracer first, as coverage or a debugger does.
ENTRY = """
import atexit, os, sys
class Teardown:
    def __del__(self, write=os.write):  # bound now: the teardown empties the module's names first
        write(2, b"TEARDOWN\\n")
keep = Teardown()
traced = "--traced" in sys.argv
if traced:
    sys.argv.remove("--traced")
    sys.settrace(lambda *args: None)
import popprof.cli as cli
command = cli.main
def main():
    atexit.register(lambda: print("HANDLER", file=sys.stderr, flush=True))
    return command()
cli.main = main
sys.argv = ["popprof", *sys.argv[1:]]
cli.run()
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_success_writes_everything_runs_the_commands_handlers_and_skips_the_teardown() -> None:
    done = _run("summary", str(TRACE), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)  # the whole document reached stdout (flushed before the end)
    assert summary["trace"]["events"] > 0
    assert "HANDLER" in done.stderr.splitlines()
    assert "TEARDOWN" not in done.stderr  # the process ended without unloading its modules


@pytest.mark.parametrize("args", [("summary", "/nonexistent/trace.json"), ("summary", str(TRACE), "--nope")])
def test_errors_keep_their_exit_code_and_one_line(args: tuple[str, ...]) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("popprof: error:") and lines[1:] == ["HANDLER"]


def test_findings_keep_exit_code_one() -> None:
    done = _run("check", str(TRACE), "--fail-on", "info", "-q")
    assert done.returncode == 1, done.stderr  # a finding at or above --fail-on
    assert "HANDLER" in done.stderr.splitlines()


def test_a_traced_process_ends_as_usual() -> None:
    done = _run("--traced", "summary", "/nonexistent/trace.json")
    assert done.returncode == 2
    assert "HANDLER" in done.stderr.splitlines()
    assert "TEARDOWN" in done.stderr  # the interpreter's own end ran: a tracer can save its results


def test_in_process_main_returns() -> None:
    from popprof.cli import main

    assert main(["--version"]) == 0  # and this process goes on
