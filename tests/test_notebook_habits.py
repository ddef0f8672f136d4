"""Issue 46 item 7: what a new user tries in a notebook or a query, answered as they expect."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import popprof
from popprof.cli import main
from popprof.io.plural import plural
from popprof.model.profile import Profile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BUNDLE = FIXTURES / "mk2_training.popprof"
OTHER = FIXTURES / "mk1_noexec.popprof"
TRACE = FIXTURES / "traces" / "training_loop.json.gz"
SUMMARY = FIXTURES / "text_summary" / "mk2_training.txt"
KEY = "team-key-A-0123456789abcdef"


def test_redact_takes_the_profile_in_hand(tmp_path):
    """Before: TypeError: expected str, bytes or os.PathLike object, not Profile."""
    profile = popprof.open(TRACE)
    report = popprof.redact(profile, tmp_path / "out.json.gz", key=KEY)
    assert report.passed and gzip.decompress((tmp_path / "out.json.gz").read_bytes()).lstrip().startswith(
        b"{"
    )
    report = popprof.redact(popprof.open(SUMMARY), tmp_path / "summary.txt", key=KEY)
    assert report.passed and "Memory Usage" in (tmp_path / "summary.txt").read_text("utf-8")


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (Profile("made_here", {}), "was not read from one (source is empty): write it with popprof.export"),
        (3, "takes the path of a bundle, a trace (.json/.json.gz) or a Poplar text summary, or a Profile"),
    ],
)
def test_redact_says_in_one_line_what_it_takes(tmp_path, source, words):
    with pytest.raises(TypeError) as caught:
        popprof.redact(source, tmp_path / "out.json", key=KEY)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out.json").exists()


def test_a_diffs_text_repr_is_short():
    """Before: the dataclass repr printed every DataFrame of the diff (thousands of characters)."""
    result = popprof.diff(BUNDLE, OTHER)
    text = repr(result)
    lines = text.splitlines()
    assert lines[0].startswith("<ProfileDiff 'mk2_training' -> 'mk1_noexec': 48 metrics, ")
    assert len(lines) <= 2 + result.REPR_METRICS and len(text) < 1500
    assert "more changed metrics: .changed_metrics()" in lines[-1] and "notes: .notes" in lines[-1]
    assert "DataFrame" not in text and "change_bytes" not in text  # no table of the diff
    popprof.gate(result)
    assert "; gate PASS: 0 budgets exceeded" in repr(result).splitlines()[0]
    same = repr(popprof.diff(BUNDLE, BUNDLE))
    assert same == "<ProfileDiff 'mk2_training' -> 'mk2_training': 48 metrics, 0 changed>"


def test_counts_have_their_plural_right():
    assert [plural(n, "row") for n in (0, 1, 2, 1234)] == ["0 rows", "1 row", "2 rows", "1,234 rows"]
    assert plural(1, "match", "matches") == "1 match" and plural(3, "match", "matches") == "3 matches"
    from popprof.model.readproblems import MEANINGS, meaning

    assert meaning(MEANINGS["unmatched_end"], "1") == "1 end (E) event has no begin: dropped"
    assert meaning(MEANINGS["unmatched_end"], "2") == "2 end (E) events have no begin: dropped"
    for template in MEANINGS.values():
        for count in ("1", "3"):
            assert "(s)" not in meaning(template, count) and "{" not in meaning(template, count)


def test_tables_and_query_say_1_row(capsys):
    assert (
        main(["query", str(BUNDLE), "select 1 as x union all select 2 union all select 3", "--rows", "2"])
        == 0
    )
    assert capsys.readouterr().out.splitlines()[-1].startswith("... 1 more row (use --rows N")
    assert main(["tables", str(BUNDLE)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  target ")]
    assert rows and " 1 row " in rows[0] and "rows" not in rows[0].split("1 row")[0]


def test_categorical_columns_are_text_in_query(capsys):
    """Before: name arrived as a DuckDB ENUM, so name[1:30] failed with a Binder Error until the user cast it."""
    sql = "select name[1:12] as short, length(name) as n, upper(channel) as c from events order by n desc limit 2"
    assert main(["query", str(TRACE), sql, "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "short,n,c" and len(out) == 3
    frame = popprof.query(TRACE, "select column_name, column_type from (describe events)")
    types = dict(zip(frame["column_name"], frame["column_type"], strict=True))
    assert types["name"] == "VARCHAR" and types["start_us"] == "DOUBLE"
    assert popprof.query(TRACE, "select count(*) as n from events where name like 'aten::%'")["n"][0] > 0
    assert popprof.open(TRACE).events["name"].dtype == "category"  # the profile itself is unchanged


def test_a_gate_results_text_repr_is_short():
    result = popprof.diff(BUNDLE, OTHER)
    passed = repr(popprof.gate(result))
    assert (
        passed
        == "<GateResult gate PASS: 0 budgets exceeded, 2 gaps, 7 within budget (budget: default budget)>"
    )
    failed = repr(popprof.gate(result, {"memory.max_tile_index": "+0%"})).splitlines()
    assert failed[0].startswith("<GateResult gate FAIL: 1 budget exceeded, ") and len(failed) == 2
    assert failed[1].startswith("  memory.max_tile_index changed +132.18 %")
