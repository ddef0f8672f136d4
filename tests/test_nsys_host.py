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
from trace_helpers import sql_rows

import popprof
from popprof.readers import bundle, read_path

NSYS = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "nsys"
SAXPY = NSYS / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
FUSER = NSYS / "nvfuser_report1.sqlite"


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


def test_slices_per_thread_equalsql_rows(saxpy) -> None:
    slices = saxpy.cpu_slices
    mine = slices.groupby("tid")["dur_us"].agg(["count", "sum"]).reset_index()
    expected = sql_rows(SAXPY, _ON_CPU_SQL)
    assert len(mine) == len(expected) == 8
    for (tid, count, total_us), (e_tid, e_count, e_ns) in zip(
        mine.itertuples(index=False), expected, strict=True
    ):
        assert (tid, count) == (e_tid, e_count)
        assert total_us * 1000 == pytest.approx(e_ns, abs=1e-3)
    # every switch pairs: the 3,238 rows are 1,619 slices
    assert len(slices) * 2 == sql_rows(SAXPY, "SELECT count(*) FROM SCHED_EVENTS")[0][0] == 3238
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


def test_samples_leaf_functions_equalsql_rows(saxpy) -> None:
    samples = saxpy.cpu_samples
    assert len(samples) == 5451 == sql_rows(SAXPY, "SELECT count(*) FROM COMPOSITE_EVENTS")[0][0]
    expected = sql_rows(
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


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of ``[start, end)`` intervals, by hand (a test's few hundred intervals)."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Total overlap of two unions, by hand."""
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def test_gaps_on_and_off_cpu_by_hand(saxpy) -> None:
    """The device's gaps from its kernels and copies (SQL), the main thread's on-CPU time in them from
    SCHED_EVENTS (SQL), intersected by hand, equal the metric's; the gaps are the account's idle time."""
    from popprof.metrics.account import time_account
    from popprof.metrics.host_cpu import gap_off_cpu_share, host_cpu

    work = _union(
        sql_rows(SAXPY, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL')
        + sql_rows(SAXPY, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY')
    )
    gaps = [(e, s) for (_, e), (s, _) in zip(work[:-1], work[1:], strict=True)]
    on_cpu = sql_rows(
        SAXPY,
        "SELECT start, next_start FROM (SELECT start, isSchedIn, "
        "LEAD(start) OVER (ORDER BY start, rowid) AS next_start, LEAD(isSchedIn) OVER (ORDER BY start, rowid) "
        "AS next_in FROM SCHED_EVENTS WHERE globalTid % 16777216 = 1230493) WHERE isSchedIn = 1 AND next_in = 0",
    )
    gaps_ns = sum(e - s for s, e in gaps)
    on_ns = _overlap(gaps, on_cpu)
    rows = host_cpu(saxpy)
    main = rows[0]
    assert (main["tid"], main["device"], main["launches"]) == (1230493, "gpu:0", 20)  # 5 kernels + 15 copies
    assert main["gaps"] == len(gaps) == 19
    assert main["gaps_us"] * 1000 == pytest.approx(gaps_ns, abs=1e-3)
    assert main["gaps_on_cpu_us"] * 1000 == pytest.approx(on_ns, abs=1e-3)
    assert main["gaps_off_cpu_us"] * 1000 == pytest.approx(gaps_ns - on_ns, abs=1e-3)
    assert main["window_us"] * 1000 == pytest.approx(work[-1][1] - work[0][0], abs=1e-3)
    assert main["on_cpu_us"] * 1000 == pytest.approx(_overlap([(work[0][0], work[-1][1])], on_cpu), abs=1e-3)
    account = time_account(saxpy, steps=False).iloc[0]
    idle = account["idle_host"] + account["idle_launch"] + account["idle_other"]
    assert main["gaps_us"] == pytest.approx(idle)
    # the figures of the export: the main thread ran through the device's 724.05 ms of gaps, 31.9 us off CPU
    assert round(main["gaps_us"] / 1000, 2) == 724.05 and round(main["gaps_off_cpu_us"], 1) == 31.9
    assert gap_off_cpu_share(saxpy) == pytest.approx((gaps_ns - on_ns) / gaps_ns)
    # the helper threads: 8 threads, each off CPU for what the main thread is not
    assert len(rows) == 8 and all(r["gaps_us"] == main["gaps_us"] for r in rows)
    assert {r["tid"] for r in rows if r["gaps_on_cpu_us"] == 0} == {
        1230500,
        1230501,
        1230502,
        1230503,
        1230504,
    }


def test_gap_samples_by_hand(saxpy) -> None:
    """The leaf functions sampled in the gaps, counted by SQL over the same gaps."""
    from popprof.metrics.host_cpu import host_cpu

    work = _union(
        sql_rows(SAXPY, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL')
        + sql_rows(SAXPY, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY')
    )
    inside = " OR ".join(
        f"(e.start >= {e} AND e.start < {s})" for (_, e), (s, _) in zip(work[:-1], work[1:], strict=True)
    )
    expected = sql_rows(
        SAXPY,
        "SELECT v.value, count(*) FROM COMPOSITE_EVENTS e JOIN SAMPLING_CALLCHAINS c ON c.id = e.id "
        f"AND c.stackDepth = 0 JOIN StringIds v ON v.id = c.symbol WHERE {inside} "
        "GROUP BY v.value ORDER BY count(*) DESC, v.value LIMIT 3",
    )
    main = host_cpu(saxpy)[0]
    assert [(f["function"], f["samples"]) for f in main["gap_functions"]] == expected
    assert expected[0] == ("main", 2390)


def test_summary_shows_host_threads(capsys) -> None:
    from popprof.cli import main

    assert main(["-q", "summary", str(SAXPY)]) == 0
    out = capsys.readouterr().out
    assert "Host threads in the device's idle gaps" in out
    assert "gpu:0 idle 724.05 ms in 19 gaps" in out
    flat = " ".join(out.split())
    # the parts: the gaps' 3,610 samples, 2,779 computing and 830 in MPI (its stacks or its traced MPI ranges:
    # tests/test_nsys_host_calls.py), times the on-CPU time over the gaps
    on = 724.02 / 724.05
    assert (f"{2779 / 3610 * on:.1%}", f"{830 / 3610 * on:.1%}") == ("77.0%", "23.0%")
    assert (
        "MPI Rank 0 (1230493), 20 launches: on CPU 724.02 ms (100.0 %: computing 77.0 %, in communication calls "
        "23.0 %), off CPU" in flat
    )
    assert "sampled in the gaps: main 66.2 %" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert main(["-q", "summary", str(SAXPY), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = document["trace"]["host_cpu"]
    assert rows[0]["thread"] == "MPI Rank 0 (1230493)" and rows[0]["gap_samples"] == 3610


def test_summary_of_other_export_has_no_host_threads(capsys) -> None:
    from popprof.cli import main
    from popprof.metrics import compute

    assert main(["-q", "summary", str(FUSER)]) == 0
    assert "Host threads" not in capsys.readouterr().out
    assert main(["-q", "summary", str(FUSER), "--format", "json"]) == 0
    assert "host_cpu" not in json.loads(capsys.readouterr().out)["trace"]
    assert compute(read_path(FUSER))["trace.host_gap_off_cpu_share"] is None


def test_redacted_bundle_keeps_the_figures_not_the_names(saxpy, tmp_path: Path, capsys) -> None:
    """``popprof redact`` pseudonymises the sampled functions (public words such as ``main`` stay) and keeps
    every figure of the host threads."""
    from popprof.cli import main
    from popprof.metrics.host_cpu import host_cpu

    out = tmp_path / "saxpy.popprof"
    assert main(["-q", "redact", str(SAXPY), "-o", str(out)]) == 0
    capsys.readouterr()
    back = popprof.open(out)
    functions = set(back.cpu_samples["function"].astype(str))
    assert "std::abs(double)" not in functions and "cxip_cq_progress" not in functions
    mine, theirs = host_cpu(saxpy)[0], host_cpu(back)[0]
    for key in ("gaps", "gaps_us", "gaps_on_cpu_us", "gaps_off_cpu_us", "launches", "gap_samples"):
        assert theirs[key] == mine[key], key
    assert [f["samples"] for f in theirs["gap_functions"]] == [f["samples"] for f in mine["gap_functions"]]


def test_unpaired_switches_are_left_out_and_counted(tmp_path: Path) -> None:
    """A sched-out before any sched-in (the thread ran when the capture began) and a second sched-in in a row
    pair with nothing: left out, counted; the slices around them stay."""
    copy = tmp_path / "r.sqlite"
    copy.write_bytes(SAXPY.read_bytes())
    connection = sqlite3.connect(copy)
    main_tid = 302119224788637
    connection.execute(
        "INSERT INTO SCHED_EVENTS VALUES (5, 3, 0, ?)", (main_tid,)
    )  # before its first sched-in
    connection.execute(
        "INSERT INTO SCHED_EVENTS VALUES (21000, 3, 1, ?)", (main_tid,)
    )  # then 21932 is in too
    connection.commit()
    connection.close()
    profile = read_path(copy)
    assert int(profile.meta["nsys.sched_switches_unpaired"]) == 2
    slices = profile.cpu_slices
    assert len(slices) == 1619
    first = slices.sort_values("start_us").iloc[0]
    assert (first["start_us"], first["cpu"]) == (21.932, 118)  # the later sched-in of the two pairs


def test_device_gaps_finding_says_computing_or_waiting() -> None:
    """``host.device-gaps`` on the pipit export names the launching thread's on-CPU share of the gaps, from the
    metric; without context switches (nvFuser) its message says nothing of it."""
    from popprof.metrics.host_cpu import host_cpu
    from popprof.rules import check

    saxpy = read_path(SAXPY)
    (finding,) = [f for f in check(saxpy) if f.rule_id == "host.device-gaps"]
    main = host_cpu(saxpy)[0]
    on = main["gaps_on_cpu_us"] / main["gaps_us"]
    assert (
        f"launching thread MPI Rank 0 (1230493) was on CPU {on * 100:.1f} % (computing "
        f"{main['gaps_computing_us'] / main['gaps_us'] * 100:.1f} %, in communication calls 23.0 %"
        in finding.message
    )
    assert "mostly computing, not waiting; sampled in main 66.2 %" in finding.message
    assert all("on CPU" not in f.message for f in check(read_path(FUSER)))


def test_what_limits_says_what_the_launching_thread_did_in_the_gaps(tmp_path):
    """ "What limits this run" (text, JSON and the HTML report) names, per device, its launching thread's
    on-CPU share of the device's idle gaps and the verdict the rule ``host.device-gaps`` gives, from the one
    definition (``metrics.host_cpu.launchers_in_gaps``): on the pipit export, MPI Rank 0 on CPU 100.0 %,
    computing (MPI polling and the saxpy loop), not blocked."""
    from click.testing import CliRunner

    from popprof.cli import cli
    from popprof.metrics.host_cpu import GAP_VERDICTS, host_cpu, launchers_in_gaps

    profile = popprof.open(SAXPY)
    first = host_cpu(profile)[0]
    (launcher,) = launchers_in_gaps(profile).values()
    assert launcher["thread"] == first["thread"] == "MPI Rank 0 (1230493)"
    assert launcher["on_cpu_share"] == pytest.approx(first["gaps_on_cpu_us"] / first["gaps_us"])
    assert launcher["verdict"] == GAP_VERDICTS["computing"]
    result = CliRunner().invoke(cli, ["summary", str(SAXPY), "--format", "json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["what_limits"]["host_in_gaps"]
    assert (entry["device"], entry["thread"], entry["verdict"]) == (
        "gpu:0",
        launcher["thread"],
        GAP_VERDICTS["computing"],
    )
    assert entry["gaps_us"] == pytest.approx(first["gaps_us"])
    assert [f["function"] for f in entry["functions"]] == ["main", "std::abs(double)"]
    text = CliRunner().invoke(cli, ["summary", str(SAXPY)]).stdout
    opening = " ".join(text.split("Top opportunities")[0].split())
    assert (
        "Host in gpu:0's idle gaps (724.05 ms): its launching thread MPI Rank 0 (1230493) on CPU 100.0 %"
        in opening
    )
    assert GAP_VERDICTS["computing"] in opening
    findings = CliRunner().invoke(cli, ["check", str(SAXPY), "--format", "json", "--fail-on", "never"]).stdout
    (gaps,) = [
        f for f in json.loads(findings)["profiles"][0]["findings"] if f["rule_id"] == "host.device-gaps"
    ]
    assert GAP_VERDICTS["computing"] in gaps["message"]
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(SAXPY), "--no-plots", "-o", str(out)]).exit_code == 0
    assert (
        "idle gaps (724.05 ms): its launching thread MPI Rank 0 (1230493) on CPU 100.0 %" in out.read_text()
    )


def test_what_limits_has_no_host_note_without_context_switches():
    """The nvFuser export records no context switches: no ``host_in_gaps`` in its "What limits this run"."""
    from popprof.report.explain import explained_summary

    doc = explained_summary(popprof.open(FUSER))
    assert "host_in_gaps" not in (doc.get("what_limits") or {})


def test_report_lists_the_threads_the_summary_shows(tmp_path):
    """The HTML report's "Host threads in the device's idle gaps" table has a row for each thread the text
    summary shows (the launcher, then the threads that ran in the gaps, ``shown_threads``), with its on-CPU
    time in the gaps; other formats have no such table."""
    from click.testing import CliRunner

    from popprof.cli import cli
    from popprof.metrics.host_cpu import host_cpu
    from popprof.report.host_threads import THREADS_SHOWN, shown_threads

    profile = popprof.open(SAXPY)
    (shown,) = shown_threads(host_cpu(profile)).values()
    assert [t["thread"] for t in shown][:1] == ["MPI Rank 0 (1230493)"] and len(shown) == THREADS_SHOWN
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(SAXPY), "--no-plots", "-o", str(out)]).exit_code == 0
    html = out.read_text("utf-8")
    table = html[html.index('<table class="host-threads">') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 1 + len(shown)
    for t in shown:
        assert f"<td>{t['thread']}</td>" in table
    assert "724.02 ms (100.0 %)" in table
    assert CliRunner().invoke(cli, ["report", str(FUSER), "--no-plots", "-o", str(out)]).exit_code == 0
    assert 'class="host-threads"' not in out.read_text("utf-8")
