"""Issue 14: hostile input. One test (or more) per failure found by the adversarial pass; each failed before its fix.

Reproductions that once took gigabytes or ran forever run in a child process under an
address-space and a time limit (tests/hostile_helpers.py), so a regression fails the test
instead of exhausting the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hostile_helpers import FIXTURES, gzip_with_filler, run_limited

from popprof.cli import main

BUNDLE = FIXTURES / "mk2_training.popprof"
SUMMARY = FIXTURES / "text_summary" / "mk2_training.txt"
TRACE = FIXTURES / "traces" / "training_loop.json"
#: DuckDB reserves address space beyond its memory_limit: its children get more room.
QUERY_MEMORY = 3 << 30


def _cli(capsys, *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("popprof: error: "), err
    return lines[0]


# -- 1. quadratic memory in format detection ---------------------------------------------------------


def test_deep_nesting_in_the_head_is_sniffed_in_linear_memory(tmp_path):
    """40,000 nested `[` in the first 64 KiB took 4 GB in the SDK 1.x sniffing (ijson prefixes)."""
    path = tmp_path / "nested.json"
    path.write_bytes(b'{"memory": ' + b"[" * 60_000 + b"]" * 60_000 + b"}")
    run = run_limited("summary", path, memory=1 << 30, seconds=60)
    line = run.one_error_line()
    assert str(path) in line and "not a recognised profile format" in line


def test_sniffing_still_tells_the_sdk1_layouts_apart():
    from popprof.readers.sdk1_json import _layout_of_head

    assert _layout_of_head(b'{"graphProfile": {') == "wrapped"
    assert _layout_of_head(b' {"target": {"numIPUs": 1}, "memory": {"byTile": {"total": [1, 2') == "graph"
    assert _layout_of_head(b'{"profilerMode": "x", "simulation": {"cycles": 5, "steps": [') == "execution"
    assert _layout_of_head(b'{"a": {"b": {"memory": {"byTile": 1}}}}') is None  # not a top-level key's object
    assert _layout_of_head(b'{"memory": [{"byTile": 1}]}') is None  # inside an array
    assert _layout_of_head(b'{"n\\"ame": "memory", "x": {"memory') is None  # quotes and a cut-off string
    assert _layout_of_head(b"[" * 100_000) is None


# -- 2. decompression bombs, long strings and lines ----------------------------------------------------


def test_a_gzip_text_bomb_stops_at_the_ratio_limit(tmp_path):
    """A .txt.gz of a summary header and gigabytes of spaces ended in MemoryError (exit 3)."""
    head = SUMMARY.read_bytes()[:1500]
    bomb = gzip_with_filler(tmp_path / "bomb.txt.gz", head, b" ", 1536 << 20)
    assert bomb.stat().st_size < 3 << 20
    run = run_limited("summary", bomb, memory=1 << 30, seconds=120)
    line = run.one_error_line()
    limit, env = (
        ("gzip-ratio", "POPPROF_MAX_GZIP_RATIO")
        if "gzip-ratio" in line
        else ("text-bytes", "POPPROF_MAX_TEXT_BYTES")
    )  # whichever the bomb reaches first
    assert env in line and f"--limit {limit}=" in line


def test_a_gzip_json_bomb_of_one_huge_string_ends_quickly(tmp_path):
    """A 1 MB .json.gz holding one 1 GiB string ran for more than 400 s."""
    head = b'{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "name": "'
    bomb = gzip_with_filler(tmp_path / "bomb.json.gz", head, b"abcdefgh", 1 << 30, b'"}]}')
    for args in (("summary", bomb), ("redact", bomb, "-o", tmp_path / "out.json.gz")):
        run = run_limited(
            *args, memory=1 << 30, seconds=120, env={"POPPROF_REDACT_KEY": "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"}
        )
        assert run.code is not None, f"{args[0]} did not end within 120 s"
        line = run.one_error_line()
        assert "gzip-ratio" in line or "string-bytes" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.json.gz"]


def test_a_json_string_over_the_limit_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    name = "".join(rng.choice(list("abcdefghijklmnop"), 3 << 20))
    path = tmp_path / "long_name.json"
    path.write_text(
        json.dumps({"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "name": name}]})
    )
    monkeypatch.setenv("POPPROF_MAX_STRING_BYTES", "1M")
    code, _, err = _cli(capsys, "summary", path)
    line = _one_line(err)
    assert code == 2 and "string-bytes" in line and "POPPROF_MAX_STRING_BYTES" in line
    code, out, _ = _cli(capsys, "--limit", "string-bytes=8M", "summary", path)
    assert code == 0 and "events" in out


def test_deep_json_nesting_in_a_trace_is_refused_before_parsing(tmp_path, capsys):
    args = "[" * 5000 + "]" * 5000
    path = tmp_path / "deep.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "name": "a", "args": {"x": '
        + args
        + "}}]}"
    )
    code, _, err = _cli(capsys, "summary", path)
    assert code == 2 and "json-depth" in _one_line(err)


def test_text_limits_whole_size_and_line_length(tmp_path, capsys, monkeypatch):
    text = SUMMARY.read_text()
    big = tmp_path / "big.txt"
    big.write_text(text + ("# padding line\n" * 200_000))
    monkeypatch.setenv("POPPROF_MAX_TEXT_BYTES", "1M")
    code, _, err = _cli(capsys, "summary", big)
    assert code == 2 and "text-bytes" in _one_line(err) and "POPPROF_MAX_TEXT_BYTES" in err
    monkeypatch.delenv("POPPROF_MAX_TEXT_BYTES")
    long = tmp_path / "long.txt"
    lines = text.splitlines(keepends=True)
    long.write_text("".join(lines[:10]) + "x" * (2 << 20) + "\n" + "".join(lines[10:]))
    code, _, err = _cli(capsys, "summary", long)
    assert code == 2 and "line 11" in err and "line-bytes" in _one_line(err)
    code, _, _ = _cli(capsys, "--limit", "line-bytes=4M", "summary", long)
    assert code == 0


def test_a_bad_limit_value_is_a_usage_error(capsys, monkeypatch):
    code, _, err = _cli(capsys, "--limit", "nope=1", "summary", BUNDLE)
    assert code == 2 and "text-bytes" in _one_line(err)
    monkeypatch.setenv("POPPROF_MAX_JSON_DEPTH", "deep")
    code, _, err = _cli(capsys, "summary", TRACE)
    assert code == 2 and "POPPROF_MAX_JSON_DEPTH" in _one_line(err)


def test_limit_values_parse_like_people_write_them():
    from popprof.io import limits

    assert limits.parse_value("512M") == 512 << 20
    assert limits.parse_value("1.5GiB") == 3 << 29
    assert limits.parse_value("300", "levels") == 300
    for bad in ("0", "-1", "lots", "1M"):
        with pytest.raises(ValueError):
            limits.parse_value(bad, "levels" if bad == "1M" else "bytes")


# -- 3. special files as input -------------------------------------------------------------------------


def test_a_fifo_without_a_writer_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    for args in (("summary", fifo), ("redact", fifo, "-o", tmp_path / "out.json"), ("check", fifo)):
        run = run_limited(*args, seconds=30, env={"POPPROF_REDACT_KEY": "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"})
        assert run.code is not None, f"{args[0]} hung on the FIFO"
        line = run.one_error_line()
        assert "named pipe" in line and "not a regular file" in line


def test_process_substitution_says_what_to_do(tmp_path):
    run = run_limited("popprof", "summary", f"<(cat {TRACE})", shell=True, seconds=30)
    line = run.one_error_line()
    assert "not a regular file" in line and "save the data to a file first" in line


# -- 4. bundle manifest types, corrupt Parquet -----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("profile_name", ["a"]),
        ("profile_name", {"a": 1}),
        ("sources", "x"),
        ("sources", [1]),
        ("redacted", 1),
        ("tool_version", 2),
        ("tables.tiles.rows", "1472"),
        ("tables.tiles.rows", -1),
        ("tables.tiles.columns", "tile"),
    ],
)
def test_every_manifest_field_type_is_checked(tmp_path, capsys, key, value):
    bundle = tmp_path / "b.popprof"
    shutil.copytree(BUNDLE, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    where = manifest
    *parents, last = key.split(".")
    for part in parents:
        where = where[part]
    where[last] = value
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    for command in ("summary", "check", "tables"):
        code, _, err = _cli(capsys, command, bundle)
        assert code == 2 and last in _one_line(err) and "bundle manifest field" in err


def test_a_corrupt_parquet_footer_is_one_line(tmp_path, capsys):
    bundle = tmp_path / "b.popprof"
    shutil.copytree(BUNDLE, bundle)
    data = (bundle / "tiles.parquet").read_bytes()
    (bundle / "tiles.parquet").write_bytes(data[:-12] + (10**9).to_bytes(4, "little") + data[-8:])
    code, _, err = _cli(capsys, "summary", bundle)
    assert code == 2 and "corrupt Parquet file" in _one_line(err)


# -- 5. the query sandbox ----------------------------------------------------------------------------


def test_query_has_no_file_system_not_even_its_temp_directory(tmp_path):
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "hostname").write_text("secret-host\n")
    (tmp_path / ".tmp").symlink_to(secret)
    queries = [
        "COPY (SELECT 1) TO '.tmp/x.csv'",
        "ATTACH '.tmp/db.duckdb' AS d",
        "SELECT * FROM read_text('.tmp/*')",
        "SELECT * FROM read_text('.tmp/hostname')",
        f"ATTACH '{tmp_path}/:memory:' AS m",
        "SELECT 1; ATTACH ':memory:' AS m",
        "SET temp_directory = '.tmp'",
        "INSTALL httpfs",
    ]
    for sql in queries:
        run = run_limited("query", BUNDLE, sql, cwd=tmp_path, seconds=60, memory=QUERY_MEMORY)
        line = run.one_error_line()
        assert "SQL error" in line and "secret-host" not in run.out + run.err, sql
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp", "elsewhere"]
    assert [p.name for p in secret.iterdir()] == ["hostname"]
    run = run_limited(
        "query",
        BUNDLE,
        "SELECT current_setting('allowed_directories') AS d, current_setting('temp_directory') AS t",
        "--format",
        "json",
        cwd=tmp_path,
        memory=QUERY_MEMORY,
    )
    assert run.code == 0 and json.loads(run.out) == [{"d": [], "t": ""}]


def test_query_time_and_memory_are_bounded(tmp_path):
    run = run_limited(
        "query",
        BUNDLE,
        "SELECT count(*) FROM range(10000000000000)",
        "--timeout",
        "2",
        cwd=tmp_path,
        seconds=60,
        memory=QUERY_MEMORY,
    )
    line = run.one_error_line()
    assert "query-seconds" in line and "--timeout" in line
    run = run_limited(
        "query",
        BUNDLE,
        "SELECT list(range(100000000)) FROM range(20)",
        "--memory-limit",
        "128M",
        cwd=tmp_path,
        seconds=60,
        memory=QUERY_MEMORY,
    )
    assert "query-memory" in run.one_error_line()
    run = run_limited(
        "query",
        BUNDLE,
        "SELECT * FROM range(30000000)",
        "--memory-limit",
        "64M",
        "--format",
        "csv",
        cwd=tmp_path,
        seconds=60,
        memory=QUERY_MEMORY,
    )
    assert "query-memory" in run.one_error_line()  # the pandas result is held to the limit too


# -- 6. one rule for every command that writes a bundle ------------------------------------------------


@pytest.mark.parametrize("command", ["export", "redact"])
def test_a_folder_of_other_bundles_is_never_replaced(tmp_path, capsys, command, monkeypatch):
    """`redact -o DIR` deleted a folder of other bundles (export refused the same)."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", "3f9a2c1b07de5d84e6b1a09c7f2e4d3b")
    folder = tmp_path / "bundles"
    folder.mkdir()
    for name in ("a", "b"):
        shutil.copytree(BUNDLE, folder / f"{name}.popprof")
    before = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
    code, _, err = _cli(capsys, command, BUNDLE, "-o", folder)
    assert code == 2 and "not a bundle" in _one_line(err) and str(folder) in err
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == before


def test_an_earlier_set_of_bundles_is_marked_and_replaced(tmp_path, capsys, pva_double, monkeypatch):
    monkeypatch.setenv("POPPROF_REDACT_KEY", "3f9a2c1b07de5d84e6b1a09c7f2e4d3b")
    out = tmp_path / "shared"
    for _ in range(2):
        code, _, err = _cli(capsys, "redact", FIXTURES / "run_dir", "-o", out)
        assert code == 0, err
    manifests = [json.loads(p.read_text()) for p in out.glob("*/manifest.json")]
    assert len(manifests) == 2 and all(m["bundle_set"] is True for m in manifests)


# -- 7. outputs onto special files -------------------------------------------------------------------


def test_dash_means_standard_output(capsys):
    code, out, _ = _cli(capsys, "baseline", BUNDLE, "-o", "-")
    assert code == 0 and json.loads(out)["format"] == "popprof-baseline"
    assert not Path("-").exists()


def test_a_symlink_to_standard_output_streams_and_stays_a_symlink(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to("/proc/self/fd/1")
    run = run_limited("baseline", BUNDLE, "-o", link, seconds=60)
    assert run.code == 0, run.err
    assert json.loads(run.out)["format"] == "popprof-baseline"
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"


def test_a_fifo_output_receives_the_bytes_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "findings.json"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        run = run_limited("check", BUNDLE, "--format", "json", "--fail-on", "never", "-o", fifo, seconds=60)
        received = reader.communicate(timeout=60)[0]
    finally:
        reader.kill()
        reader.wait()
    assert run.code == 0, run.err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and json.loads(received)


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_a_character_device_is_never_replaced(tmp_path, capsys):
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.stat(os.devnull).st_rdev)
    other = tmp_path / "zero"
    os.mknod(other, 0o666 | stat.S_IFCHR, os.stat("/dev/zero").st_rdev)
    code, _, err = _cli(capsys, "check", BUNDLE, "--fail-on", "never", "-o", null)
    assert code == 0 and stat.S_ISCHR(os.lstat(null).st_mode)
    code, _, err = _cli(capsys, "check", BUNDLE, "--fail-on", "never", "-o", other)
    assert code == 2 and "character device" in _one_line(err) and "-o -" in err
    assert stat.S_ISCHR(os.lstat(other).st_mode)
    code, _, err = _cli(capsys, "export", BUNDLE, "-o", null)
    assert code == 2 and "a bundle is a directory" in _one_line(err) and stat.S_ISCHR(os.lstat(null).st_mode)


# -- 8. interruption -------------------------------------------------------------------------------------

_INTERRUPTED_EXPORT = """
import os, signal, sys
import pyarrow.parquet as pq
from popprof.cli import main
real = pq.write_table
calls = []
def write_then_terminate(*args, **kwargs):
    real(*args, **kwargs)
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGTERM)
pq.write_table = write_then_terminate
sys.exit(main(["export", sys.argv[1], "-o", sys.argv[2]]))
"""


def test_sigterm_mid_write_removes_temporaries_and_exits_143(tmp_path):
    out = tmp_path / "out.popprof"
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_EXPORT, str(BUNDLE), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 143, done.stderr
    assert done.stderr == "popprof: terminated\n"
    assert list(tmp_path.iterdir()) == []


def test_a_later_run_removes_stale_temporaries_of_its_own_output(tmp_path, capsys):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(gone.stdout)
    stale_dir = tmp_path / f".out.popprof.{dead}.abc_1234.tmp"
    stale_dir.mkdir()
    (stale_dir / "tiles.parquet").write_bytes(b"partial")
    stale_old = tmp_path / f".out.popprof.{dead}.zz99.old"
    stale_old.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        live = tmp_path / f".out.popprof.{sleeper.pid}.q1w2e3r4.tmp"  # a run still under way: kept
        live.mkdir()
        unrelated = tmp_path / f".other.popprof.{dead}.abc_1234.tmp"  # another output's: kept
        unrelated.mkdir()
        code, _, err = _cli(capsys, "export", BUNDLE, "-o", tmp_path / "out.popprof")
        assert code == 0, err
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            ["out.popprof", live.name, unrelated.name]
        )
    finally:
        sleeper.kill()
        sleeper.wait()


def test_sigterm_handler_is_restored_after_main(capsys):
    before = signal.getsignal(signal.SIGTERM)
    _cli(capsys, "rules")
    assert signal.getsignal(signal.SIGTERM) is before


# -- 9. deep recursion ---------------------------------------------------------------------------------------


def test_json_nested_inside_strings_is_exit_2_not_a_recursion_error(tmp_path):
    deep = "[" * 1200 + "]" * 1200
    path = tmp_path / "deep_strings.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "pid": 1,
                        "tid": 1,
                        "ts": 1,
                        "dur": 3,
                        "name": deep,
                        "cat": deep,
                        "args": {"z": deep},
                    }
                ]
            }
        )
    )
    for args in (
        ("summary", path),
        ("redact", path, "-o", tmp_path / "r.json"),
        ("check", path),
        ("export", path, "-o", tmp_path / "e.popprof", "--with-args"),
    ):
        run = run_limited(*args, env={"POPPROF_REDACT_KEY": "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"}, seconds=90)
        assert run.code in (0, 1, 2), (args, run.err)
        assert "Traceback" not in run.err and "internal error" not in run.err, (args, run.err)
        if run.code == 2:
            run.one_error_line()


# -- 10. errors while writing a bundle name the output ---------------------------------------------

_FULL_DISK = """
import resource, signal, sys
from popprof.cli import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["export", "redact"])
def test_a_write_error_names_the_output_not_a_temporary(tmp_path, command):
    out = tmp_path / "out.popprof"
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, command, str(BUNDLE), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "POPPROF_REDACT_KEY": "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"},
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("popprof: error:")]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"popprof: error: {out}: cannot write the output") and ".tmp" not in lines[0]
    assert "File too large" in lines[0]
    assert list(tmp_path.iterdir()) == []


# == round 2 (issue 27) ===============================================================================

# -- data loss: a directory is replaced only when it is a bundle popprof wrote, holding nothing else ----


@pytest.mark.parametrize("command", ["export", "redact"])
@pytest.mark.parametrize("kind", ["extension", "notes"])
def test_a_directory_with_a_foreign_manifest_or_added_notes_is_never_replaced(
    tmp_path, capsys, command, kind, monkeypatch
):
    """`export`/`redact -o DIR` deleted any directory holding a manifest.json, and a bundle's added notes."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", "3f9a2c1b07de5d84e6b1a09c7f2e4d3b")
    folder = tmp_path / "out"
    if kind == "extension":  # a browser extension: its own manifest.json
        folder.mkdir()
        (folder / "manifest.json").write_text(json.dumps({"manifest_version": 3, "name": "x"}))
        (folder / "background.js").write_text("// code\n")
    else:  # a bundle popprof wrote, with the user's notes added
        shutil.copytree(BUNDLE, folder)
        (folder / "NOTES.md").write_text("what I found\n")
    before = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    code, _, err = _cli(capsys, command, BUNDLE, "-o", folder)
    assert code == 2 and "not a bundle popprof wrote" in _one_line(err)
    assert {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    } == before


def test_a_bundle_popprof_wrote_is_replaced(tmp_path, capsys):
    out = tmp_path / "b.popprof"
    for _ in range(2):
        code, _, err = _cli(capsys, "export", BUNDLE, "-o", out)
        assert code == 0, err
    assert (out / "manifest.json").is_file()


def test_two_records_in_one_second_get_their_own_directories(tmp_path, monkeypatch):
    """The default directory had a one-second resolution: two runs shared it."""
    import datetime as dt

    from popprof.model.errors import UsageError
    from popprof.record.pipeline import default_out_dir, prepare_out_dir

    monkeypatch.chdir(tmp_path)
    now = dt.datetime(2026, 12, 1, 23, 0, 0, 123456)
    first, second = default_out_dir(now, pid=100), default_out_dir(now.replace(microsecond=123457), pid=100)
    assert first != second and first != default_out_dir(now, pid=101)
    assert "123456" in first.name and first.name.endswith("-100")
    prepare_out_dir(first)
    (first / "reports").rmdir()  # as if a second run raced in after the first made the directory
    shared = tmp_path / "shared"
    shared.mkdir()
    prepare_out_dir(shared)
    with pytest.raises(UsageError):
        prepare_out_dir(shared)  # not empty any more: the second run is refused, never shares it
    (shared / "reports").rmdir()
    os.mkdir(shared / "reports")  # the other run's mkdir won: exclusive creation refuses this one
    with pytest.raises(UsageError):
        prepare_out_dir(shared)


# -- reaching outside a bundle --------------------------------------------------------------------------


def test_a_table_file_that_is_a_symlink_is_never_followed(tmp_path, capsys, monkeypatch):
    """A table file that is a symlink was followed to any file, and export and redact copied that data."""
    monkeypatch.setenv("POPPROF_REDACT_KEY", "3f9a2c1b07de5d84e6b1a09c7f2e4d3b")
    secret = tmp_path / "secret.parquet"
    shutil.copy(BUNDLE / "tiles.parquet", secret)
    bundle = tmp_path / "received.popprof"
    shutil.copytree(BUNDLE, bundle)
    (bundle / "tiles.parquet").unlink()
    (bundle / "tiles.parquet").symlink_to(secret)
    for args in (
        ["summary", bundle],
        ["export", bundle, "-o", tmp_path / "copy.popprof"],
        ["redact", bundle, "-o", tmp_path / "shared.popprof"],
    ):
        code, _, err = _cli(capsys, *args)
        assert code == 2 and "is a symlink" in _one_line(err), err
    assert not (tmp_path / "copy.popprof").exists() and not (tmp_path / "shared.popprof").exists()


def test_a_manifest_that_is_a_symlink_or_a_fifo_is_refused(tmp_path, capsys):
    bundle = tmp_path / "b.popprof"
    shutil.copytree(BUNDLE, bundle)
    real = tmp_path / "elsewhere.json"
    shutil.move(bundle / "manifest.json", real)
    (bundle / "manifest.json").symlink_to(real)
    code, _, err = _cli(capsys, "summary", bundle)
    assert code == 2 and "is a symlink" in _one_line(err)
    (bundle / "manifest.json").unlink()
    os.mkfifo(bundle / "manifest.json")
    run = run_limited("summary", bundle, seconds=60)
    assert "not a regular file" in run.one_error_line()


def test_a_sparse_huge_manifest_is_not_read_whole(tmp_path):
    bundle = tmp_path / "b.popprof"
    shutil.copytree(BUNDLE, bundle)
    with open(bundle / "manifest.json", "r+b") as handle:
        handle.truncate(1500 << 20)  # sparse: 1.5 GB of zeros on no disk
    run = run_limited("summary", bundle, seconds=60, memory=1 << 30)
    assert "manifest-bytes" in run.one_error_line()


def _zero_rows_bundle(tmp_path: Path, rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    bundle = tmp_path / "bomb.popprof"
    shutil.copytree(BUNDLE, bundle)
    table = pq.read_table(bundle / "tiles.parquet")
    zeros = pa.table({f.name: pa.nulls(0, f.type) for f in table.schema})
    with pq.ParquetWriter(bundle / "tiles.parquet", table.schema, compression="zstd") as writer:
        block = pa.table(
            {
                f.name: pa.array(np.zeros(1 << 20, dtype=np.int64)).cast(f.type, safe=False)
                if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
                else pa.nulls(1 << 20, f.type)
                for f in zeros.schema
            }
        )
        for _ in range(rows >> 20):
            writer.write_table(block)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["tables"]["tiles"]["rows"] = rows
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


def test_a_parquet_row_bomb_is_refused_from_its_footer(tmp_path):
    """60 M zero rows in a couple of MB took 5.4 GB and then exit 3."""
    bundle = _zero_rows_bundle(tmp_path, 60 << 20)
    assert (bundle / "tiles.parquet").stat().st_size < 40 << 20
    run = run_limited("summary", bundle, seconds=120, memory=1 << 30)
    assert "parquet-ratio" in run.one_error_line()


def test_a_manifest_row_count_that_disagrees_with_the_footer_is_one_line(tmp_path, capsys):
    bundle = tmp_path / "b.popprof"
    shutil.copytree(BUNDLE, bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["tables"]["tiles"]["rows"] += 1
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = _cli(capsys, "summary", bundle)
    assert code == 2 and "manifest says" in _one_line(err)


# -- outputs and the umask ---------------------------------------------------------------------------------


def test_outputs_follow_the_umask_and_a_replaced_file_keeps_its_mode(tmp_path, capsys):
    """Every output was 0644 (directories 0755) whatever the umask; a replaced 0600 file came back 0644."""
    old = os.umask(0o077)
    try:
        code, _, err = _cli(capsys, "export", BUNDLE, "-o", tmp_path / "b.popprof")
        assert code == 0, err
        code, _, err = _cli(capsys, "baseline", BUNDLE, "-o", tmp_path / "base.json")
        assert code == 0, err
        code, _, err = _cli(capsys, "timeline", TRACE, "-o", tmp_path / "tl.json")  # an unredacted copy
        assert code == 0, err
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "b.popprof").stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "b.popprof").iterdir())
    assert stat.S_IMODE((tmp_path / "base.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tl.json").stat().st_mode) == 0o600
    os.chmod(tmp_path / "base.json", 0o640)
    code, _, err = _cli(capsys, "baseline", BUNDLE, "-o", tmp_path / "base.json")
    assert code == 0, err
    assert stat.S_IMODE((tmp_path / "base.json").stat().st_mode) == 0o640


# -- the query sandbox: EXPLAIN of what is not read-only, macros, views ------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
        "EXPLAIN CREATE TABLE t AS SELECT 1",
        "explain analyze /* x */ DROP VIEW tiles",
        "EXPLAIN (FORMAT json) DROP VIEW tiles",
        "CREATE MACRO m(a) AS a + 1",
        "DROP VIEW tiles",
        "SELECT 1; DROP VIEW tiles",
    ],
)
def test_query_refuses_explain_of_writes_macros_and_dropping_views(sql, capsys):
    code, out, err = _cli(capsys, "query", BUNDLE, sql)
    assert code == 2 and "not allowed" in _one_line(err), (out, err)


def test_query_still_explains_a_select(capsys):
    for sql in ("EXPLAIN SELECT * FROM tiles", "EXPLAIN ANALYZE SELECT count(*) FROM tiles"):
        code, out, err = _cli(capsys, "query", BUNDLE, sql)
        assert code == 0 and out, err


def test_query_formatting_is_held_to_the_limits(tmp_path):
    """Formatting was outside the limits: a huge string result reached 6.3 GB, JSON exited 3."""
    big = "SELECT repeat('x', 400000000) AS s"
    for fmt in ("table", "json", "csv"):
        run = run_limited(
            "query", BUNDLE, big, "--memory-limit", "512M", "--format", fmt, seconds=120, memory=QUERY_MEMORY
        )
        assert "query-memory" in run.one_error_line(), fmt
    run = run_limited(
        "query", BUNDLE, "SELECT repeat('x', 1000000) AS s", "--format", "json", memory=QUERY_MEMORY
    )
    assert run.code == 0 and json.loads(run.out) == [{"s": "x" * 1000000}], run.err
    run = run_limited(
        "query",
        BUNDLE,
        "SELECT * FROM range(60000000)",
        "--timeout",
        "3",
        "--format",
        "csv",
        seconds=45,  # 60 M rows with --timeout 10 ran 77 s: formatting was outside the deadline
        memory=QUERY_MEMORY,
    )
    assert run.code is not None, "the deadline does not cover formatting the result"
    assert "query-seconds" in run.one_error_line()


# -- record: logs of any size are read in one streaming pass --------------------------------------------


def test_record_finds_an_oom_message_followed_by_more_than_text_bytes(tmp_path, capsys, monkeypatch):
    """A job whose out-of-memory message was followed by more than 256 MiB of output: the whole log was
    skipped, record said the job left no out-of-memory message and exited 0 (a CI gate passed an OOM run)."""
    monkeypatch.setenv("POPPROF_MAX_TEXT_BYTES", "1M")
    script = (
        "import sys\n"
        "sys.stderr.write('noise line\\n' * 1000)\n"
        "sys.stderr.write('Out of memory on tile 1: 674752 bytes used but tiles only have 638976 bytes of memory\\n')\n"
        "sys.stderr.write(('x' * 99 + '\\n') * 30000)\n"
        f"sys.stdout.write(open({str(SUMMARY)!r}).read())\n"
        "sys.stdout.write(('y' * 99 + '\\n') * 30000)\n"
    )
    out = tmp_path / "run"
    code = main(["record", "-o", str(out), "--no-plots", "--", sys.executable, "-c", script])
    _, err = capsys.readouterr()
    assert (out / "stderr.log").stat().st_size > 2 << 20
    rec = json.loads((out / "record.json").read_text())
    assert rec["logs"]["stderr.log"] == ["stderr.oom_log"], err
    assert rec["logs"]["stdout.log"] == ["stdout.text_summary"], err
    assert code == 1, err  # the tile-oom finding fails the check


def test_streaming_windows_cover_the_text_exactly(tmp_path):
    from popprof.readers import textload

    text = "".join(f"line {i} " + "z" * (i % 97) + "\n" for i in range(20000)) + "last without end"
    path = tmp_path / "log.txt"
    path.write_text(text)
    parts = list(textload.windows(path, size=4096))
    assert "".join(t for _, t in parts) == text and len(parts) > 100
    assert all(t.endswith("\n") for _, t in parts[:-1])
    assert [n for n, _ in parts] == [
        1 + "".join(t for _, t in parts[:k]).count("\n") for k in range(len(parts))
    ]


# -- option files and config-named files: the input guard; regexes in bounded time --------------------------


def test_a_catastrophic_device_map_regex_in_a_parent_config_is_one_line(tmp_path):
    """`(a+)+$` in a parent directory's popprof.toml hung summary/query on one 37-character event name."""
    trace = tmp_path / "t.json"
    trace.write_text(
        json.dumps(
            {"traceEvents": [{"ph": "X", "name": "a" * 36 + "b", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}
        )
    )
    (tmp_path / "popprof.toml").write_text('[device_map]\ncompute = "(a+)+$"\n')
    work = tmp_path / "sub"
    work.mkdir()
    for args in (["summary", trace], ["query", trace, "SELECT count(*) FROM events"]):
        run = run_limited(*args, cwd=work, seconds=60, memory=QUERY_MEMORY)
        line = run.one_error_line()
        assert "device map: compute" in line and "exponential" in line, line
    run = run_limited("summary", trace, "--device-map", '{"compute": "(x|x)*y"}', cwd=tmp_path, seconds=60)
    assert "exponential" in run.one_error_line()


def test_bounded_patterns_refuse_the_shapes_and_keep_the_built_in_maps():
    from popprof.io.patterns import compile_bounded
    from popprof.model.errors import UsageError
    from popprof.trace.device import DEFAULT_MAPS

    for table in DEFAULT_MAPS.values():
        for category, pattern in table.items():
            if "(?!" in pattern:  # the built-in PVTI compute map: lookahead, which RE2 lacks (not user input)
                with pytest.raises(UsageError, match="RE2"):
                    compile_bounded(pattern, category)
            else:
                compile_bounded(pattern, category)
    for bad in ["(a+)+$", "(a*)*", "(a|a)*b", r"(\w+\s?)+$", ".*.*.*x", r"(a)\1", "(?:a?){20}"]:
        with pytest.raises(UsageError):
            compile_bounded(bad, "x")
    for good in ["^nccl", "Memcpy|Memset", r"\bsync\b", "(ab)+c", "[a-z]+_[0-9]+", ".*foo.*"]:
        compile_bounded(good, "x")


#: exponential in Python's re on "a" * 30 (each ``a?`` can match or not), yet none of the shapes the check knows
MISSED = "a?" * 30 + "a" * 30


def test_a_pattern_the_shape_check_misses_runs_in_linear_time(tmp_path):
    """The static check refuses shapes; this one is not among them, and on Python's re it backtracks 2^30 times
    on a 30-character name. Device maps and redaction keep patterns now run on RE2: a fast exit 0."""
    trace = tmp_path / "t.json"
    trace.write_text(
        json.dumps({"traceEvents": [{"ph": "X", "name": "a" * 30, "ts": 1, "dur": 2, "pid": 1, "tid": 1}]})
    )
    run = run_limited(
        "query",
        trace,
        "SELECT device_category FROM events",
        "--device-map",
        json.dumps({"sync": "^:" + MISSED}),
        seconds=60,
        memory=QUERY_MEMORY,
    )
    assert run.code == 0, run.err[-2000:]
    assert "sync" in run.out
    out = tmp_path / "r.json"
    run = run_limited(
        "redact",
        trace,
        "-o",
        out,
        "--keep",
        "re:" + MISSED,
        seconds=60,
        env={"POPPROF_REDACT_KEY": "3f9a2c1b07de5d84e6b1a09c7f2e4d3b"},
    )
    assert run.code == 0, run.err[-2000:]
    assert "a" * 30 in out.read_text()  # kept readable


def test_a_pattern_the_linear_engine_cannot_run_is_one_line(tmp_path):
    """With lookahead the pattern cannot run on RE2; on re the shape check alone would bound it, and it misses
    this one: on a 30-character name re backtracks 2^30 times."""
    trace = tmp_path / "t.json"
    trace.write_text(
        json.dumps({"traceEvents": [{"ph": "X", "name": "a" * 30, "ts": 1, "dur": 2, "pid": 1, "tid": 1}]})
    )
    (tmp_path / "popprof.toml").write_text(f'[device_map]\ncompute = "(?=a){MISSED}"\n')
    for args in (["summary", trace], ["query", trace, "SELECT count(*) FROM events"]):
        run = run_limited(*args, cwd=tmp_path, seconds=60, memory=QUERY_MEMORY)
        line = run.one_error_line()
        assert "device map: compute" in line and "RE2" in line, line


@pytest.mark.parametrize("special", ["fifo", "zero"])
def test_option_files_that_are_special_files_are_refused(tmp_path, special):
    """--device-map (and device_map = FILE in a config) blocked forever on a FIFO and read /dev/zero to OOM."""
    if special == "fifo":
        name = tmp_path / "map.fifo"
        os.mkfifo(name)
    else:
        name = Path("/dev/zero")
    run = run_limited("summary", TRACE, "--device-map", name, seconds=60, memory=1 << 30)
    assert "not a regular file" in run.one_error_line()
    (tmp_path / "popprof.toml").write_text(f'device_map = "{name}"\n')
    run = run_limited("summary", TRACE, cwd=tmp_path, seconds=60, memory=1 << 30)
    assert "not a regular file" in run.one_error_line()
    os.remove(tmp_path / "popprof.toml")
    run = run_limited("summary", TRACE, "--config", name, cwd=tmp_path, seconds=60, memory=1 << 30)
    assert "not a regular file" in run.one_error_line()


@pytest.mark.parametrize("special", ["fifo", "zero"])
def test_a_budget_file_that_is_a_special_file_is_refused(tmp_path, special):
    """issue 46 item 2: diff/trend --budget blocked forever on a FIFO and read /dev/zero to a MemoryError."""
    if special == "fifo":
        name = tmp_path / "budget.toml"
        os.mkfifo(name)
    else:
        name = Path("/dev/zero")
    for args in (("diff", BUNDLE, BUNDLE), ("trend", tmp_path / "no-store", "memory.total_incl_gaps_bytes")):
        run = run_limited(*args, "--budget", name, cwd=tmp_path, seconds=60, memory=1 << 30)
        line = run.one_error_line()
        assert "budget file is " in line and "not a regular file" in line, line


def test_an_oversized_or_binary_budget_file_is_one_line(tmp_path, capsys):
    from popprof.compare.gate import read_budget_file
    from popprof.io.limits import LimitExceeded
    from popprof.model.errors import InputError

    big = tmp_path / "budget.toml"
    with open(big, "wb") as handle:
        handle.truncate(64 << 20)
    with pytest.raises(LimitExceeded, match="option-bytes"):
        read_budget_file(big)
    binary = tmp_path / "budget.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputError, match="not UTF-8"):
        read_budget_file(binary)
    code, _out, err = _cli(capsys, "diff", BUNDLE, BUNDLE, "--budget", tmp_path / "missing.toml")
    assert code == 2 and "budget file: no such file" in _one_line(err)


def test_an_oversized_option_file_is_refused(tmp_path):
    from popprof.io.files import read_option_file
    from popprof.io.limits import LimitExceeded

    big = tmp_path / "map.json"
    with open(big, "wb") as handle:
        handle.truncate(64 << 20)
    with pytest.raises(LimitExceeded, match="option-bytes"):
        read_option_file(big, "device map file")


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[rules]\nenable = [1]\n", "rules.enable[0]"),
        ("[rules]\ndisable = 5\n", "rules.disable"),
        ("[rules]\nfail_on = 2\n", "rules.fail_on"),
        ('[rules]\n"memory.headroom.warning" = [[]]\n', "rules.memory.headroom.warning[0]"),
        ('[rules]\n"memory.headroom.warning" = inf\n', "rules.memory.headroom.warning"),
        ("[device_map]\ncompute = 5\n", "device_map.compute"),
        ("device_map = 5\n", "device_map"),
        ("rules = 1\n", "rules"),
        ("[gate]\nstrict = 1\n", "gate.strict"),
        ("[pilot]\nidle = nan\n", "pilot.idle"),
    ],
)
@pytest.mark.parametrize("command", ["check", "summary", "report", "diff", "baseline"])
def test_a_config_value_of_the_wrong_type_is_one_line_naming_key_and_file(
    tmp_path, capsys, monkeypatch, toml, key, command
):
    """`[rules] enable = [1]`, `[device_map] compute = 5` ... exited 3 in check/report/summary/diff/baseline."""
    (tmp_path / "popprof.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    args = {"diff": ["diff", BUNDLE, BUNDLE], "report": ["report", BUNDLE, "-o", tmp_path / "r.html"]}.get(
        command, [command, BUNDLE]
    )
    code, _, err = _cli(capsys, *args)
    line = _one_line(err)
    assert code == 2 and f"config key {key} " in line and "popprof.toml" in line, line


# -- non-finite and absurd numbers, null keys, zero and huge targets ----------------------------------------


def _tampered_bundle(tmp_path: Path, table: str, change) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    bundle = tmp_path / f"{table}.popprof"
    shutil.copytree(BUNDLE, bundle)
    frame = pq.read_table(bundle / f"{table}.parquet").to_pandas()
    change(frame)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), bundle / f"{table}.parquet")
    return bundle


def test_timestamps_near_the_float_maximum_or_infinity_are_read_as_missing(tmp_path):
    """ts = 1.7e308 or "Infinity" exited 3 in plot (and numpy warnings were extra stderr lines)."""
    events = [
        {"ph": "X", "name": "k", "ts": 1.7e308, "dur": 2, "pid": 1, "tid": 1},
        {"ph": "X", "name": "k2", "ts": "Infinity", "dur": 2, "pid": 1, "tid": 1},
        {"ph": "X", "name": "k3", "ts": 5, "dur": "-Infinity", "pid": 1, "tid": 1},
        {"ph": "X", "name": "k4", "ts": 9, "dur": 3, "pid": 1, "tid": 1},
    ]
    trace = tmp_path / "inf.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    for args in (
        ["check", trace],
        ["summary", trace],
        ["plot", trace, "--kind", "timeline", "-o", tmp_path / "t.png"],
    ):
        run = run_limited(*args, seconds=120)
        assert run.code in (0, 1), run.err
        assert all(line.startswith("popprof: ") for line in run.err.splitlines()), run.err
        assert "invalid value" not in run.err and "Traceback" not in run.err


def test_a_null_metadata_key_is_ignored_with_a_warning(tmp_path, capsys):
    bundle = _tampered_bundle(
        tmp_path, "metadata", lambda f: f.__setitem__("key", f["key"].mask(f.index == 0))
    )
    code, out, err = _cli(capsys, "summary", bundle)
    assert code == 0 and "without a key" in err, err


@pytest.mark.parametrize("command", ["report", "plot"])
def test_a_zero_tile_target_is_read_as_missing(tmp_path, capsys, command):
    def zero(frame):
        frame["tiles_per_ipu"] = 0
        frame["num_tiles"] = 0

    bundle = _tampered_bundle(tmp_path, "target", zero)
    args = ["report", bundle, "-o", tmp_path / "r.html"]
    if command == "plot":
        args = ["plot", bundle, "--kind", "tilemap", "-o", tmp_path / "t.png"]
    code, _, err = _cli(capsys, *args)
    assert code == 0, err


def test_a_huge_tiles_per_ipu_is_one_line_not_16_gib(tmp_path):
    """tiles_per_ipu = 2^31-1 in a 232 KB bundle made report / plot --kind tilemap allocate 16 GiB."""
    bundle = _tampered_bundle(tmp_path, "target", lambda f: f.__setitem__("tiles_per_ipu", 2**31 - 1))
    for args in (
        ["report", bundle, "-o", tmp_path / "r.html"],
        ["plot", bundle, "--kind", "tilemap", "-o", tmp_path / "t.png"],
    ):
        run = run_limited(*args, seconds=120, memory=2 << 30)
        assert "tiles_per_ipu" in run.one_error_line()


# -- messages: names printed safely --------------------------------------------------------------------------


def test_an_output_name_with_a_newline_or_non_utf8_bytes_prints_one_safe_line(tmp_path):
    """A name with a newline printed a two-line status; a non-UTF-8 name printed \\udcff escapes."""
    for name, shown in ((b"two\nlines.json", "two\\nlines.json"), (b"bad\xffname.json", "bad\\xffname.json")):
        target = os.path.join(os.fsencode(tmp_path), name)
        run = run_limited("baseline", BUNDLE, "-o", os.fsdecode(target), seconds=60)
        assert run.code == 0 and os.path.exists(target), run.err
        (line,) = run.err.splitlines()
        assert line.startswith("popprof: wrote ") and line.endswith(shown) and "\\udc" not in line, line
    missing = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"no\xff\nsuch.json"))
    run = run_limited("summary", missing, seconds=60)
    line = run.one_error_line()
    assert "no\\xff\\nsuch.json" in line and "\\udc" not in line, line


def test_a_worker_ends_silently_on_sigterm(tmp_path):
    """On SIGTERM a parse worker printed a 25-line traceback (it inherited the CLI's handler)."""
    code = (
        "import os, signal, sys, time\n"
        "from popprof.cli import _on_sigterm\n"
        "from popprof.io.workers import quiet_worker\n"
        "signal.signal(signal.SIGTERM, _on_sigterm)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    quiet_worker()\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "os.kill(pid, signal.SIGTERM)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == str(int(signal.SIGTERM)) and done.stderr == "", done.stderr


def test_a_file_that_changes_while_it_is_read_is_refused(tmp_path, monkeypatch, capsys):
    """A trace overwritten while it was read was parsed from mixed bytes (and spun the CPU for minutes)."""
    from popprof.readers import chrome

    trace = tmp_path / "t.json"
    shutil.copy(TRACE, trace)
    real = chrome.read

    def read_then_overwrite(path, **options):
        result = real(path, **options)
        with open(path, "ab") as handle:  # the writer appends while the reader works
            handle.write(b" " * 100)
        return result

    monkeypatch.setattr(chrome, "read", read_then_overwrite)
    code, _, err = _cli(capsys, "summary", trace)
    assert code == 2 and "changed while it was read" in _one_line(err)


# -- issue 27: one event with a huge args array ------------------------------------------------------------------


def test_one_event_with_a_huge_args_array_reads_in_a_small_multiple_of_the_file(tmp_path):
    """Before: orjson built the 64 MB event's args as Python objects (~15x: about 1 GB), which an address space of
    1.5 GiB does not hold (MemoryError, exit 3); now the event is streamed by the lexer without its arrays."""
    item = '{"name": "t", "shape": [1, 2]}, '
    small = ",\n".join(
        json.dumps({"ph": "X", "name": f"k{i}", "pid": 1, "tid": 7, "ts": i, "dur": 1, "args": {"stream": 7}})
        for i in range(100)
    )
    path = tmp_path / "long_args.json"
    with open(path, "w") as out:
        out.write(
            '{"traceEvents": [\n' + small + ',\n{"ph": "X", "name": "big", "pid": 1, "tid": 7, "ts": 200, '
        )
        out.write('"dur": 5, "args": {"stream": 7, "correlation": 3, "inputs": [')
        for _ in range(64):
            out.write(item * ((1 << 20) // len(item)))
        out.write('{}]}}\n], "schemaVersion": 1}\n')
    run = run_limited("summary", path, "--format", "json", seconds=120)
    assert run.code == 0, run.err[-2000:]
    assert "event-bytes" in run.err and len(run.err.splitlines()) == 1, run.err  # the one read-problem line
    assert json.loads(run.out)["trace"]["events"] == 101


# -- issue 46: round 3 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        "Programs executed:\n\nmain, main.\n",  # SDK 2.x/3.x: the list after a blank line
        "Programs executed: main, main.\n",  # on the heading line
        "  Programs executed:\n\n  main, main.\n",  # indented
    ],
)
def test_a_summary_listing_main_main_redacts_and_passes_the_scan(tmp_path, capsys, layout):
    """issue 46 item 5 (red-team round 2): a real summary whose programs read "main, main." made redact refuse
    (exit 1): the scan took the whole line for a sensitive string although every name in it is public."""
    summary = (
        SUMMARY.read_text("utf-8")
        + "\nExecution:\n\n"
        + layout
        + "\n  Total cycles:                                         25,444,984 (approx 19,131.6 microseconds)\n"
    )
    source, out, key = tmp_path / "run.txt", tmp_path / "shared.txt", tmp_path / "team.key"
    source.write_text(summary)
    key.write_text("team-key-A-0123456789abcdef\n")
    code, _out, err = _cli(capsys, "redact", source, "-o", out, "--key-file", key)
    assert code == 0, err
    assert layout.strip().splitlines()[-1].strip() in out.read_text("utf-8")  # Poplar's own names stay
    assert _cli(capsys, "scan", out, "--against", source)[0] == 0


def test_public_words_ending_a_sentence_are_public():
    from popprof.redaction.allowlist import Allowlist

    public = Allowlist()
    assert "main." in public and "main, main." in public and "<anonymous>." in public
    assert "QzvSecretProgram." not in public and "main, QzvSecretProgram." not in public
