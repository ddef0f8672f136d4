"""What the host threads did, from an Nsight Systems export: when each ran on a CPU, and what it ran.

``SCHED_EVENTS`` (``nsys profile --sample=cpu`` / ``--cpuctxsw=process-tree``): one row per context switch,
``start`` (ns), ``cpu``, ``isSchedIn`` (1: the thread was put on ``cpu``, 0: taken off it) and ``globalTid``.
A thread is on CPU from a sched-in to the sched-out that follows it on that thread: one ``cpu_slices`` row.

``COMPOSITE_EVENTS`` (CPU IP samples: ``start``, ``globalTid``) joined by ``id`` to ``SAMPLING_CALLCHAINS``
(one row per frame: ``symbol`` into ``StringIds``, ``stackDepth`` 0 the sampled frame, the leaf): one
``cpu_samples`` row per sample, named by its leaf function, with the call it was inside (``call``: a call
blocking on the device or communication, by the outermost frame that names one, function or module:
:mod:`popprof.trace.host_calls`; with the thread's MPI calls traced, ``communication`` inside them).

NVIDIA's SQLite export schema reference ("SQLite Export Schema Reference", ``nsys-exporter/exported_data``)
documents both tables; ``docs/readers.md`` says what is read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...model.errors import InputError
from ...trace import frame, host_calls
from .database import Export

SCHED = "SCHED_EVENTS"
SAMPLES = "COMPOSITE_EVENTS"
CALLCHAINS = "SAMPLING_CALLCHAINS"
#: the name of a sample whose leaf frame has no symbol (no callchain row at depth 0)
UNKNOWN_FUNCTION = "(unknown)"


def _require(export: Export, rows: pd.DataFrame, table: str, columns: tuple[str, ...]) -> None:
    """InputError naming ``table`` when a row lacks one of ``columns`` (nsys writes them on every row)."""
    missing = rows[list(columns)].isna().any(axis=1)
    if missing.any():
        raise InputError(
            export.path,
            f"malformed nsys input: {int(missing.sum())} {table} rows without {' or '.join(columns)}",
            "export the report again with nsys export --type sqlite",
        )


def _pid_tid(global_tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pid and tid out of nsys's ``globalTid`` (as the reader decodes it for runtime calls)."""
    return (global_tid >> 24) & 0xFFFFFF, global_tid & 0xFFFFFF


def cpu_slices(export: Export, rank: int | None) -> tuple[pd.DataFrame | None, int]:
    """Each thread's on-CPU intervals from ``SCHED_EVENTS``, and how many switches pair with none.

    Per thread, in time order (``rowid`` breaks a tie), a sched-in followed by a sched-out is one slice on the
    sched-in's CPU. A sched-out with no sched-in before it (the thread was running when the capture started),
    a sched-in with no sched-out after it, and a second sched-in in a row are left out and counted.
    """
    needed = {"start", "cpu", "isSchedIn", "globalTid"}
    if SCHED not in export.tables or not needed <= export.columns(SCHED):
        return None, 0
    rows = export.query(
        f"SELECT start, cpu, isSchedIn, globalTid FROM {SCHED} WHERE globalTid IS NOT NULL "
        "ORDER BY globalTid, start, rowid"
    )
    if rows.empty:
        return None, 0
    _require(export, rows, SCHED, ("start", "isSchedIn"))
    tid = rows["globalTid"].to_numpy(dtype=np.int64)
    start = rows["start"].to_numpy(dtype=np.int64)
    sched_in = rows["isSchedIn"].to_numpy(dtype=np.int64) != 0
    pair = sched_in[:-1] & ~sched_in[1:] & (tid[:-1] == tid[1:])
    first = np.flatnonzero(pair)
    unpaired = len(rows) - 2 * len(first)
    pid, thread = _pid_tid(tid[first])
    slices = pd.DataFrame(
        {
            "rank": frame.constant_int(len(first), rank),
            "pid": pid,
            "tid": thread,
            "start_us": start[first] / 1000.0,
            "dur_us": (start[first + 1] - start[first]) / 1000.0,
            "cpu": pd.array(rows["cpu"].to_numpy()[first], dtype="Int32"),
        }
    )
    return slices, unpaired


def cpu_samples(export: Export, rank: int | None, ranges: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The CPU samples of ``COMPOSITE_EVENTS``, each named by its leaf frame's function (``stackDepth`` 0 of
    ``SAMPLING_CALLCHAINS`` through ``StringIds``; ``(unknown)`` without one) and with its ``call``
    (:func:`_sample_calls`, then :func:`_traced_calls` over ``ranges``: the export's host ranges, ``pid``,
    ``tid``, ``start``, ``end`` in ns and ``name``, as the reader reads its NVTX ranges)."""
    if SAMPLES not in export.tables or not {"id", "start", "globalTid"} <= export.columns(SAMPLES):
        return None
    stacks = CALLCHAINS in export.tables and {"id", "symbol", "stackDepth"} <= export.columns(CALLCHAINS)
    if stacks:
        name = "s.value"
        join = (
            f"LEFT JOIN {CALLCHAINS} AS c ON c.id = e.id AND c.stackDepth = 0 "
            "LEFT JOIN StringIds AS s ON s.id = c.symbol"
        )
    else:
        name, join = "NULL", ""
    rows = export.query(
        f"SELECT e.id AS id, e.start AS start, e.globalTid AS globalTid, {name} AS function "
        f"FROM {SAMPLES} AS e {join} WHERE e.globalTid IS NOT NULL ORDER BY e.start, e.id"
    )
    if rows.empty:
        return None
    _require(export, rows, SAMPLES, ("start",))
    pid, tid = _pid_tid(rows["globalTid"].to_numpy(dtype=np.int64))
    start = rows["start"].to_numpy(dtype=np.int64)
    call = None
    if stacks:
        call = _sample_calls(export, rows["id"], rows["function"].notna().to_numpy())
        call = _traced_calls(call, pid, tid, start, ranges)
    return pd.DataFrame(
        {
            "rank": frame.constant_int(len(rows), rank),
            "pid": pid,
            "tid": tid,
            "ts_us": start / 1000.0,
            "function": rows["function"].fillna(UNKNOWN_FUNCTION).astype("category"),
            "call": call,
        }
    )


def _traced_calls(
    call: pd.Categorical, pid: np.ndarray, tid: np.ndarray, start: np.ndarray, ranges: pd.DataFrame | None
) -> pd.Categorical:
    """``call`` with each sample that has one (a stack) made ``communication`` when it falls inside a range of
    its own thread named as an MPI call (``MPI_Recv``: nsys's MPI trace, an NVTX range) whatever its stack
    names: a stack cut below its MPI frame names none, and MPI is the outer call of a ``host_wait`` inside it
    (:func:`popprof.trace.host_calls.inside_ranges`). A sample without a stack stays missing: made
    communication only inside MPI, such samples would weigh the split towards it."""
    if ranges is None or ranges.empty:
        return call
    mpi = host_calls.mpi_ranges(ranges["name"]) & (ranges["end"] > ranges["start"]).to_numpy()
    if not mpi.any():
        return call
    key = (pid << 24) | tid
    rows = ranges[mpi]
    inside = host_calls.inside_ranges(
        key,
        start.astype(np.float64),
        (rows["pid"].to_numpy(dtype=np.int64) << 24) | rows["tid"].to_numpy(dtype=np.int64),
        rows["start"].to_numpy(dtype=np.float64),
        rows["end"].to_numpy(dtype=np.float64),
    )
    codes = call.codes.copy()
    codes[inside & (codes >= 0)] = host_calls.SAMPLE_CALLS.index(host_calls.COMMUNICATION)
    return pd.Categorical.from_codes(codes, categories=call.categories)


def _sample_calls(export: Export, sample_id: pd.Series, has_stack: np.ndarray) -> pd.Categorical:
    """Each sample's call (:data:`popprof.trace.host_calls.SAMPLE_CALLS`; missing for a sample without a leaf
    frame, ``has_stack`` false) from all its frames: each distinct symbol and module is matched once
    (:mod:`popprof.trace.host_calls`), SQLite hands back only the frames that name a call, and the outermost of
    them decides."""
    module = "module" if "module" in export.columns(CALLCHAINS) else "NULL"
    strings = export.query(
        f"SELECT id, value FROM StringIds WHERE id IN (SELECT symbol FROM {CALLCHAINS} "
        f"UNION SELECT {module} FROM {CALLCHAINS})"
    )
    ids = strings["id"].to_numpy(dtype=np.int64)
    values = strings["value"].tolist()
    by_function, by_module = host_calls.function_calls(values), host_calls.module_calls(values)
    codes = np.where(has_stack, 3, 0).astype(np.int8)  # 3: a stack naming no call (other); 0: missing
    symbols, modules = ids[by_function > 0], ids[by_module > 0]
    if symbols.size or modules.size:
        frames = export.query(
            f"SELECT id, stackDepth AS depth, symbol, {module} AS module FROM {CALLCHAINS} "
            f"WHERE id IS NOT NULL AND (symbol IN ({_id_list(symbols)}) OR {module} IN ({_id_list(modules)}))"
        )
        code_of = pd.Series(np.maximum(by_function, 0), index=ids)
        symbol = frames["symbol"].map(code_of[symbols]).fillna(0).to_numpy(dtype=np.int8)
        in_module = (
            frames["module"].map(pd.Series(by_module, index=ids)[modules]).fillna(0).to_numpy(dtype=np.int8)
        )
        sample, outer = host_calls.outermost_calls(
            frames["id"].to_numpy(dtype=np.int64),
            frames["depth"].fillna(0).to_numpy(dtype=np.int64),
            np.where(symbol > 0, symbol, in_module),
        )
        rows = sample_id.to_numpy(dtype=np.int64)
        if sample.size:
            at = np.minimum(np.searchsorted(sample, rows), sample.size - 1)
            found = sample[at] == rows
            codes[found] = outer[at[found]]
    return pd.Categorical.from_codes(codes.astype(np.int64) - 1, categories=list(host_calls.SAMPLE_CALLS))


def _id_list(ids: np.ndarray) -> str:
    """Integer ids as an SQL list (``NULL`` for none: ``x IN (NULL)`` holds for no row)."""
    return ", ".join(map(str, ids.tolist())) or "NULL"
