"""summary, tables, query and export from the command line, and their error behaviour."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import popprof
from popprof.cli import main
from popprof.readers import bundle
from popprof.testing import synth


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    profile = synth.make_profile(num_ipus=2, num_steps=400, num_liveness_steps=100, oom_tiles=1, seed=5)
    return profile, bundle.write(profile, tmp_path_factory.mktemp("b") / "sample.popprof")


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_text_and_json_agree_with_tables(capsys, sample):
    profile, path = sample
    code, out, _ = run(capsys, "summary", str(path), "--format", "json")
    assert code == 0
    data = json.loads(out)
    tiles = profile.tiles
    fullest = int(tiles["bytes_incl_gaps"].idxmax())
    assert data["memory"]["max_tile"] == int(tiles["tile"].iloc[fullest])
    assert data["memory"]["max_tile_incl_gaps_bytes"] == float(tiles["bytes_incl_gaps"].max())
    assert data["memory"]["tiles_out_of_memory"] == int((tiles["bytes_incl_gaps"] > 638_976).sum()) == 1
    per_ipu = profile.steps.groupby("ipu")["cycles"].sum()
    assert data["execution"]["total_cycles"] == float(per_ipu.max())
    assert data["execution"]["by_category"]["compute"]["cycles"] == float(
        profile.steps.loc[profile.steps["category"] == "compute", "cycles"].sum()
    )
    code, text, _ = run(capsys, "summary", str(path))
    assert code == 0 and "tiles out of memory    1" in text and "top programs" in text


def test_tables_lists_every_table(capsys, sample):
    profile, path = sample
    code, out, _ = run(capsys, "tables", str(path), "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert {t: v["rows"] for t, v in data[profile.name].items()} == {
        t: len(f) for t, f in profile.tables.items()
    }


def test_query_runs_sql_over_tables(capsys, sample):
    profile, path = sample
    code, out, _ = run(
        capsys,
        "query",
        str(path),
        "SELECT category, sum(cycles) AS cycles FROM steps GROUP BY 1 ORDER BY 1",
        "--format",
        "csv",
    )
    assert code == 0
    got = pd.read_csv(__import__("io").StringIO(out)).set_index("category")["cycles"]
    want = profile.steps.groupby("category", observed=True)["cycles"].sum().sort_index()
    assert got.to_dict() == {k: float(v) for k, v in want.items()}


def test_query_sql_error_is_exit_2(capsys, sample):
    _, path = sample
    code, out, err = run(capsys, "query", str(path), "SELECT nope FROM steps")
    assert code == 2 and out == "" and "SQL error" in err and "Traceback" not in err


def test_export_round_trip_from_cli(capsys, sample, tmp_path):
    profile, path = sample
    code, out, _ = run(capsys, "export", str(path), "-o", str(tmp_path / "again.popprof"))
    assert code == 0
    again = popprof.open(tmp_path / "again.popprof")
    for name in profile.table_names:
        pd.testing.assert_frame_equal(again[name], profile[name])


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        (b"", "the file is empty"),
        (b"\x1f\x8b\x08\x00garbage-not-gzip", "corrupt gzip"),
        (b"just some words that are not a profile\n", "not a recognised profile format"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, content, message):
    path = tmp_path / "input.bin"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, "summary", str(path))
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    if content is not None:
        assert path.read_bytes() == content  # input untouched


def test_directory_without_profile(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run(capsys, "summary", str(tmp_path))
    assert code == 2 and "holds no profile" in err


def test_help_has_examples(capsys):
    for command in ("summary", "tables", "query", "export"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and "Example" in out


def test_summary_of_a_baseline_shows_its_stored_metrics(capsys, sample, tmp_path):
    profile, path = sample
    baseline = tmp_path / "baseline.json"
    assert run(capsys, "baseline", str(path), "-o", str(baseline))[0] == 0
    code, out, _ = run(capsys, "summary", str(baseline), "--format", "json")
    assert code == 0
    memory = json.loads(out)["memory"]
    assert memory["total_incl_gaps_bytes"] == float(profile.tiles["bytes_incl_gaps"].sum())
    assert memory["tiles_out_of_memory"] == 1


def test_summary_of_steps_without_cycles_says_unknown_not_zero(capsys, sample, tmp_path):
    profile, _ = sample
    blind = profile.copy()
    steps = blind.steps.copy()
    steps["cycles"] = pd.array([pd.NA] * len(steps), dtype="Int64")
    blind.set_table("steps", steps)
    path = bundle.write(blind, tmp_path / "blind.popprof")
    code, out, _ = run(capsys, "summary", str(path), "--format", "json")
    assert code == 0
    execution = json.loads(out)["execution"]
    assert execution["total_cycles"] is None and execution["total_time_us"] is None
    assert execution["steps"] == steps["step"].nunique()
    assert all(row["cycles"] is None and row["share"] is None for row in execution["by_category"].values())
    assert execution["top_programs"] and all(
        p["cycles"] is None and p["share"] is None for p in execution["top_programs"]
    )
    code, text, _ = run(capsys, "summary", str(path))
    assert code == 0 and "busiest IPU n/a cycles" in text


def test_a_truncated_trace_reads_with_one_warning_line(capsys, fixtures_dir, tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_bytes((fixtures_dir / "traces" / "training_loop.json").read_bytes()[:4000])
    code, out, err = run(capsys, "summary", str(cut), "--format", "json")
    assert code == 0 and json.loads(out)["trace"]["events"] > 0
    assert (
        err.count("\n") == 1
        and "read with problems: the file ends early: events after the cut are missing" in err
    )
