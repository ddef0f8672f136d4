"""The annotation breakdown in the metric registry (``trace.gpu_annotation_us.<name>``): its members are the
summary's ``trace.gpu_annotations`` rows summed over ranks (and HTA 0.5.0's own sums), computed once per summary;
``diff`` compares them between two real traces, says "not in" (never 0) against a trace without annotations,
and prints long names within 80 columns; ``baseline``, the gate and the store carry them.

Variants of the real traces are written to ``tmp_path`` (the fixture budget is full).
"""

from __future__ import annotations

import gzip
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest

import popprof
import popprof.metrics as registry
from popprof import store as store_api
from popprof.cli import main
from popprof.compare.basis import choose, normalise, totals_notes
from popprof.metrics.summary import summarise
from popprof.report.diff import render_text

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "traces"
REFERENCE = json.loads((REAL / "hta_annotations_reference.json").read_text("utf-8"))
NCCL = REAL / "nccl_data.json.gz"
PREFIX = "trace.gpu_annotation_us."
#: The module (``from popprof.metrics import annotations`` would give the package's ``__future__`` feature).
annotations = importlib.import_module("popprof.metrics.annotations")
ALL_REDUCE = PREFIX + "nccl:all_reduce"


def _members(values: dict) -> dict[str, float]:
    return {k: v for k, v in values.items() if k.startswith(PREFIX)}


def _json(capsys, *args: str) -> dict:
    capsys.readouterr()
    code = main([*args, "--format", "json"])
    assert code in (0, 1)
    return json.loads(capsys.readouterr().out)


def _variant(tmp_path: Path, name: str, change) -> Path:
    """A copy of ``nccl_data`` with its events passed through ``change`` (a list -> list function)."""
    data = json.loads(gzip.decompress(NCCL.read_bytes()))
    data["traceEvents"] = change(data["traceEvents"])
    out = tmp_path / f"{name}.json.gz"
    out.write_bytes(gzip.compress(json.dumps(data).encode()))
    return out


def _gpu_annotation(event: dict) -> bool:
    return event.get("cat") == annotations.GPU_ANNOTATION


def _slower_all_reduce(events: list[dict]) -> list[dict]:
    """The GPU ranges of ``nccl:all_reduce`` twice as long (the rest of the trace as it is)."""
    return [
        dict(e, dur=e["dur"] * 2) if _gpu_annotation(e) and e["name"] == "nccl:all_reduce" else e
        for e in events
    ]


def _without_gpu_annotations(events: list[dict]) -> list[dict]:
    return [e for e in events if not _gpu_annotation(e)]


@pytest.mark.parametrize("run", sorted(REFERENCE["gpu"]))
def test_members_are_the_summary_json_rows_summed_over_ranks(run: str, capsys) -> None:
    """``popprof baseline``'s members equal ``popprof summary --format json``'s ``trace.gpu_annotations`` rows,
    summed per name over ranks (``ProfilerStep#N`` as ``ProfilerStep#*``), the 10 largest (both to the ns)."""
    path = str(REAL / f"{run}.json.gz")
    rows = _json(capsys, "summary", path)["trace"]["gpu_annotations"]
    by_name: dict[str, float] = {}
    for row in rows:
        name = "ProfilerStep#*" if row["name"].startswith("ProfilerStep#") else row["name"]
        by_name[name] = by_name.get(name, 0.0) + row["sum_us"]
    top = sorted(by_name.items(), key=lambda item: (-item[1], item[0]))[:10]
    capsys.readouterr()
    assert main(["baseline", path, "-o", "-"]) == 0
    stored = json.loads(capsys.readouterr().out)["metrics"]
    members = {k[len(PREFIX) :]: v for k, v in stored.items() if k.startswith(PREFIX)}
    assert list(members) == sorted(members)  # the baseline writes its keys sorted (a stable file)
    assert set(members) == {name for name, _ in top}
    for name, total in top:
        assert members[name]["unit"] == "us"
        assert members[name]["value"] == pytest.approx(total, abs=5e-4), name


@pytest.mark.parametrize("run", ["nccl_data", "tracelens_mi300x_normalization", "amd_mi250_minitoy"])
def test_members_are_htas_own_sums(run: str) -> None:
    """Against HTA 0.5.0's rows (one rank each): a member is the sum HTA gives its name."""
    values = _members(registry.compute(popprof.open(REAL / f"{run}.json.gz")))
    hta = {row[1]: row[3] for row in REFERENCE["gpu"][run]}
    steps = {k: v for k, v in hta.items() if k.startswith("ProfilerStep#")}
    expected = {k: v for k, v in hta.items() if k not in steps}
    if steps:
        expected["ProfilerStep#*"] = sum(steps.values())
    assert values == {PREFIX + k: pytest.approx(v, rel=1e-12) for k, v in expected.items()}
    assert len(values) == min(len(expected), annotations.FAMILY_NAMES)


def test_the_summary_builds_the_breakdown_once(monkeypatch) -> None:
    """``popprof summary`` computes the metrics (the family) and the JSON's rows: one breakdown for both."""
    calls = []
    original = annotations.annotation_breakdown

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(annotations, "annotation_breakdown", counted)
    profile = popprof.open(NCCL)
    doc = summarise(profile)
    assert len(doc["trace"]["gpu_annotations"]) == 5
    assert len(calls) == 1
    registry.compute(profile)  # outside a summary: its own scope, its own breakdown
    assert len(calls) == 2


def test_a_trace_without_gpu_annotations_has_no_member() -> None:
    """``two_ranks`` has host annotations only; ``cupti_range_profiler`` none at all."""
    for path in (REAL / "two_ranks", REAL / "cupti_range_profiler.json.gz"):
        values = registry.compute(popprof.open(path))
        assert not _members(values) and values.get("trace.event_count"), path


def test_diff_of_two_real_traces_compares_the_step_member() -> None:
    """Two real traces of one ``ProfilerStep#6`` each: the step member is compared whatever the numbering."""
    result = popprof.diff(
        REAL / "tracelens_h100_bert_small.json.gz", REAL / "tracelens_h100_falconsai_nsfw.json.gz"
    )
    row = result.metrics.set_index("name").loc[PREFIX + "ProfilerStep#*"]
    assert (row["base"], row["new"], row["status"]) == (3907.0, 7559.0, "changed")
    assert bool(row["worse"]) and row["unit"] == "us"


def test_diff_shows_a_slower_annotation_and_the_gate_catches_it(tmp_path: Path, capsys) -> None:
    slower = _variant(tmp_path, "slower", _slower_all_reduce)
    budget = tmp_path / "budget.toml"
    budget.write_text(f'[budgets]\n"{ALL_REDUCE}" = "+10%"\n')
    doc = _json(capsys, "diff", str(NCCL), str(slower), "--budget", str(budget))
    rows = {r["name"]: r for r in doc["metrics"] if r["name"].startswith(PREFIX)}
    assert len(rows) == 5
    changed = rows.pop(ALL_REDUCE)
    assert changed["status"] == "changed" and changed["worse"] is True
    assert changed["base"] == pytest.approx(24216.0) and 1.9 < changed["new"] / changed["base"] < 2.1
    assert {r["status"] for r in rows.values()} == {"unchanged"}  # the other names as they were
    assert [v["metric"] for v in doc["gate"]["violations"]] == [ALL_REDUCE]
    assert not doc["gate"]["passed"]
    new_rows = _json(capsys, "summary", str(slower))["trace"]["gpu_annotations"]
    (mine,) = [r for r in new_rows if r["name"] == "nccl:all_reduce"]
    assert changed["new"] == pytest.approx(mine["sum_us"], abs=5e-4)  # the breakdown's figure, in diff too


@pytest.mark.parametrize("direction", ["base", "new"])
def test_against_a_trace_without_annotations_the_members_are_not_in_it_never_0(
    tmp_path: Path, capsys, direction: str
) -> None:
    bare = _variant(tmp_path, "bare", _without_gpu_annotations)
    sides = [str(NCCL), str(bare)] if direction == "new" else [str(bare), str(NCCL)]
    doc = _json(capsys, "diff", *sides, "--no-gate")
    rows = [r for r in doc["metrics"] if r["name"].startswith(PREFIX)]
    assert len(rows) == 5
    assert {r["status"] for r in rows} == {f"missing_{direction}"}
    assert all(r[direction] is None and r["worse"] is None for r in rows)
    assert not any("do not overlap" in note for note in doc["notes"])
    capsys.readouterr()
    main(["diff", *sides, "--no-gate"])
    text = capsys.readouterr().out
    lines = text.splitlines()
    at = lines.index("  trace.gpu_annotation_us.DistributedDataParallel.forward")  # a line of its own
    assert lines[at + 1].rstrip().endswith(f"not in {direction}") and "0.0 us" not in lines[at + 1]


def test_a_name_one_side_did_not_annotate_is_not_in_it_never_removed_from_0(tmp_path: Path) -> None:
    """The members are a top 10 (a name may be past it on one side): one side without a name is "not in" it,
    while the names both have are compared."""
    fewer = _variant(
        tmp_path,
        "fewer",
        lambda events: [e for e in events if not (_gpu_annotation(e) and e["name"] == "nccl:broadcast")],
    )
    rows = popprof.diff(NCCL, fewer).metrics.set_index("name")
    gone = rows.loc[PREFIX + "nccl:broadcast"]
    assert gone["status"] == "missing_new" and gone["base"] == pytest.approx(81.0) and pd.isna(gone["new"])
    kept = rows.loc[[n for n in rows.index if n.startswith(PREFIX) and not n.endswith("broadcast")]]
    assert len(kept) == 4 and set(kept["status"]) == {"unchanged"}


def test_members_of_different_names_are_each_not_in_the_other_side() -> None:
    """Two real traces that annotated different ranges: no member is compared, none is 0, no note calls it a
    naming difference."""
    result = popprof.diff(NCCL, REAL / "tracelens_mi300x_normalization.json.gz")
    rows = result.metrics[result.metrics["name"].str.startswith(PREFIX)]
    assert len(rows) == 5 + 10
    assert set(rows["status"]) == {"missing_new", "missing_base"}
    assert rows[["base", "new"]].isna().any(axis=1).all()
    assert not [n for n in result.notes if PREFIX in n]


def test_long_names_do_not_widen_the_text_table() -> None:
    """A member's name too long for the room its figures leave is a line of its own (cut to 78 columns): the
    table stays within 80 columns and the other metrics keep their one line each."""
    result = popprof.diff(NCCL, REAL / "tracelens_b200_vllm_eager.json.gz")
    text = render_text(result)
    assert max(len(line) for line in text.splitlines()) <= 80
    lines = text.splitlines()
    one_line = 0
    for name in result.changed_metrics(False)["name"]:  # a short name keeps its figures beside it
        if len(name) <= 20:
            (row,) = [line for line in lines if line.startswith(f"  {name} ")]
            assert len(row.split()) >= 4, row
            one_line += 1
    assert one_line >= 10
    names = [line for line in lines if line.startswith("  " + PREFIX)]
    assert len(names) == 8 and all(len(line) <= 80 for line in names)
    assert "  trace.gpu_annotation_us.## Call CompiledFxGraph fud64jsrx" in text  # the long one, cut
    assert any(line.endswith("...") and len(line) == 80 for line in names)
    assert (
        "trace.gpu_annotation_us.## Call CompiledFxGraph fud64jsrxcxliekg7lptyw24yz5k3oa65b73wjfbhz6j2fg6ouu7 ##"
        in (json.dumps([r.name for r in result.metrics.itertuples()]))
    )


def test_on_a_per_step_basis_the_members_stay_totals_with_a_note() -> None:
    """HTA's window leaves the last step out: the members are never divided by trace.profiler_step_count."""
    base = {"trace.profiler_step_count": 3.0, "trace.span_us": 30.0, ALL_REDUCE: 24216.0}
    new = {"trace.profiler_step_count": 6.0, "trace.span_us": 60.0, ALL_REDUCE: 48432.0}
    bases = choose(base, new)
    assert bases["trace"].per == "profiler step"
    assert normalise(base, bases, "base")[ALL_REDUCE] == 24216.0
    assert normalise(base, bases, "base")["trace.span_us"] == 10.0
    (note,) = totals_notes(bases, base, new)
    assert note.startswith("trace.gpu_annotation_us.* compared as totals, not per profiler step")
    equal = choose({**base, "trace.profiler_step_count": 6.0}, new)
    assert totals_notes(equal, base, new) == []  # as totals anyway: nothing to say
    assert totals_notes(bases, {"trace.span_us": 1.0}, {"trace.span_us": 2.0}) == []


def test_a_baseline_and_the_store_carry_the_members(tmp_path: Path, capsys) -> None:
    slower = _variant(tmp_path, "slower", _slower_all_reduce)
    baseline = tmp_path / "baseline.json"
    assert main(["baseline", str(NCCL), "-o", str(baseline)]) == 0
    stored = json.loads(baseline.read_text("utf-8"))["metrics"]
    assert stored["trace.gpu_annotation_us.## backward ##"]["value"] == pytest.approx(1279.0)
    doc = _json(capsys, "diff", str(baseline), str(NCCL), "--no-gate")
    rows = [r for r in doc["metrics"] if r["name"].startswith(PREFIX)]
    assert len(rows) == 5 and {r["status"] for r in rows} == {"unchanged"}  # read back under the same names
    doc = _json(capsys, "diff", str(baseline), str(slower), "--no-gate")
    (row,) = [r for r in doc["metrics"] if r["name"] == ALL_REDUCE]
    assert row["status"] == "changed" and row["worse"] is True

    store = tmp_path / "store"
    assert main(["store", "init", str(store)]) == 0
    for run, source in (("1", NCCL), ("2", slower)):
        add = ["store", "add", str(store), str(source), "--run-id", run, "--profile", "nccl"]
        assert main([*add, "--time", f"2026-12-0{run}T00:00:00Z"]) == 0
    doc = _json(capsys, "trend", "show", str(store), ALL_REDUCE)
    (series,) = doc["series"]
    assert series["values"][0] == pytest.approx(24216.0)
    assert 1.9 < series["values"][1] / series["values"][0] < 2.1
    history = store_api.open(str(store)).metric(
        "trace.gpu_annotation_us.## backward ##"
    )  # a name with spaces, #
    assert history["run_id"].tolist() == ["1", "2"]
    assert history["value"].tolist() == [pytest.approx(1279.0)] * 2 and set(history["unit"]) == {"us"}
    assert set(history["better"]) == {"lower"}


def test_a_member_on_a_line_of_its_own_lines_up_with_the_header(tmp_path: Path) -> None:
    """The only changed metric a member: its name above, its figures right-aligned under the header's."""
    result = popprof.diff(NCCL, _variant(tmp_path, "slower", _slower_all_reduce))
    lines = render_text(result).splitlines()
    at = lines.index("  " + ALL_REDUCE)
    header, figures = lines[at - 1], lines[at + 1]
    assert header.startswith("  metric ") and figures.strip().endswith("worse")
    for column, value in (("base", "24.22 ms"), ("new", "48.44 ms")):
        assert header.index(f" {column} ") + len(column) + 1 == figures.index(value) + len(value), column


def test_a_rank_directory_sums_its_ranks(tmp_path: Path, capsys) -> None:
    """``nccl_data`` as rank 0 and its slower copy as rank 1 of one directory: a member is the two ranks' sums
    (the summary's rows per rank) added, as the trace's other totals add up over ranks."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    data = json.loads(gzip.decompress(NCCL.read_bytes()))
    (ranks / "rank-0.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    data["traceEvents"] = _slower_all_reduce(data["traceEvents"])
    data["distributedInfo"] = dict(data["distributedInfo"], rank=1)
    (ranks / "rank-1.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    rows = _json(capsys, "summary", str(ranks))["trace"]["gpu_annotations"]
    per_rank = {(r["rank"], r["name"]): r["sum_us"] for r in rows}
    assert {rank for rank, _ in per_rank} == {0, 1} and len(per_rank) == 10
    values = _members(registry.compute(popprof.open(ranks)))
    assert len(values) == 5
    for name in ("nccl:all_reduce", "DistributedDataParallel.forward"):
        assert values[PREFIX + name] == pytest.approx(per_rank[0, name] + per_rank[1, name], abs=1e-3), name
    assert per_rank[1, "nccl:all_reduce"] > 1.9 * per_rank[0, "nccl:all_reduce"]
    assert values[PREFIX + "## backward ##"] == pytest.approx(2 * 1279.0)


def test_htas_others_is_a_member_like_a_name(tmp_path: Path) -> None:
    """More than 1,000 names on a rank: HTA's tail is one row ``others``, and one member when among the 10."""
    data = json.loads(gzip.decompress(NCCL.read_bytes()))
    first = min(
        (e for e in data["traceEvents"] if _gpu_annotation(e) and e["name"] == "nccl:all_reduce"),
        key=lambda e: e["ts"],
    )
    many = [dict(first, name=f"tiny_{i:04d}", dur=3.0) for i in range(1001)]
    path = tmp_path / "many.json.gz"
    path.write_bytes(gzip.compress(json.dumps(dict(data, traceEvents=data["traceEvents"] + many)).encode()))
    profile = popprof.open(path)
    records = annotations.annotation_records(profile)
    (others,) = [r for r in records if r["name"] == annotations.OTHERS]
    assert others["count"] > 100  # the tiny names past HTA's quantile
    values = _members(registry.compute(profile))
    assert len(values) == annotations.FAMILY_NAMES
    assert values[PREFIX + annotations.OTHERS] == others["sum_us"]
    assert values[PREFIX + "nccl:all_reduce"] == pytest.approx(24216.0)
    kept = sorted(k for k in values if k.startswith(PREFIX + "tiny_"))
    assert len(kept) == 10 - 6 and all(values[k] <= others["sum_us"] for k in kept)
