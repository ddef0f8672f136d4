"""The other commands' text keeps to the width as ``summary``, ``check`` and ``diff`` do (docs/figures.md,
"How text prints"): piped (``COLUMNS`` unset) no line is wider than 80, and ``COLUMNS=160`` is honoured;
names and prose are cut or wrapped, every figure is kept.

Before: ``tables`` 159 columns (the rocprofv3 MI350 trace's problems line; 137 the pipit Nsight export's
cpu_slices row), ``rules`` 212, ``query`` 516 (a
400-character kernel name of the H100 BERT trace, right-aligned), ``store ls`` 147, ``trend`` 181, ``fleet
ranks`` 119 and ``pilot`` 164 on the real inputs below. Inputs: ``fixtures/real`` (``tests/real_inputs.py``),
the bundled ``fixtures/*.popprof``, and a store made of them in a temporary directory.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from real_inputs import REAL, real_inputs

from popprof.cli import cli
from popprof.pilot.render import MISSING, _rows

FIXTURES = REAL.parent
BUNDLES = sorted(FIXTURES.glob("*.popprof"))
TRACES = REAL / "traces"
#: Inputs with trace events (GPU traces, XPlane, Nsight Systems exports): ``query`` over their names.
EVENT_INPUTS = [p for p in real_inputs() if p.parent.name != "poplar"]
#: A commit hash as CI gives one (40 digits): trend's bisect range of two of them is 82 columns.
COMMIT_OLD, COMMIT_NEW = "1f" * 20, "2e" * 20


def _run(*args: object, columns: str | None = None, code: int = 0) -> str:
    """``popprof ARGS`` as a pipe gets it: stdout, with ``COLUMNS`` unset unless given."""
    result = CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": columns})
    assert result.exit_code == code, result.output
    return result.stdout


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _fits(text: str, width: int = 80) -> None:
    wide = [line for line in text.splitlines() if len(line) > width]
    assert not wide, "\n".join(wide)
    assert not [line for line in text.splitlines() if line != line.rstrip()]  # no trailing blanks in a CI log


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store of real runs: the DLRM run three times, NCCL on a long branch, the H100 BERT trace, and the
    mk2 bundle and its v2 as one series with two 40-digit commits (a change for trend to report)."""
    root = tmp_path_factory.mktemp("width") / "store"
    _run("store", "init", root)
    for day in (1, 2, 3):
        _run(
            "store",
            "add",
            root,
            TRACES / "dlrm_8ranks",
            "--run-id",
            f"dlrm-{day}",
            "--time",
            f"2026-12-0{day}",
        )
    _run(
        "store",
        "add",
        root,
        TRACES / "nccl_data.json.gz",
        "--branch",
        "feature/a-long-branch-name-for-the-width",
    )
    _run("store", "add", root, TRACES / "tracelens_h100_bert_small.json.gz", "--branch", "main")
    for bundle, commit, day in (("mk2_training", COMMIT_OLD, 4), ("mk2_training_v2", COMMIT_NEW, 5)):
        _run(
            "store", "add", root, FIXTURES / f"{bundle}.popprof", "--profile", "mk2", "--commit", commit,
            "--branch", "main", "--time", f"2026-12-0{day}",
        )  # fmt: skip
    return root


# -- tables -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [*real_inputs(), *BUNDLES], ids=lambda p: p.name)
def test_tables_fit_80_columns_and_keep_every_count_and_description(path: Path):
    text = _run("tables", path)
    _fits(text)
    doc = json.loads(_run("tables", path, "--format", "json"))
    flat = _flat(text)
    for tables in doc.values():
        for table, info in tables.items():
            counts = [line for line in text.splitlines() if line.startswith(f"  {table} ")]
            assert len(counts) >= 1 and any(f" {info['rows']:,} row" in line for line in counts), table
            for column, dtype in info["columns"].items():
                assert f"{column} {dtype}" in flat


def test_tables_description_beside_its_count_at_160_columns():
    from popprof.model.schema import TABLES

    path = REAL / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
    wide = _run("tables", path, "--no-columns", columns="160")
    assert 80 < _widest(wide) <= 160
    # the description (127 columns as a row) is on its row's line at 160, wrapped under it at 80
    row = next(line for line in wide.splitlines() if line.startswith("  cpu_slices "))
    assert row.endswith(TABLES["cpu_slices"].row)
    narrow = _run("tables", path, "--no-columns").splitlines()
    at = next(i for i, line in enumerate(narrow) if line.startswith("  cpu_slices "))
    assert not narrow[at].endswith(TABLES["cpu_slices"].row) and narrow[at + 1].startswith(" " * 43)


# -- rules --------------------------------------------------------------------------------------------------


def test_rules_fit_and_keep_every_description_and_parameter():
    text = _run("rules")
    _fits(text)
    rules = json.loads(_run("rules", "--format", "json"))
    flat = _flat(text)
    for rule in rules:
        assert f"{rule['id']}: {_flat(rule['description'])}" in flat
        for key, value in rule["params"].items():
            assert f"  {rule['id']}.{key} = {value}" in text.splitlines()
    wide = _run("rules", columns="160")
    assert 80 < _widest(wide) <= 160
    assert len(wide.splitlines()) < len(text.splitlines())


# -- query --------------------------------------------------------------------------------------------------

NAMES_SQL = (
    "SELECT name, count(*) AS n, sum(dur_us) AS total_us FROM events GROUP BY name "
    "ORDER BY length(name) DESC, name LIMIT 12"
)


@pytest.mark.parametrize("path", EVENT_INPUTS, ids=lambda p: p.name)
def test_query_fits_and_cuts_only_the_names(path: Path):
    text = _run("query", path, NAMES_SQL)
    _fits(text)
    rows = list(csv.DictReader(io.StringIO(_run("query", path, NAMES_SQL, "--format", "csv"))))
    lines = text.splitlines()
    assert lines[0].startswith("name ") or not rows
    for row, line in zip(rows, lines[1:], strict=False):
        shown, n, total = line.rsplit(None, 2)
        assert int(n) == int(row["n"])  # the figures are whole: pandas' format of the sum
        assert float(total) == pytest.approx(float(row["total_us"]), rel=1e-5, abs=1e-3)
        shown = shown.rstrip()
        if not row["name"]:  # a missing name, as pandas shows one
            assert shown in ("None", "NaN", "<NA>")
        elif shown.endswith("..."):
            assert row["name"].startswith(shown[:-3]) and len(row["name"]) > len(shown), (shown, row["name"])
        else:
            assert shown == row["name"].rstrip()
    if any(line.rsplit(None, 2)[0].endswith("...") for line in lines[1 : 1 + len(rows)]):
        assert "a value cut to fit 80 columns" in text


def test_query_of_a_400_character_kernel_name_at_160_columns():
    path = TRACES / "tracelens_h100_bert_small.json.gz"
    wide = _run("query", path, NAMES_SQL, columns="160")
    assert 80 < _widest(wide) <= 160 and "a value cut to fit 160 columns" in wide
    whole = json.loads(_run("query", path, NAMES_SQL, "--format", "json"))
    assert len(whole[0]["name"]) > 400  # the value is whole in JSON


# -- store ls, trend, fleet ---------------------------------------------------------------------------------


def test_store_ls_splits_into_tables_repeating_the_run_id(store: Path):
    text = _run("store", "ls", store)
    _fits(text)
    runs = json.loads(_run("store", "ls", store, "--format", "json"))
    heads = [line for line in text.splitlines() if line.startswith("run_id ")]
    assert len(heads) == 3  # 180 columns as one table: a column joins the first table it fits
    for r in runs:  # every run in every table, each of its values on its line
        lines = [line for line in text.splitlines() if line.startswith(f"{r['run_id']} ")]
        assert len(lines) == len(heads)
        for key in ("profile", "commit", "branch", "kind", "source_format", "month"):
            if r[key] is not None:
                assert any(f" {r[key]}" in line for line in lines), (r["run_id"], key)
    wide = _run("store", "ls", store, columns="160")  # 40-digit commits and a long branch: 180 in one table
    assert 80 < _widest(wide) <= 160
    assert len([line for line in wide.splitlines() if line.startswith("run_id ")]) == 2
    whole = _run("store", "ls", store, columns="200")
    assert len([line for line in whole.splitlines() if line.startswith("run_id ")]) == 1
    assert 160 < _widest(whole) <= 200


def test_trend_wraps_and_abbreviates_a_range_of_40_digit_commits(store: Path):
    metrics = [
        "execution.total_cycles",
        "memory.total_incl_gaps_bytes",
        "trace.device_idle_us",
        "execution.total_time_us",  # explained by the time account under the change
    ]
    text = _run("trend", "show", store, *metrics)
    _fits(text)
    assert "    time account (mean of 1 run before and 1 after):" in text.splitlines()
    doc = json.loads(_run("trend", "show", store, *metrics, "--format", "json"))
    changes = [c for s in doc["series"] for c in s["changes"]]
    assert changes and all(c["bisect_from_commit"] == COMMIT_OLD for c in changes)
    assert _flat(text).count(f"{COMMIT_OLD[:12]}..{COMMIT_NEW[:12]};") == len(changes)
    for s in doc["series"]:
        assert f"{s['metric']} [{s['profile']}]" in text
    wide = _run("trend", "show", store, *metrics, columns="200")
    assert wide.count(f"{COMMIT_OLD}..{COMMIT_NEW};") == len(changes) and _widest(wide) <= 200


@pytest.mark.parametrize("figure", ["late_start", "step_us"])
def test_fleet_ranks_fits(store: Path, figure: str):
    text = _run("fleet", "ranks", store, "--figure", figure)
    _fits(text)
    assert _flat(text).startswith(f"figure: {figure}, ") and "(--figure to change); z > 3.5" in _flat(text)
    wide = _run("fleet", "ranks", store, "--figure", figure, columns="160")
    assert wide.splitlines()[0].endswith("z > 3.5") and _widest(wide) <= 160


# -- scan, pilot --------------------------------------------------------------------------------------------


def test_scan_fits(tmp_path: Path):
    source = TRACES / "hta_simple_add.json.gz"
    redacted = tmp_path / "shared.json.gz"
    CliRunner().invoke(cli, ["redact", str(source), "-o", str(redacted), "-q"], env={"COLUMNS": None})
    text = _run("scan", redacted, "--against", source)
    _fits(text)
    assert text.startswith("leak scan passed (")


PILOTS = [
    (
        FIXTURES / "mk2_training.popprof",
        [TRACES / "dlrm_8ranks", TRACES / "tracelens_h100_bert_small.json.gz"],
    ),
    (REAL / "poplar" / "tutorials_tut6_execution_hw_sdk3.txt", [TRACES / "amd_mi250_minitoy.json.gz"]),
    (FIXTURES / "mk2_training.popprof", [FIXTURES / "pod4_pipeline.popprof"]),
]


@pytest.mark.parametrize("ipu, baselines", PILOTS, ids=lambda p: getattr(p, "name", "+"))
def test_pilot_fits_and_keeps_every_figure(ipu: Path, baselines: list[Path]):
    args = [ipu, *(a for b in baselines for a in ("--baseline", b))]
    text = _run("pilot", *args)
    _fits(text)
    doc = json.loads(_run("pilot", *args, "--format", "json"))
    lines = text.splitlines()
    for label, cells in _rows(doc):  # the name, then its figures on its line or the next
        at = next(i for i, line in enumerate(lines) if line.startswith(label))
        assert all(any(c in line for line in lines) for c in cells if c != MISSING), label
        assert any(line.endswith(f"  {cells[0]}") or f"  {cells[0]}  " in line for line in lines[at : at + 2])
    for c in doc["columns"]:
        for caveat in c["caveats"]:
            assert f"caveat: {_flat(caveat)}" in _flat(text)
    wide = _run("pilot", *args, columns="160")
    assert _widest(wide) <= 160
    table = wide[: wide.index("\nDiagnosis")]
    assert "(1) " not in table and all(f"{c['label']} (" in table for c in doc["columns"])
