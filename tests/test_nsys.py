"""The Nsight Systems SQLite reader (``popprof.readers.nsys``) on two real exports, checked against the
databases' own figures by SQL (``fixtures/real/nsys/README.md`` for their provenance):

- ``pipit_saxpy_mpi_cuda_perlmutter.sqlite`` (hpcgroup/pipit's test data: MPI + CUDA saxpy on Perlmutter, an
  older nsys schema with ``EXPORT_META_DATA`` and no ``ENUM_*`` tables);
- ``nvfuser_report1.sqlite`` (NVIDIA/Fuser: a matmul test on an H200, a newer schema with the ``ENUM_*`` tables).

Per kernel name the count and summed duration, the runtime calls, the NVTX ranges and the copies' bytes equal
the SQL's; kernels join their launch calls by correlation; the CLI reads both; bad input is one line, exit 2.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import summary_error
from trace_helpers import sql_rows

from popprof.cli import main
from popprof.metrics.copies import copy_kinds
from popprof.readers import detect, read_path

NSYS = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "nsys"
SAXPY = NSYS / "pipit_saxpy_mpi_cuda_perlmutter.sqlite"
FUSER = NSYS / "nvfuser_report1.sqlite"
FILES = [SAXPY, FUSER]
#: the figures the brief gives for each file: kernels, runtime calls, NVTX rows, copies, memsets
ROWS = {SAXPY: (5, 95, 24, 15, 0), FUSER: (19, 968, 652, 1, 1)}


#: a runtime row that is not the backtrace twin (eventClass 67) of another row with its correlationId
_NOT_TWIN = (
    "NOT (t.eventClass = 67 AND EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME u "
    "WHERE u.correlationId = t.correlationId AND u.eventClass <> 67))"
)


@pytest.fixture(scope="module", params=FILES, ids=lambda p: p.stem)
def case(request):
    return request.param, read_path(request.param)


def test_detected_by_content() -> None:
    for path in FILES:
        assert detect(path).FORMAT == "nsys"


def test_kernels_per_name_equalsql_rows(case) -> None:
    path, profile = case
    events = profile.events
    kernels = events[events["channel"] == "kernel"]
    expected = sql_rows(
        path,
        'SELECT COALESCE(d.value, s.value), count(*), sum(k."end" - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k '
        "LEFT JOIN StringIds d ON d.id = k.demangledName LEFT JOIN StringIds s ON s.id = k.shortName GROUP BY 1",
    )
    got = kernels.groupby("name", observed=True)["dur_us"].agg(["count", "sum"])
    assert len(kernels) == ROWS[path][0] == sum(n for _, n, _ in expected)
    for name, count, total_ns in expected:
        assert got.loc[name, "count"] == count
        assert got.loc[name, "sum"] == pytest.approx(total_ns / 1000.0, rel=1e-12)
    assert (kernels["device"].astype(str) == "gpu:0").all() and kernels["stream"].notna().all()
    assert (kernels["device_category"] == "compute").all()


def test_times_keep_nanoseconds(case) -> None:
    path, profile = case
    first = sql_rows(path, "SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    kernels = profile.events[profile.events["channel"] == "kernel"]
    assert kernels["start_us"].min() == first / 1000.0


def test_runtime_and_nvtx_counts(case) -> None:
    path, profile = case
    events = profile.events
    host = events[events["channel"].isin(["cuda_runtime", "cuda_driver"])]
    assert sql_rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0] == ROWS[path][1]
    # older nsys (saxpy) records a call it took a backtrace of twice: once more under eventClass 67
    calls = sql_rows(path, f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME t WHERE {_NOT_TWIN}")[0][0]
    assert len(host) == calls == {SAXPY: 57, FUSER: 968}[path]
    assert int(profile.meta.get("nsys.backtrace_twins_left_out", 0)) == ROWS[path][1] - calls
    assert host["device"].isna().all() and host["correlation"].notna().all()
    assert not host["name"].astype(str).str.contains(r"_v\d{4,}$").any()  # nsys's version suffix is dropped
    ranges = sql_rows(
        path, 'SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70) AND "end" IS NOT NULL'
    )
    nvtx = events[events["channel"] == "user_annotation"]
    assert len(nvtx) == ranges[0][0] and ranges[0][0] <= ROWS[path][2]
    assert not nvtx["name"].astype(str).str.startswith("(unnamed").any()  # text or textId named every one
    pid = sql_rows(path, "SELECT DISTINCT (globalTid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    assert set(host["pid"].unique().tolist()) == {p for (p,) in pid}


def test_copies_named_and_bytes(case) -> None:
    path, profile = case
    events = profile.events
    copies = events[events["channel"] == "gpu_memcpy"]
    memsets = events[events["channel"] == "gpu_memset"]
    assert (len(copies), len(memsets)) == ROWS[path][3:]
    if path == SAXPY:  # pageable host memory (srcKind/dstKind 0) to and from the device
        assert set(copies["name"].astype(str)) == {
            "Memcpy HtoD (Pageable -> Device)",
            "Memcpy DtoH (Device -> Pageable)",
        }
    else:
        assert copies["name"].astype(str).tolist() == ["Memcpy DtoH (Device -> Pinned)"]
        assert memsets["name"].astype(str).tolist() == ["Memset (Device)"]
        enum = dict(sql_rows(path, "SELECT id, label FROM ENUM_CUDA_MEM_KIND"))
        assert (enum[0], enum[1], enum[2]) == ("Pageable", "Pinned", "Device")
    kinds = copy_kinds(profile)
    total = sql_rows(path, "SELECT COALESCE(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0]
    total += sql_rows(path, "SELECT COALESCE(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMSET")[0][0]
    assert kinds["bytes"].sum() == total
    assert kinds["count"].sum() == len(copies) + len(memsets)


def test_kernels_join_their_launch_calls(case) -> None:
    path, profile = case
    events = profile.events
    device = events[events["device"].notna()]
    calls = events[events["channel"].isin(["cuda_runtime", "cuda_driver"])]
    joined = device.merge(calls, on="correlation", suffixes=("", "_call"))
    expected = sql_rows(
        path,
        "SELECT count(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
        "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
        "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET) d JOIN CUPTI_ACTIVITY_KIND_RUNTIME t "
        f"USING (correlationId) WHERE {_NOT_TWIN}",
    )[0][0]
    assert len(joined) == expected == len(device)  # every device item has its one launch call
    kernels = joined[joined["channel"] == "kernel"]
    assert kernels["name_call"].astype(str).str.contains("Launch|cuLaunch").all()
    assert (kernels["start_us"] >= kernels["start_us_call"]).all()


def test_threads_named(case) -> None:
    _, profile = case
    threads = profile.threads
    gpu = threads[threads["process_labels"] == "GPU 0"]
    assert gpu["process_name"].astype(str).str.startswith("NVIDIA").all()
    assert gpu["thread_name"].astype(str).str.startswith("stream ").all()
    assert profile.meta["source_format"] == "nsys"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_cli_summary_and_check(path: Path, capsys) -> None:
    assert main(["-q", "summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "What limits this run" in out and "gpu:0" in out
    assert main(["-q", "summary", str(path), "--format", "json"]) == 0
    assert main(["-q", "check", str(path), "--fail-on", "never"]) == 0
    capsys.readouterr()
    code = main(["-q", "summary", str(path), "--critical-path"])
    out, err = capsys.readouterr()
    assert code == 0 or (code == 2 and len(err.splitlines()) == 1), err


def test_gpu_account_has_compute() -> None:
    from popprof.metrics.devices import device_breakdown

    for path in FILES:
        row = device_breakdown(read_path(path)).iloc[0]
        assert row["compute_us"] > 0, path


def test_input_left_untouched(tmp_path: Path) -> None:
    copy = tmp_path / "r.sqlite"
    shutil.copy(FUSER, copy)
    before = copy.read_bytes()
    read_path(copy)
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.sqlite"]  # no journal left behind


def test_other_sqlite_is_one_line(tmp_path: Path, capsys) -> None:
    other = tmp_path / "other.sqlite"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE t (a INTEGER)")
    connection.commit()
    connection.close()
    summary_error(other, capsys)
    lookalike = tmp_path / "lookalike.sqlite"
    connection = sqlite3.connect(lookalike)
    connection.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    connection.commit()
    connection.close()
    assert "not an Nsight Systems export" in summary_error(lookalike, capsys)


@pytest.mark.parametrize("keep", [4096, 100_000, 400_000])
def test_truncated_is_one_line(tmp_path: Path, capsys, keep: int) -> None:
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(FUSER.read_bytes()[:keep])
    line = summary_error(cut, capsys)
    assert "unreadable SQLite database" in line and "truncated or corrupt" in line


def test_gzipped_is_one_line(tmp_path: Path, capsys) -> None:
    import gzip

    packed = tmp_path / "r.sqlite.gz"
    packed.write_bytes(gzip.compress(FUSER.read_bytes()))
    assert "gunzip" in summary_error(packed, capsys)


def test_no_python_loop_over_rows(case) -> None:
    _, profile = case
    assert np.isfinite(profile.events["start_us"]).all()


def test_kernel_launch_args_with_args() -> None:
    import json

    import popprof

    profile = popprof.open(FUSER, with_args=True)
    kernels = profile.events[profile.events["channel"] == "kernel"]
    first = kernels.sort_values("start_us").iloc[0]
    (row,) = sql_rows(
        FUSER,
        "SELECT gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, "
        "staticSharedMemory + dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1",
    )
    args = json.loads(first["args"])
    assert (*args["grid"], *args["block"], args["registers per thread"], args["shared memory"]) == row


def test_fifo_is_one_line(tmp_path: Path) -> None:
    import os

    from popprof.model.errors import InputError
    from popprof.readers import nsys, read_with

    fifo = tmp_path / "x.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_with(nsys, fifo)
