"""numpy's BLAS in popprof's own process (``popprof/io/blas.py``): the console script asks OpenBLAS for one
thread before numpy loads, the user's own choice wins, and ``popprof record`` runs the user's command with the
environment as the user had it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.io import blas

HERE = Path(__file__).resolve().parent
CHILD = str(HERE / "record_child.py")

#: numpy loaded after what the console script does first: its process's threads and the variable it saw
PROBE = """
import json, os, sys
from popprof.io.blas import one_thread
one_thread()
import numpy
print(json.dumps({"threads": len(os.listdir("/proc/self/task")), "set": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


def _probe(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads counted from /proc")
def test_numpy_loads_with_one_blas_thread_unless_the_user_chose():
    env = {k: v for k, v in os.environ.items() if k != blas.VARIABLE}
    assert _probe(env) == {"threads": 1, "set": "1"}  # no OpenBLAS thread beside the main one
    assert _probe({**env, blas.VARIABLE: "2"})["set"] == "2"  # the user's number is kept


def test_the_console_script_asks_before_the_cli_imports_numpy():
    """``python -m popprof`` (the console script's path): the variable is set by the time the command runs."""
    code = (
        "import os, sys\n"
        "import popprof.cli as cli\n"
        "def show():\n"
        "    print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)\n"
        "    raise SystemExit(0)\n"
        "cli.run = show\n"
        "sys.argv = ['popprof', 'summary', 'x']\n"
        "from popprof.launch import run\n"
        "run()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != blas.VARIABLE}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1", "False"]


def test_only_what_popprof_set_is_taken_out(monkeypatch):
    monkeypatch.delenv(blas.VARIABLE, raising=False)
    monkeypatch.setattr(blas, "_set_here", False)
    blas.one_thread()
    assert os.environ[blas.VARIABLE] == "1" and blas._set_here
    assert blas.VARIABLE not in blas.as_the_user_had_it(os.environ)
    assert blas.as_the_user_had_it({"A": "b", blas.VARIABLE: "4"}) == {"A": "b", blas.VARIABLE: "4"}
    monkeypatch.setenv(blas.VARIABLE, "3")
    monkeypatch.setattr(blas, "_set_here", False)
    blas.one_thread()  # the user's setting: left alone, and given to their command as it is
    assert os.environ[blas.VARIABLE] == "3" and not blas._set_here
    assert blas.as_the_user_had_it(os.environ)[blas.VARIABLE] == "3"


def test_record_runs_the_command_with_the_users_blas_threads(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(blas.VARIABLE, raising=False)
    monkeypatch.setattr(blas, "_set_here", False)
    blas.one_thread()  # as the console script did in this process
    seen = tmp_path / "seen.json"
    options = ["--no-plots", "--no-graph", "--no-execution", "--no-trace"]
    code = main(
        ["record", "-o", str(tmp_path / "run"), *options, "--", sys.executable, CHILD, "--seen", str(seen)]
    )
    capsys.readouterr()
    assert code == 0
    assert json.loads(seen.read_text())["OPENBLAS_NUM_THREADS"] is None  # not popprof's "1"
