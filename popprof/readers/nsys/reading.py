"""The Nsight Systems reader's front: the export's tables into events, threads, target and metadata."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ...io.progress import reading
from ...io.sources import source_metadata
from ...model.errors import InputError
from ...model.profile import Profile
from ...trace import frame
from ..chrome.tables import trace_rank
from . import FORMAT
from .database import Export, opened
from .host import cpu_samples, cpu_slices

KERNEL, COPY, MEMSET, RUNTIME, DRIVER, NVTX = (
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_runtime",
    "cuda_driver",
    "user_annotation",
)
#: ``CUPTI_ACTIVITY_KIND_RUNTIME.eventClass`` of driver calls (``ENUM_NSYS_EVENT_CLASS``:
#: ``TRACE_PROCESS_EVENT_CUDA_DRIVER``); every other class is a runtime call
DRIVER_CLASS = 1
#: ``eventClass`` ``TRACE_PROCESS_EVENT_CUDABACKTRACE``: older nsys records a call whose backtrace it took a
#: second time under this class (same ``correlationId``, a slightly wider span); such a twin is left out
BACKTRACE_CLASS = 67
#: ``NVTX_EVENTS.eventType`` of ranges (``ENUM_NSYS_EVENT_TYPE``: NvtxPushPopRange, NvtxStartEndRange,
#: NvtxtPushPopRange); marks, domain and thread names have no duration and are left out
NVTX_RANGES = (59, 60, 70)
#: ``copyKind`` (``ENUM_CUDA_MEMCPY_OPER``, CUPTI's ``CUpti_ActivityMemcpyKind`` numbering) -> Kineto's short
#: direction; the unified-memory kinds nsys adds (11-13) by their direction
COPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "HtoD",
    12: "DtoH",
    13: "DtoD",
}
#: ``srcKind`` / ``dstKind`` / ``memKind`` (``ENUM_CUDA_MEM_KIND``) labels, as the exports that carry the enum
#: table write them; an export without the table (older nsys) uses the same numbering
MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
#: tables whose rows are counted in ``nsys.unread`` when they hold any (read by no part of popprof)
UNREAD_TABLES = (
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUDA_GRAPH_EVENTS",
    "CUBLAS_EVENTS",
    "CUDNN_EVENTS",
    "OSRT_API",
    "MPI_P2P_EVENTS",
    "MPI_COLLECTIVES_EVENTS",
    "MPI_START_WAIT_EVENTS",
    "MPI_OTHER_EVENTS",
    "NCCL_EVENTS",
)
_COLUMNS = ("pid", "tid", "start", "end", "name", "channel", "stream", "correlation", "device")


def read(
    path: Path,
    *,
    with_args: bool = False,
    device_map: Mapping[str, str | None] | str | None = None,
    **_options: object,
) -> Profile:
    """Read an Nsight Systems SQLite export into a Profile with events, threads, target and metadata.

    Kernels, copies and memsets are device work (``stream`` set, ``device`` ``gpu:N``), runtime calls and NVTX
    ranges host work; see the package docstring and ``docs/readers.md``. Copies and memsets always carry
    their ``bytes`` as args (Kineto's, which the copies analysis reads); with ``with_args`` kernels carry their
    launch configuration too. Host threads' context switches become ``cpu_slices``, CPU samples ``cpu_samples``
    (``host.py``; the NVTX ranges of traced MPI calls tell which samples were inside one), when the export has
    them.
    """
    with reading(path), opened(path) as export:
        rank = trace_rank({}, path)
        threads_named = _thread_names(export)
        ranges = _nvtx(export)
        parts = [
            _kernels(export, with_args),
            _copies(export),
            _memsets(export),
            _runtime(export),
            ranges,
        ]
        counts = {t: export.count(t) for t in _READ_TABLES}
        lacking = dict(export.lacking)
        twins = parts[3].attrs.get("backtrace_twins", 0) if parts[3] is not None else 0
        unread = {t: n for t in UNREAD_TABLES if (n := export.count(t))}
        processes = _process_names(export)
        gpus = _gpus(export)
        session = _session_start(export)
        version = _version(export)
        slices, unpaired = cpu_slices(export, rank)
        samples = cpu_samples(export, rank, ranges)  # inside a traced MPI call: communication
    rows = (
        pd.concat([p for p in parts if p is not None and len(p)], ignore_index=True)
        if any(p is not None and len(p) for p in parts)
        else None
    )
    if rows is None:
        raise InputError(
            path,
            "holds no kernels, copies, memsets, CUDA API calls or NVTX ranges",
            "profile with nsys profile --trace=cuda,nvtx, then nsys export --type sqlite",
        )
    start_ns = rows["start"].to_numpy(dtype=np.int64)
    dur_ns = (rows["end"] - rows["start"]).to_numpy(dtype=np.float64)
    backwards = dur_ns < 0
    dur_ns[backwards] = np.nan  # an end before its start: kept, without a duration
    name_codes, names = pd.factorize(rows["name"].fillna("(unnamed)"))
    channel_codes, channels = pd.factorize(rows["channel"])
    stream = rows["stream"].to_numpy(dtype=np.int64)
    correlation = rows["correlation"].to_numpy(dtype=np.int64)
    device = rows["device"].to_numpy(dtype=np.int64)
    labels = np.unique(device[device >= 0])
    device_codes = np.searchsorted(labels, device).astype(np.int32)
    device_codes[device < 0] = -1
    args = rows["args"].to_numpy(dtype=object)
    has_args = pd.notna(args)
    events, built = frame.build_events(
        pid=rows["pid"].to_numpy(dtype=np.int64),
        tid=rows["tid"].to_numpy(dtype=np.int64),
        start=start_ns / 1000.0,
        dur=dur_ns / 1000.0,
        name_codes=name_codes.astype(np.int32),
        names=[str(n) for n in names],
        channel_codes=channel_codes.astype(np.int32),
        channels=[str(c) for c in channels],
        source_format=FORMAT,
        device_map=device_map,
        args=np.where(has_args, args, None) if has_args.any() else None,
        extra=frame.gpu_work_columns(stream, correlation, device_codes, labels),
    )
    frame.set_rank(events, rank)
    threads = _threads(events, processes, threads_named, gpus, rank)
    metadata = dict(source_metadata(FORMAT, [path]))
    metadata["nsys.rows"] = json.dumps({k: v for k, v in counts.items() if v})
    if twins:
        metadata["nsys.backtrace_twins_left_out"] = twins
    if unpaired:
        metadata["nsys.sched_switches_unpaired"] = unpaired
    if unread:
        metadata["nsys.unread_tables"] = json.dumps(unread)
    metadata["nsys.gpus"] = json.dumps([{"gpu": k, "name": v} for k, v in sorted(gpus.items())])
    if session is not None:
        metadata["nsys.session_start_utc_ns"] = session
    if version is not None:
        metadata["nsys.version"] = version
    if rank is not None:
        metadata["trace.rank"] = rank
        metadata["trace.rank_source"] = "file name"
    mpi_rank = _mpi_rank(threads_named)
    if mpi_rank is not None:
        metadata["nsys.mpi_rank"] = mpi_rank
    if lacking:
        metadata["nsys.tables_lacking_columns"] = json.dumps(lacking)
        metadata["warnings.unread_rows"] = sum(counts.get(t, 0) for t in lacking)
    if backwards.any():
        metadata["warnings.end_before_start"] = int(backwards.sum())
    if built.get("partial_overlap"):
        metadata["warnings.partial_overlap"] = built["partial_overlap"]
    name = path.name.removesuffix(".sqlite") or path.stem
    return Profile(
        name,
        {
            "target": {"source_format": [FORMAT]},
            "events": events,
            "threads": threads,
            "cpu_slices": slices,
            "cpu_samples": samples,
        },
        source=str(path),
        metadata=metadata,
    )


#: the name nsys gives a thread of an MPI rank when it traces MPI (``--trace=mpi``): ``MPI Rank 0``
MPI_RANK_THREAD = re.compile(r"MPI Rank (\d+)")
#: the tables holding the export's own ``EXPORT_PRODUCT_VERSION`` (older nsys, newer nsys)
EXPORT_META_TABLES = ("EXPORT_META_DATA", "META_DATA_EXPORT")


def _mpi_rank(thread_names: Mapping[tuple[int, int], str]) -> int | None:
    """The one MPI rank the export's thread names record (``MPI Rank N``: nsys names the thread so when it traces
    MPI); None without one, or with several (one report of a whole ``mpirun``: no one rank)."""
    found = {int(m.group(1)) for name in thread_names.values() if (m := MPI_RANK_THREAD.fullmatch(str(name)))}
    return found.pop() if len(found) == 1 else None


def _version(export: Export) -> str | None:
    """The nsys version that exported the file (``EXPORT_PRODUCT_VERSION``), when the export records it."""
    for table in EXPORT_META_TABLES:
        if _present(export, table, ("name", "value")):
            row = export.connection.execute(
                f"SELECT value FROM {table} WHERE name = 'EXPORT_PRODUCT_VERSION' LIMIT 1"
            ).fetchone()
            if row and row[0] is not None:
                return str(row[0])
    return None


_READ_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "SCHED_EVENTS",
    "COMPOSITE_EVENTS",
)


def _present(export: Export, table: str, needed: tuple[str, ...]) -> bool:
    """Whether ``table`` is there with the ``needed`` columns (an export may lack a table it had nothing for)."""
    return table in export.tables and set(needed) <= export.columns(table)


def _or_null(export: Export, table: str, column: str, alias: str = "t") -> str:
    """``alias.column`` when ``table`` has it, else SQL NULL: columns differ between nsys versions."""
    return f'{alias}."{column}"' if column in export.columns(table) else "NULL"


def _device_work(export: Export, table: str, extra: str, joins: str = "") -> pd.DataFrame | None:
    """The rows of a device-work table (kernels, copies, memsets) with the columns every one has."""
    needed = ("start", "end", "deviceId", "streamId", "correlationId")
    if not export.readable(table, needed):
        return None
    return export.query(
        f'SELECT t.start AS start, t."end" AS "end", t.deviceId AS device, t.streamId AS stream, '
        f'COALESCE(t.correlationId, -1) AS correlation{extra} FROM "{table}" AS t {joins}'
    )


def _on_streams(
    rows: pd.DataFrame, names: pd.Series, channel: str, args: pd.Series | None = None
) -> pd.DataFrame:
    """Device rows on their (GPU, stream) track, as Kineto lays a GPU out: pid the GPU, tid the stream;
    ``args`` their JSON args (None: none)."""
    device = rows["device"].fillna(-1).astype(np.int64)
    stream = rows["stream"].fillna(-1).astype(np.int64)
    return pd.DataFrame(
        {
            "pid": device,
            "tid": stream,
            "start": rows["start"],
            "end": rows["end"],
            "name": names,
            "channel": channel,
            "stream": stream,
            "correlation": rows["correlation"].fillna(-1).astype(np.int64),
            "device": device,
            "args": args if args is not None else None,
        }
    )


def _bytes_args(rows: pd.DataFrame) -> pd.Series:
    """Kineto's args of a copy or memset: ``{"bytes": N, "memory bandwidth (GB/s)": bytes / duration}``."""
    size = rows["bytes"].astype("Float64")
    dur = (rows["end"] - rows["start"]).astype("Float64")
    rate = (size / dur).where(dur > 0)  # bytes per ns = GB/s
    text = (
        '{"bytes": '
        + size.astype("Int64").astype(str)
        + ', "memory bandwidth (GB/s)": '
        + rate.astype(str)
        + "}"
    )
    text = text.where(rate.notna(), '{"bytes": ' + size.astype("Int64").astype(str) + "}")
    return text.where(size.notna(), None)


def _kernel_args(rows: pd.DataFrame) -> pd.Series:
    """Kineto's args of a kernel (with ``with_args``): grid, block, registers per thread, shared memory."""

    def ints(column: str) -> pd.Series:
        return rows[column].astype("Int64").astype(str).str.replace("<NA>", "null")

    grid = "[" + ints("gridX") + ", " + ints("gridY") + ", " + ints("gridZ") + "]"
    block = "[" + ints("blockX") + ", " + ints("blockY") + ", " + ints("blockZ") + "]"
    shared = (
        rows["staticSharedMemory"].astype("Int64") + rows["dynamicSharedMemory"].astype("Int64")
    ).astype(str)
    return (
        '{"grid": '
        + grid
        + ', "block": '
        + block
        + ', "registers per thread": '
        + ints("registersPerThread")
        + ', "shared memory": '
        + shared.str.replace("<NA>", "null")
        + "}"
    )


#: the kernel columns its args are made of (with ``with_args``)
LAUNCH_COLUMNS = (
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
    "registersPerThread",
    "staticSharedMemory",
    "dynamicSharedMemory",
)


def _kernels(export: Export, with_args: bool) -> pd.DataFrame | None:
    """Kernels by their demangled name (Kineto's), else their short or mangled name; their launch
    configuration as args with ``with_args``."""
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if table not in export.tables:
        return None
    joins, picks = [], []
    for i, column in enumerate(("demangledName", "shortName", "mangledName")):
        if column in export.columns(table):
            joins.append(f'LEFT JOIN StringIds AS s{i} ON s{i}.id = t."{column}"')
            picks.append(f"s{i}.value")
    name = f"COALESCE({', '.join(picks)})" if picks else "NULL"
    launch = "".join(f", {_or_null(export, table, c)} AS {c}" for c in LAUNCH_COLUMNS) if with_args else ""
    rows = _device_work(export, table, f", {name} AS name{launch}", " ".join(joins))
    if rows is None:
        return None
    return _on_streams(rows, rows["name"], KERNEL, _kernel_args(rows) if with_args else None)


def _kinds(export: Export, table: str, default: Mapping[int, str]) -> dict[int, str]:
    """An ``ENUM_*`` table's labels by id where the export has it, else ``default``."""
    if table in export.tables and {"id", "label"} <= export.columns(table):
        found = export.query(f'SELECT id, label FROM "{table}"')
        return {**default, **dict(zip(found["id"].tolist(), found["label"].tolist(), strict=True))}
    return dict(default)


def _copies(export: Export) -> pd.DataFrame | None:
    """Copies named as Kineto names them: ``Memcpy HtoD (Pageable -> Device)``; a device-to-device copy between
    two GPUs is ``Memcpy PtoP``."""
    table = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if table not in export.tables:
        return None
    extra = ", ".join(
        f"{_or_null(export, table, c)} AS {c}"
        for c in ("copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId", "bytes")
    )
    rows = _device_work(export, table, f", {extra}")
    if rows is None:
        return None
    kinds = _kinds(export, "ENUM_CUDA_MEM_KIND", MEM_KINDS)
    direction = rows["copyKind"].map(COPY_KINDS).fillna("Unknown")
    src, dst = rows["srcDeviceId"], rows["dstDeviceId"]
    peer = (direction == "DtoD") & src.notna() & dst.notna() & (src != dst)
    direction = direction.where(~peer, "PtoP")
    src_kind = rows["srcKind"].map(kinds)
    dst_kind = rows["dstKind"].map(kinds)
    both = src_kind.notna() & dst_kind.notna()
    names = ("Memcpy " + direction).where(
        ~both, "Memcpy " + direction + " (" + src_kind + " -> " + dst_kind + ")"
    )
    names = names.where(~peer, "Memcpy PtoP (Device -> Device)")
    return _on_streams(rows, names, COPY, _bytes_args(rows))


def _memsets(export: Export) -> pd.DataFrame | None:
    """Memsets named as Kineto names them: ``Memset (Device)``."""
    table = "CUPTI_ACTIVITY_KIND_MEMSET"
    if table not in export.tables:
        return None
    rows = _device_work(
        export,
        table,
        f", {_or_null(export, table, 'memKind')} AS memKind, {_or_null(export, table, 'bytes')} AS bytes",
    )
    if rows is None:
        return None
    kind = rows["memKind"].map(_kinds(export, "ENUM_CUDA_MEM_KIND", MEM_KINDS))
    names = ("Memset (" + kind + ")").fillna("Memset")
    return _on_streams(rows, names, MEMSET, _bytes_args(rows))


def _on_threads(rows: pd.DataFrame, names: pd.Series, channel: pd.Series | str) -> pd.DataFrame:
    """Host rows on their thread: pid and tid out of ``globalTid``."""
    global_tid = rows["globalTid"].fillna(0).to_numpy(dtype=np.int64)
    n = len(rows)
    return pd.DataFrame(
        {
            "pid": (global_tid >> 24) & 0xFFFFFF,
            "tid": global_tid & 0xFFFFFF,
            "start": rows["start"],
            "end": rows["end"],
            "name": names,
            "channel": channel,
            "stream": np.full(n, -1, dtype=np.int64),
            "correlation": rows["correlation"].fillna(-1).astype(np.int64)
            if "correlation" in rows
            else np.full(n, -1, dtype=np.int64),
            "device": np.full(n, -1, dtype=np.int64),
            "args": None,
        }
    )


def _runtime(export: Export) -> pd.DataFrame | None:
    """CUDA runtime and driver API calls, without nsys's ``_vNNNN`` version suffix (``cudaLaunchKernel``)."""
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if not export.readable(table, ("start", "end", "globalTid", "nameId")):
        return None
    rows = export.query(
        f'SELECT t.start AS start, t."end" AS "end", t.globalTid AS globalTid, '
        f"COALESCE({_or_null(export, table, 'correlationId')}, -1) AS correlation, "
        f"{_or_null(export, table, 'eventClass')} AS eventClass, s.value AS name "
        f"FROM {table} AS t LEFT JOIN StringIds AS s ON s.id = t.nameId"
    )
    twin = (rows["eventClass"] == BACKTRACE_CLASS) & rows["correlation"].isin(
        rows.loc[rows["eventClass"] != BACKTRACE_CLASS, "correlation"]
    )
    rows = rows[~twin.to_numpy()].reset_index(drop=True)
    rows.attrs["backtrace_twins"] = int(twin.sum())
    names = rows["name"].str.replace(r"_v\d{4,}$", "", regex=True)
    channel = np.where(rows["eventClass"] == DRIVER_CLASS, DRIVER, RUNTIME)
    out = _on_threads(rows, names, channel)
    out.attrs["backtrace_twins"] = rows.attrs["backtrace_twins"]
    return out


def _nvtx(export: Export) -> pd.DataFrame | None:
    """NVTX ranges on the thread that opened them, named by ``text`` or the ``textId`` string."""
    table = "NVTX_EVENTS"
    if not export.readable(table, ("start", "end", "globalTid", "eventType")):
        return None
    text = _or_null(export, table, "text")
    if "textId" in export.columns(table):
        name, join = f"COALESCE({text}, s.value)", "LEFT JOIN StringIds AS s ON s.id = t.textId"
    else:
        name, join = text, ""
    types = ", ".join(str(t) for t in NVTX_RANGES)
    rows = export.query(
        f'SELECT t.start AS start, t."end" AS "end", t.globalTid AS globalTid, {name} AS name '
        f'FROM {table} AS t {join} WHERE t.eventType IN ({types}) AND t."end" IS NOT NULL'
    )
    return _on_threads(rows, rows["name"].fillna("(unnamed NVTX range)"), NVTX)


def _process_names(export: Export) -> dict[int, str]:
    """Process names by pid (``PROCESSES``)."""
    if not _present(export, "PROCESSES", ("pid", "name")):
        return {}
    found = export.query("SELECT pid, name FROM PROCESSES WHERE name IS NOT NULL")
    return dict(zip(found["pid"].astype(np.int64).tolist(), found["name"].tolist(), strict=True))


def _thread_names(export: Export) -> dict[tuple[int, int], str]:
    """Thread names by (pid, tid) (``ThreadNames`` into ``StringIds``)."""
    if not _present(export, "ThreadNames", ("nameId", "globalTid")):
        return {}
    found = export.query(
        "SELECT (t.globalTid >> 24) & 16777215 AS pid, t.globalTid & 16777215 AS tid, s.value AS name "
        "FROM ThreadNames AS t JOIN StringIds AS s ON s.id = t.nameId"
    )
    keys = zip(found["pid"].tolist(), found["tid"].tolist(), strict=True)
    return dict(zip(keys, found["name"].tolist(), strict=True))


def _gpus(export: Export) -> dict[int, str]:
    """GPU names by device id (``TARGET_INFO_GPU``)."""
    if not _present(export, "TARGET_INFO_GPU", ("id", "name")):
        return {}
    found = export.query("SELECT id, name FROM TARGET_INFO_GPU WHERE id IS NOT NULL")
    return dict(zip(found["id"].astype(np.int64).tolist(), found["name"].astype(str).tolist(), strict=True))


def _session_start(export: Export) -> int | None:
    """The session's start (``TARGET_INFO_SESSION_START_TIME.utcEpochNs``): event times are from it."""
    table = "TARGET_INFO_SESSION_START_TIME"
    if not _present(export, table, ("utcEpochNs",)):
        return None
    value = export.connection.execute(f"SELECT utcEpochNs FROM {table} LIMIT 1").fetchone()
    return int(value[0]) if value and value[0] is not None else None


def _threads(
    events: pd.DataFrame,
    processes: dict[int, str],
    thread_names: dict[tuple[int, int], str],
    gpus: dict[int, str],
    rank: int | None,
) -> pd.DataFrame:
    """The threads table: a GPU (pid = its device id) named by its product, its tracks ``stream N``; host
    processes and threads by their names in the export."""
    on_gpu = set(events.loc[events["device"].notna(), "pid"].unique().tolist())
    process_names = {p: n for p, n in processes.items() if p not in on_gpu}
    process_names.update({g: gpus.get(g, f"GPU {g}") for g in on_gpu})
    pairs = events.loc[events["device"].notna(), ["pid", "tid"]].drop_duplicates()
    names = {k: v for k, v in thread_names.items() if k[0] not in on_gpu}
    names.update({(int(p), int(t)): f"stream {t}" for p, t in pairs.itertuples(index=False)})
    seen = set(events["pid"].unique().tolist())
    names = {k: v for k, v in names.items() if k[0] in seen}
    threads = frame.build_threads(events, process_names, names)
    pids = threads["pid"].tolist()
    threads["process_labels"] = pd.array([f"GPU {p}" if p in on_gpu else "CPU" for p in pids], dtype="str")
    threads["rank"] = frame.constant_int(len(threads), rank)
    return threads
