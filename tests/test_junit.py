"""One JUnit dialect for `check` and `diff`, valid against the schema CI test reporters read.

The schema is Jenkins xUnit's junit-10.xsd (tests/schemas/README.md says where
it comes from); xmlschema validates without any network access.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from popprof.cli import main
from popprof.readers import bundle
from popprof.report import junit
from popprof.report import markdown as md
from popprof.testing import synth

xmlschema = pytest.importorskip("xmlschema")

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "junit-10.xsd"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def schema():
    return xmlschema.XMLSchema(str(SCHEMA_PATH))


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("junit")
    base = synth.make_profile(num_steps=300, num_liveness_steps=40, seed=5)
    worse = base.copy()
    steps = worse.steps.copy()
    steps["cycles"] = steps["cycles"] * 2
    worse.set_table("steps", steps)
    return bundle.write(base, root / "base.popprof"), bundle.write(worse, root / "worse.popprof")


def run(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().out


def assert_valid(schema, text: str) -> ET.Element:
    errors = list(schema.iter_errors(text))
    assert not errors, errors[0]
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    for suite in suites:  # the counts agree with the cases, on both levels
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites)
    return root


def test_the_schema_rejects_what_check_used_to_write(schema):
    """A `skipped` count on the root (what `check` wrote) and a bare `<testsuite>` case without a name fail."""
    assert not schema.is_valid(
        '<testsuites skipped="1"><testsuite name="a" tests="0" failures="0" errors="0"/></testsuites>'
    )
    assert not schema.is_valid(
        '<testsuites><testsuite name="a" tests="1" failures="0" errors="0">'
        "<testcase/></testsuite></testsuites>"
    )


def test_check_writes_valid_junit_with_failures_and_skips(schema, capsys):
    code, out = run(
        capsys, "check", FIXTURES / "mk2_oom.popprof", FIXTURES / "mk2_training.popprof", "--format", "junit"
    )
    root = assert_valid(schema, out)
    assert code == 1 and root.get("name") == "popprof check"
    assert [s.get("name") for s in root.findall("testsuite")] == ["mk2_oom", "mk2_training"]
    assert {c.get("classname") for c in root.iter("testcase")} == {
        "popprof.check.mk2_oom",
        "popprof.check.mk2_training",
    }
    assert int(root.get("failures")) >= 1
    assert any(c.find("skipped") is not None for c in root.iter("testcase"))


def test_diff_writes_the_same_dialect(schema, bundles, capsys):
    base, worse = bundles
    code, out = run(capsys, "diff", base, worse, "--format", "junit")
    root = assert_valid(schema, out)
    assert code == 1 and root.get("name") == "popprof gate" and len(root.findall("testsuite")) == 1
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert "execution.total_cycles" in failed
    code, out = run(capsys, "diff", base, worse, "--format", "junit", "--no-gate")
    root = assert_valid(schema, out)
    assert code == 0 and root.get("name") == "popprof diff"
    assert all(c.find("system-out") is not None for c in root.iter("testcase"))


def test_diff_gaps_are_skipped_or_failed_with_strict(schema, bundles, tmp_path, capsys):
    base, _ = bundles
    summary = FIXTURES / "text_summary" / sorted(p.name for p in (FIXTURES / "text_summary").glob("*.txt"))[0]
    code, out = run(capsys, "diff", base, summary, "--format", "junit")
    root = assert_valid(schema, out)
    skipped = [c for c in root.iter("testcase") if c.find("skipped") is not None]
    assert skipped and all("gap:" in c.find("skipped").get("message") for c in skipped)
    code, out = run(capsys, "diff", base, summary, "--format", "junit", "--strict")
    root = assert_valid(schema, out)
    assert code == 1 and not list(root.iter("skipped"))
    assert {c.get("name") for c in skipped} <= {
        c.get("name") for c in root.iter("testcase") if c.find("failure") is not None
    }


def test_two_run_directories_give_one_suite_per_engine(schema, capsys, pva_double):
    code, out = run(capsys, "diff", FIXTURES / "run_dir", FIXTURES / "run_dir", "--format", "junit")
    root = assert_valid(schema, out)
    assert code == 0 and sorted(s.get("name") for s in root.findall("testsuite")) == [
        "popprof.gate.inference",
        "popprof.gate.training",
    ]


def test_control_characters_and_markup_in_messages_stay_valid(schema):
    case = junit.Case(
        "rule <a&b>",
        "popprof.check.p",
        failure=junit.Failure('bad "\x07" & <x>', "error"),
        output="out\x00put",
    )
    text = junit.render(
        [junit.Suite("p", [case, junit.Case("ok", "popprof.check.p", skipped="not evaluated")])],
        "popprof check",
    )
    root = assert_valid(schema, text)
    assert root.find(".//failure").get("message") == 'bad "" & <x>'
    assert root.find(".//system-out").text == "output"


def test_markdown_table_escapes_cells_and_aligns_numbers():
    lines = md.table(
        ["name", "n"], [[md.code("a|b`c"), "1,024"], [md.cell("two\nlines | here"), "3"]], right={1}
    )
    assert lines == ["| name | n |", "|---|---:|", "| `a\\|b'c` | 1,024 |", "| two lines \\| here | 3 |"]
