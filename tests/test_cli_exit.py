"""The console entry (``popprof.cli.run``): main's exit code, complete output, atexit handlers, frozen GC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "fixtures" / "traces" / "training_loop.json"

#: runs the entry as the console script does; an atexit handler reports what the shutdown will see
ENTRY = """
import atexit, gc, json, sys
def report():
    print(json.dumps({"frozen": gc.get_freeze_count()}), file=sys.stderr)
atexit.register(report)
sys.argv = ["popprof", *sys.argv[1:]]
from popprof.cli import run
run()
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def _shutdown_report(stderr: str) -> dict:
    return json.loads(next(line for line in stderr.splitlines() if line.startswith('{"frozen"')))


def test_success_writes_everything_and_freezes_before_exit() -> None:
    done = _run("summary", str(TRACE), "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)  # the whole document reached stdout
    assert summary["trace"]["events"] > 0
    assert (
        _shutdown_report(done.stderr)["frozen"] > 10_000
    )  # the imported libraries' objects, skipped at shutdown


@pytest.mark.parametrize("args", [("summary", "/nonexistent/trace.json"), ("summary", str(TRACE), "--nope")])
def test_errors_keep_their_exit_code(args: tuple[str, ...]) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert _shutdown_report(done.stderr)["frozen"] > 0  # atexit handlers still run


def test_in_process_main_does_not_freeze() -> None:
    import gc

    from popprof.cli import main

    before = gc.get_freeze_count()
    assert main(["--version"]) == 0
    assert gc.get_freeze_count() == before
