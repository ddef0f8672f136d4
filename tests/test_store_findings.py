"""The store keeps each run's findings and time account (``findings`` and ``account``), so ``store query``
asks across runs what ``popprof check`` and ``popprof query ... account`` say of one: the same rules, the
same function, the same rows; older stores without them still query (empty, typed views)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from store_helpers import MK2, ROOT, run

import popprof.store as store
from popprof.metrics.account import COLUMNS as ACCOUNT_COLUMNS
from popprof.metrics.account import PARTS
from popprof.model.errors import UsageError
from popprof.rules.base import plan
from popprof.store.compact import compact, fsck
from popprof.store.judged import rules_hash
from popprof.store.schemas import ACCOUNT_PARTS, schema_of

MK2_V2 = ROOT / "fixtures" / "mk2_training_v2.popprof"
TRACE = ROOT / "fixtures" / "real" / "traces" / "tracelens_h100_bert_small.json.gz"
#: (run id, source); the trace records input shapes, which ``popprof check`` reads for the operator rules
SOURCES = (("r1", MK2), ("r2", MK2_V2), ("r3", TRACE))
KEYS = ("run_id", "profile", "created", "ingest_id", "month")


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("findings") / "store"
    store.init(root)
    for i, (run_id, source) in enumerate(SOURCES):
        store.add(root, [source], run_id=run_id, time=f"2026-0{i + 1}-02T00:00:00Z")
    return root


def _rows(root: Path, sql: str) -> list[dict]:
    return store.open(root).frame(sql).to_dict("records")


def _check_json(capsys, source: Path) -> list[dict]:
    code, out, _ = run(capsys, "check", source, "--format", "json", "--fail-on", "never")
    assert code == 0
    (profile,) = json.loads(out)["profiles"]
    return profile["findings"]


@pytest.mark.parametrize(("run_id", "source"), SOURCES, ids=lambda v: getattr(v, "name", v))
def test_findings_are_what_check_gives_for_each_run(filled: Path, capsys, run_id: str, source: Path) -> None:
    expected = _check_json(capsys, source)
    assert expected, "each of these sources has findings"
    got = _rows(filled, f"SELECT * FROM findings WHERE run_id = '{run_id}' ORDER BY position")
    assert [r["rule_id"] for r in got] == [f["rule_id"] for f in expected]
    assert [r["severity"] for r in got] == [f["severity"] for f in expected]
    assert [r["title"] for r in got] == [f["title"] for f in expected]
    assert [r["figure"] for r in got] == [f["figure"] for f in expected]
    for row, finding in zip(got, expected, strict=True):
        gain = finding["estimated_gain"] or {}
        assert row["gain_value"] == pytest.approx(gain.get("value"), rel=1e-4, abs=1e-3)
        assert row["gain_unit"] == gain.get("unit")
        if finding["share"] is not None:
            assert row["share"] == pytest.approx(finding["share"], rel=1e-6)
    counted = _rows(
        filled,
        f"SELECT rule_id, severity, count(*) AS n FROM findings WHERE run_id = '{run_id}' GROUP BY ALL",
    )
    assert Counter({(r["rule_id"], r["severity"]): r["n"] for r in counted}) == Counter(
        (f["rule_id"], f["severity"]) for f in expected
    )


@pytest.mark.parametrize(("run_id", "source"), SOURCES, ids=lambda v: getattr(v, "name", v))
def test_account_is_what_popprof_query_gives_for_each_run(
    filled: Path, capsys, run_id: str, source: Path
) -> None:
    code, out, _ = run(capsys, "query", source, "SELECT * FROM account", "--format", "json")
    assert code == 0
    expected = json.loads(out)
    got = _rows(filled, f"SELECT * EXCLUDE ({', '.join(KEYS)}) FROM account WHERE run_id = '{run_id}'")
    assert len(got) == len(expected) == 1
    for row, want in zip(got, expected, strict=True):
        assert list(row) == list(want) == ACCOUNT_COLUMNS
        for column, value in want.items():
            if isinstance(value, float):
                assert row[column] == pytest.approx(value, rel=1e-9), column
            elif value is None:
                assert row[column] is None or row[column] != row[column], column  # NULL (NaN in pandas)
            else:
                assert row[column] == value, column


def test_a_trace_recording_shapes_is_judged_with_them_and_stored_without(filled: Path) -> None:
    """``check`` reads a trace's arguments when it records shapes (the operator rules need them): the findings
    are of that read, while the store's tables stay the read without them (content hash, size unchanged)."""
    rules = _rows(filled, "SELECT rule_id FROM findings WHERE run_id = 'r3' ORDER BY position")
    assert "operations.below-roofline" in [r["rule_id"] for r in rules]
    args = _rows(filled, "SELECT count(*) AS n FROM events WHERE run_id = 'r3' AND args IS NOT NULL")
    assert args == [{"n": 0}]


def test_the_question_across_runs_and_the_settings_that_judged_them(filled: Path) -> None:
    since = _rows(
        filled,
        "SELECT min(r.created) AS first, count(*) AS runs FROM findings f JOIN runs r USING (run_id, profile) "
        "WHERE f.rule_id = 'memory.headroom'",
    )
    assert since[0]["runs"] == 2 and str(since[0]["first"]).startswith("2026-01-02")
    errors = _rows(filled, "SELECT DISTINCT run_id FROM findings WHERE severity = 'error' ORDER BY run_id")
    assert [r["run_id"] for r in errors] == ["r1", "r2", "r3"]
    hashes = _rows(filled, "SELECT DISTINCT rules_sha256, popprof_version FROM findings")
    assert len(hashes) == 1 and hashes[0]["rules_sha256"] == rules_hash(None)
    idle = _rows(filled, "SELECT run_id, idle_host / window_us AS share FROM account WHERE device = 'gpu:0'")
    assert [r["run_id"] for r in idle] == ["r3"] and 0 < idle[0]["share"] < 1


def test_the_rule_settings_hash_tells_settings_apart_and_the_config_judges(tmp_path: Path) -> None:
    stricter = {"rules": {"memory.headroom.warning": 0.5, "memory.headroom.error": 0.6}}
    assert rules_hash(None) == rules_hash({}) == rules_hash({"rules": {"fail_on": "warning"}})
    default = plan()[1]["memory.headroom"]["warning"]
    assert rules_hash({"rules": {"memory.headroom.warning": default}}) == rules_hash(
        None
    )  # a default repeated
    assert rules_hash(stricter) != rules_hash(None)
    assert rules_hash({"rules": {"disable": "memory.*"}}) != rules_hash(None)
    root = tmp_path / "store"
    store.init(root)
    store.add(root, [MK2], run_id="default", time="2026-03-01T00:00:00Z")
    store.add(
        root, [MK2], run_id="off", time="2026-03-01T00:00:00Z", config={"rules": {"disable": "memory.*"}}
    )
    rows = _rows(root, "SELECT run_id, rule_id, rules_sha256 FROM findings")
    off = [r for r in rows if r["run_id"] == "off"]
    assert off and not any(r["rule_id"].startswith("memory.") for r in off)
    assert {r["rules_sha256"] for r in off} == {rules_hash({"rules": {"disable": "memory.*"}})}
    assert any(r["rule_id"].startswith("memory.") for r in rows if r["run_id"] == "default")
    # a bad rules table is refused before anything is read or written
    with pytest.raises(UsageError):
        store.add(root, [MK2], run_id="bad", config={"rules": {"no.such-rule.x": 1}})
    assert not _rows(root, "SELECT * FROM runs WHERE run_id = 'bad'")


def test_store_add_reads_the_rules_of_the_nearest_configuration_or_of_config_file(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    (tmp_path / "popprof.toml").write_text('[rules]\ndisable = ["memory.*"]\n')
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "store", "init", "s")[0] == 0
    assert run(capsys, "store", "add", "s", MK2, "--run-id", "1")[0] == 0
    code, out, _ = run(
        capsys, "store", "query", "s", "SELECT DISTINCT rule_id FROM findings", "--format", "json"
    )
    assert (
        code == 0 and json.loads(out) and not any(r["rule_id"].startswith("memory.") for r in json.loads(out))
    )
    # --config FILE instead: here a file turning the host rules off
    (tmp_path / "ci.toml").write_text('[rules]\ndisable = ["host.*"]\n')
    assert run(capsys, "store", "add", "s", MK2, "--run-id", "2", "--config", "ci.toml")[0] == 0
    sql = "SELECT DISTINCT rule_id FROM findings WHERE run_id = '2'"
    code, out, _ = run(capsys, "store", "query", "s", sql, "--format", "json")
    rules = [r["rule_id"] for r in json.loads(out)]
    assert any(r.startswith("memory.") for r in rules) and not any(r.startswith("host.") for r in rules)
    code, _, err = run(capsys, "store", "add", "s", MK2, "--run-id", "3", "--config", "missing.toml")
    assert code == 2 and "config file not found" in err


def test_an_older_store_without_the_kinds_still_queries(filled: Path, tmp_path: Path, capsys) -> None:
    old = tmp_path / "old"
    shutil.copytree(filled, old)
    shutil.rmtree(old / "findings")
    shutil.rmtree(old / "account")
    shutil.rmtree(old / "cache", ignore_errors=True)
    con = store.open(old).duckdb()
    for kind in ("findings", "account"):
        assert con.execute(f"SELECT count(*) FROM {kind}").fetchone() == (0,)
        described = {name: kind_ for name, kind_, *_ in con.execute(f"DESCRIBE {kind}").fetchall()}
        assert list(described) == [f.name for f in schema_of(kind)] + ["month"]
    assert described["window_us"] == "DOUBLE" and described["rank"] == "BIGINT"
    con.close()
    code, out, _ = run(capsys, "store", "query", old, "SELECT rule_id, count(*) FROM findings GROUP BY ALL")
    assert code == 0 and "(no rows)" in out
    assert not [p for p in fsck(old) if p.kind != "pending"]
    # a run of an older store added again is unchanged: it keeps its (absent) findings, nothing is written
    (result,) = store.add(old, [MK2], run_id="r1", time="2026-01-02T00:00:00Z")
    assert result.status == "unchanged" and not (old / "findings").exists()


def test_compaction_keeps_findings_and_account_and_fsck_is_clean(filled: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(filled, copy)
    sql = {
        "findings": "SELECT * EXCLUDE (month) FROM findings ORDER BY run_id, position",
        "account": "SELECT * EXCLUDE (month) FROM account ORDER BY run_id, device",
    }
    before = {kind: _rows(copy, q) for kind, q in sql.items()}
    done = compact(copy, before="2026-04")
    assert done
    for kind, q in sql.items():
        files = sorted(p.name for p in (copy / kind).rglob("*.parquet"))
        assert files and all(name.startswith("compact-") for name in files), kind
        assert json.dumps(_rows(copy, q), default=str) == json.dumps(before[kind], default=str), kind
    assert not fsck(copy)


def test_a_replaced_run_leaves_no_findings_behind(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store.init(root)
    store.add(root, [MK2], run_id="1", time="2026-03-01T00:00:00Z")
    store.add(root, [MK2_V2], run_id="1", profile="mk2_training", time="2026-03-01T00:00:00Z", replace=True)
    assert len(list((root / "findings").rglob("*.parquet"))) == 1
    assert len(list((root / "account").rglob("*.parquet"))) == 1
    assert not fsck(root)
    gains = _rows(root, "SELECT gain_value FROM findings WHERE rule_id = 'exchange.share'")
    assert [round(r["gain_value"], 2) for r in gains] == [2971.29]  # v2's, not the first add's


def test_the_declared_account_parts_are_the_accounts() -> None:
    assert ACCOUNT_PARTS == PARTS
    assert [f.name for f in schema_of("account")][3:-1] == ACCOUNT_COLUMNS


def test_arrow_dataset_hands_off_findings_and_account(filled: Path) -> None:
    s = store.open(filled)
    for kind in ("findings", "account"):
        table = s.arrow_dataset(kind).to_table()
        assert table.schema.names == [f.name for f in schema_of(kind)] + ["month"]
        assert table.num_rows == len(_rows(filled, f"SELECT * FROM {kind}"))


def test_a_damaged_findings_file_is_found_as_any_store_file(filled: Path, tmp_path: Path, capsys) -> None:
    from store_helpers import flip_in_data_page

    copy = tmp_path / "copy"
    shutil.copytree(filled, copy)
    shutil.rmtree(copy / "cache", ignore_errors=True)
    damaged = next((copy / "findings").rglob("*.parquet"))
    flip_in_data_page(damaged, "gain_value")
    assert [p.kind for p in fsck(copy)] == ["damaged"]
    code, _, err = run(capsys, "store", "query", copy, "SELECT count(*) FROM findings")
    assert code == 2 and "damaged store file" in err


def test_an_executor_of_add_spark_judges_with_the_config_it_is_handed(tmp_path: Path) -> None:
    """``add_spark``'s options reach each executor's ``store.add`` (its partition function, run here
    without Spark): the ``[rules]`` given judge the run."""
    from popprof.store.distributed import _add_partition

    root = tmp_path / "store"
    store.init(root)
    options = {"time": "2026-03-01T00:00:00Z", "config": {"rules": {"disable": ["memory.*"]}}}
    (record,) = _add_partition(str(root), options, [str(MK2)])
    assert record["result"]["status"] == "added"
    rows = _rows(root, "SELECT DISTINCT rule_id, rules_sha256 FROM findings")
    assert rows and not any(r["rule_id"].startswith("memory.") for r in rows)
    assert {r["rules_sha256"] for r in rows} == {rules_hash({"rules": {"disable": ["memory.*"]}})}


def test_the_catalogue_tells_a_run_judged_with_no_finding_from_one_never_judged(
    filled: Path, tmp_path: Path
) -> None:
    judged = _rows(
        filled,
        "SELECT r.run_id, json_extract_string(r.manifest, '$.judged.rules_sha256') AS rules, "
        "CAST(json_extract(r.manifest, '$.judged.findings') AS BIGINT) AS n, "
        "(SELECT count(*) FROM findings f WHERE f.run_id = r.run_id) AS rows FROM runs r ORDER BY r.run_id",
    )
    assert [(r["rules"], r["n"]) for r in judged] == [(rules_hash(None), r["rows"]) for r in judged]
    root = tmp_path / "store"
    store.init(root)
    store.add(root, [MK2], run_id="quiet", time="2026-03-01T00:00:00Z", config={"rules": {"disable": "*"}})
    (row,) = _rows(root, "SELECT json_extract(manifest, '$.judged.findings') AS n FROM runs")
    assert str(row["n"]) == "0" and not _rows(root, "SELECT * FROM findings")


def test_a_failing_read_with_arguments_is_a_warning_and_the_plain_read_is_judged(
    tmp_path: Path, monkeypatch
) -> None:
    import popprof.readers as readers
    from popprof.model.errors import InputError

    plain = readers.open_all

    def failing(path, **options):
        if options.get("with_args"):
            raise InputError(path, "no arguments today")
        return plain(path, **options)

    monkeypatch.setattr(readers, "open_all", failing)
    root = tmp_path / "store"
    store.init(root)
    with pytest.warns(UserWarning, match="judged without them"):
        (result,) = store.add(root, [TRACE], run_id="t", time="2026-03-01T00:00:00Z")
    assert result.status == "added"
    rules = [r["rule_id"] for r in _rows(root, "SELECT rule_id FROM findings ORDER BY position")]
    assert rules == ["host.launch-overhead"]  # check --no-shapes's: the operator rule needs the shapes
