"""`popprof diff` and `popprof baseline` from the command line: formats, exit codes, errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from engine_helpers import two_engines

from popprof.cli import main
from popprof.readers import bundle
from popprof.testing import synth


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("diffcli")
    base = synth.make_profile(num_steps=500, num_liveness_steps=60, seed=31)
    worse = base.copy()
    steps = worse.steps.copy()
    steps["cycles"] = steps["cycles"] * 2  # total cycles +100 %
    worse.set_table("steps", steps)
    return (
        bundle.write(base, root / "base.popprof"),
        bundle.write(worse, root / "worse.popprof"),
        base,
        root,
    )


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_identical_profiles_exit_0(capsys, bundles):
    base, _, _, _ = bundles
    code, out, _ = run(capsys, "diff", base, base)
    assert code == 0
    assert "no metric changed" in out and "gate PASS" in out


def test_regression_exits_1_and_names_metric_change_and_budget(capsys, bundles):
    base, worse, profile, _ = bundles
    code, out, _ = run(capsys, "diff", base, worse)
    assert code == 1
    assert max(len(x) for x in out.splitlines()) <= 80
    flat = " ".join(out.split())  # the gate's line wraps at 80 columns
    assert (
        "FAIL execution.total_cycles changed +100.00 % (5,788,461 -> 11,576,922); budget: growth <= 2 %"
        in flat
    )
    lines = out.splitlines()
    assert lines[1] == "basis: execution figures as totals (both sides ran 2 runs)"
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["metric", "base"])
    assert lines[3].startswith("What changed")  # after the title, the basis and a blank line
    first_metric = lines[header + 1].split()[0]  # the table follows "What changed", under its header
    # biggest relative change first: the doubled cycles and the time account's parts made of them
    assert first_metric.startswith(("execution.", "account."))
    code, out, _ = run(capsys, "diff", base, worse, "--no-gate")
    assert code == 0 and "gate" not in out


def test_json_markdown_junit(capsys, bundles):
    base, worse, profile, _ = bundles
    code, out, _ = run(capsys, "diff", base, worse, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["gate"]["passed"] is False
    cycles = next(m for m in doc["metrics"] if m["name"] == "execution.total_cycles")
    assert cycles["base"] == float(profile.steps["cycles"].sum()) and cycles["rel_change"] == 1.0
    assert doc["programs"]["counts"]["grown"] == profile.steps["program"].nunique()

    code, out, _ = run(capsys, "diff", base, worse, "--format", "markdown")
    assert out.startswith("**popprof gate: FAIL**")
    assert "| `execution.total_cycles` |" in out and "<summary>Programs" in out

    code, out, _ = run(capsys, "diff", base, worse, "--format", "junit")
    suite = ET.fromstring(out)
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert "execution.total_cycles" in failed and int(suite.get("failures")) == len(failed)


def test_all_shows_unchanged_metrics(capsys, bundles):
    base, worse, _, _ = bundles
    _, out, _ = run(capsys, "diff", base, worse, "--no-gate")
    _, out_all, _ = run(capsys, "diff", base, worse, "--no-gate", "--all")
    assert "memory.total_incl_gaps_bytes" not in out and "memory.total_incl_gaps_bytes" in out_all
    assert "hidden; --all shows them" in out


def test_baseline_command_and_diff_against_it(capsys, bundles, tmp_path):
    base, worse, _, _ = bundles
    out_file = tmp_path / "baseline.json"
    code, _, err = run(capsys, "baseline", base, "-o", out_file)
    assert code == 0 and out_file.is_file() and "wrote" in err
    code, printed, _ = run(capsys, "baseline", base)
    assert printed == out_file.read_text()
    code, out, _ = run(capsys, "diff", out_file, worse)
    assert code == 1 and "baseline (metrics only)" in out
    code, out, _ = run(capsys, "diff", out_file, base)
    assert code == 0


def test_budget_file_and_strict(capsys, bundles, tmp_path):
    base, worse, _, _ = bundles
    lenient = tmp_path / "lenient.toml"
    lenient.write_text('[budgets]\n"execution.*" = "+150%"\n"execution.exchange_and_sync_share" = "+1"\n')
    code, out, _ = run(capsys, "diff", base, worse, "--budget", lenient)
    assert code == 0, out
    # a profile without steps against one with: gaps; --strict fails
    no_steps = synth.make_profile(num_steps=500, num_liveness_steps=60, seed=31, execution=False)
    path = bundle.write(no_steps, tmp_path / "nosteps.popprof")
    code, out, _ = run(capsys, "diff", path, base)
    assert code == 0 and "GAP  execution.total_cycles" in out
    code, out, _ = run(capsys, "diff", path, base, "--strict")
    assert code == 1


def test_bad_input_exits_2_with_one_line(capsys, bundles, tmp_path):
    base, _, _, _ = bundles
    code, out, err = run(capsys, "diff", base, tmp_path / "missing.popprof")
    assert code == 2 and "missing.popprof" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.toml"
    bad.write_text('[budgets]\n"memory.*" = { growth = 1 }\n')
    code, _, err = run(capsys, "diff", base, base, "--budget", bad)
    assert code == 2 and "bad.toml" in err and "unknown key" in err and "Traceback" not in err
    for text in ('budgets = "+1%"\n', "budgets = [1, 2]\n"):  # budgets that are not a table
        bad.write_text(text)
        code, _, err = run(capsys, "diff", base, base, "--budget", bad)
        assert code == 2 and "bad.toml" in err and "'budgets' must be a table" in err, err
        assert len(err.strip().splitlines()) == 1
    broken = tmp_path / "baseline.json"
    broken.write_text('{"format": "popprof-baseline", "format_version": 1, "metrics": [')
    code, _, err = run(capsys, "diff", broken, base)
    assert code == 2 and "baseline.json" in err


def test_run_directories_compare_engine_by_engine(capsys, tmp_path):
    training, inference, bigger = two_engines()
    old, new = tmp_path / "old", tmp_path / "new"
    bundle.write(training, old / "training")
    bundle.write(inference, old / "inference")
    bundle.write(bigger, new / "training")
    bundle.write(inference, new / "validation")
    code, out, _ = run(capsys, "diff", old, new, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["passed"] is False
    assert list(doc["engines"]) == ["training"]
    assert doc["notes"] == ["only in base: inference", "only in new: validation"]
    code, _, err = run(capsys, "diff", old, new, "--engine", "inference")
    assert code == 2 and "no engine 'inference'" in err  # the new run has no inference engine
    code, out, err = run(capsys, "diff", old / "inference", new / "validation")
    assert code == 0 and "no metric changed" in out


def test_output_file_is_written_and_inputs_protected(capsys, bundles, tmp_path):
    base, worse, _, _ = bundles
    report = tmp_path / "gate.xml"
    code, out, _ = run(capsys, "diff", base, worse, "--format", "junit", "-o", report)
    assert code == 1 and out == ""
    root = ET.parse(report).getroot()
    assert root.get("name") == "popprof gate" and root.find("testsuite").get("name") == "popprof.gate"
    before = sorted(p.name for p in base.iterdir())
    code, _, err = run(capsys, "diff", base, worse, "-o", base / "report.txt")
    assert code == 2 and "would overwrite the input" in err
    assert sorted(p.name for p in base.iterdir()) == before
