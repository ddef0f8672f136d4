"""The call a CPU sample was inside (``cpu_samples.call``), and the launching thread's on-CPU time in the device's
gaps split by it (``metrics.host_cpu``), on the pipit MPI + CUDA export (``fixtures/real/nsys``).

A thread polling in ``MPI_Recv`` or spinning in a synchronous ``cudaMemcpy`` is on CPU but waiting; the samples'
call stacks tell it from computing. Every count here is recomputed from the export's own tables by SQL.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from trace_helpers import sql_rows

import popprof
from popprof.readers import read_path

NSYS = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "nsys"
SAXPY = NSYS / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
MAIN_TID = 1230493

#: samples with a frame of an MPI or network library, by the frame's module or MPI's API names: SQL's own test,
#: not the package's patterns (the export's libraries: Cray MPICH ``libmpi_nvidia``, libfabric, nsys's MPI
#: interposer ``libToolsInjectionMPICH64`` whose frames are ``MPI_Send``, ...)
_COMMUNICATION_SQL = """
SELECT DISTINCT c.id FROM SAMPLING_CALLCHAINS c
LEFT JOIN StringIds s ON s.id = c.symbol LEFT JOIN StringIds m ON m.id = c.module
WHERE m.value LIKE '%/libmpi%' OR m.value LIKE '%/libfabric%' OR s.value LIKE 'MPI\\_%' ESCAPE '\\'
   OR s.value LIKE 'PMPI\\_%' ESCAPE '\\'
"""
#: samples with a stack inside an NVTX range named ``MPI_...`` of their own thread (nsys's MPI trace), by SQL
_IN_TRACED_MPI_SQL = """
SELECT DISTINCT e.id FROM COMPOSITE_EVENTS e JOIN NVTX_EVENTS n ON n.globalTid = e.globalTid
LEFT JOIN StringIds t ON t.id = n.textId
WHERE COALESCE(n.text, t.value) LIKE 'MPI\\_%' ESCAPE '\\' AND e.start >= n.start AND e.start < n."end"
  AND e.id IN (SELECT id FROM SAMPLING_CALLCHAINS)
"""


@pytest.fixture(scope="module")
def saxpy():
    return read_path(SAXPY)


def test_sample_calls_equal_sql(saxpy) -> None:
    """172 samples inside ``cudaMemcpy`` (its synchronous copies spin in the driver: ``host_wait``), 1,118 in MPI
    or libfabric by their stacks, and 164 more whose stacks name no call but fall inside the thread's traced
    ``MPI_*`` ranges: 1,282 ``communication``; every other sample with a stack ``other``."""
    calls = saxpy.cpu_samples["call"].value_counts(dropna=False).to_dict()
    in_memcpy = {
        i
        for (i,) in sql_rows(
            SAXPY,
            "SELECT DISTINCT c.id FROM SAMPLING_CALLCHAINS c JOIN StringIds s ON s.id = c.symbol "
            "WHERE s.value = 'cudaMemcpy'",
        )
    }
    by_stack = {i for (i,) in sql_rows(SAXPY, _COMMUNICATION_SQL)}
    traced = {i for (i,) in sql_rows(SAXPY, _IN_TRACED_MPI_SQL)}
    ((with_stack,),) = sql_rows(SAXPY, "SELECT count(DISTINCT id) FROM SAMPLING_CALLCHAINS")
    communication = by_stack | traced
    host_wait = in_memcpy - communication
    assert calls == {
        "host_wait": len(host_wait),
        "communication": len(communication),
        "other": with_stack - len(host_wait) - len(communication),
    }
    assert (len(host_wait), len(by_stack), len(traced - by_stack), with_stack) == (172, 1118, 164, 5451)
    assert by_stack <= traced  # every sample whose stack names MPI is inside a traced MPI range


def test_gap_time_split_by_the_samples_calls(saxpy) -> None:
    """In gpu:0's gaps the launching thread is on CPU 100.0 %; of its 3,610 samples there, 830 are in
    communication calls (795 by their stacks, 35 more inside its traced MPI ranges) and 1 in ``cudaMemcpy``:
    23.0 % of the gaps polling in MPI, 77.0 % computing. Each part is the on-CPU time times its share of the
    samples."""
    from popprof.metrics.host_cpu import host_cpu, launchers_in_gaps

    row = host_cpu(saxpy)[0]
    samples = saxpy.cpu_samples
    gaps = _gaps(saxpy)
    ts = samples["ts_us"].to_numpy()
    at = np.searchsorted(gaps[0], ts, side="right") - 1
    in_gap = (at >= 0) & (ts < gaps[1][np.maximum(at, 0)]) & (samples["tid"].to_numpy() == MAIN_TID)
    in_mpi = _in_traced_mpi(saxpy)
    counts = samples["call"][in_gap].value_counts().to_dict()
    assert counts == {"other": 2779, "communication": 830, "host_wait": 1}
    assert int((in_gap & in_mpi).sum()) == 830  # the samples in the gaps inside the traced MPI calls
    on, gaps_us = row["gaps_on_cpu_us"], row["gaps_us"]
    assert row["gaps_communication_us"] == pytest.approx(on * 830 / 3610)
    assert row["gaps_host_wait_us"] == pytest.approx(on * 1 / 3610)
    assert row["gaps_computing_us"] == pytest.approx(on * 2779 / 3610)
    (launcher,) = launchers_in_gaps(saxpy).values()
    assert launcher["on_cpu_parts"]["communication"] == pytest.approx(on * 830 / 3610 / gaps_us)
    assert launcher["on_cpu_parts"]["computing"] == pytest.approx(on * 2779 / 3610 / gaps_us)
    assert launcher["on_cpu_parts"]["communication"] == pytest.approx(0.2299, abs=5e-4)
    assert launcher["on_cpu_parts"]["computing"] == pytest.approx(0.7697, abs=5e-4)


def test_samples_agree_with_the_traced_mpi_calls(saxpy) -> None:
    """Two measures of the same time: the export traces MPI too (NVTX ranges ``MPI_Send``, ``MPI_Recv`` on the
    main thread). The thread's on-CPU time in the gaps inside those ranges (exact interval arithmetic: 173.61
    ms, 24.0 % of the gaps) and the samples' estimate (166.46 ms, 23.0 %) agree within 1.5 points. Every gap
    sample inside the ranges is communication now, so the rest is the sampling itself: inside the ranges the
    sampler took 4.78 samples per ms on CPU, elsewhere in the gaps 5.05 (at 5.05: 877 samples, 24.0 %)."""
    from popprof.metrics.host_cpu import host_cpu
    from popprof.trace.spans import intersect_intervals, merge_intervals

    row = host_cpu(saxpy)[0]
    mpi = _traced_mpi(saxpy)
    assert set(mpi["name"].astype(str)) == {"MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Finalize"}
    ms, me = merge_intervals(mpi["start_us"].to_numpy(), (mpi["start_us"] + mpi["dur_us"]).to_numpy())
    slices = saxpy.cpu_slices[saxpy.cpu_slices["tid"] == MAIN_TID]
    os_, oe = merge_intervals(
        slices["start_us"].to_numpy(), (slices["start_us"] + slices["dur_us"]).to_numpy()
    )
    on_s, on_e = intersect_intervals(*_gaps(saxpy), os_, oe)
    gs, ge = intersect_intervals(on_s, on_e, ms, me)
    traced_us, on_us = float((ge - gs).sum()), float((on_e - on_s).sum())
    traced = traced_us / row["gaps_us"]
    sampled = row["gaps_communication_us"] / row["gaps_us"]
    assert traced == pytest.approx(0.2398, abs=5e-4)
    assert sampled == pytest.approx(0.2299, abs=5e-4)
    assert 0 < traced - sampled < 0.015
    # the samples in the gaps inside and outside the ranges, per ms on CPU there
    ts = saxpy.cpu_samples["ts_us"].to_numpy()
    at = np.searchsorted(gs, ts, side="right") - 1
    inside = (at >= 0) & (ts < ge[np.maximum(at, 0)])
    assert (int(inside.sum()), row["gap_samples"]) == (830, 3610)
    rate_in = 830 / traced_us * 1000
    rate_out = (3610 - 830) / (on_us - traced_us) * 1000
    assert (round(rate_in, 2), round(rate_out, 2)) == (4.78, 5.05)
    # at the rate outside, the ranges would have held 877 samples: the traced share
    expected = traced_us * rate_out / 1000
    assert round(expected) == 877


def test_the_outermost_call_decides(tmp_path: Path) -> None:
    """A ``cudaMemcpy`` called from inside ``MPI_Recv`` (CUDA-aware MPI) is communication: the call the program
    made. A sample with no frame at all has no call (unknown), not ``other``."""
    copy = _copy(tmp_path)
    with sqlite3.connect(copy) as db:
        ((memcpy_symbol,),) = db.execute("SELECT id FROM StringIds WHERE value = 'cudaMemcpy'").fetchall()
        ((sample, depth),) = db.execute(
            "SELECT id, stackDepth FROM SAMPLING_CALLCHAINS WHERE symbol = ? ORDER BY id LIMIT 1",
            (memcpy_symbol,),
        ).fetchall()
        ((recv_symbol,),) = db.execute("SELECT id FROM StringIds WHERE value = 'MPI_Recv'").fetchall()
        for shift, where in ((1000, "stackDepth > ?"), (-999, "stackDepth >= 1000 + ?")):  # no key clash
            db.execute(
                f"UPDATE SAMPLING_CALLCHAINS SET stackDepth = stackDepth + {shift} WHERE id = ? AND {where}",
                (sample, depth),
            )
        db.execute(  # an MPI_Recv frame of another sample, copied above the cudaMemcpy
            "INSERT INTO SAMPLING_CALLCHAINS SELECT ?, symbol, module, kernelMode, thumbCode, unresolved, "
            "specialEntry, originalIP, unwindMethod, ?, symbolName FROM SAMPLING_CALLCHAINS WHERE symbol = ? "
            "LIMIT 1",
            (sample, depth + 1, recv_symbol),
        )
        ((bare,),) = db.execute(
            "SELECT id FROM COMPOSITE_EVENTS WHERE id NOT IN (SELECT id FROM SAMPLING_CALLCHAINS "
            "WHERE symbol = ?) ORDER BY id LIMIT 1",
            (memcpy_symbol,),
        ).fetchall()
        db.execute("DELETE FROM SAMPLING_CALLCHAINS WHERE id = ?", (bare,))
    call = read_path(copy).cpu_samples["call"]
    counts = call.value_counts().to_dict()
    assert (counts["host_wait"], counts["communication"]) == (172 - 1, 1282 + 1)  # the export's, one moved
    assert int(call.isna().sum()) == 1  # the sample without frames


def test_a_traced_mpi_call_is_the_outer_call(saxpy, tmp_path: Path) -> None:
    """Inside a traced ``MPI_*`` range of its own thread a sample with a stack is communication, whatever its stack
    names: the 164 whose stacks name no call (cut below the MPI frame: ``pthread_spin_lock``, addresses without a
    symbol) and a ``cudaMemcpy`` moved inside ``MPI_Recv`` (MPI is the outer call). Nothing else changes; a
    sample without a stack stays missing there; ranges of another thread, or named otherwise, change nothing
    (the gaps' split is then the stacks' alone, 22.0 % communication)."""
    from popprof.metrics.host_cpu import host_cpu

    base = saxpy.cpu_samples["call"].astype(object)
    in_mpi = _in_traced_mpi(saxpy)

    def edited(edit: str, *params: object):
        copy = tmp_path / f"c{len(list(tmp_path.iterdir()))}.sqlite"
        copy.write_bytes(SAXPY.read_bytes())
        with sqlite3.connect(copy) as db:
            db.execute(edit, params)
        return read_path(copy)

    def calls(edit: str, *params: object) -> pd.Series:
        return edited(edit, *params).cpu_samples["call"].astype(object)

    mpi_ranges = (
        "eventType = 59 AND textId IN (SELECT id FROM StringIds WHERE value LIKE 'MPI\\_%' ESCAPE '\\')"
    )
    # the ranges renamed ("halo MPI_Recv") or moved to the next thread: the stacks alone decide
    for edit in (
        f"UPDATE NVTX_EVENTS SET text = 'halo ' || (SELECT value FROM StringIds WHERE id = textId) WHERE {mpi_ranges}",
        f"UPDATE NVTX_EVENTS SET globalTid = globalTid + 1 WHERE {mpi_ranges}",
    ):
        profile = edited(edit)
        stacks = profile.cpu_samples["call"].astype(object)
        changed = (stacks != base).to_numpy()
        assert (base[changed] == "communication").all() and (stacks[changed] == "other").all()
        assert int(changed.sum()) == 164 and not (changed & ~in_mpi).any()
        assert (stacks[in_mpi & ~changed] == "communication").all()  # their stacks name MPI
        # the split as before the ranges decided: 795 of the 3,610 gap samples, 22.0 % of the gaps
        row = host_cpu(profile)[0]
        assert row["gaps_communication_us"] / row["gaps_us"] == pytest.approx(
            row["gaps_on_cpu_us"] * 795 / 3610 / row["gaps_us"]
        )
        assert row["gaps_communication_us"] / row["gaps_us"] == pytest.approx(0.2202, abs=5e-4)
    # a cudaMemcpy sample moved into the first MPI_Recv: communication
    recv = _traced_mpi(saxpy).query("name == 'MPI_Recv'").iloc[0]
    inside_ns = int(recv["start_us"] * 1000) + 1000
    memcpy = "SELECT c.id FROM SAMPLING_CALLCHAINS c JOIN StringIds s ON s.id = c.symbol WHERE s.value = 'cudaMemcpy'"
    moved = calls(
        f"UPDATE COMPOSITE_EVENTS SET start = ? WHERE id = ({memcpy} ORDER BY c.id LIMIT 1)", inside_ns
    )
    assert moved.value_counts().to_dict() == {"other": 3997, "communication": 1283, "host_wait": 171}
    # a sample inside the ranges without frames: missing, not communication
    first = int(np.flatnonzero(in_mpi)[0])
    ts_ns = round(float(saxpy.cpu_samples["ts_us"].iloc[first]) * 1000)
    assert sql_rows(SAXPY, f"SELECT count(*) FROM COMPOSITE_EVENTS WHERE start = {ts_ns}") == [(1,)]
    bare = calls(
        "DELETE FROM SAMPLING_CALLCHAINS WHERE id = (SELECT id FROM COMPOSITE_EVENTS WHERE start = ?)", ts_ns
    )
    assert pd.isna(bare.iloc[first]) and int(bare.isna().sum()) == 1
    assert int((bare == "communication").sum()) == 1281


def test_without_call_stacks_nothing_is_split(tmp_path: Path, capsys) -> None:
    """Samples without call stacks (``SAMPLING_CALLCHAINS`` empty) have no call: the gaps' on-CPU time is not
    split, and the summary says only on CPU and off CPU, as before it could tell."""
    from popprof.cli import main
    from popprof.metrics.host_cpu import GAP_VERDICTS, host_cpu, launchers_in_gaps

    copy = _copy(tmp_path)
    with sqlite3.connect(copy) as db:
        db.execute("DELETE FROM SAMPLING_CALLCHAINS")
    profile = read_path(copy)
    assert profile.cpu_samples["call"].isna().all()
    row = host_cpu(profile)[0]
    assert row["gaps_computing_us"] is None and row["gaps_communication_us"] is None
    (launcher,) = launchers_in_gaps(profile).values()
    assert launcher["on_cpu_parts"] is None
    assert (
        launcher["verdict"] == GAP_VERDICTS["computing"]
    )  # on CPU all the gaps: computing, for want of stacks
    assert main(["-q", "summary", str(copy)]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "on CPU 724.02 ms (100.0 %), off CPU" in flat and "communication calls" not in flat


def test_polling_rank_is_called_waiting_by_every_consumer(tmp_path: Path, capsys) -> None:
    """Where the launching thread polled in MPI for most of the gaps, the verdict is waiting, not computing, and
    the summary's opening, the rule's message and the JSON all say the one verdict (``launchers_in_gaps``). The
    copy renames the program's ``main`` frames ``MPI_Waitall`` (so 2,390 more gap samples are in MPI)."""
    from popprof.cli import main
    from popprof.metrics.host_cpu import GAP_VERDICTS, launchers_in_gaps
    from popprof.rules import RULES
    from popprof.rules.host import WAITING_ADVICE

    device_gaps = RULES["host.device-gaps"]
    copy = _copy(tmp_path)
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE StringIds SET value = 'MPI_Waitall' WHERE value = 'main'")
    profile = read_path(copy)
    (launcher,) = launchers_in_gaps(profile).values()
    assert launcher["on_cpu_parts"]["communication"] > 0.5
    verdict = GAP_VERDICTS["communication"]
    assert launcher["verdict"] == verdict
    assert main(["-q", "summary", str(copy), "--format", "json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["what_limits"]["host_in_gaps"]
    assert entry["verdict"] == verdict
    assert entry["on_cpu_parts"]["communication"] == pytest.approx(launcher["on_cpu_parts"]["communication"])
    assert main(["-q", "summary", str(copy)]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 80
    assert verdict in " ".join(text.split("Top opportunities")[0].split())
    assert main(["-q", "check", str(copy), "--format", "json", "--fail-on", "never"]) == 0
    (gaps,) = [
        f
        for f in json.loads(capsys.readouterr().out)["profiles"][0]["findings"]
        if f["rule_id"] == "host.device-gaps"
    ]
    assert verdict in gaps["message"] and "CPU samples' call stacks" in gaps["message"]
    assert gaps["advice"].startswith(WAITING_ADVICE["communication"])
    assert gaps["advice"].endswith(device_gaps.advice_for("gpu"))


def test_a_computing_launcher_gets_no_waiting_lead(saxpy) -> None:
    """On the real export the launching thread computed in the gaps: no lead of how it waited. Its gaps began as
    its synchronous copies returned, so the advice leads with that (tests/test_gaps_after_waits.py)."""
    from popprof.rules import RULES, check
    from popprof.rules.host import DRAINED_ADVICE, WAITING_ADVICE

    (finding,) = [f for f in check(saxpy) if f.rule_id == "host.device-gaps"]
    assert not any(lead in finding.advice for lead in WAITING_ADVICE.values())
    assert finding.advice == f"{DRAINED_ADVICE} {RULES['host.device-gaps'].advice_for('gpu')}"


def test_bundle_and_redaction_keep_the_calls(saxpy, tmp_path: Path, capsys) -> None:
    """The calls are public words: a bundle and a redacted bundle keep them, so the split is the same."""
    from popprof.cli import main
    from popprof.metrics.host_cpu import host_cpu

    expected = saxpy.cpu_samples["call"].value_counts().to_dict()
    plain, redacted = tmp_path / "p.popprof", tmp_path / "r.popprof"
    assert main(["-q", "export", str(SAXPY), "-o", str(plain)]) == 0
    assert main(["-q", "redact", str(SAXPY), "-o", str(redacted)]) == 0
    capsys.readouterr()
    for path in (plain, redacted):
        back = popprof.open(path)
        assert back.cpu_samples["call"].value_counts().to_dict() == expected
        assert host_cpu(back)[0]["gaps_communication_us"] == pytest.approx(
            host_cpu(saxpy)[0]["gaps_communication_us"]
        )


@pytest.mark.parametrize(
    ("function", "code"),
    [
        ("cudaMemcpy", 1),
        ("cudaStreamSynchronize", 1),
        ("cuMemcpyDtoH_v2", 1),
        ("hipDeviceSynchronize", 1),
        ("cudaMemcpyAsync", 0),
        ("cudaLaunchKernel", 0),
        ("MPI_Recv", 2),
        ("PMPI_Allreduce", 2),
        ("MPIR_Wait_impl", 2),
        ("MPIDI_SHMI_progress", 2),
        ("opal_progress", 2),
        ("ncclAllReduce", 2),
        ("cxip_cq_progress", 2),
        ("ucp_worker_progress", 2),
        ("main", 0),
        ("MPIsolver", 0),
        (None, 0),
    ],
)
def test_function_calls(function, code) -> None:
    from popprof.trace.host_calls import function_calls

    assert function_calls([function]).tolist() == [code]


def test_module_calls() -> None:
    from popprof.trace.host_calls import module_calls

    modules = [
        "/opt/cray/pe/lib64/libmpi_nvidia.so.12.0.0",
        "/opt/cray/libfabric/1.15.2.0/lib64/libfabric.so.1.18.2",
        "libnccl.so.2",
        "/usr/lib64/libcuda.so.525.105.17",
        "/home/user/saxpy-mpi-cuda",
        "libucs.so.0",
        "libmkl_core.so.2",
        None,
    ]
    assert module_calls(modules).tolist() == [2, 2, 2, 0, 0, 2, 0, 0]


@pytest.mark.parametrize(
    ("name", "mpi"),
    [
        ("MPI_Recv", True),
        ("MPI_Comm_rank", True),
        ("PMPI_Allreduce", True),
        ("MPIX_Stream_create", True),
        ("MPI_T_init_thread", True),
        ("MPI Rank 0", False),
        ("MPI_SEND", False),
        ("halo MPI_Recv", False),
        ("saxpy", False),
        (None, False),
    ],
)
def test_mpi_range_names(name, mpi) -> None:
    from popprof.trace.host_calls import mpi_ranges

    assert mpi_ranges(pd.Series(["saxpy", name, "MPI_Send"])).tolist() == [False, mpi, True]


def test_inside_ranges_per_thread() -> None:
    """Ranges ``[start, end)`` of their own thread only, nested or overlapping ones merged."""
    from popprof.trace.host_calls import inside_ranges

    thread = np.array([1, 1, 1, 1, 1, 2, 2, 3])
    ts = np.array([0.0, 10.0, 15.0, 25.0, 30.0, 12.0, 40.0, 12.0])
    # thread 1: [10, 20) with [12, 14) inside it and [18, 25) overlapping; thread 2: [40, 41)
    range_thread = np.array([1, 1, 1, 2])
    start = np.array([10.0, 12.0, 18.0, 40.0])
    end = np.array([20.0, 14.0, 25.0, 41.0])
    got = inside_ranges(thread, ts, range_thread, start, end).tolist()
    assert got == [False, True, True, False, False, False, True, False]


def _traced_mpi(profile):
    """The main thread's NVTX ranges named ``MPI_...`` (the events' ``user_annotation`` rows)."""
    events = profile.events
    return events[
        (events["channel"] == "user_annotation")
        & events["name"].astype(str).str.startswith("MPI_")
        & (events["tid"] == MAIN_TID)
    ]


def _in_traced_mpi(profile) -> np.ndarray:
    """Which samples fall inside one of their thread's ``MPI_...`` ranges, range by range."""
    samples = profile.cpu_samples
    ts, tid = samples["ts_us"].to_numpy(), samples["tid"].to_numpy()
    inside = np.zeros(ts.size, dtype=bool)
    for r in _traced_mpi(profile).itertuples():
        inside |= (tid == r.tid) & (ts >= r.start_us) & (ts < r.start_us + r.dur_us)
    return inside


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "saxpy.sqlite"
    copy.write_bytes(SAXPY.read_bytes())
    return copy


def _gaps(profile) -> tuple[np.ndarray, np.ndarray]:
    from popprof.metrics.gaps import device_gaps
    from popprof.trace.intervals import device_activities

    (activity,) = device_activities(profile, by="device")
    return device_gaps(activity, 0.0)
