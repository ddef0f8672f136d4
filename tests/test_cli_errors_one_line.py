"""Issue 46 items 4, 6 and 8: the launcher ends as the CLI ends when stdout fails, answers only what the CLI
would, every usage error is one line (exit 2), a missing input is said before the heavy imports, and a Chrome
trace cut off gets the same answer gzipped or not.

Each test failed on main before its fix. None measures time: the start-up figures are in
benchmarks/README.md (``bench_startup.py``).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import popprof
from popprof.cli import EXIT_BROKEN_PIPE, main

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "fixtures" / "traces" / "training_loop.json"
ENV = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}


def _popprof(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess:
    """``python -m popprof ARGV`` (the launcher first, as the console script) in a fresh interpreter."""
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "popprof", *argv], env=ENV, cwd=ROOT, timeout=120, **kwargs)


# -- item 4: stdout full, closed or gone, as the launcher and the CLI answer it ------------------------------

#: answered by the launcher (the first three) and by the CLI (-q sends them on)
STDOUT_ARGVS = [["--version"], ["--help"], ["summary", "--help"], ["-q", "--version"], ["-q", "--help"]]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("argv", STDOUT_ARGVS)
def test_a_full_stdout_is_one_error_line_and_exit_2(argv: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = _popprof(argv, stdout=full)
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode() == "popprof: error: No space left on device\n"


@pytest.mark.parametrize("argv", STDOUT_ARGVS)
def test_a_stdout_whose_reader_is_gone_ends_silently_with_141(argv: list[str]) -> None:
    """``popprof --help | head -1`` in a script with pipefail: the reader exited before the write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = _popprof(argv, stdout=write_end)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr.decode()) == (EXIT_BROKEN_PIPE, "")


@pytest.mark.parametrize("argv", [*STDOUT_ARGVS, ["tables", str(TRACE)]])
def test_a_closed_stdout_ends_silently_with_141(argv: list[str]) -> None:
    """``popprof --version >&-``: nothing can be delivered, so it ends as after a closed pipe (not exit 0)."""
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" "$@" >&-', sys.executable, "-m", "popprof", *argv],
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=ROOT,
        timeout=120,
    )
    assert (done.returncode, done.stderr.decode()) == (EXIT_BROKEN_PIPE, "")


def test_a_closed_stdout_with_nothing_to_write_is_still_fine(tmp_path: Path) -> None:
    out = tmp_path / "tables.txt"
    done = subprocess.run(
        [
            "sh",
            "-c",
            'exec "$0" "$@" >&-',
            sys.executable,
            "-m",
            "popprof",
            "tables",
            str(TRACE),
            "-q",
            "-o",
            str(out),
        ],
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8")


def test_the_launcher_codes_agree_with_the_cli() -> None:
    import popprof.launch

    assert popprof.launch.EXIT_BROKEN_PIPE == EXIT_BROKEN_PIPE


@pytest.mark.parametrize("argv", [["popprof", "--help"], ["popprof", "-h"], ["bogus", "--help"]])
def test_the_launcher_answers_only_what_the_cli_would(argv: list[str]) -> None:
    """``popprof popprof --help`` once printed the top-level help, exit 0: the CLI says no such command, exit 2."""
    launched = _popprof(argv, stdout=subprocess.PIPE)
    probe = f"import sys; sys.argv = ['popprof', *{argv!r}]\nfrom popprof.cli import run\nrun()\n"
    direct = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, env=ENV, cwd=ROOT, timeout=120
    )
    assert (launched.returncode, launched.stdout, launched.stderr) == (
        direct.returncode,
        direct.stdout,
        direct.stderr,
    )
    assert launched.returncode == 2 and launched.stdout == b""
    assert launched.stderr.decode() == f"popprof: error: no such command '{argv[0]}' (try 'popprof --help')\n"


# -- item 6: every usage error is one line, exit 2 -----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["summary", "--bogus", str(TRACE)], "no such option '--bogus' (try 'popprof summary --help')"),
        (["--bogus"], "no such option '--bogus' (try 'popprof --help')"),
        (["bogus"], "no such command 'bogus' (try 'popprof --help')"),
        (["summary"], "missing argument 'PATH' (try 'popprof summary --help')"),
        (["check", str(TRACE), "--fail-on", "bogus"], "invalid value for '--fail-on'"),
        (["summary", str(TRACE), "--format"], "option '--format' requires an argument"),
        (["store", "add"], "missing argument 'STORE' (try 'popprof store add --help')"),
        (["summary", str(TRACE), "-o", "{tmp}"], "is a directory (try 'popprof summary --help')"),
        (["summary", "{tmp}/missing.json"], "missing.json: no such file or directory"),
        (["summary", f"{TRACE}/inside"], "cannot access: Not a directory"),
        (["summary", "{tmp}"], "directory holds no profile"),
        (["summary", str(TRACE), "--config", "{tmp}/missing.toml"], "config file not found"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(capsys, tmp_path: Path, args: list[str], fragment: str) -> None:
    code = main([a.replace("{tmp}", str(tmp_path)) for a in args])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("popprof: error: "), err
    assert fragment in lines[0], err
    assert "Usage:" not in err and "Traceback" not in err


def test_popprof_alone_still_shows_its_help() -> None:
    """No arguments at all asks for the help (click's, on stderr, exit 2): that one stays a block."""
    done = _popprof([], stdout=subprocess.PIPE)
    assert done.returncode == 2 and done.stderr.decode().startswith("Usage: popprof")


# -- item 6: a missing input is said before the heavy imports ------------------------------------------------

MISSING = "/nonexistent/popprof-missing.json"
HEAVY = ("numpy", "pandas", "pyarrow", "matplotlib", "duckdb", "popprof.readers")


@pytest.mark.parametrize(
    "argv",
    [
        ["summary", MISSING],
        ["tables", MISSING],
        ["check", MISSING],
        ["query", MISSING, "SELECT 1"],
        ["export", MISSING, "-o", "{tmp}/out.popprof"],
        ["timeline", MISSING, "-o", "{tmp}/out.json"],
        ["diff", MISSING, str(TRACE)],
        ["diff", str(TRACE), MISSING],
        ["baseline", MISSING],
        ["plot", MISSING, "-o", "{tmp}/out.png"],
        ["report", MISSING, "-o", "{tmp}/out.html"],
        ["redact", MISSING, "-o", "{tmp}/out.json"],
    ],
)
def test_a_missing_input_is_said_before_the_heavy_imports(tmp_path: Path, argv: list[str]) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    probe = (
        f"import sys; sys.argv = ['popprof', *{argv!r}]\n"
        "from popprof.launch import run\n"
        "try:\n    run()\nexcept SystemExit as exc:\n    code = exc.code\n"
        f"sys.stdout.write(repr((code, sorted(m for m in {HEAVY!r} if m in sys.modules))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120
    )
    assert done.stdout == "(2, [])", (done.stdout, done.stderr)
    assert done.stderr == f"popprof: error: {MISSING}: no such file or directory\n"


# -- item 6: a Chrome trace cut off, gzipped or not --------------------------------------------------------


def _trace_bytes(events: int = 3000) -> bytes:
    rows = [
        {"ph": "X", "name": f"step{i % 7}", "cat": "op", "pid": 1, "tid": 1 + i % 3, "ts": i * 10, "dur": 5}
        for i in range(events)
    ]
    return json.dumps({"traceEvents": rows}).encode()


def _cut(tmp_path: Path, gzipped: bool, early: bool) -> Path:
    whole = _trace_bytes()
    if gzipped:
        packed = gzip.compress(whole)
        data = packed[:30] if early else packed[: len(packed) // 2]
        path = tmp_path / "cut.json.gz"
    else:
        data = whole[:30] if early else whole[: len(whole) // 2]
        path = tmp_path / "cut.json"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("gzipped", [False, True], ids=["json", "json.gz"])
def test_a_trace_cut_off_keeps_the_events_before_the_cut_gzipped_or_not(
    capsys, tmp_path: Path, gzipped: bool
) -> None:
    """The same damage, the same answer: exit 0, the events before the cut, one warning (docs/readers.md)."""
    path = _cut(tmp_path, gzipped, early=False)
    code = main(["summary", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)
    (line,) = err.splitlines()
    assert line.startswith(f"popprof: warning: {path}: read with problems: the file ends early"), err
    events = popprof.open(path).events
    assert 0 < len(events) < 3000


@pytest.mark.parametrize("gzipped", [False, True], ids=["json", "json.gz"])
def test_a_trace_cut_before_any_event_is_refused_gzipped_or_not(
    capsys, tmp_path: Path, gzipped: bool
) -> None:
    path = _cut(tmp_path, gzipped, early=True)
    code = main(["summary", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"popprof: error: {path}: "), err
