"""The table schema: every table, column, dtype and unit, enforced in one place.

Readers build DataFrames and hand them to :func:`conform`, which checks the
columns, fills columns a source does not know with missing values (only where
the column is nullable), and casts every column to its declared dtype. So every
reader, and a bundle read back from Parquet, gives the same columns and dtypes.

Conventions: snake_case names; units in the name (``_bytes``, ``_cycles``,
``_us``, ``_hz``); repeated strings are ``category``; keys use plain numpy
integers of the smallest sound width; measures a source may lack use pandas'
nullable integers (``Int64``) or ``float64`` with NaN. ``docs/schema.md`` is
generated from this module (``python -m popprof.model.schema``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: Step / program categories (see the reference facts).
STEP_CATEGORIES: tuple[str, ...] = ("compute", "exchange", "global_exchange", "host_io", "sync", "other")

#: Program type -> category, per the reference facts. Unknown types are "other".
PROGRAM_TYPE_CATEGORY: dict[str, str] = {
    "OnTileExecute": "compute",
    "DoExchange": "exchange",
    "GlobalExchange": "global_exchange",
    "StreamCopyBegin": "host_io",
    "StreamCopyMid": "host_io",
    "StreamCopyEnd": "host_io",
    "Sync": "sync",
    "SyncAns": "sync",
    "Sans": "sync",
}


def category_of_program_type(program_type: pd.Series) -> pd.Series:
    """Map a Series of program types to step categories (vectorised; unknown -> ``other``)."""
    mapped = pd.Series(program_type, copy=False).astype("str").map(PROGRAM_TYPE_CATEGORY)
    return mapped.fillna("other").astype("category")


@dataclass(frozen=True)
class Column:
    """One column: its name, pandas dtype, unit and meaning."""

    name: str
    dtype: str
    description: str
    unit: str = ""
    nullable: bool = True
    optional: bool = False  # may be absent altogether (e.g. events.args)


@dataclass(frozen=True)
class Table:
    """One table: what a row is, its columns and what fills it."""

    name: str
    row: str
    columns: tuple[Column, ...]
    description: str = ""
    sources: str = ""
    key: tuple[str, ...] = field(default_factory=tuple)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _c(
    name: str, dtype: str, description: str, unit: str = "", *, key: bool = False, optional: bool = False
) -> Column:
    return Column(name, dtype, description, unit, nullable=not key, optional=optional)


TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        Table(
            "target",
            "profile",
            (
                _c(
                    "source_format",
                    "str",
                    "reader that produced the profile (pop, text_summary, sdk1_json, bundle, ...)",
                ),
                _c("ipu_arch", "str", "IPU architecture, e.g. ipu1 (Mk1), ipu2 (Mk2)"),
                _c("target_type", "str", "Ipu, IpuModel, Cpu or Unknown"),
                _c("num_ipus", "Int32", "IPUs in the whole target (every replica)"),
                _c("tiles_per_ipu", "Int32", "tiles on each IPU"),
                _c(
                    "num_tiles",
                    "Int32",
                    "tiles in the whole target, every replica (num_ipus x tiles_per_ipu)",
                ),
                _c("bytes_per_tile", "Int64", "memory capacity of one tile", "bytes"),
                _c("clock_hz", "float64", "IPU clock frequency", "Hz"),
                _c("num_replicas", "Int32", "replicas of the graph (pva's liveness is one replica's)"),
                _c("ipus_per_replica", "Int32", "IPUs one replica spans"),
                _c("poplar_version", "str", "Poplar version string that wrote the profile"),
            ),
            "The IPU target the graph was compiled for.",
            "all graph sources",
        ),
        Table(
            "tiles",
            "tile",
            (
                _c("tile", "int32", "global tile index", key=True),
                _c("ipu", "int16", "IPU the tile belongs to", key=True),
                _c("tile_in_ipu", "int32", "tile index within its IPU", key=True),
                _c("bytes_incl_gaps", "Int64", "memory used including gaps", "bytes"),
                _c("bytes_excl_gaps", "Int64", "memory used excluding gaps", "bytes"),
                _c("overflowed_bytes", "Int64", "memory in the overflowed region (excluding gaps)", "bytes"),
                _c(
                    "always_live_bytes",
                    "Int64",
                    "bytes of always-live variables on this tile (of whichever replica owns it)",
                    "bytes",
                ),
                _c(
                    "not_always_live_bytes",
                    "Int64",
                    "peak bytes of not-always-live variables on this tile (of whichever replica owns it)",
                    "bytes",
                ),
                _c("capacity_bytes", "Int64", "tile memory capacity", "bytes"),
            ),
            "Memory per tile of the whole target: every tile of every replica. Present only when the source gives "
            "every tile.",
            "pop, sdk1_json",
            ("tile",),
        ),
        Table(
            "tile_memory",
            "tile x memory category",
            (
                _c("tile", "int32", "global tile index", key=True),
                _c(
                    "category",
                    "category",
                    "memory category as the source names it (e.g. vertexCode, controlCode)",
                ),
                _c("bytes", "int64", "bytes of this category on this tile", "bytes", key=True),
            ),
            "Memory per tile broken down by category (only non-zero rows).",
            "pop, sdk1_json",
            ("tile", "category"),
        ),
        Table(
            "memory_totals",
            "memory figure of the whole profile or of one tile",
            (
                _c("tile", "Int32", "tile for per-tile blocks; missing for whole-profile figures"),
                _c(
                    "group",
                    "category",
                    "total | region | data_type | data_type_total | vertex_category | vertex_type | vertex_code_type "
                    "| maximum | per_ipu | other (a figure of the memory tree with an unknown label, under its path)",
                ),
                _c(
                    "category",
                    "category",
                    "label within the group (e.g. including_gaps, Interleaved, Vertex Code)",
                ),
                _c("bytes", "Int64", "bytes", "bytes"),
            ),
            "Memory totals for sources (like the text summary) that give figures rather than every tile.",
            "text_summary (and derived for others)",
        ),
        Table(
            "tile_histogram",
            "histogram bin of tile memory",
            (
                _c("low_bytes", "Int64", "lower bound of the bin", "bytes"),
                _c("high_bytes", "Int64", "upper bound of the bin", "bytes"),
                _c("num_tiles", "Int64", "tiles in the bin"),
            ),
            "The text summary's per-tile memory histogram (excluding gaps).",
            "text_summary",
        ),
        Table(
            "out_of_memory",
            "tile named in an out-of-memory message",
            (
                _c(
                    "compilation",
                    "int32",
                    "failed compilation in the source (0 = the first message in the log)",
                    key=True,
                ),
                _c("tile", "Int32", "global tile index the message names (missing: SDK 2.1+ names none)"),
                _c("bytes_used", "Int64", "bytes the tile needed, as the message prints them", "bytes"),
                _c("capacity_bytes", "Int64", "tile memory capacity, as the message prints it", "bytes"),
                _c("over_bytes", "Int64", "bytes_used - capacity_bytes", "bytes"),
                _c("line", "Int64", "line of the message in the source text (1-based)"),
                _c(
                    "reason",
                    "str",
                    "the message's reason when it names no tile ('Cannot fit all variable data onto "
                    "one or more tiles')",
                ),
                _c(
                    "profile_path",
                    "str",
                    "'Profile saved to: PATH' of the message, as printed (a path: sensitive)",
                ),
            ),
            "Out-of-memory messages (poplar::graph_memory_allocation_error: 'Out of memory on tile N: X bytes "
            "used but tiles only have Y bytes of memory', or from SDK 2.1 'Out of memory: Cannot fit all variable "
            "data onto one or more tiles. Profile saved to: PATH'). Poplar names at most one tile per failed "
            "compilation, so this is a lower bound on the tiles over.",
            "oom_log, text_summary (messages in the same text)",
            ("compilation",),
        ),
        Table(
            "execution_totals",
            "execution figure of a summary",
            (
                _c(
                    "category",
                    "category",
                    "compute | compute_excluding_idle | exchange | global_exchange | host_io | shared_structure_copy "
                    "| sync | total, or the label as printed when unknown",
                ),
                _c("basis", "category", "total (cycles of the whole run) | tile_average (mean over tiles)"),
                _c(
                    "cycles",
                    "float64",
                    "cycles as printed (tile averages keep their decimals); NaN when the "
                    "summary says 'Must enable ...' instead of a number",
                    "cycles",
                ),
                _c(
                    "share",
                    "float64",
                    "share of the total cycles as printed ('(10.4% of total)'), as a fraction",
                ),
                _c("estimated", "boolean", "the figure is marked 'Estimated (...)'"),
                _c(
                    "time_us",
                    "float64",
                    "the printed approximate time ('approx N microseconds'), total only",
                    "us",
                ),
                _c("label", "str", "the line's label as printed"),
            ),
            "The Execution section of a Poplar text summary (SDK 1.x 'Total ... cycles' and SDK 2.x/3.x "
            "'Tile average ... cycles' layouts).",
            "text_summary",
        ),
        Table(
            "vertex_cycles",
            "vertex type of a summary's 'Cycles by vertex type'",
            (
                _c("vertex_type", "str", "vertex type as printed (e.g. popops::Zero2d<float>)"),
                _c("instances", "Int64", "vertex instances"),
                _c("cycles", "Int64", "cycles spent in this vertex type", "cycles"),
            ),
            "Cycles by vertex type from a Poplar text summary's Execution section.",
            "text_summary",
        ),
        Table(
            "programs",
            "program",
            (
                _c("program_id", "int32", "index in the source's program list", key=True),
                _c("name", "str", "program name"),
                _c("type", "category", "program type (OnTileExecute, DoExchange, ...; unknown names kept)"),
                _c("category", "category", "compute | exchange | global_exchange | host_io | sync | other"),
                _c(
                    "code_bytes",
                    "Int64",
                    "code bytes summed over tiles, when known (pva: opt-in, code_bytes=True)",
                    "bytes",
                ),
            ),
            "Programs of the graph.",
            "pop, sdk1_json",
            ("program_id",),
        ),
        Table(
            "variables",
            "variable",
            (
                _c("name", "str", "variable name"),
                _c("bytes", "Int64", "size", "bytes"),
                _c("always_live", "boolean", "whether the variable lives for the whole program"),
                _c("tile", "Int32", "tile, when the source places the variable on one tile"),
            ),
            "Variables of one replica's graph (always-live ones from pva; others where known).",
            "pop",
        ),
        Table(
            "liveness",
            "liveness program step",
            (
                _c("step", "int32", "liveness step index", key=True),
                _c("program", "str", "program run at this step"),
                _c("program_type", "category", "type of that program"),
                _c(
                    "not_always_live_bytes",
                    "Int64",
                    "not-always-live bytes live at this step, per replica (as pva gives them)",
                    "bytes",
                ),
            ),
            "Not-always-live memory per program step of one replica; whole-target peak liveness = always-live bytes "
            "of every tile + max of this x num_replicas.",
            "pop",
            ("step",),
        ),
        Table(
            "liveness_variables",
            "variable live at a liveness step",
            (
                _c("step", "int32", "liveness step index", key=True),
                _c("name", "str", "variable name"),
                _c("bytes", "Int64", "size (one replica's)", "bytes"),
            ),
            "Not-always-live variables per liveness step of one replica (only the largest few are kept; by default "
            "only for the peak step).",
            "pop",
        ),
        Table(
            "runs",
            "execution run",
            (
                _c("run", "int32", "run index", key=True),
                _c("name", "str", "run (program) name"),
                _c("start_us", "float64", "host wall-clock start", "us"),
                _c("end_us", "float64", "host wall-clock end", "us"),
            ),
            "Execution runs.",
            "pop",
            ("run",),
        ),
        Table(
            "steps",
            "execution step x IPU",
            (
                _c("run", "int32", "run the step belongs to", key=True),
                _c("step", "int32", "global step index over all runs", key=True),
                _c("ipu", "int16", "IPU", key=True),
                _c("program", "category", "program executed in this step"),
                _c("program_type", "category", "its type"),
                _c("category", "category", "compute | exchange | global_exchange | host_io | sync | other"),
                _c("cycles", "Int64", "cycles this step took on this IPU", "cycles"),
                _c("active_from_cycles", "Int64", "first active cycle (max over tiles)", "cycles"),
                _c("active_to_cycles", "Int64", "last active cycle (max over tiles)", "cycles"),
                _c("tile_balance", "float64", "how evenly cycles spread over tiles (0..1, from pva)"),
                _c("data_in_bytes", "Int64", "bytes received", "bytes"),
                _c("data_out_bytes", "Int64", "bytes sent", "bytes"),
            ),
            "Execution steps per IPU (needs an execution profile).",
            "pop, sdk1_json",
            ("step", "ipu"),
        ),
        Table(
            "step_tile_cycles",
            "execution step x tile",
            (
                _c("step", "int32", "global step index", key=True),
                _c("tile", "int32", "global tile index", key=True),
                _c("cycles", "int64", "cycles on this tile", "cycles", key=True),
            ),
            "Per-tile cycles of each step (optional: steps x tiles is large).",
            "pop (opt-in)",
        ),
        Table(
            "operations",
            "framework operation",
            (
                _c("name", "str", "operation name"),
                _c(
                    "layer",
                    "category",
                    "layer that created it (poplibs, popart, onnx, poptorch, xla_op, ...)",
                ),
                _c("file", "str", "source file of the debug context"),
                _c("line", "Int32", "source line"),
                _c("first_step", "Int32", "first liveness step"),
                _c("last_step", "Int32", "last liveness step"),
                _c(
                    "bytes",
                    "Int64",
                    "bytes of its variables, when the source gives their sizes (pva does not: missing)",
                    "bytes",
                ),
            ),
            "Framework operations from debug information (pva.OperationAnalysis).",
            "pop + debug.cbor",
        ),
        Table(
            "events",
            "trace event",
            (
                _c("event_id", "int64", "event index, unique within the profile", key=True),
                _c("pid", "int64", "process id", key=True),
                _c("tid", "int64", "thread id", key=True),
                _c("parent_id", "Int64", "event_id of the enclosing event on the same thread"),
                _c("depth", "int16", "nesting depth (0 = top level)", key=True),
                _c("name", "category", "event label"),
                _c("channel", "category", "channel (pvti) or category (Chrome trace)"),
                _c("start_us", "float64", "start time", "us"),
                _c("dur_us", "float64", "duration (0 for instant events)", "us"),
                _c(
                    "device_category",
                    "category",
                    "device activity category (compute | exchange | host_io | sync | other); host_wait marks a host "
                    "call that blocks on the device (cudaDeviceSynchronize, ...: host time, never device time); "
                    "missing for other host events",
                ),
                _c(
                    "rank",
                    "Int64",
                    "rank of the distributed run (distributedInfo.rank; an nsys export's MPI Rank N thread in a "
                    "rank directory; else the file name rank-N; else given by the rank directory)",
                ),
                _c("device", "category", "device the event ran on (gpu:N, ipu:N); missing for host events"),
                _c(
                    "stream",
                    "Int64",
                    "GPU stream (Kineto args.stream; rocprof: the HSA queue; xplane: the Stream #N line; "
                    "nsys: streamId) or IPU channel number; missing on host",
                ),
                _c(
                    "correlation",
                    "Int64",
                    "launch correlation id linking a host launch call to its device event "
                    "(Kineto args.correlation, the id of ac2g flows; rocprof correlation_id.internal; xplane the "
                    "correlation_id stat; nsys correlationId)",
                ),
                _c(
                    "bookkeeping",
                    "boolean",
                    "profiler bookkeeping (the PyTorch Profiler (N) span, Spans / Traces "
                    "pseudo-threads): kept, but left out of attribution, busiest threads and top events",
                ),
                _c(
                    "instant_scope",
                    "category",
                    "for an instant event (Chrome ph i/I/R): its scope t (thread), p "
                    "(process) or g (global); missing for events with a duration, also zero-duration complete events",
                ),
                _c("args", "str", "event arguments as JSON (only when read with args)", optional=True),
            ),
            "Timed events of host (and device) threads.",
            "pvti, chrome_trace, rocprof, xplane, nsys",
            ("event_id",),
        ),
        Table(
            "flows",
            "flow event (an arrow between two events, e.g. Kineto ac2g: CPU launch -> GPU kernel)",
            (
                _c("rank", "Int64", "rank of the distributed run"),
                _c("pid", "int64", "process id", key=True),
                _c("tid", "int64", "thread id", key=True),
                _c("ts_us", "float64", "time", "us"),
                _c("phase", "category", "s (start) | t (step) | f (finish)"),
                _c("id", "str", "flow id (for ac2g the correlation id)"),
                _c("name", "category", "flow name"),
                _c("channel", "category", "flow category (ac2g, fwdbwd, ...)"),
                _c("binding", "category", "binding point (bp): e = enclosing slice; missing = next slice"),
            ),
            "Flow events as the trace holds them (kept for the timeline round trip and correlation).",
            "chrome_trace",
        ),
        Table(
            "allocations",
            "allocator event",
            (
                _c(
                    "event_id",
                    "int64",
                    "the [memory] row of events: its rank and its parent (the operator that allocated)",
                    key=True,
                ),
                _c("pid", "int64", "process id", key=True),
                _c("tid", "int64", "thread id", key=True),
                _c("ts_us", "float64", "time", "us"),
                _c(
                    "device", "category", "the allocator's device: gpu:N (CUDA, HIP), cpu, or c10's type name"
                ),
                _c("bytes", "Int64", "the block: positive allocated, negative freed", "bytes"),
                _c(
                    "total_allocated",
                    "Int64",
                    "the allocator's total allocated after the call (Kineto 2022+)",
                    "bytes",
                ),
                _c(
                    "total_reserved",
                    "Int64",
                    "the caching allocator's total reserved after the call",
                    "bytes",
                ),
                _c(
                    "addr",
                    "Int64",
                    "the block's address (Kineto 2022+): pairs a free with its allocation",
                    optional=True,
                ),
            ),
            "PyTorch profiler's [memory] instant events (profile_memory=True), read when first used.",
            "chrome_trace",
        ),
        Table(
            "threads",
            "thread",
            (
                _c("pid", "int64", "process id", key=True),
                _c("tid", "int64", "thread id", key=True),
                _c("process_name", "str", "process name"),
                _c("thread_name", "str", "thread name"),
                _c("rank", "Int64", "rank of the distributed run the thread belongs to"),
                _c(
                    "process_labels",
                    "str",
                    "process labels (Chrome process_labels metadata, e.g. Kineto's 'GPU 0')",
                ),
                _c("process_sort_index", "Int64", "display order of the process (Chrome process_sort_index)"),
                _c("thread_sort_index", "Int64", "display order of the thread (Chrome thread_sort_index)"),
            ),
            "Threads seen in a trace (and processes named by metadata: tid of the metadata event, usually 0).",
            "pvti, chrome_trace, rocprof, xplane, nsys",
            ("pid", "tid"),
        ),
        Table(
            "counters",
            "counter sample",
            (
                _c("pid", "int64", "process id", key=True),
                _c("name", "category", "counter name"),
                _c("series", "category", "series within the counter"),
                _c("ts_us", "float64", "sample time", "us"),
                _c("value", "float64", "sample value"),
            ),
            "Counter / line-graph samples.",
            "chrome_trace",
        ),
        Table(
            "cpu_slices",
            "time slice a host thread ran on a CPU (from its sched-in to the next sched-out of that thread)",
            (
                _c("rank", "Int64", "rank of the distributed run"),
                _c("pid", "int64", "process id", key=True),
                _c("tid", "int64", "thread id", key=True),
                _c("start_us", "float64", "when the thread was put on the CPU", "us"),
                _c("dur_us", "float64", "how long it ran there before it was taken off", "us"),
                _c("cpu", "Int32", "the CPU it ran on"),
            ),
            "Host threads' context switches as on-CPU intervals; a thread is off CPU (waiting, blocked or "
            "preempted) between them.",
            "nsys (SCHED_EVENTS)",
        ),
        Table(
            "cpu_samples",
            "CPU sample of a host thread (its instruction pointer, with a call stack)",
            (
                _c("rank", "Int64", "rank of the distributed run"),
                _c("pid", "int64", "process id", key=True),
                _c("tid", "int64", "thread id", key=True),
                _c("ts_us", "float64", "sample time", "us"),
                _c("function", "category", "the sampled (leaf) frame's function, (unknown) without a symbol"),
                _c(
                    "call",
                    "category",
                    "the call the sample was inside, by its call stack's outermost frame naming one: host_wait "
                    "(a call blocking on the device: a sync, a synchronous copy), communication (MPI, NCCL, "
                    "a network library polling) or other (the program's own work); missing without a stack",
                ),
            ),
            "Periodic CPU samples of host threads, each named by the function it was in.",
            "nsys (COMPOSITE_EVENTS, SAMPLING_CALLCHAINS)",
        ),
        Table(
            "metadata",
            "key",
            (
                _c("key", "str", "key", key=True),
                _c("value", "str", "value (JSON-encoded when structured)"),
            ),
            "Engine options, app/framework JSON, source file names and hashes, reader notes.",
            "all",
            ("key",),
        ),
    ]
}


def _cast(series: pd.Series, dtype: str) -> pd.Series:
    if dtype == "category":
        if not isinstance(series.dtype, pd.CategoricalDtype):
            series = (
                series.astype("str").astype("category")
                if series.dtype != "str"
                else series.astype("category")
            )
        cats = series.cat.categories
        if cats.dtype != "str":
            series = series.cat.rename_categories(cats.astype("str"))
        return series
    if dtype == "str":
        return series if series.dtype == "str" else series.astype("str")
    if dtype in {"int8", "int16", "int32", "int64"}:
        if series.dtype == dtype:
            return series
        if series.isna().any():
            raise ValueError(f"column {series.name!r} must not have missing values")
        return series.astype(dtype)
    if dtype == "float64":
        return (
            series if series.dtype == np.float64 else pd.to_numeric(series, errors="raise").astype("float64")
        )
    return series if series.dtype == dtype else series.astype(dtype)


def empty_series(dtype: str, length: int) -> pd.Series:
    """A Series of ``length`` missing values of ``dtype`` (for columns a source does not know)."""
    if dtype == "str":
        return pd.Series([None] * length, dtype="str")
    if dtype == "category":
        return pd.Series(pd.Categorical([None] * length, categories=pd.Index([], dtype="str")))
    if dtype == "float64":
        return pd.Series(np.full(length, np.nan))
    return pd.Series(pd.array([None] * length, dtype=dtype))


def conform(table: str, frame: pd.DataFrame | dict) -> pd.DataFrame:
    """Return ``frame`` with exactly the schema's columns, in order, with the schema's dtypes.

    Missing nullable columns are filled with missing values; a missing key
    column or an unknown column is a programming error (``ValueError``).
    """
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; known: {', '.join(TABLES)}")
    spec = TABLES[table]
    if isinstance(frame, dict):
        frame = pd.DataFrame(frame)
    unknown = [c for c in frame.columns if c not in {col.name for col in spec.columns}]
    if unknown:
        raise ValueError(f"table {table!r}: unknown columns {unknown}")
    n = len(frame)
    out: dict[str, pd.Series] = {}
    for col in spec.columns:
        if col.name in frame.columns:
            s = frame[col.name].reset_index(drop=True)
            try:
                out[col.name] = _cast(s, col.dtype)
            except (ValueError, TypeError) as exc:
                raise ValueError(
                    f"table {table!r} column {col.name!r}: cannot cast to {col.dtype}: {exc}"
                ) from exc
        elif col.optional:
            continue
        elif col.nullable:
            out[col.name] = empty_series(col.dtype, n)
        else:
            raise ValueError(f"table {table!r}: required column {col.name!r} is missing")
    return pd.DataFrame(out, index=pd.RangeIndex(n), copy=False)  # no second copy of a large table


def empty_table(table: str) -> pd.DataFrame:
    """An empty DataFrame with the table's columns and dtypes."""
    return conform(
        table,
        pd.DataFrame({c.name: empty_series(c.dtype, 0) for c in TABLES[table].columns if not c.optional}),
    )


def schema_markdown() -> str:
    """Render the schema as Markdown (the body of ``docs/schema.md``)."""
    lines: list[str] = []
    for spec in TABLES.values():
        lines.append(f"### `{spec.name}`\n")
        lines.append(f"One row per {spec.row}. {spec.description}  ")
        lines.append(f"Filled by: {spec.sources or 'see text'}.\n")
        lines.append("| column | dtype | unit | nullable | meaning |")
        lines.append("|---|---|---|---|---|")
        for c in spec.columns:
            null = "optional column" if c.optional else ("yes" if c.nullable else "no")
            lines.append(f"| `{c.name}` | `{c.dtype}` | {c.unit} | {null} | {c.description} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(schema_markdown())
