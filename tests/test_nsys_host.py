"""What the host threads did, from Nsight Systems' context switches and CPU samples, on the real pipit export.

``cpu_slices`` (``SCHED_EVENTS``) and ``cpu_samples`` (``COMPOSITE_EVENTS`` + ``SAMPLING_CALLCHAINS``) are
checked against the database's own figures by SQL written here, independently of the reader's query; the
nvFuser export (no context switches, no samples) reads as before.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import summary_error

import popprof
from popprof.readers import bundle, read_path

NSYS = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "nsys"
SAXPY = NSYS / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
FUSER = NSYS / "nvfuser_report1.sqlite"


def _sql(path: Path, query: str) -> list[tuple]:
    connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def saxpy():
    return read_path(SAXPY)


#: per thread, the on-CPU time: each sched-in to the next switch of the same thread when that is a sched-out
_ON_CPU_SQL = """
WITH ordered AS (
    SELECT globalTid, start, isSchedIn,
           LEAD(start) OVER (PARTITION BY globalTid ORDER BY start, rowid) AS next_start,
           LEAD(isSchedIn) OVER (PARTITION BY globalTid ORDER BY start, rowid) AS next_in
    FROM SCHED_EVENTS
)
SELECT globalTid % 16777216 AS tid, count(*), sum(next_start - start)
FROM ordered WHERE isSchedIn = 1 AND next_in = 0
GROUP BY globalTid ORDER BY tid
"""


def test_slices_per_thread_equal_sql(saxpy) -> None:
    slices = saxpy.cpu_slices
    mine = slices.groupby("tid")["dur_us"].agg(["count", "sum"]).reset_index()
    expected = _sql(SAXPY, _ON_CPU_SQL)
    assert len(mine) == len(expected) == 8
    for (tid, count, total_us), (e_tid, e_count, e_ns) in zip(
        mine.itertuples(index=False), expected, strict=True
    ):
        assert (tid, count) == (e_tid, e_count)
        assert total_us * 1000 == pytest.approx(e_ns, abs=1e-3)
    # every switch pairs: the 3,238 rows are 1,619 slices
    assert len(slices) * 2 == _sql(SAXPY, "SELECT count(*) FROM SCHED_EVENTS")[0][0] == 3238
    assert "nsys.sched_switches_unpaired" not in saxpy.meta
    assert (slices["pid"] == 1230493).all() and (slices["dur_us"] > 0).all()
    main = slices[slices["tid"] == 1230493]
    assert main["dur_us"].sum() == pytest.approx(1_900_723.471)
    # no slice of a thread overlaps its next one
    for _, thread in slices.sort_values(["tid", "start_us"]).groupby("tid"):
        ends = (thread["start_us"] + thread["dur_us"]).to_numpy()
        assert (thread["start_us"].to_numpy()[1:] >= ends[:-1]).all()


def test_slices_keep_the_cpu(saxpy) -> None:
    first = saxpy.cpu_slices.sort_values("start_us").iloc[0]
    assert (first["start_us"], first["dur_us"], first["cpu"]) == (21.932, (183273 - 21932) / 1000, 118)


def test_samples_leaf_functions_equal_sql(saxpy) -> None:
    samples = saxpy.cpu_samples
    assert len(samples) == 5451 == _sql(SAXPY, "SELECT count(*) FROM COMPOSITE_EVENTS")[0][0]
    expected = _sql(
        SAXPY,
        "SELECT s.value, count(*) FROM COMPOSITE_EVENTS e JOIN SAMPLING_CALLCHAINS c "
        "ON c.id = e.id AND c.stackDepth = 0 JOIN StringIds s ON s.id = c.symbol "
        "GROUP BY s.value ORDER BY count(*) DESC, s.value LIMIT 5",
    )
    counts = samples["function"].value_counts()
    mine = sorted(((str(k), int(v)) for k, v in counts.items()), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert mine == expected
    assert mine[0] == ("main", 2980)
    assert (samples["tid"] == 1230493).all()
    assert np.all(np.diff(samples["ts_us"].to_numpy()) >= 0)


def test_tables_no_longer_unread(saxpy) -> None:
    unread = json.loads(saxpy.meta.get("nsys.unread_tables", "{}"))
    assert "SCHED_EVENTS" not in unread and "COMPOSITE_EVENTS" not in unread
    rows = json.loads(saxpy.meta["nsys.rows"])
    assert rows["SCHED_EVENTS"] == 3238 and rows["COMPOSITE_EVENTS"] == 5451


def test_other_export_unchanged() -> None:
    fuser = read_path(FUSER)
    assert fuser.table_names == ["target", "events", "threads", "metadata"]
    assert not fuser.has("cpu_slices") and fuser.get("cpu_samples") is None
    with pytest.raises(popprof.MissingTableError, match="context switches"):
        fuser.table("cpu_slices")


def test_bundle_round_trips_the_host_tables(saxpy, tmp_path: Path) -> None:
    back = popprof.open(bundle.write(saxpy, tmp_path / "saxpy.popprof"))
    for name in ("cpu_slices", "cpu_samples"):
        pd.testing.assert_frame_equal(back[name], saxpy[name], check_exact=True, obj=name)


def test_sched_without_columns_is_left_out(tmp_path: Path) -> None:
    """An export whose SCHED_EVENTS lacks a column nsys writes reads without the table, not an error."""
    copy = tmp_path / "r.sqlite"
    copy.write_bytes(SAXPY.read_bytes())
    connection = sqlite3.connect(copy)
    connection.execute("ALTER TABLE SCHED_EVENTS RENAME COLUMN isSchedIn TO other")
    connection.commit()
    connection.close()
    profile = read_path(copy)
    assert not profile.has("cpu_slices") and profile.has("cpu_samples")


def test_sched_bad_values_is_one_line(tmp_path: Path, capsys) -> None:
    """A context switch with no time is one error line, no traceback."""
    copy = tmp_path / "bad.sqlite"
    copy.write_bytes(SAXPY.read_bytes())
    connection = sqlite3.connect(copy)
    connection.execute("CREATE TABLE s2 AS SELECT * FROM SCHED_EVENTS")
    connection.execute("DROP TABLE SCHED_EVENTS")
    connection.execute(
        "CREATE TABLE SCHED_EVENTS (start INTEGER, cpu INTEGER, isSchedIn INTEGER, globalTid INTEGER)"
    )
    connection.execute("INSERT INTO SCHED_EVENTS SELECT * FROM s2")
    connection.execute("INSERT INTO SCHED_EVENTS VALUES (NULL, 1, 1, 302119224788637)")
    connection.commit()
    connection.close()
    assert "SCHED_EVENTS" in summary_error(copy, capsys)
