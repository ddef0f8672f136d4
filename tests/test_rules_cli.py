"""``popprof check`` and ``popprof rules``: exit codes, formats, options, config files."""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from popprof.cli import main
from popprof.model.profile import Profile
from popprof.readers import bundle
from popprof.testing.synth import make_profile


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundles")
    paths = {}
    oom = make_profile(name="oom", num_steps=600, num_liveness_steps=60, oom_tiles=2, seed=1)
    roomy = make_profile(
        name="roomy",
        num_steps=600,
        num_liveness_steps=60,
        median_fill=0.4,
        hot_tiles=0,
        gap_share=0.03,
        exchange_heavy=None,
        seed=2,
        execution=False,
    )
    events = pd.DataFrame(
        {
            "event_id": [0, 1, 2, 3],
            "pid": [0, 0, 1, 1],
            "tid": [7, 7, 1, 1],
            "depth": [0, 0, 0, 0],
            "name": ["gemm", "gemm", "optimizer.step", "log"],
            "device_category": ["compute", "compute", None, None],
            "start_us": [0.0, 30_000.0, 1_000.0, 29_000.0],
            "dur_us": [1_000.0, 1_000.0, 28_000.0, 500.0],
        }
    )
    trace = Profile("trace", {"events": events})
    for name, profile in (("oom", oom), ("roomy", roomy), ("trace", trace)):
        paths[name] = str(root / f"{name}.popprof")
        bundle.write(profile, paths[name])
    return paths


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_codes(bundles, capsys):
    code, out, _ = run(capsys, "check", bundles["oom"])
    assert code == 1 and "memory.tile-oom" in out and "FAILED" in out
    code, out, _ = run(capsys, "check", bundles["roomy"])
    assert code == 0, out
    assert "not evaluated: needs an execution profile" not in out  # folded: one line per profile
    code, out, _ = run(capsys, "check", bundles["roomy"], "--show-skipped")
    assert code == 0 and "not evaluated: needs an execution profile" in out
    code, _, _ = run(capsys, "check", bundles["oom"], "--fail-on", "never")
    assert code == 0
    code, _, _ = run(capsys, "check", bundles["roomy"], "--fail-on", "info")
    assert code == 1  # the liveness peak is an info finding


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--rule", "memory.nope"], "unknown rule 'memory.nope'"),
        (["--skip", "zzz"], "unknown rule 'zzz'"),
        (["--set", "memory.headroom.warning"], "RULE.PARAM=VALUE"),
        (["--set", "memory.headroom.warn=1"], "no parameter 'warn'"),
        (["--set", "memory.headroom.warning=lots"], "expected float"),
        (["--config", "/nonexistent/popprof.toml"], "config file not found"),
    ],
)
def test_usage_errors_exit_2_with_one_line(bundles, capsys, argv, message):
    code, out, err = run(capsys, "check", bundles["oom"], *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_input_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, "check", str(tmp_path / "missing.pop"))
    assert code == 2 and "missing.pop" in err


def test_rule_selection_and_set(bundles, capsys):
    code, out, _ = run(capsys, "check", bundles["oom"], "--rule", "memory.gaps", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["profiles"][0]["passed"] == ["memory.gaps"]
    code, out, _ = run(
        capsys,
        "check",
        bundles["roomy"],
        "--rule",
        "memory.headroom",
        "--format",
        "json",
        "--set",
        "memory.headroom.warning=1%",
        "--fail-on",
        "warning",
    )
    assert code == 1
    finding = json.loads(out)["profiles"][0]["findings"][0]
    assert finding["rule_id"] == "memory.headroom" and finding["threshold"] == 0.01


def test_json_structure(bundles, capsys):
    code, out, _ = run(capsys, "check", bundles["oom"], bundles["trace"], "--format", "json")
    data = json.loads(out)
    assert data["schema"] == "popprof.findings/1" and data["fail_on"] == "error" and data["failed"] is True
    assert [p["profile"] for p in data["profiles"]] == ["oom", "trace"]
    oom = data["profiles"][0]
    assert set(oom) == {
        "profile",
        "source",
        "worst",
        "counts",
        "findings",
        "not_evaluated",
        "passed",
        "limit",
    }
    # the run's limit as summary states it (docs/figures.md): the trace's device events (an IPU's, read as a
    # .pvti device's) are 2 ms of compute 31 ms apart; the 29 ms between them, no device run submitted, is host
    trace = data["profiles"][1]["limit"]
    assert set(trace) == {"limit", "share", "groups", "unattributed", "devices"}
    assert trace["limit"] == "host" and trace["share"] == pytest.approx(29 / 31)
    f = oom["findings"][0]
    assert set(f) == {
        "rule_id",
        "severity",
        "title",
        "message",
        "value",
        "threshold",
        "figure",
        "share",
        "estimated_gain",
        "where",
        "advice",
    }
    assert data["totals"]["error"] == sum(p["counts"]["error"] for p in data["profiles"])
    trace = data["profiles"][1]
    long_events = [f for f in trace["findings"] if f["rule_id"] == "host.long-events"]
    assert long_events and "optimizer.step" in long_events[0]["message"]
    assert long_events[0]["where"]["time_us"] == [1000.0, 29000.0]


def test_junit_is_valid_xml_with_one_testcase_per_rule(bundles, capsys):
    code, out, _ = run(capsys, "check", bundles["oom"], "--format", "junit")
    root = ET.fromstring(out)
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    names = [c.get("name") for c in cases]
    assert len(names) == len(set(names)) == int(suite.get("tests"))
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    skipped = {c.get("name") for c in cases if c.find("skipped") is not None}
    assert "memory.tile-oom" in failed and skipped == {
        "host.device-gaps",
        "host.long-events",
        "host.launches-without-device",
        "host.launch-overhead",
        "distributed.stragglers",
        "operations.below-roofline",
        "distributed.collective-skew",
        "device.dependency-waits",
        "host.pageable-copies",
        "host.device-copies",
        "memory.device-headroom",
    }
    assert int(suite.get("failures")) == len(failed) and int(suite.get("skipped")) == 11
    code, out, _ = run(capsys, "check", bundles["oom"], "--format", "junit", "--fail-on", "warning")
    more = {c.get("name") for c in ET.fromstring(out).iter("testcase") if c.find("failure") is not None}
    assert failed < more


def test_markdown_has_a_table(bundles, capsys):
    code, out, _ = run(capsys, "check", bundles["oom"], "--format", "markdown")
    lines = out.splitlines()
    assert lines[0] == "## popprof check"
    header = lines.index("| severity | rule | finding | estimated gain | where |")  # every finding is priced
    assert lines[header + 1] == "|---|---|---|---|---|"
    assert lines[header + 2].startswith("| **warning** | `memory.tile-imbalance` |")  # the largest gain first
    assert any(line.startswith("| **error** | `memory.tile-oom` |") for line in lines[header + 2 :])
    assert "<summary>not evaluated (11)</summary>" in out


def test_output_file_is_written(bundles, capsys, tmp_path):
    target = tmp_path / "out" / "findings.xml"
    code, out, _ = run(capsys, "check", bundles["oom"], "--format", "junit", "-o", str(target))
    assert code == 1 and out == ""
    ET.parse(target)
    assert [p.name for p in target.parent.iterdir()] == ["findings.xml"]  # no temporary left behind


def test_plain_text_when_piped(bundles, capsys):
    code, out, _ = run(capsys, "check", bundles["trace"])
    assert "\x1b[" not in out
    assert "host.long-events" in out and "SKIPPED" in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("0 errors,") or re.match(r"\d+ errors?, \d+ warnings?, ", last), last


def test_config_file_is_found_and_applied(bundles, capsys, tmp_path, monkeypatch):
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.popprof.rules]\nenable = ["memory.*"]\nfail_on = "warning"\n'
        '"memory.headroom.warning" = 0.01\n'
    )
    monkeypatch.chdir(project / "sub")
    code, out, _ = run(capsys, "check", bundles["roomy"], "--format", "json")
    data = json.loads(out)
    assert data["fail_on"] == "warning" and code == 1
    ids = {f["rule_id"] for f in data["profiles"][0]["findings"]}
    assert "memory.headroom" in ids and not any(i.startswith("exchange") for i in ids)
    # --config overrides discovery; the explicit --fail-on overrides the config
    other = tmp_path / "strict.toml"
    other.write_text('[rules]\ndisable = ["memory.headroom"]\n')
    code, out, _ = run(
        capsys, "check", bundles["roomy"], "--format", "json", "--config", str(other), "--fail-on", "error"
    )
    assert code == 0
    assert "memory.headroom" not in {f["rule_id"] for f in json.loads(out)["profiles"][0]["findings"]}


def test_bad_config_exits_2(bundles, capsys, tmp_path, monkeypatch):
    (tmp_path / "popprof.toml").write_text("[rules\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "check", bundles["roomy"])
    assert code == 2 and "popprof.toml" in err and "invalid TOML" in err
    (tmp_path / "popprof.toml").write_text('[rules]\nfail_on = "sometimes"\n')
    code, _, err = run(capsys, "check", bundles["roomy"])
    assert code == 2 and "fail_on" in err


def test_rules_listing(capsys):
    code, out, _ = run(capsys, "rules", "--format", "json")
    data = {r["id"]: r for r in json.loads(out)}
    assert code == 0
    assert data["memory.headroom"]["params"] == {"warning": 0.85, "error": 0.95}
    assert data["exchange.phases"]["params"]["moderate"] == 0.30
    assert data["memory.tile-oom"]["needs"] == [["tiles"], ["memory_totals"], ["out_of_memory"]]
    code, out, _ = run(capsys, "rules")
    assert "memory.headroom.warning = 0.85" in out and "host.device-gaps: " in out
    code, out, _ = run(capsys, "rules", "--format", "markdown")
    assert out.startswith("| rule | description | needs | parameters |")


def test_run_directory_gives_one_result_per_engine(pva_double, fixtures_dir, capsys):
    code, out, _ = run(
        capsys, "check", str(fixtures_dir / "run_dir"), "--format", "json", "--rule", "memory.*"
    )
    names = sorted(p["profile"] for p in json.loads(out)["profiles"])
    assert names == ["inference", "training"]
    code, out, _ = run(
        capsys, "check", str(fixtures_dir / "run_dir"), "--engine", "training", "--format", "json"
    )
    assert [p["profile"] for p in json.loads(out)["profiles"]] == ["training"]


def test_rich_table_escapes_markup_in_messages():
    from popprof.report.findings import render_text
    from popprof.rules import Finding, Findings

    found = Findings(
        [
            Finding(
                "memory.headroom",
                "error",
                "t",
                "vertex poplin::Conv[bold]x[/bold] is full",
                where={"programs": ["[red]p[/red]"]},
            )
        ],
        profile_name="p",
    )
    text = render_text([found], rich=True, width=200)
    assert "[bold]x[/bold]" in text and "[red]p[/red]" in text
    assert "\x1b[" in text  # coloured for a terminal


def test_inputs_are_never_modified_or_overwritten(bundles, capsys, tmp_path):
    import hashlib
    from pathlib import Path

    def digest(root: str) -> dict:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(root).iterdir())}

    before = digest(bundles["oom"])
    run(capsys, "check", bundles["oom"], "--format", "json", "-o", str(tmp_path / "r.json"))
    assert digest(bundles["oom"]) == before
    summary = tmp_path / "summary.txt"
    summary.write_text("Target:\n  Number of IPUs: 1\n")
    code, _, err = run(capsys, "check", str(summary), "-o", str(summary))
    assert code == 2 and "would overwrite the input" in err
    assert summary.read_text() == "Target:\n  Number of IPUs: 1\n"
    code, _, err = run(capsys, "check", bundles["oom"], "-o", str(Path(bundles["oom"]) / "manifest.json"))
    assert code == 2 and digest(bundles["oom"]) == before


def test_junit_splits_findings_of_one_rule_around_fail_on():
    """Findings of one rule with equal text but different evidence: the error fails, the warning goes to
    system-out (findings are told apart by identity, not by comparing their evidence frames)."""
    from popprof.report.findings import render_junit
    from popprof.rules.base import Finding, Findings

    error = Finding(
        "exchange.phases",
        "error",
        "Exchange-heavy phase",
        "same text",
        evidence=pd.DataFrame({"share": [0.6]}),
    )
    warning = Finding(
        "exchange.phases",
        "warning",
        "Exchange-heavy phase",
        "same text",
        evidence=pd.DataFrame({"share": [0.35]}),
    )
    results = Findings([error, warning], evaluated=["exchange.phases"], profile_name="p")
    root = ET.fromstring(render_junit([results], "error"))
    (case,) = root.iter("testcase")
    assert case.find("failure").get("type") == "error"
    assert case.find("system-out").text == "[warning] same text"
    assert root.get("failures") == "1" and root.get("tests") == "1"


def test_rules_not_evaluated_fold_into_one_line_per_profile(bundles, capsys):
    """Issue 28: 10 of 11 rules SKIPPED on an out-of-memory log gave 10 lines per profile."""
    code, folded, _ = run(capsys, "check", bundles["roomy"], bundles["trace"])
    _, listed, _ = run(capsys, "check", bundles["roomy"], bundles["trace"], "--show-skipped")
    for profile in ("roomy", "trace"):
        block = folded.split(profile, 1)[1].splitlines()
        at = next(i for i, line in enumerate(block) if "SKIPPED" in line)
        # one entry, wrapped at 80 columns: its line and the lines indented under it
        entry = " ".join(
            [block[at], *itertools.takewhile(lambda line: line.startswith("      "), block[at + 1 :])]
        )
        assert re.search(r"\d+ rules? not evaluated:", entry) and "--show-skipped" in entry
    assert folded.count("SKIPPED") == 2
    assert listed.count("SKIPPED") > 2 and listed.count("SKIPPED") == listed.count("not evaluated: ")
    assert folded.splitlines()[-1] == listed.splitlines()[-1]  # the same totals line
