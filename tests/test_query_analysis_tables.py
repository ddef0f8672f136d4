"""The analysis tables of ``popprof query`` (``popprof/analysis_tables.py``): each is the output of the one
function that defines its figures, so SQL over it gives the figures the summary and the rules give; a query
naming none computes none; a table that does not apply is one line and exit 2."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import popprof
from popprof import analysis_tables
from popprof.cli import main
from popprof.metrics.account import run_account
from popprof.metrics.launches import kernel_launches
from popprof.model.errors import UsageError
from popprof.model.schema import TABLES
from popprof.rules import check
from popprof.sql import QueryBudget, run_query

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
SAXPY = ROOT / "real" / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
SIMPLE_ADD = ROOT / "real" / "traces" / "hta_simple_add.json.gz"
BERT = ROOT / "real" / "traces" / "tracelens_h100_bert_small.json.gz"
MK2 = ROOT / "mk2_training.popprof"


@pytest.fixture(scope="module")
def saxpy():
    return popprof.open(SAXPY)


@pytest.fixture(scope="module")
def simple_add():
    return popprof.open(SIMPLE_ADD)


@pytest.fixture(scope="module")
def mk2():
    return popprof.open(MK2)


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_no_analysis_table_shadows_a_raw_table():
    assert not set(analysis_tables.NAMES) & set(TABLES)
    assert list(analysis_tables.analysis_tables()) == list(analysis_tables.NAMES)


def test_drained_gaps_in_sql_are_the_summarys(saxpy):
    """pipit's saxpy: the gaps that began while the host waited are what_limits.drained_gaps' 723.59 ms."""
    drained = popprof.summary(saxpy)["what_limits"]["drained_gaps"]
    result = run_query(
        saxpy,
        "SELECT device, count(*) AS gaps, sum(dur_us) AS drained_us FROM gaps "
        "WHERE after_wait IS NOT NULL GROUP BY device ORDER BY device",
    )
    assert [(d["device"], d["gaps"], d["drained_us"]) for d in drained] == list(
        result.itertuples(index=False, name=None)
    )
    assert round(float(result["drained_us"].sum()) / 1000, 2) == 723.59


def test_gaps_of_the_flagged_devices_are_the_rules_evidence(simple_add):
    """The table holds what host.device-gaps attributes (on every device; its evidence: the flagged ones)."""
    finding = next(f for f in check(simple_add).items if f.rule_id == "host.device-gaps")
    evidence = finding.evidence
    table = run_query(simple_add, "SELECT * FROM gaps ORDER BY rank, device, gap")
    assert len(table) == len(evidence) == 23
    assert table["dur_us"].tolist() == evidence["dur_us"].tolist()
    assert table["start_us"].tolist() == evidence["start_us"].tolist()
    assert (
        table["after_wait"].fillna("").tolist() == evidence["after_wait"].astype(object).fillna("").tolist()
    )
    assert list(table.columns) == list(analysis_tables.analysis_tables()["gaps"].columns)


def test_the_rules_settings_shape_gaps_and_findings(simple_add):
    """The gaps are the rule's with its configured min_gap_us; each configuration is its own cached table."""
    config = {"rules": {"host.device-gaps.min_gap_us": 5000}}
    finding = next(f for f in check(simple_add, config=config).items if f.rule_id == "host.device-gaps")
    table = popprof.query(simple_add, "SELECT dur_us FROM gaps ORDER BY device, gap", config=config)
    assert table["dur_us"].tolist() == finding.evidence["dur_us"].tolist()
    assert len(table) < len(popprof.query(simple_add, "SELECT * FROM gaps"))
    quiet = {"rules": {"disable": ["host.*"]}}
    rules = popprof.query(simple_add, "SELECT rule_id FROM findings", config=quiet)["rule_id"].tolist()
    assert rules == [f.rule_id for f in check(simple_add, config=quiet).items]
    assert not any(r.startswith("host.") for r in rules)


def test_a_join_of_gaps_and_events(saxpy):
    """Each drained gap began inside the blocking call it names: the events table has that call across it."""
    result = run_query(
        saxpy,
        "SELECT g.gap, count(e.event_id) AS calls FROM gaps g JOIN events e "
        "ON e.name = g.after_wait AND e.start_us <= g.start_us AND e.start_us + e.dur_us > g.start_us "
        "GROUP BY g.gap ORDER BY g.gap",
    )
    assert result["gap"].tolist() == [0, 1, 2, 3]
    assert (result["calls"] >= 1).all()


@pytest.mark.parametrize("which", ["saxpy", "simple_add", "mk2"])
def test_the_account_table_is_the_account(which, request):
    profile = request.getfixturevalue(which)
    devices = popprof.summary(profile)["what_limits"]["devices"]
    table = run_query(profile, "SELECT device, window_us FROM account ORDER BY rank, device")
    assert table["window_us"].tolist() == [d["window_us"] for d in devices]
    account = run_account(profile)
    parts = run_query(profile, "SELECT compute, idle FROM account")
    assert parts["compute"].tolist() == account["compute"].tolist()
    if which == "mk2":  # the IPU's parts; the GPU's are NULL
        assert parts["idle"].tolist() == account["idle"].tolist()
        assert run_query(profile, "SELECT count(*) AS n FROM account WHERE idle_host IS NULL")["n"][0] == 1


def test_launches_are_htas_launch_statistics(simple_add):
    launches = kernel_launches(simple_add)
    result = run_query(
        simple_add,
        "SELECT count(*) AS n, sum(launch_delay_us) AS delay, count(*) FILTER (WHERE short) AS short FROM launches",
    )
    overview = popprof.summary(simple_add)["launches"]
    assert result["n"][0] == len(launches) == overview["count"]
    assert result["delay"][0] == pytest.approx(float(launches["launch_delay_us"].sum()), abs=1e-9)
    assert result["short"][0] == overview["short_count"]


def test_operators_are_the_summarys_operations(capsys):
    """Shapes read as the summary reads them (the CLI reads the events' arguments when an analysis is named)."""
    code, out, _ = run(capsys, "summary", str(BERT), "--format", "json")
    assert code == 0
    operations = json.loads(out)["operations"]
    code, out, err = run(capsys, "query", str(BERT), "SELECT * FROM operators", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) >= len(operations) > 3
    for row, op in zip(rows, operations, strict=False):
        assert row["input_shapes"] is not None or op["input_shapes"] is None
        row["input_shapes"] = None if row["input_shapes"] is None else json.loads(row["input_shapes"])
        figures = ("device_time_us", "flops_per_call", "bytes_per_call", "tflops", "tbps")
        assert {k: v for k, v in row.items() if k not in figures} == {
            k: v for k, v in op.items() if k not in figures
        }
        for key in figures:  # the query's JSON writes 10 decimals
            assert row[key] == (None if op[key] is None else pytest.approx(op[key], rel=1e-9, abs=1e-9))
    assert any(op["tflops"] for op in operations)


def test_the_events_arguments_are_read_only_for_a_query_naming_an_analysis(capsys):
    """A name in a string is no table: the events are read as for any raw query (without their args)."""
    columns = {}
    for sql in ("SELECT * FROM events LIMIT 1", "SELECT 'gaps' AS w, * FROM events LIMIT 1"):
        code, out, err = run(capsys, "query", str(BERT), sql, "--format", "json")
        assert code == 0, err
        columns[sql] = set(json.loads(out)[0]) - {"w"}
    assert len({frozenset(c) for c in columns.values()}) == 1
    assert "args" not in columns["SELECT * FROM events LIMIT 1"]


@pytest.mark.parametrize("which", ["simple_add", "mk2"])
def test_findings_are_checks(which, request):
    profile = request.getfixturevalue(which)
    items = [f.to_dict() for f in check(profile).items]
    table = run_query(profile, "SELECT * FROM findings ORDER BY position")
    assert table["rule_id"].tolist() == [f["rule_id"] for f in items]
    gains = [(f["estimated_gain"] or {}).get("value") for f in items]
    assert [None if v != v else v for v in table["gain_value"].tolist()] == gains
    assert table["share"].fillna(-1).tolist() == [-1 if f["share"] is None else f["share"] for f in items]


def test_a_query_naming_no_analysis_table_computes_none(saxpy, monkeypatch):
    built: list[str] = []
    original = analysis_tables.build

    def counting(profile, name, config=None):
        built.append(name)
        return original(profile, name, config)

    monkeypatch.setattr(analysis_tables, "build", counting)
    for sql in (
        "SELECT count(*) FROM events",
        "SELECT 'gaps, account' AS words -- FROM findings",
        "WITH gaps AS (SELECT 1 AS x) SELECT * FROM gaps",
        "SELECT count(*) FROM threads",
    ):
        run_query(saxpy, sql)
    assert built == []
    run_query(saxpy, "SELECT count(*) FROM gaps g JOIN account a USING (device)")
    assert sorted(built) == ["account", "gaps"]


def test_the_analyses_count_within_the_deadline(saxpy, monkeypatch):
    """A query whose time has run out computes no analysis: the timeout's one line instead."""
    built: list[str] = []
    monkeypatch.setattr(analysis_tables, "build", lambda p, n, c=None: built.append(n))
    late = QueryBudget(timeout_s=1.0, started=time.monotonic() - 10)
    with pytest.raises(UsageError, match="query-seconds"):
        run_query(saxpy, "SELECT * FROM findings", budget=late)
    assert built == []


@pytest.mark.parametrize("table", ["gaps", "launches", "operators"])
def test_a_table_that_does_not_apply_is_one_line_and_exit_2(table, capsys):
    code, out, err = run(capsys, "query", str(MK2), f"SELECT * FROM {table}")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert f"analysis table {table} does not apply to mk2_training" in lines[0]
    assert "Traceback" not in err


def test_tables_lists_the_analysis_tables(capsys):
    code, out, _ = run(capsys, "tables", str(MK2))
    assert code == 0
    section = out[out.index("analysis tables (computed when a query names them)") :]
    for name, table in analysis_tables.analysis_tables().items():
        assert f"  {name} " in section
        assert table.columns[-1] in section
    assert max(len(line) for line in out.splitlines()) <= 80


def test_describe_gives_the_declared_columns(simple_add):
    for name, table in analysis_tables.analysis_tables().items():
        described = run_query(simple_add, f"DESCRIBE {name}")
        assert tuple(described["column_name"]) == table.columns, name


def test_gaps_no_rule_can_judge_say_the_rules_reason(capsys):
    """A TPU's XLA ops have no recorded launches: host.device-gaps is not evaluated, and the table says why."""
    tpu = ROOT / "real" / "xplane" / "xprof_tpu_v6e_inference.xplane.pb"
    code, out, err = run(capsys, "query", str(tpu), "SELECT * FROM gaps")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "analysis table gaps does not apply" in err and "needs the launches of the device's work" in err
    code, out, err = run(capsys, "query", str(tpu), "SELECT count(*) AS n FROM operators", "--format", "csv")
    assert code == 0 and int(out.split()[1]) > 0, err  # the TPU's HLO ops


def test_a_query_shows_every_missing_value_as_null(capsys) -> None:
    """A SQL result shows a missing value as NULL whatever its column's type: pandas printed a missing text as
    ``None`` or ``NaN`` (by how it was made), a nullable integer as ``<NA>`` and a float as ``NaN``, in one
    table. Numbers stay right-aligned, text left-aligned."""
    sql = (
        "SELECT name, device, parent_id, NULL::DOUBLE AS d, NULL::BOOLEAN AS b FROM events "
        "WHERE device IS NULL AND parent_id IS NOT NULL ORDER BY event_id LIMIT 1"
    )
    assert main(["query", str(SIMPLE_ADD), sql]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["name", "device", "parent_id", "d", "b"]
    assert out[1].split()[1:] == ["NULL", out[1].split()[2], "NULL", "NULL"]
    assert out[1].split()[2].isdigit()
    assert "NaN" not in out[1] and "None" not in out[1] and "<NA>" not in out[1]
    grouped = "SELECT after_wait, count(*) AS n FROM gaps GROUP BY ALL ORDER BY n DESC"
    assert main(["query", str(SIMPLE_ADD), grouped]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == [["NULL", "13"], ["cudaStreamSynchronize", "6"], ["cudaDeviceSynchronize", "4"]]
    # right-aligned numbers: the integer column's values end where its name ends
    head, first = out[0], out[1]
    assert first.index(out[1].split()[2]) + len(out[1].split()[2]) == head.index("parent_id") + len(
        "parent_id"
    )
