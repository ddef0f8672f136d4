"""The command line as a first-time user meets it: every command on every fixture, and bad outputs.

Each command runs in-process through ``popprof.cli.main`` (as the console script
does) on every sample under fixtures/. What a run must look like is written here
by hand: exit code 0/1/2 as README documents, results on stdout only, at most
one line on stderr for an error and never a traceback, nothing written on
failure, inputs untouched. The target figures expected per fixture come from
fixtures/README.md (Mk1 = 1,216 tiles, Mk2 = 1,472 tiles per IPU, pod4 = 4 IPUs,
mk2_oom = 12 tiles over capacity), not from the code under test.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from popprof.cli import EXIT_BROKEN_PIPE, main
from popprof.io.atomic import atomic_path
from popprof.model.errors import OutputError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PVA_DOUBLE = Path(__file__).resolve().parent / "pva_double"

BUNDLES = sorted(p.name for p in FIXTURES.glob("*.popprof"))
INPUTS = (
    [f"{name}" for name in BUNDLES]
    + ["run_dir/training/profile.pop"]
    + [f"text_summary/{p.name}" for p in sorted((FIXTURES / "text_summary").glob("*.txt"))]
    + [f"sdk1_json/{p.name}" for p in sorted((FIXTURES / "sdk1_json").glob("*.json"))]
    + [f"traces/{p.name}" for p in sorted((FIXTURES / "traces").iterdir())]
)
TRACES = [i for i in INPUTS if i.startswith("traces/")]

#: (IPUs, tiles per IPU) by sample name, from fixtures/README.md.
TARGETS = {
    "mk1_noexec": (1, 1216),
    "mk2_oom": (1, 1472),
    "mk2_training": (1, 1472),
    "mk2_training_v2": (1, 1472),
    "pod4_pipeline": (4, 1472),
    "training": (1, 1472),
    "mk2_training_sdk3": (1, 1472),
    "pod4_pipeline_sdk1_exec": (4, 1472),
}


def _stem(rel: str) -> str:
    """The profile name popprof gives a sample: its file name, or the engine directory of a profile.pop."""
    name = Path(rel).name
    if name == "profile.pop":
        return Path(rel).parent.name
    for suffix in (".json.gz", ".popprof", ".json", ".txt", ".pop", ".pvti"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _digest(path: Path) -> str:
    """A hash of every file under ``path`` (names and bytes), to prove an input was not modified."""
    h = hashlib.sha256()
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run ``popprof ARGS`` in ``tmp_path`` with the pva double importable; check the output contract."""
    monkeypatch.syspath_prepend(str(PVA_DOUBLE))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("pva", None)

    def run(*args: str, expect: int | tuple[int, ...] = 0) -> tuple[str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        allowed = expect if isinstance(expect, tuple) else (expect,)
        assert code in allowed, f"popprof {' '.join(map(str, args))}: exit {code}, stderr: {err}"
        assert "Traceback" not in err and "internal error" not in err, err
        if code == 2:
            assert out == "", f"an error must print nothing on stdout, got {out[:200]!r}"
            lines = err.strip().splitlines()
            if lines[0].startswith("Usage: popprof"):  # a group called with nothing: its help (exit 2)
                assert "Error:" not in err, f"a usage error is one line (issue 46), got {err!r}"
            else:
                assert len(lines) == 1, f"an error is one line on stderr, got {err!r}"
        return out, err

    yield run
    sys.modules.pop("pva", None)


# --------------------------------------------------------------------------- every fixture x read-only commands


@pytest.mark.parametrize("rel", INPUTS)
def test_read_only_commands_on_every_fixture(cli, rel):
    path = FIXTURES / rel
    before = _digest(path)
    stem = _stem(rel)

    out, err = cli("summary", path, "--format", "json")
    data = json.loads(out)
    if rel == "traces/begin_end.json":  # holds an unmatched B and an unmatched E on purpose
        assert (
            err.count("\n") == 1
            and "1 begin (B) event never ends" in err
            and "1 end (E) event has no begin" in err
        )
    else:
        assert err == ""
    if rel in TRACES:
        assert data["trace"]["events"] > 0
    else:
        ipus, tiles = TARGETS[stem]
        assert (data["target"]["num_ipus"], data["target"]["tiles_per_ipu"]) == (ipus, tiles)
        if stem == "mk2_oom" and not rel.startswith("text_summary/"):  # a text summary has no per-tile table
            assert data["memory"]["tiles_out_of_memory"] == 12

    text, _ = cli("summary", path)
    assert text.startswith(f"Profile {stem} (") and "Traceback" not in text

    out, _ = cli("tables", path, "--format", "json")
    tables = json.loads(out)
    assert len(tables) == 1 and all(
        t["rows"] >= 0 and t["columns"] for t in next(iter(tables.values())).values()
    )

    table = "events" if rel in TRACES else "target"
    out, _ = cli("query", path, f"SELECT count(*) AS n FROM {table}", "--format", "json")
    assert json.loads(out)[0]["n"] == (next(iter(tables.values()))[table]["rows"])

    out, _ = cli("check", path, "--format", "json", "--fail-on", "never")
    json.loads(out)
    out, _ = cli("check", path, "--format", "junit", "--fail-on", "never")
    assert ET.fromstring(out).tag in ("testsuites", "testsuite")

    out, _ = cli("baseline", path)
    assert json.loads(out)
    assert _digest(path) == before


# --------------------------------------------------------------------------- one sample of each kind x writing commands

KINDS = [
    "mk2_training.popprof",
    "mk1_noexec.popprof",
    "run_dir/training/profile.pop",
    "text_summary/pod4_pipeline.txt",
    "sdk1_json/mk2_oom.json",
    "traces/poptorch_4532.pvti",
    "traces/training_loop.json.gz",
    "traces/begin_end.json",
]


@pytest.mark.parametrize("rel", KINDS)
def test_writing_commands_on_each_kind(cli, rel, tmp_path):
    path = FIXTURES / rel
    before = _digest(path)
    stem = _stem(rel)
    has_timeline = rel in TRACES or rel.endswith(("training.popprof", ".pop", "mk2_oom.json"))

    out, err = cli("export", path, "-o", tmp_path / "x.popprof")
    assert out == "" and err.splitlines()[-1] == f"popprof: wrote {tmp_path / 'x.popprof'}"
    assert json.loads((tmp_path / "x.popprof" / "manifest.json").read_text())
    out, _ = cli("summary", tmp_path / "x.popprof", "--format", "json")  # the bundle reads back
    assert json.loads(out)["profile"] == stem

    out, err = cli("diff", path, path, "--format", "json", "--no-gate")
    # a source read with problems is named once per command, although diff reads it twice
    assert json.loads(out) and (err == "" or (err.count("\n") == 1 and err.startswith("popprof: warning: ")))
    cli("diff", path, path, "-o", tmp_path / "diff.md", "--format", "markdown", expect=(0, 1))
    assert (tmp_path / "diff.md").read_text().strip()

    out, _ = cli("check", path, "-o", tmp_path / "findings.xml", "--format", "junit", expect=(0, 1))
    assert out == "" and ET.parse(tmp_path / "findings.xml").getroot() is not None

    _, err = cli("baseline", path, "-o", tmp_path / "baseline.json")
    assert "wrote" in err and json.loads((tmp_path / "baseline.json").read_text())
    cli("diff", tmp_path / "baseline.json", path, "--no-gate")

    if has_timeline:
        cli("timeline", path, "-o", tmp_path / "t.json")
        assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    else:
        _, err = cli("timeline", path, "-o", tmp_path / "t.json", expect=2)
        assert "nothing to put on a timeline" in err and not (tmp_path / "t.json").exists()

    cli("report", path, "-o", tmp_path / "r.html", "--no-plots")
    assert (tmp_path / "r.html").read_text().lstrip().lower().startswith("<!doctype html")

    red = tmp_path / ("red" + ("" if path.is_dir() or rel.endswith(".pop") else Path(rel).suffix))
    if rel.endswith(".json.gz"):
        red = tmp_path / "red.json.gz"
    out, _ = cli("redact", path, "-o", red, "--key-file", _key(tmp_path))
    assert red.exists() and out.strip()
    assert _digest(path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".old"))]


def _key(tmp_path: Path) -> Path:
    key = tmp_path / "team.key"
    key.write_text("3f9a2c1b07de5d84e6b1a09c7f2e4d3b\n")
    return key


def test_plots_of_a_bundle_and_a_trace(cli, tmp_path):
    cli("plot", FIXTURES / "mk2_training.popprof", "--kind", "memory", "-o", tmp_path / "m.png")
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cli("plot", FIXTURES / "traces/training_loop.json", "--kind", "timeline", "-o", tmp_path / "t.svg")
    assert b"<svg" in (tmp_path / "t.svg").read_bytes()[:500]
    _, err = cli(
        "plot", FIXTURES / "traces/training_loop.json", "--kind", "memory", "-o", tmp_path / "x.png", expect=2
    )
    assert "cannot draw --kind memory" in err and "per-tile memory" in err and "timeline" in err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    "command",
    [
        "summary",
        "tables",
        "query",
        "export",
        "check",
        "rules",
        "diff",
        "baseline",
        "redact",
        "scan",
        "timeline",
        "plot",
        "report",
    ],
)
def test_every_command_has_help_with_examples(cli, command):
    out, _ = cli(command, "--help")
    assert f"Usage: popprof {command}" in out and ("Examples:" in out or "Example:" in out)
    assert max(len(line) for line in out.splitlines()) <= 100


def test_a_run_directory_needs_engine_for_single_profile_commands(cli, tmp_path):
    run_dir = FIXTURES / "run_dir"
    for args in (
        ("query", run_dir, "SELECT 1"),
        ("baseline", run_dir),
        ("timeline", run_dir, "-o", "t.json"),
        ("plot", run_dir, "-o", "p.png"),
    ):
        _, err = cli(*args, expect=2)
        assert "holds 2 profiles (inference, training)" in err and "--engine" in err, err
    assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.png"))
    out, _ = cli(
        "query", run_dir, "SELECT count(*) AS n FROM target", "--engine", "inference", "--format", "csv"
    )
    assert out.splitlines() == ["n", "1"]


# --------------------------------------------------------------------------- regression tests for fixes


WRITERS = [
    ("export", "{src}", "-o", "{out}"),
    ("check", "{src}", "--fail-on", "never", "-o", "{out}"),
    ("diff", "{src}", "{src}", "--no-gate", "-o", "{out}"),
    ("baseline", "{src}", "-o", "{out}"),
    ("redact", "{src}", "--key-file", "{key}", "-o", "{out}"),
    ("timeline", "{trace}", "-o", "{out}"),
    ("plot", "{src}", "-o", "{out}.png"),
    ("report", "{src}", "--no-plots", "-o", "{out}"),
]


@pytest.mark.parametrize("args", WRITERS, ids=[a[0] for a in WRITERS])
def test_an_output_that_cannot_be_written_is_one_line_exit_2(cli, tmp_path, args):
    """Was an internal error (exit 3) naming a hidden temporary file."""
    blocker = tmp_path / "afile"
    blocker.write_text("a file, not a directory\n")
    out = blocker / "sub" / "result"
    values = {
        "src": FIXTURES / "mk2_training.popprof",
        "trace": FIXTURES / "traces/training_loop.json",
        "out": out,
        "key": _key(tmp_path),
    }
    _, err = cli(*(a.format(**values) for a in args), expect=2)
    assert err.startswith(f"popprof: error: {out}") and "afile is a file, not a directory" in err, err
    assert ".tmp" not in err
    assert blocker.read_text() == "a file, not a directory\n"


def test_atomic_path_names_the_target_when_the_disk_is_full(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with (
        pytest.raises(OutputError, match=r"out\.json: cannot write the output \(No space left"),
        atomic_path(target) as tmp,
    ):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert target.read_text() == "old" and not tmp.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_atomic_path_keeps_input_errors_as_they_are(tmp_path):
    """An error reading some other file inside the block is not blamed on the output."""
    with pytest.raises(FileNotFoundError), atomic_path(tmp_path / "out.json", directory=True) as tmp:
        (tmp_path / "missing-input").read_bytes()
    assert not tmp.exists() and list(tmp_path.iterdir()) == []


def test_atomic_path_over_a_directory_says_so(tmp_path):
    (tmp_path / "taken.json").mkdir()
    with pytest.raises(OutputError, match="it is a directory"), atomic_path(tmp_path / "taken.json") as tmp:
        tmp.write_text("{}")
    assert (tmp_path / "taken.json").is_dir() and len(list(tmp_path.iterdir())) == 1


def test_a_file_system_error_is_one_line_exit_2(cli, monkeypatch):
    """An OSError that no reader turned into an InputError is still one line, not an internal error."""
    import popprof.readers as readers

    def refuse(path, **options):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(readers, "open_all", refuse)  # the CLI imports it when it reads
    Path("secret.pop").write_bytes(b"x")  # present: a missing one is said before the readers (issue 46)
    _, err = cli("summary", "secret.pop", expect=2)
    assert err == "popprof: error: secret.pop: Permission denied\n"


def test_query_writes_no_files_and_checks_limit(cli, tmp_path):
    bundle = FIXTURES / "mk2_training.popprof"
    _, err = cli("query", bundle, f"COPY (SELECT * FROM tiles) TO '{tmp_path / 'leak.csv'}'", expect=2)
    assert "SQL error" in err and not (tmp_path / "leak.csv").exists()
    _, err = cli("query", bundle, "SELECT 1", "--limit", "-1", expect=2)
    assert "--limit" in err
    out, _ = cli("query", bundle, "SELECT tile, ipu FROM tiles WHERE tile < 0")
    assert out.splitlines() == ["tile  ipu", "(no rows)"]
    out, _ = cli("query", bundle, "SELECT tile FROM tiles ORDER BY tile", "--limit", "2")
    assert out.splitlines() == [
        " tile",
        "    0",
        "    1",
        "... 1,470 more rows (use --rows N or --format csv)",
    ]


def test_a_closed_stdout_exits_141_silently(tmp_path):
    """``popprof ... | head`` used to exit 1 (which reads as 'findings') via click's EPIPE handling."""
    env = dict(os.environ, PYTHONPATH=str(PVA_DOUBLE))
    proc = subprocess.Popen(
        [sys.executable, "-m", "popprof", "tables", str(FIXTURES / "pod4_pipeline.popprof")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    proc.stdout.close()  # before the child has written anything: its first write fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == EXIT_BROKEN_PIPE == 141
    assert err == ""


def test_profile_pop_without_the_sdk_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pop = FIXTURES / "run_dir/training/profile.pop"
    code = (
        f"import popprof\ntry:\n    popprof.open({str(pop)!r})\n"
        "except popprof.model.errors.SdkMissingError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.count("\n") == 1 and "needs the Poplar SDK's pva module" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "popprof", "summary", str(pop)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"popprof: error: {pop}: reading this file needs the Poplar SDK")


def test_a_python_warning_is_one_line_on_stderr(cli, monkeypatch):
    """Library warnings used to print two lines with a source path (e.g. matplotlib's xlim warning)."""
    import warnings

    import popprof.metrics.summary as summary_cli  # the CLI imports summarise from here when it runs

    real = summary_cli.summarise

    def noisy(profile, **options):
        warnings.warn(
            "Attempting to set identical low and high xlims\n  makes it singular", UserWarning, stacklevel=1
        )
        return real(profile, **options)

    monkeypatch.setattr(summary_cli, "summarise", noisy)
    out, err = cli("summary", FIXTURES / "mk2_training.popprof", "--format", "json")
    assert json.loads(out)["profile"] == "mk2_training"
    assert err == "popprof: warning: Attempting to set identical low and high xlims makes it singular\n"


def test_redact_refuses_one_file_for_report_and_mapping(cli, tmp_path):
    """Both used to be written to the same path, one silently replacing the other."""
    _, err = cli(
        "redact",
        FIXTURES / "traces/training_loop.json",
        "-o",
        tmp_path / "r.json",
        "--key-file",
        _key(tmp_path),
        "--report",
        tmp_path / "same.json",
        "--mapping-out",
        tmp_path / "same.json",
        expect=2,
    )
    assert "--report and --mapping-out" in err
    assert not (tmp_path / "same.json").exists() and not (tmp_path / "r.json").exists()


OPTION_FILES = [
    ("check", "{src}", "--fail-on", "never", "--config", "{opt}", "-o", "{opt}"),
    ("diff", "{src}", "{src}", "--budget", "{opt}", "-o", "{opt}"),
    ("diff", "{src}", "{src}", "--config", "{opt}", "-o", "{opt}"),
    ("report", "{src}", "--no-plots", "--config", "{opt}", "-o", "{opt}"),
    ("redact", "{trace}", "-o", "{tmp}/r.json", "--key-file", "{opt}", "--mapping-out", "{opt}"),
    (
        "redact",
        "{trace}",
        "-o",
        "{tmp}/r.json",
        "--key-file",
        "{key}",
        "--policy",
        "{opt}",
        "--report",
        "{opt}",
    ),
    ("redact", "{trace}", "-o", "{opt}", "--key-file", "{opt}"),
]


@pytest.mark.parametrize(
    "args", OPTION_FILES, ids=[" ".join(a[0:1] + a[-2:-1]) + str(i) for i, a in enumerate(OPTION_FILES)]
)
def test_an_output_never_overwrites_a_config_budget_policy_or_key_file(cli, tmp_path, args):
    """The key file used to be replaced by the pseudonym map, the config by the findings report."""
    opt = tmp_path / "opt.toml"
    opt.write_text(
        "3f9a2c1b07de5d84e6b1a09c7f2e4d3b\n"
        if "--key-file" in args and "{key}" not in args
        else "[tool.popprof.rules]\n"
    )
    before = opt.read_bytes()
    values = {
        "src": FIXTURES / "mk2_training.popprof",
        "trace": FIXTURES / "traces/training_loop.json",
        "opt": opt,
        "tmp": tmp_path,
        "key": _key(tmp_path),
    }
    _, err = cli(*(a.format(**values) for a in args), expect=2)
    assert "would overwrite the input" in err and str(opt) in err, err
    assert opt.read_bytes() == before and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("command", ["export", "redact"])
def test_a_bundle_output_never_replaces_a_directory_that_is_not_a_bundle(cli, tmp_path, command):
    """`popprof export x -o some/dir` used to delete everything in some/dir and put the bundle there."""
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work\n")
    extra = ("--key-file", _key(tmp_path)) if command == "redact" else ()
    _, err = cli(command, FIXTURES / "mk2_training.popprof", "-o", precious, *extra, expect=2)
    assert (
        err.startswith(f"popprof: error: {precious}: ")
        and "an existing directory that is not a bundle" in err
    )
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]
    assert (precious / "thesis.tex").read_text() == "years of work\n"

    afile = tmp_path / "notes.popprof"
    afile.write_text("a file\n")
    _, err = cli(command, FIXTURES / "mk2_training.popprof", "-o", afile, *extra, expect=2)
    assert "an existing file, where a directory would go" in err and afile.read_text() == "a file\n"

    empty = tmp_path / "empty"
    empty.mkdir()
    cli(command, FIXTURES / "mk2_training.popprof", "-o", empty, *extra)
    cli(command, FIXTURES / "mk2_training.popprof", "-o", empty, *extra)  # an earlier bundle is replaced
    assert (empty / "manifest.json").is_file() and (empty / "tiles.parquet").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_earlier_directory_of_bundles_is_replaced(cli, tmp_path):
    """A run directory redacts to a directory of bundles (one per engine); running it again replaces it."""
    out = tmp_path / "shared.popprof"
    for _ in range(2):
        cli("redact", FIXTURES / "run_dir", "-o", out, "--key-file", _key(tmp_path))
        assert len([p for p in out.iterdir() if (p / "manifest.json").is_file()]) == 2
    (out / "README.txt").write_text("mine\n")  # no longer only bundles: kept
    _, err = cli("redact", FIXTURES / "run_dir", "-o", out, "--key-file", _key(tmp_path), expect=2)
    assert "not a bundle" in err and (out / "README.txt").read_text() == "mine\n"


def test_export_of_one_profile_does_not_replace_a_directory_of_bundles(cli, tmp_path):
    """`popprof export run_dir/ -o bundles/` then `popprof export one.pop -o bundles/` deleted both bundles."""
    bundles = tmp_path / "bundles"
    _, err = cli("export", FIXTURES / "run_dir", "-o", bundles)
    assert err.splitlines() == [
        f"popprof: wrote {bundles / 'inference.popprof'}",
        f"popprof: wrote {bundles / 'training.popprof'}",
    ]
    _, err = cli("export", FIXTURES / "run_dir/training/profile.pop", "-o", bundles, expect=2)
    assert f"-o {bundles / 'training.popprof'}" in err
    assert sorted(p.name for p in bundles.iterdir()) == ["inference.popprof", "training.popprof"]
    cli("export", FIXTURES / "run_dir/training/profile.pop", "-o", bundles / "training.popprof")
