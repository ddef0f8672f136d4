"""Issue 28: the CLI starts fast and every command takes the same flags.

``popprof --version`` and every ``--help`` import nothing heavy (checked in a fresh interpreter);
every command shows the global options and takes them after its name too; every command that
writes a result takes ``-o`` (``-`` is stdout) and ``--config``; one ``popprof: wrote FILE`` line
on stderr that ``-q`` silences.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from popprof.cli import COMMANDS, SHORT_HELP, LazyGroup, cli, main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BUNDLE = FIXTURES / "mk2_training.popprof"
TRACE = next(p for p in sorted((FIXTURES / "traces").iterdir()) if p.name.endswith((".json", ".json.gz")))

#: Modules that make start-up slow (issue 28: 0.5-0.7 s of CPU for --version).
HEAVY = ("pandas", "pyarrow", "numpy", "duckdb", "matplotlib", "rich", "popprof.readers", "popprof.metrics")

#: Commands that write a result, and so take -o and --config.
WRITERS = (
    "summary",
    "tables",
    "query",
    "export",
    "timeline",
    "check",
    "diff",
    "baseline",
    "plot",
    "report",
    "record",
    "pilot",
    "rules",
)

PROBE = """
import sys
from popprof.cli import main
try:
    main({argv!r})
finally:
    heavy = sorted(m for m in {heavy!r} if m in sys.modules)
    print("HEAVY=" + ",".join(heavy), file=sys.stderr)
"""


def _heavy_after(argv: list[str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)],
        capture_output=True,
        text=True,
        check=False,
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("HEAVY=")][-1]
    return [m for m in line[len("HEAVY=") :].split(",") if m]


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_version_and_help_import_nothing_heavy():
    assert _heavy_after(["--version"]) == []
    assert _heavy_after(["--help"]) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_help_imports_nothing_heavy(command):
    assert _heavy_after([command, "--help"]) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_listed_help_line_is_the_commands_own(command):
    """popprof --help reads SHORT_HELP instead of importing every command: it must say what they say."""
    loaded = LazyGroup._load(command)
    assert loaded is not None
    assert SHORT_HELP[command] == loaded.get_short_help_str(limit=500)


def _options(command: click.Command) -> dict[str, click.Option]:
    return {opt: p for p in command.params if isinstance(p, click.Option) for opt in p.opts}


def _every_command() -> list[list[str]]:
    """Every command line's words: each command, and each subcommand of a command group."""
    out = []
    for name in sorted(COMMANDS):
        command = LazyGroup._load(name)
        out.append([name])
        if isinstance(command, click.Group):
            out += [[name, sub] for sub in sorted(command.commands)]
    return out


#: Commands whose own --limit means something else (rows), left to them (none since store query has --rows).
OWN_LIMIT: set[tuple[str, ...]] = set()


@pytest.mark.parametrize("words", _every_command(), ids=" ".join)
def test_every_command_shows_the_same_global_options(words, capsys):
    code, group_help, _ = _run(capsys, "--help")
    code, help_text, _ = _run(capsys, *words, "--help")
    assert code == 0
    group = _options(cli)
    command = LazyGroup._load(words[0])
    for word in words[1:]:
        command = command.commands[word]
    own = _options(command)
    names = ("-q", "--quiet") if tuple(words) in OWN_LIMIT else ("-q", "--quiet", "--limit")
    for name in names:
        assert name in own, f"{' '.join(words)} --help lacks {name}"
        assert own[name].help == group[name].help
    assert "-q, --quiet" in help_text
    assert "-q, --quiet" in group_help
    if tuple(words) not in OWN_LIMIT:
        assert "--limit NAME=VALUE" in help_text


@pytest.mark.parametrize("command", WRITERS)
def test_every_command_that_writes_takes_output_and_config(command):
    own = _options(LazyGroup._load(command))
    assert "-o" in own and "--output" in own and "--config" in own


def test_global_options_work_after_the_command(capsys, tmp_path):
    code, _, err = _run(capsys, "summary", BUNDLE, "--quiet")
    assert code == 0 and err == ""
    code, _, err = _run(capsys, "summary", BUNDLE, "--limit", "json-depth=nope")
    assert code == 2 and "--limit json-depth" in err and len(err.splitlines()) == 1
    big = tmp_path / "summary.txt"
    big.write_text((FIXTURES / "text_summary").joinpath(_first_text()).read_text())
    code, _, err = _run(capsys, "summary", big, "--limit", "text-bytes=100")
    assert code == 2 and "text-bytes" in err
    code, _, err = _run(capsys, "--limit", "text-bytes=100", "summary", big)
    assert "POPPROF_MAX_TEXT_BYTES" not in os.environ  # the run's --limit does not outlive it
    assert code == 2 and "text-bytes" in err


def _first_text() -> str:
    return sorted(p.name for p in (FIXTURES / "text_summary").glob("*.txt"))[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["summary", BUNDLE],
        ["summary", BUNDLE, "--format", "json"],
        ["tables", BUNDLE],
        ["query", BUNDLE, "SELECT count(*) AS n FROM tiles"],
        ["check", BUNDLE, "--fail-on", "never"],
        ["diff", BUNDLE, BUNDLE, "--no-gate"],
        ["baseline", BUNDLE],
        ["rules"],
        ["rules", "--format", "json"],
    ],
    ids=lambda a: " ".join(str(x) for x in a[:1] + a[2:]),
)
def test_output_file_says_wrote_once_and_q_silences_it(argv, capsys, tmp_path):
    _says_wrote_once_and_q_silences_it(capsys, tmp_path, argv)


def _says_wrote_once_and_q_silences_it(capsys, tmp_path: Path, argv: list) -> None:
    """``-o FILE`` writes what stdout shows (atomically: no temporary file is left) and says so once on stderr;
    ``-q`` before or after the command silences it; ``-o -`` is stdout."""
    code, stdout_text, _ = _run(capsys, *argv)
    assert code == 0 and stdout_text
    target = tmp_path / "out.txt"
    code, out, err = _run(capsys, *argv, "-o", target)
    assert code == 0 and out == ""
    assert err == f"popprof: wrote {target}\n"
    assert target.read_text() == stdout_text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left
    for quiet in (["-q", *argv, "-o", target], [*argv, "-o", target, "-q"]):
        code, out, err = _run(capsys, *quiet)
        assert code == 0 and out == "" and err == ""
    code, out, err = _run(capsys, *argv, "-o", "-")
    assert code == 0 and err == "" and _same(out, stdout_text)


@pytest.fixture(scope="module")
def store_root(tmp_path_factory) -> Path:
    """A small store: 30 runs of an exact and a noisy metric, and 20 trace jobs of 8 ranks."""
    import popprof.store as store
    from popprof.testing.store_history import shifted_series, write_history, write_rank_jobs

    root = tmp_path_factory.mktemp("flags") / "store"
    store.init(root)
    memory = [1_000_000] * 15 + [1_050_000] * 15
    write_history(
        root, {"memory.total_incl_gaps_bytes": memory, "trace.device_idle_us": shifted_series(30, seed=1)}
    )
    write_rank_jobs(root, 20, 8, seed=3, slow={5: 0.2})
    return root


@pytest.mark.parametrize(
    "argv",
    [
        ["trend", "memory.total_incl_gaps_bytes"],
        ["trend", "memory.total_incl_gaps_bytes", "--format", "json"],
        ["trend", "show", "memory.total_incl_gaps_bytes", "--format", "markdown"],
        ["fleet", "ranks"],
        ["fleet", "ranks", "--format", "csv"],
        ["store", "ls", "--last", "5"],
    ],
    ids=" ".join,
)
def test_the_store_commands_take_the_same_output_option(argv, store_root, capsys, tmp_path):
    words = [w for w in argv[:2] if w in ("show", "ranks", "ls")]
    command = [*argv[: 1 + len(words)], store_root, *argv[1 + len(words) :]]
    _says_wrote_once_and_q_silences_it(capsys, tmp_path, command)


def test_trend_o_with_an_image_name_plots_and_still_prints_the_report(store_root, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    argv = ["trend", store_root, "memory.total_incl_gaps_bytes"]
    _, report, _ = _run(capsys, *argv)
    target = tmp_path / "trend.png"
    code, out, err = _run(capsys, *argv, "-o", target)
    assert code == 0 and out == report and err == f"popprof: wrote {target}\n"
    assert target.read_bytes()[:4] == b"\x89PNG"
    code, out, err = _run(capsys, *argv, "-o", tmp_path / "trend.svg", "-q")
    assert (
        code == 0 and out == report and err == "" and b"<svg" in (tmp_path / "trend.svg").read_bytes()[:500]
    )


def test_the_store_commands_never_write_into_the_store(store_root, capsys):
    for argv in (["trend", store_root, "memory.total_incl_gaps_bytes"], ["fleet", "ranks", store_root]):
        code, out, err = _run(capsys, *argv, "-o", store_root / "report.txt")
        assert code == 2 and out == "" and "overwrite the input" in err and len(err.splitlines()) == 1
    assert not (store_root / "report.txt").exists()


def _same(streamed: str, echoed: str) -> bool:
    """`-o -` gives the same bytes as no -o (the baseline's generation time may differ)."""
    try:
        a, b = json.loads(streamed), json.loads(echoed)
    except ValueError:
        return streamed == echoed
    for doc in (a, b):
        if isinstance(doc, dict):
            doc.pop("created", None)
            doc.pop("generated", None)
    return a == b


def test_export_says_wrote_on_stderr_not_the_path_on_stdout(capsys, tmp_path):
    target = tmp_path / "x.popprof"
    code, out, err = _run(capsys, "export", BUNDLE, "-o", target)
    assert code == 0 and out == "" and err == f"popprof: wrote {target}\n"
    code, out, err = _run(capsys, "export", BUNDLE, "-o", target, "-q")
    assert code == 0 and out == "" and err == ""


def test_the_writers_of_images_and_traces_use_the_same_line(capsys, tmp_path):
    target = tmp_path / "t.json"
    code, _, err = _run(capsys, "timeline", TRACE, "-o", target)
    assert code == 0 and err.splitlines()[-1].startswith(f"popprof: wrote {target} (")
    code, _, err = _run(capsys, "timeline", TRACE, "-o", target, "-q")
    assert code == 0 and "wrote" not in err


def test_query_rows_replaces_limit_and_the_old_spelling_still_works(capsys):
    sql = "SELECT tile FROM tiles ORDER BY tile"
    code, out, err = _run(capsys, "query", BUNDLE, sql, "--rows", "3")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[1:4] == ["   0", "   1", "   2"] or len([x for x in lines if x.strip().isdigit()]) == 3
    assert "more rows (use --rows N" in lines[-1]
    code, old, err = _run(capsys, "query", BUNDLE, sql, "--limit", "3")
    assert code == 0 and old == out
    assert "query --rows N" in err and len(err.splitlines()) == 1
    code, _, err = _run(capsys, "query", BUNDLE, sql, "--limit", "3", "--limit", "query-seconds=5")
    assert code == 0


def test_config_is_read_from_the_given_file(capsys, tmp_path):
    """summary --config: the device map of that file is used (it was ignored: no --config at all)."""
    config = tmp_path / "mine.toml"
    config.write_text('[device_map]\ncompute = "no-such-kernel-name"\n')
    code, _, err = _run(capsys, "summary", TRACE, "--config", config, "--format", "json")
    assert code == 0
    config.write_text('[device_map]\nnot_a_category = "x"\n')
    code, _, err = _run(capsys, "summary", TRACE, "--config", config)
    assert code == 2 and len(err.splitlines()) == 1


def test_rules_lists_the_parameters_the_given_config_sets(capsys, tmp_path):
    """rules --config: the parameters check would use, and the rules the config turns off marked."""
    config = tmp_path / "ci.toml"
    config.write_text('[rules]\n"memory.headroom.warning" = 0.7\ndisable = ["host.*"]\n')
    code, out, _ = _run(capsys, "rules", "--format", "json", "--config", config)
    rules = {r["id"]: r for r in json.loads(out)}
    assert code == 0
    assert rules["memory.headroom"]["params"]["warning"] == 0.7
    assert rules["memory.headroom"]["defaults"]["warning"] == 0.85
    assert rules["memory.headroom"]["enabled"] and not rules["host.device-gaps"]["enabled"]
    code, out, _ = _run(capsys, "rules", "--config", config)
    assert "memory.headroom.warning = 0.7" in out
    # the mark follows the rule's id, as in --format markdown, so a description that wraps keeps it in view
    assert any(line.startswith("host.device-gaps (off in the config): ") for line in out.splitlines())
    assert not any(line.startswith("memory.headroom (off") for line in out.splitlines())
    assert any(line.startswith("memory.headroom: ") for line in out.splitlines())
    config.write_text("[rules\n")
    code, _, err = _run(capsys, "rules", "--config", config)
    assert code == 2 and len(err.splitlines()) == 1


def test_an_in_process_run_gives_the_callers_progress_back(tmp_path) -> None:
    """`-q` silences progress for the run only: a notebook or test calling main() keeps its own setting after
    (before, a run with -q left progress off for everything the process did next)."""
    from popprof.io import progress

    out = tmp_path / "s.json"
    assert not progress.quiet()
    assert main(["summary", str(BUNDLE), "--format", "json", "-q", "-o", str(out)]) == 0
    assert out.exists() and not progress.quiet()
    progress.set_quiet(True)
    try:
        assert main(["summary", str(BUNDLE), "--format", "json", "-o", str(out)]) == 0
        assert progress.quiet()  # the caller's own -q stays too
    finally:
        progress.set_quiet(False)


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"], ["summary", "--help"], ["store", "-h"]])
@pytest.mark.parametrize("columns", ["80", "120", "60"])
def test_the_launcher_answers_as_the_cli_does(argv: list[str], columns: str) -> None:
    """The same bytes from the launcher as from the CLI itself, at any width; click is imported for the help
    (drawn by the CLI), never for ``--version``."""
    env = {**os.environ, "COLUMNS": columns}
    probe = (
        "import sys; sys.argv = ['popprof', *{argv!r}]\n"
        "from popprof.{module} import run\n"
        "try:\n    run()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('CLICK=%s' % ('click' in sys.modules))\n"
    )
    outs = {}
    for module in ("launch", "cli"):
        done = subprocess.run(
            [sys.executable, "-c", probe.format(argv=argv, module=module)],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=60,
        )
        outs[module] = (done.stdout, done.stderr)
    assert outs["launch"][0] == outs["cli"][0] and outs["launch"][0]
    assert outs["launch"][1].endswith(f"CLICK={argv != ['--version']}")
