"""A reader's problems are said once per source per command, in plain words, and not again for its bundle."""

from __future__ import annotations

import json

from popprof.cli import main

UNPAIRED = "1 begin (B) event never ends: its duration is unknown; 1 end (E) event has no begin: dropped"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def warning_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "read with problems" in line]


def test_said_once_in_plain_words(capsys, fixtures_dir):
    trace = fixtures_dir / "traces" / "begin_end.json"
    code, out, err = run(capsys, "summary", trace)
    assert code == 0
    assert warning_lines(err) == [f"popprof: warning: {trace}: read with problems: {UNPAIRED}"]
    assert "Read with problems" in out  # the summary itself says it too (stdout)
    code, out, err = run(capsys, "diff", trace, trace, "--no-gate")  # the same source opened twice
    assert code == 0 and len(warning_lines(err)) == 1
    code, _, err = run(capsys, "tables", trace)  # a new command says it again
    assert len(warning_lines(err)) == 1


def test_a_bundle_keeps_the_problems_without_warning_again(capsys, fixtures_dir, tmp_path):
    trace = fixtures_dir / "traces" / "begin_end.json"
    bundle = tmp_path / "be.popprof"
    code, _, err = run(capsys, "export", trace, "-o", bundle)
    assert code == 0 and len(warning_lines(err)) == 1  # said when the source is read
    code, out, err = run(capsys, "summary", bundle, "--format", "json")
    assert code == 0 and warning_lines(err) == []
    assert json.loads(out)["read_problems"] == {
        "unmatched_begin": "1 begin (B) event never ends: its duration is unknown",
        "unmatched_end": "1 end (E) event has no begin: dropped",
    }
    code, out, err = run(capsys, "tables", bundle)
    assert code == 0 and warning_lines(err) == []
    assert "read with problems: 1 end (E) event has no begin: dropped" in out


def test_a_clean_source_says_nothing(capsys, fixtures_dir):
    code, out, err = run(capsys, "summary", fixtures_dir / "real" / "traces" / "nccl_data.json.gz")
    assert code == 0 and warning_lines(err) == [] and "Read with problems" not in out
