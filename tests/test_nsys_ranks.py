"""A directory of Nsight Systems SQLite exports (one report per rank) opens as ONE profile with every rank, as a
directory of per-rank Chrome traces does (``popprof/readers/rank_dir.py``).

No real multi-rank set of exports exists here: the directories are built in ``tmp_path`` from copies of the two
real exports (``fixtures/real/nsys``): the pipit MPI + CUDA saxpy, whose main thread nsys named ``MPI Rank 0``,
and nvFuser's matmul test (no MPI). Every figure is checked against reading each file alone and against SQL on
the file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import summary_error
from trace_helpers import sql_rows

import popprof
from popprof.cli import main
from popprof.metrics.devices import device_breakdown
from popprof.model.errors import InputError
from popprof.model.readproblems import problems
from popprof.readers import rank_dir, read_path

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
SAXPY = REAL / "nsys" / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
FUSER = REAL / "nsys" / "nvfuser_report1.sqlite"
CHROME_RANK0 = REAL / "traces" / "two_ranks" / "rank-0.json.gz"
#: the copies of the two-rank directory: the saxpy under a name without a rank (its rank is its MPI Rank 0
#: thread's), nvFuser's with rank 1 in its name
TWO = {"saxpy.sqlite": SAXPY, "report_rank1.sqlite": FUSER}
KERNEL_SQL = 'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL'


def _directory(root: Path, files: dict[str, Path]) -> Path:
    root.mkdir()
    for name, source in files.items():
        shutil.copyfile(source, root / name)
    return root


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Path, popprof.Profile]:
    path = _directory(tmp_path_factory.mktemp("nsys") / "run", TWO)
    profiles = popprof.open_all(path)
    assert list(profiles) == ["run"]
    return path, profiles["run"]


#: the session start the two exports record (TARGET_INFO_SESSION_START_TIME), read with SQL
START_SQL = "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"
#: how far after the saxpy's session the nvFuser copy of ``together`` starts: ranks of one run start together
TOGETHER_NS = 2_500_000_000


@pytest.fixture(scope="module")
def together(tmp_path_factory) -> popprof.Profile:
    """The two exports as ranks of one run: the nvFuser copy's recorded session start set 2.5 s after the saxpy's
    (the real exports were made 18 months apart; only that one value of the copy is changed)."""
    import sqlite3

    path = _directory(tmp_path_factory.mktemp("nsys") / "run", TWO)
    ((saxpy_start,),) = sql_rows(SAXPY, START_SQL)
    with sqlite3.connect(path / "report_rank1.sqlite") as db:
        db.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = ?", (saxpy_start + TOGETHER_NS,))
    return popprof.open_all(path)["run"]


def _without_rank(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.drop(columns="rank").reset_index(drop=True)
    for column in out.columns:
        if isinstance(out[column].dtype, pd.CategoricalDtype):
            out[column] = out[column].astype(str)
    return out


def test_one_profile_with_both_ranks_and_each_ranks_events(two) -> None:
    _, p = two
    ev = p.events
    singles = {0: read_path(SAXPY), 1: read_path(FUSER)}
    assert p.meta["source_format"] == "nsys"
    # the files in their names' natural order (report_rank1 before saxpy), each with its rank
    assert json.loads(p.meta["trace.ranks"]) == [1, 0]
    assert json.loads(p.meta["trace.rank_files"]) == {"0": "saxpy.sqlite", "1": "report_rank1.sqlite"}
    assert json.loads(p.meta["trace.rank_sources"]) == {"0": "thread MPI Rank 0", "1": "file name"}
    assert ev.groupby("rank").size().to_dict() == {r: len(s.events) for r, s in singles.items()}
    for rank, single in singles.items():
        mine = ev[ev["rank"] == rank]
        for column in ("name", "channel", "device"):
            assert mine[column].astype(str).value_counts().to_dict() == (
                single.events[column].astype(str).value_counts().to_dict()
            )
        assert mine["dur_us"].sum() == pytest.approx(single.events["dur_us"].sum(), rel=1e-12)
    # each rank's times move by its session's start after the earliest (the saxpy's, 18 months before
    # nvFuser's: float64 keeps 0.01 us at that distance)
    ((saxpy_start,),) = sql_rows(SAXPY, START_SQL)
    ((fuser_start,),) = sql_rows(FUSER, START_SQL)
    offsets = {0: 0.0, 1: (fuser_start - saxpy_start) / 1000.0}
    assert json.loads(p.meta["nsys.rank_offsets_us"]) == {str(r): o for r, o in offsets.items()}
    assert np.array_equal(
        ev.loc[ev["rank"] == 0, "start_us"].to_numpy(), singles[0].events["start_us"].to_numpy()
    )
    moved = ev.loc[ev["rank"] == 1, "start_us"].to_numpy() - offsets[1]
    assert np.allclose(moved, singles[1].events["start_us"].to_numpy(), rtol=0, atol=0.01)
    # sessions 18 months apart are not one run: said as a read problem
    assert p.meta["warnings.sessions_apart"] == "1"
    assert "likely of another run" in problems(p)["sessions_apart"]


def test_ranks_of_one_run_are_put_on_one_clock(together) -> None:
    p = together
    assert json.loads(p.meta["nsys.rank_offsets_us"]) == {"0": 0.0, "1": TOGETHER_NS / 1000.0}
    assert "warnings.sessions_apart" not in p.meta
    ev = p.events
    for rank, source, offset in ((0, SAXPY, 0.0), (1, FUSER, TOGETHER_NS / 1000.0)):
        single = read_path(source)
        for table, column in (("events", "start_us"), ("cpu_slices", "start_us"), ("cpu_samples", "ts_us")):
            theirs, mine = single.get(table), p.get(table)
            if theirs is None or not len(theirs):
                continue
            mine = mine[mine["rank"] == rank]
            assert np.array_equal(mine[column].to_numpy(), theirs[column].to_numpy() + offset), (table, rank)
    # the first kernel of rank 1 starts 2.5 s (its session's start) plus its own start after rank 0's session
    kernels = ev[(ev["channel"] == "kernel") & (ev["rank"] == 1)]
    ((first_ns,),) = sql_rows(FUSER, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert kernels["start_us"].min() == pytest.approx((TOGETHER_NS + first_ns) / 1000.0, abs=1e-6)


def test_kernels_per_rank_equal_sql_on_each_file(two) -> None:
    _, p = two
    kernels = p.events[p.events["channel"] == "kernel"]
    for rank, source in ((0, SAXPY), (1, FUSER)):
        ((count, total_ns),) = sql_rows(source, KERNEL_SQL)
        mine = kernels[kernels["rank"] == rank]
        assert len(mine) == count and count > 0
        assert mine["dur_us"].sum() == pytest.approx(total_ns / 1000.0, rel=1e-12)


def test_ids_unique_and_nesting_stays_within_a_rank(two) -> None:
    _, p = two
    ev = p.events
    assert ev["event_id"].tolist() == list(range(len(ev)))
    child = ev[ev["parent_id"].notna()]
    assert len(child) > 0
    parents = ev.set_index("event_id").loc[child["parent_id"].astype("int64")]
    assert (parents["rank"].to_numpy() == child["rank"].to_numpy()).all()
    assert (parents["tid"].to_numpy() == child["tid"].to_numpy()).all()


def test_every_table_with_rank_has_the_ranks(two) -> None:
    _, p = two
    with_rank = [t for t in p.table_names if p.get(t) is not None and "rank" in p.get(t).columns]
    assert {"events", "threads", "cpu_slices", "cpu_samples"} <= set(with_rank)
    for table in with_rank:
        assert p.get(table)["rank"].notna().all(), table
    assert set(p.events["rank"]) == set(p.threads["rank"]) == {0, 1}
    # the host tables: only the saxpy (rank 0) traced context switches and CPU samples
    assert set(p.cpu_slices["rank"]) == set(p.cpu_samples["rank"]) == {0}


@pytest.mark.parametrize("table", ["cpu_slices", "cpu_samples"])
def test_host_tables_per_rank_equal_the_single_read(two, table: str) -> None:
    _, p = two
    single = read_path(SAXPY).get(table)
    mine = p.get(table)
    assert len(mine) == len(single) > 0
    pd.testing.assert_frame_equal(_without_rank(mine[mine["rank"] == 0]), _without_rank(single))
    if table == "cpu_samples":
        ((samples,),) = sql_rows(SAXPY, "SELECT count(*) FROM COMPOSITE_EVENTS")
        assert len(mine) == samples


def test_device_table_has_one_row_per_rank_and_device_as_the_single_reads(together) -> None:
    p = together
    table = device_breakdown(p)
    assert list(zip(table["rank"].tolist(), table["device"].astype(str).tolist(), strict=True)) == [
        (0, "gpu:0"),
        (1, "gpu:0"),
    ]
    for rank, source in ((0, SAXPY), (1, FUSER)):
        (single,) = device_breakdown(read_path(source)).to_dict("records")
        mine = table[table["rank"] == rank].iloc[0].to_dict()
        for key, value in single.items():
            if key == "rank":
                continue
            if isinstance(value, float):
                assert mine[key] == pytest.approx(value, rel=1e-9, nan_ok=True), key
            else:
                assert str(mine[key]) == str(value), key


def test_metadata_names_each_file_and_its_nsys_version(two) -> None:
    path, p = two
    files = json.loads(p.meta["source_files"])
    assert [f["name"] for f in files] == ["report_rank1.sqlite", "saxpy.sqlite"]
    versions = {
        name: sql_rows(source, f"SELECT value FROM {table} WHERE name = 'EXPORT_PRODUCT_VERSION'")[0][0]
        for (name, source), table in zip(TWO.items(), ("EXPORT_META_DATA", "META_DATA_EXPORT"), strict=True)
    }
    assert (
        json.loads(p.meta["nsys.version"])
        == versions
        == {
            "saxpy.sqlite": "2022.2.1.31",
            "report_rank1.sqlite": "2024.6.2.25",
        }
    )
    kernels = json.loads(p.meta["nsys.rows"])["CUPTI_ACTIVITY_KIND_KERNEL"]
    assert kernels == sum(
        sql_rows(f, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] for f in TWO.values()
    )
    gpus = json.loads(p.meta["nsys.gpus_by_rank"])
    assert {r: [g["name"] for g in v] for r, v in gpus.items()} == {
        "0": [sql_rows(SAXPY, "SELECT name FROM TARGET_INFO_GPU")[0][0]],
        "1": [sql_rows(FUSER, "SELECT name FROM TARGET_INFO_GPU")[0][0]],
    }
    assert "warnings.rank_given" not in p.meta


def test_summary_tables_and_query_read_the_directory(two, capsys) -> None:
    path, _ = two
    capsys.readouterr()
    assert main(["-q", "summary", str(path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Profile run (nsys)" in text and "2 ranks (0, 1)" in text
    assert "rank 0 gpu:0" in text and "rank 1 gpu:0" in text
    assert main(["tables", str(path)]) == 0
    listing = capsys.readouterr().out
    assert "cpu_slices" in listing and "cpu_samples" in listing
    sql = "SELECT rank, count(*) AS n FROM events GROUP BY 1 ORDER BY 1"
    assert main(["query", str(path), sql, "--format", "csv"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows == ["rank,n", f"0,{len(read_path(SAXPY).events)}", f"1,{len(read_path(FUSER).events)}"]
    assert (
        main(["query", str(path), "SELECT rank, count(*) AS n FROM cpu_slices GROUP BY 1", "--format", "csv"])
        == 0
    )
    assert capsys.readouterr().out.strip().splitlines() == ["rank,n", f"0,{len(read_path(SAXPY).cpu_slices)}"]


def test_read_on_worker_processes_gives_the_same_profile(two, monkeypatch) -> None:
    path, serial = two
    monkeypatch.setattr(rank_dir, "PARALLEL_MIN_BYTES", 0)
    calls: list[int] = []
    real = rank_dir.parallel.map_processes

    def counted(function, jobs, workers):  # noqa: ANN001, ANN202
        calls.append(len(jobs))
        return real(function, jobs, workers)

    monkeypatch.setattr(rank_dir.parallel, "map_processes", counted)
    parallel = popprof.open(path)
    assert calls == [2]
    pd.testing.assert_frame_equal(serial.events, parallel.events)
    pd.testing.assert_frame_equal(serial.cpu_slices, parallel.cpu_slices)


def test_ranks_from_file_names_and_the_lowest_free_rank_in_natural_order(tmp_path: Path) -> None:
    names = ["n_rank-3.sqlite", "n_rank_2.sqlite", "x_9.sqlite", "x_10.sqlite"]
    path = _directory(tmp_path / "d", dict.fromkeys(names, FUSER))
    p = popprof.open(path)
    files = json.loads(p.meta["trace.rank_files"])
    assert {name: int(rank) for rank, name in files.items()} == {
        "n_rank-3.sqlite": 3,
        "n_rank_2.sqlite": 2,
        "x_9.sqlite": 0,
        "x_10.sqlite": 1,
    }
    assert int(p.meta["warnings.rank_given"]) == 2
    assert json.loads(p.meta["trace.rank_sources"]) == {
        "0": "given",
        "1": "given",
        "2": "file name",
        "3": "file name",
    }
    n = len(read_path(FUSER).events)
    assert p.events.groupby("rank").size().to_dict() == {0: n, 1: n, 2: n, 3: n}
    assert p.meta["nsys.version"] == "2024.6.2.25"  # one version: said once


def test_the_mpi_rank_thread_wins_over_the_file_name(tmp_path: Path) -> None:
    path = _directory(tmp_path / "d", {"report_rank5.sqlite": SAXPY, "report_rank1.sqlite": FUSER})
    alone = read_path(path / "report_rank5.sqlite")
    # read alone, an export's events keep the rank of its file name (as before); its MPI rank is recorded
    assert set(alone.events["rank"]) == {5} and alone.meta["nsys.mpi_rank"] == "0"
    p = popprof.open(path)
    assert json.loads(p.meta["trace.rank_files"]) == {"0": "report_rank5.sqlite", "1": "report_rank1.sqlite"}
    for table in ("events", "threads", "cpu_slices", "cpu_samples"):
        assert 5 not in set(p.get(table)["rank"]), table
    assert set(p.cpu_slices["rank"]) == {0}


def test_two_exports_of_one_mpi_rank_are_refused(tmp_path: Path, capsys) -> None:
    """Two copies of the saxpy are two reports of MPI rank 0 whatever their names say: not one run."""
    path = _directory(tmp_path / "d", {"report_rank0.sqlite": SAXPY, "report_rank1.sqlite": SAXPY})
    with pytest.raises(InputError, match="more than one trace of one rank"):
        popprof.open(path)
    line = summary_error(path, capsys)
    assert "report_rank0.sqlite (thread MPI Rank 0), report_rank1.sqlite (thread MPI Rank 0)" in line


def test_a_directory_of_one_export_is_a_one_rank_profile_as_for_chrome(tmp_path: Path) -> None:
    nsys_dir = _directory(tmp_path / "one_nsys", {"report.sqlite": FUSER})
    chrome_dir = _directory(tmp_path / "one_chrome", {"trace.json.gz": CHROME_RANK0})
    (nsys_name,) = popprof.open_all(nsys_dir)
    (chrome_name,) = popprof.open_all(chrome_dir)
    assert (nsys_name, chrome_name) == ("one_nsys", "one_chrome")
    p, single = popprof.open(nsys_dir), read_path(FUSER)
    assert set(p.events["rank"]) == {0} and int(p.meta["warnings.rank_given"]) == 1
    pd.testing.assert_frame_equal(_without_rank(p.events), _without_rank(single.events))
    assert p.meta["nsys.version"] == single.meta["nsys.version"] == "2024.6.2.25"


def test_a_directory_mixing_nsys_and_chrome_is_refused(tmp_path: Path, capsys) -> None:
    path = _directory(tmp_path / "mixed", {"report_rank0.sqlite": FUSER, "rank-1.json.gz": CHROME_RANK0})
    line = summary_error(path, capsys)
    assert "its traces of one kind: it holds Chrome traces and Nsight Systems exports" in line
    assert "report_rank0.sqlite" in line and "rank-1.json.gz" in line


def test_a_single_export_records_its_mpi_rank_and_version() -> None:
    saxpy, fuser = read_path(SAXPY), read_path(FUSER)
    threads = sql_rows(
        SAXPY,
        "SELECT s.value FROM ThreadNames AS t JOIN StringIds AS s ON s.id = t.nameId WHERE s.value LIKE 'MPI%'",
    )
    assert threads == [("MPI Rank 0",)] and saxpy.meta["nsys.mpi_rank"] == "0"
    assert saxpy.events["rank"].isna().all()  # no rank in its name: read alone, as before
    assert "nsys.mpi_rank" not in fuser.meta
    assert (saxpy.meta["nsys.version"], fuser.meta["nsys.version"]) == ("2022.2.1.31", "2024.6.2.25")
