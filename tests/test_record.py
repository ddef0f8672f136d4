"""popprof record -- CMD, end to end: CMD is tests/record_child.py, a stand-in for a Poplar program.

The child checks the environment it was given and writes what Poplar and
libpvti would (a run directory and a .pvti through the pva test double, a
printed summary, an out-of-memory message), so these tests need no SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import popprof
from popprof.cli import main

HERE = Path(__file__).resolve().parent
CHILD = str(HERE / "record_child.py")


def record(
    capsys, out: Path, *child_args: str, options: tuple[str, ...] = ("--no-plots",)
) -> tuple[int, str, str]:
    code = main(["record", "-o", str(out), *options, "--", sys.executable, CHILD, *child_args])
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr


def load(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


def findings_by_profile(out: Path) -> dict[str, list[str]]:
    data = load(out / "findings.json")
    return {p["profile"]: [f["rule_id"] for f in p["findings"]] for p in data["profiles"]}


@pytest.fixture
def user_env(monkeypatch):
    """Values the user already set: their keys must win, and unrelated variables pass through untouched."""
    monkeypatch.setenv(
        "POPLAR_ENGINE_OPTIONS",
        json.dumps({"autoReport.executionProfileProgramRunCount": "5", "debug.allowOutOfMemory": "true"}),
    )
    monkeypatch.delenv("PVTI_OPTIONS", raising=False)
    monkeypatch.setenv("MY_OWN_VAR", "unchanged")


def test_with_the_sdk_everything_is_exported_and_checked(tmp_path, capsys, pva_double, user_env) -> None:
    out, seen = tmp_path / "run", tmp_path / "seen.json"
    code, stdout, stderr = record(
        capsys,
        out,
        "--engines",
        "training,inference",
        "--pvti",
        "--summary",
        "--seen",
        str(seen),
        options=("--run-count", "3"),
    )

    # CMD saw popprof's keys merged into the user's (the user's run count wins) and its own variable
    env = load(seen)
    reports = str((out / "reports").resolve())
    assert env["POPLAR_ENGINE_OPTIONS"] == {
        "autoReport.all": "true",
        "autoReport.directory": reports,
        "autoReport.executionProfileProgramRunCount": "5",
        "debug.allowOutOfMemory": "true",
    }
    assert env["PVTI_OPTIONS"] == {"enable": "true", "directory": reports}
    assert env["MY_OWN_VAR"] == "unchanged"

    # output passed through live and saved
    assert "child: starting" in stdout and "Memory Usage:" in stdout
    saved = (out / "stdout.log").read_text("utf-8")
    assert saved.startswith("child: starting\n") and "Memory Usage:" in saved

    # every report and trace exported; the bundles hold what the reports hold
    rec = load(out / "record.json")
    assert rec["cmd_exit_code"] == 0 and rec["sdk_available"] is True and rec["not_read_without_sdk"] == []
    assert rec["reports"] == ["reports/inference/profile.pop", "reports/training/profile.pop"]
    assert len(rec["traces"]) == 1 and rec["traces"][0].endswith(".pvti")
    trace_name = Path(rec["traces"][0]).stem
    assert sorted(rec["bundles"]) == sorted(
        f"bundles/{n}.popprof" for n in ("inference", "training", trace_name)
    )
    direct = popprof.open(out / "reports" / "training" / "profile.pop")
    exported = popprof.open(out / "bundles" / "training.popprof")
    pd.testing.assert_frame_equal(exported.tiles, direct.tiles)
    assert len(popprof.open(out / "bundles" / f"{trace_name}.popprof").events) == 3
    assert rec["logs"] == {"stdout.log": ["stdout.text_summary"], "stderr.log": []}

    # the checks ran over all of it: the training engine has 2 tiles over capacity (an error)
    found = findings_by_profile(out)
    assert set(found) == {"training", "inference", trace_name, "stdout.text_summary"}
    assert "memory.tile-oom" in found["training"] and "memory.tile-oom" not in found["inference"]
    assert "ERROR   memory.tile-oom: Tiles out of memory" in stdout  # check's text heading
    html = (out / "report.html").read_text("utf-8")
    assert 'data-profile="training"' in html and 'data-profile="stdout.text_summary"' in html
    assert code == 1 and rec["exit_code"] == 1  # CMD succeeded, an error finding at --fail-on error
    assert "popprof: note:" not in stderr


@pytest.fixture
def no_sdk(monkeypatch):
    """``import pva`` fails here, whatever other tests left on sys.path or in sys.modules."""
    monkeypatch.setitem(sys.modules, "pva", None)


def test_without_the_sdk_it_still_runs_and_says_once_what_it_could_not_do(
    tmp_path, capsys, user_env, no_sdk
) -> None:
    out, seen = tmp_path / "run", tmp_path / "seen.json"
    code, stdout, stderr = record(
        capsys, out, "--engines", "training", "--pvti", "--summary", "--seen", str(seen)
    )
    assert load(seen)["POPLAR_ENGINE_OPTIONS"]["autoReport.all"] == "true"  # the environment was still set
    rec = load(out / "record.json")
    assert rec["sdk_available"] is False and rec["bundles"] == [] and not (out / "bundles").exists()
    assert (
        rec["not_read_without_sdk"][0] == "reports/training/profile.pop"
        and len(rec["not_read_without_sdk"]) == 2
    )
    notes = [line for line in stderr.splitlines() if "pva" in line]
    assert len(notes) == 1 and "1 report and 1 .pvti trace" in notes[0] and "popprof export" in notes[0]
    assert set(findings_by_profile(out)) == {"stdout.text_summary"}  # the printed summary is still checked
    assert code == 1  # its fullest tile is at 95.3 %: a headroom error


def test_cmd_failure_is_exit_4_with_its_own_code_reported(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    code, _, stderr = record(
        capsys, out, "--summary", "--exit", "3", options=("--no-plots", "--fail-on", "never")
    )
    assert code == 4
    assert "CMD ended: exit code 3" in stderr and "exit code 4: CMD failed (exit code 3)" in stderr
    rec = load(out / "record.json")
    assert rec["cmd_exit_code"] == 3 and rec["exit_code"] == 4 and rec["cmd_killed_by"] is None
    assert (out / "findings.json").is_file() and (out / "report.html").is_file()  # still processed
    from test_report_sections import tables_by_class

    run = tables_by_class((out / "report.html").read_text("utf-8"))["run"]  # issue 28: the command's end
    cells = {row[0]: row[1] for row in run[0]}
    assert CHILD in cells["command"] and "--exit 3" in cells["command"]
    assert cells["exit code"] == "exit code 3"
    assert cells["duration"].endswith((" s", " ms", " us"))


def test_exit_code_command_returns_cmds_own_code_as_nsys_does(tmp_path, capsys) -> None:
    code, _, stderr = record(
        capsys, tmp_path / "a", "--summary", "--exit", "3", options=("--no-plots", "--exit-code=command")
    )
    assert code == 3 and "CMD ended: exit code 3" in stderr
    code, _, _ = record(capsys, tmp_path / "b", "--summary", options=("--no-plots", "--exit-code", "command"))
    assert code == 0  # findings never change CMD's code
    code, _, _ = record(
        capsys, tmp_path / "c", "--oom", "--abort", options=("--no-plots", "--exit-code=command")
    )
    assert code == 128 + 6  # killed by SIGABRT, as a shell reports it


def test_cmd_success_without_findings_at_fail_on_is_0(tmp_path, capsys) -> None:
    code, _, _ = record(capsys, tmp_path / "run", "--summary", options=("--no-plots", "--fail-on", "never"))
    assert code == 0


def test_invalid_json_in_the_environment_stops_before_anything_runs(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PVTI_OPTIONS", '{"enable": true')
    out, seen = tmp_path / "run", tmp_path / "seen.json"
    code, stdout, stderr = record(capsys, out, "--seen", str(seen))
    assert code == 2 and stdout == ""
    assert stderr.startswith("popprof: error: $PVTI_OPTIONS is not valid JSON") and stderr.count("\n") == 1
    assert not seen.exists() and not out.exists()


def test_usage_errors_run_nothing(tmp_path, capsys) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    seen = tmp_path / "seen.json"
    code, _, stderr = record(capsys, busy, "--seen", str(seen))
    assert code == 2 and "exists and is not empty" in stderr and not seen.exists()
    assert sorted(p.name for p in busy.iterdir()) == ["keep.txt"]
    out = tmp_path / "run"
    code = main(["record", "-o", str(out), "--", str(tmp_path / "no-such-program")])
    _, stderr = capsys.readouterr()
    assert code == 2 and "command not found" in stderr and not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    code = main(["record", "-o", str(empty), "--", str(tmp_path / "no-such-program")])
    assert code == 2 and list(empty.iterdir()) == []  # an empty DIR given by the user stays as it was


def test_no_profiling_asked_leaves_the_environment_as_it_was(tmp_path, capsys, user_env) -> None:
    seen = tmp_path / "seen.json"
    code, _, stderr = record(
        capsys, tmp_path / "run", "--seen", str(seen), options=("--no-graph", "--no-execution", "--no-trace")
    )
    env = load(seen)
    assert env["POPLAR_ENGINE_OPTIONS"] == {
        "autoReport.executionProfileProgramRunCount": "5",
        "debug.allowOutOfMemory": "true",
    }
    assert env["PVTI_OPTIONS"] == {}
    assert code == 0 and "nothing to check" in stderr


def test_heavy_output_on_both_streams_is_kept_whole_without_deadlock(tmp_path) -> None:
    """20,000 lines on each stream (far more than a pipe holds) pass through and are saved, in order."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "popprof",
            "record",
            "-o",
            str(out),
            "--no-check",
            "--",
            sys.executable,
            CHILD,
            "--chatter",
            "20000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected_out = ["child: starting"] + [f"out {i}" for i in range(20000)]
    expected_err = [f"err {i}" for i in range(20000)]
    assert (out / "stdout.log").read_text("utf-8").splitlines() == expected_out
    assert (out / "stderr.log").read_text("utf-8").splitlines() == expected_err
    assert proc.stdout.splitlines() == expected_out
    assert proc.stderr.splitlines()[:20000] == expected_err


# -- out of memory: these need the out-of-memory log reader (popprof/readers/oom_log.py, branch issue10) ----------


def test_compilation_out_of_memory_gives_tile_oom_from_the_log(tmp_path, capsys) -> None:
    """Compilation ran out of memory: no profile at all, only Poplar's message on stderr and an abort."""
    out = tmp_path / "run"
    code, stdout, stderr = record(capsys, out, "--oom", "--abort", options=())  # default options: plots on
    assert "Out of memory on tile 1: 674752 bytes used" in stderr  # passed through
    assert code == 4 and "CMD ended: killed by SIGABRT" in stderr
    rec = load(out / "record.json")
    assert rec["cmd_exit_code"] is None and rec["cmd_killed_by"] == "SIGABRT"
    assert rec["reports"] == [] and rec["logs"]["stderr.log"] == ["stderr.oom_log"]
    data = load(out / "findings.json")
    (profile,) = data["profiles"]
    (finding,) = [f for f in profile["findings"] if f["rule_id"] == "memory.tile-oom"]
    assert profile["profile"] == "stderr.oom_log" and finding["severity"] == "error"
    assert finding["where"]["tiles"] == [1]
    assert "674,752 B (658.9 KiB) of 638,976 B (624 KiB) (over by 35,776 B (34.9 KiB))" in finding["message"]
    assert "ERROR   memory.tile-oom: Tiles out of memory" in stdout  # check's text heading
    assert 'data-profile="stderr.oom_log"' in (out / "report.html").read_text("utf-8")


def test_a_real_run_log_with_several_failed_compilations(tmp_path, capsys) -> None:
    """A real Python run log (devito on Mk2) with three out-of-memory exceptions among ordinary output."""
    out = tmp_path / "run"
    log = HERE.parent / "fixtures" / "real" / "poplar" / "devito_wave3d_oom_log_mk2.txt"
    code, _, _ = record(capsys, out, "--stdout-from", str(log), "--exit", "1")
    assert code == 4
    assert (out / "stdout.log").read_text("utf-8").endswith(log.read_text("utf-8"))  # saved whole
    data = load(out / "findings.json")
    (profile,) = data["profiles"]
    assert profile["profile"] == "stdout.oom_log"
    (finding,) = [f for f in profile["findings"] if f["rule_id"] == "memory.tile-oom"]
    assert finding["message"].startswith("3 compilations failed: out of memory")
    assert sorted(finding["where"]["tiles"]) == [0, 14]


def test_users_report_directory_is_where_reports_are_collected(
    tmp_path, capsys, pva_double, monkeypatch
) -> None:
    """The user's autoReport.directory wins; reports already there before CMD started are not CMD's."""
    mine = tmp_path / "mine"
    old = mine / "last_week" / "profile.pop"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"an earlier run's report")
    os.utime(old, (1_600_000_000, 1_600_000_000))
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"autoReport.directory": str(mine)}))
    out = tmp_path / "run"
    code, _, stderr = record(capsys, out, "--engines", "training", options=("--no-plots", "--no-trace"))
    rec = load(out / "record.json")
    assert rec["report_directory"] == str(mine) and rec["user_keys_kept"]["POPLAR_ENGINE_OPTIONS"] == [
        "autoReport.directory"
    ]
    assert rec["reports"] == [str(mine / "training" / "profile.pop")]  # not last_week's
    assert rec["bundles"] == ["bundles/training.popprof"] and not (out / "reports" / "training").exists()
    assert code == 1 and "last_week" not in stderr


def test_a_report_that_cannot_be_read_is_a_note_not_a_failure(tmp_path, capsys, pva_double) -> None:
    out = tmp_path / "run"
    code, _, stderr = record(
        capsys,
        out,
        "--engines",
        "training",
        "--broken-engine",
        "inference",
        options=("--no-plots", "--no-trace"),
    )
    notes = [line for line in stderr.splitlines() if line.startswith("popprof: note:")]
    assert len(notes) == 1 and "inference/profile.pop" in notes[0] and "pva cannot open" in notes[0]
    rec = load(out / "record.json")
    assert len(rec["reports"]) == 2 and rec["bundles"] == ["bundles/training.popprof"]
    assert rec["notes"] == [notes[0].removeprefix("popprof: note: ")]
    assert set(findings_by_profile(out)) == {"training"}
    assert code == 1  # training's tiles over capacity; the broken report did not stop anything


def test_real_execution_summaries_printed_by_cmd_are_each_checked(tmp_path, capsys) -> None:
    """Two real SDK 3.1 execution summaries (IPU hardware, then the IPU Model) printed one after the other:
    one profile each, through the text-summary reader's read_all (needs branch issue10's execution summaries)."""
    real = HERE.parent / "fixtures" / "real" / "poplar"
    out = tmp_path / "run"
    code, _, _ = record(
        capsys,
        out,
        "--stdout-from",
        str(real / "tutorials_tut6_execution_hw_sdk3.txt"),
        "--stdout-from",
        str(real / "tutorials_tut6_execution_ipumodel_sdk3.txt"),
        options=("--no-plots", "--no-graph", "--no-execution", "--no-trace"),
    )
    assert (
        code == 1
    )  # a finding at --fail-on error: the IPU Model's host stream copies (99.7 % of its cycles)
    names = load(out / "record.json")["logs"]["stdout.log"]  # named by the reader from the line above each
    assert len(names) == 2 and all(n.startswith("stdout.text_summary.") for n in names)
    data = {p["profile"]: p for p in load(out / "findings.json")["profiles"]}
    assert list(data) == names
    shares = [
        next(f for f in data[n]["findings"] if f["rule_id"] == "exchange.share")["message"] for n in names
    ]
    assert (
        "take 0.6 %" in shares[0] and "take 0.1 %" in shares[1]
    )  # (8,743.1 + 135,849.6) / 25,444,984 on hardware
    worst = [data[n]["worst"] for n in names]
    assert worst == ["warning", "error"]  # host.stream-copy: 10.4 % on hardware, 99.7 % on the IPU Model


def test_python_api_works_outside_the_main_thread(tmp_path) -> None:
    """record() from a worker thread (where Python cannot handle signals): CMD runs, nothing is forwarded."""
    import threading

    from popprof.record.pipeline import RecordOptions
    from popprof.record.pipeline import record as record_api

    results, lines = [], []
    worker = threading.Thread(
        target=lambda: results.append(
            record_api(
                [sys.executable, CHILD, "--summary"],
                tmp_path / "run",
                RecordOptions(plots=False, fail_on="never"),
                say=lines.append,
            )
        )
    )
    worker.start()
    worker.join(120)
    (result,) = results
    assert result.exit_code == 0 and result.run.returncode == 0
    assert list(result.collected.profiles) == ["stdout.text_summary"]
    assert lines[0].startswith("popprof: CMD ended: exit code 0")


def test_no_check_exports_but_neither_checks_nor_scans_the_logs(tmp_path, capsys, pva_double) -> None:
    out = tmp_path / "run"
    code, stdout, _ = record(
        capsys, out, "--engines", "training", "--summary", "--oom", options=("--no-check", "--no-trace")
    )
    assert code == 0  # CMD succeeded; nothing was judged
    rec = load(out / "record.json")
    assert rec["checked"] is False and rec["bundles"] == ["bundles/training.popprof"]
    assert rec["logs"] == {"stdout.log": [], "stderr.log": []} and rec["outputs"] == []
    assert not (out / "findings.json").exists() and not (out / "report.html").exists()
    assert "memory.tile-oom" not in stdout


def test_without_the_sdk_and_nothing_else_the_only_note_is_the_sdk_one(tmp_path, capsys, no_sdk) -> None:
    out = tmp_path / "run"
    code, stdout, stderr = record(capsys, out, "--engines", "training", options=("--no-plots", "--no-trace"))
    notes = [line for line in stderr.splitlines() if line.startswith("popprof: note:")]
    assert (
        len(notes) == 1
        and "pva module cannot be imported" in notes[0]
        and "1 report and 0 .pvti traces" in notes[0]
    )
    assert code == 0 and load(out / "findings.json")["profiles"] == [] and not (out / "report.html").exists()
