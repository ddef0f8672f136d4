"""The GPU work of a Kineto trace as HolisticTraceAnalysis (HTA) counts it.

HTA's definitions (0.5.0), which popprof follows so its figures match the tool GPU
engineers know (documented in ``docs/traces.md``):

- **GPU work** = events on a GPU stream (``events.stream`` set: Kineto's ``args.stream``
  is an integer, not -1): kernels, memcpy and memset. Host runtime calls (``cudaDeviceSynchronize``
  ...) have no stream and are never device time; nor are the ``Event Sync`` and ``Context Sync`` events of
  Kineto's ``cuda_sync`` track, on stream -1 (HTA's ``stream.ne(-1)``; a ``Stream Sync`` has its stream).
- **Kernel type** by name (HTA's, ``hta_kernel_type``): ``COMMUNICATION`` = ``^nccl.*Kernel``; ``MEMORY`` =
  ``^(Memcpy|Memset|dma)``; ``COMPUTATION`` = anything else not matching
  ``(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)``; the rest ``OTHER``.
- **popprof's kernel type** (``kernel_type``, what every command shows) differs in one way: communication is
  the work the device map puts in ``exchange`` (``events.device_category``), the one classification the rules
  read too. That holds collectives that are not NCCL kernels (torch symmetric-memory ``multimem_all_reduce``,
  one-shot / two-shot all-reduce, RCCL, rocSHMEM) and peer-to-peer copies, which HTA counts as compute or
  memory (``docs/traces.md``).
- **Last profiler step left out**: when a trace holds at least two distinct
  ``ProfilerStep#N`` annotations, only GPU work launched (same ``correlation``) by a host
  event starting before the last ``ProfilerStep`` is kept; the last step is incomplete.
  (A rank whose host events carry no correlation at all keeps all its work: HTA would
  drop every kernel.)
- **Rounding**: when any start time of a rank has a fractional part (ns-resolution traces),
  starts are rounded up and ends down to whole microseconds, as HTA does (``start``, ``end``: HTA's figures);
  the trace's own times stay beside them (``start_exact``, ``end_exact``: popprof's, :func:`exact_times`).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .activity import category_mask, distinct, is_bookkeeping
from .device import is_collective

COMPUTATION, COMMUNICATION, MEMORY, OTHER = "COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"
KERNEL_TYPES: tuple[str, ...] = (COMPUTATION, COMMUNICATION, MEMORY, OTHER)
_COMM = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
#: Kineto categories of kernels, memcpy and memset (HTA's idle-time breakdown reads only these).
KERNEL_CHANNELS = (
    "kernel",
    "Kernel",
    "gpu_memset",
    "Memset",
    "gpu_memcpy",
    "Memcpy",
    "mtia_ccp_events",
    "cuda_profiler_range",
)

#: the channels of copies and memsets: their work is ``MEMORY`` in popprof's kernel type (:func:`kernel_types`)
_COPY_CHANNELS = ("gpu_memcpy", "gpu_memset", "Memcpy", "Memset")


def hta_kernel_type(name: str) -> str:
    """HTA's kernel type of one kernel name."""
    if _COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    if not _NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


def kernel_type(name: str) -> str:
    """popprof's kernel type of one kernel name under the default device map: ``COMMUNICATION`` for a
    collective (:func:`popprof.trace.device.is_collective`), else HTA's type (its ``COMMUNICATION`` kept)."""
    if is_collective(name):
        return COMMUNICATION
    return hta_kernel_type(name)


def hta_kernel_types(names: pd.Series) -> pd.Categorical:
    """HTA's kernel type of each event, classifying each distinct name once."""
    cat = pd.Categorical(names)
    lut = np.array([KERNEL_TYPES.index(hta_kernel_type(str(c))) for c in cat.categories] + [3], dtype=np.int8)
    return pd.Categorical.from_codes(lut[np.asarray(cat.codes)], categories=list(KERNEL_TYPES))


def kernel_types(
    hta: pd.Categorical, exchange: np.ndarray, copies: np.ndarray | None = None
) -> pd.Categorical:
    """popprof's kernel type of each work item from HTA's (``hta``) and whether the device map put it in
    ``exchange`` (``exchange``): communication is exactly the exchange work; HTA's ``COMMUNICATION`` outside
    it (a user's device map switched it off) is ``COMPUTATION``. ``copies``: items a reader put on a copy or
    memset channel, ``MEMORY`` whatever their name (HTA reads ``Memcpy``/``Memset`` names alone; a TPU's
    ``copy-done.2`` is a copy by its HLO category)."""
    codes = np.asarray(hta.codes).copy()
    comm = KERNEL_TYPES.index(COMMUNICATION)
    codes[codes == comm] = KERNEL_TYPES.index(COMPUTATION)
    if copies is not None:
        codes[copies] = KERNEL_TYPES.index(MEMORY)
    codes[exchange] = comm
    return pd.Categorical.from_codes(codes, categories=list(KERNEL_TYPES))


def _profiler_step_names(events: pd.DataFrame) -> np.ndarray:
    """Boolean per name category: holds ``ProfilerStep``."""
    cats = events["name"].cat.categories
    return np.asarray(cats.str.contains("ProfilerStep", regex=False), dtype=bool)


def leaves_last_step_out(events: pd.DataFrame) -> bool:
    """Whether HTA's window (:func:`gpu_work`'s default) leaves the last profiler step out: the trace names two
    or more ``ProfilerStep`` s."""
    return int(_profiler_step_names(events).sum()) >= 2


def last_step_start(events: pd.DataFrame, rows: np.ndarray) -> float | None:
    """The start of the last ``ProfilerStep`` among ``rows`` (one rank's events), where HTA's window ends;
    None when the trace keeps its last step (:func:`leaves_last_step_out`) or these rows have no step."""
    if not leaves_last_step_out(events):
        return None
    steps = category_mask(events["name"].array[rows], _profiler_step_names(events))
    starts = events["start_us"].to_numpy(dtype=np.float64)[rows][steps]
    starts = starts[~np.isnan(starts)]
    return float(starts.max()) if starts.size else None


def correlation_keys(rank: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """One int64 key per (rank, correlation id), the launch correlation that joins a launch call to its GPU
    work (``rank`` -1: no rank, one of its own; ``correlation`` float64); -1 where the correlation is missing.
    The package's one such key (:func:`popprof.trace.masks.correlation_keys` reads it for a profile)."""
    ok = ~np.isnan(correlation)
    key = np.full(len(rank), -1, dtype=np.int64)
    key[ok] = (rank[ok] + 1) * (1 << 40) + correlation[ok].astype(np.int64)
    return key


def hta_rounded(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's whole microseconds: ``start`` rounded up, ``end`` down, but never before the rounded start (an
    event under a microsecond that crosses no whole one would last minus one microsecond: a zero-length
    annotation or launch call summed to -1 us)."""
    start = np.ceil(start)
    return start, np.maximum(np.floor(end), start)


def has_fraction(values: np.ndarray) -> np.ndarray:
    """``values % 1 != 0`` (a fractional part, or not finite) without the division: ``floor(v) - v`` is 0
    for a whole number, another number for a fraction and NaN for NaN or an infinity (one new array)."""
    out = np.floor(values)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, not a warning
        out -= values
    return out != 0


def _correlations(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The correlation ids of some rows as float64 (NaN where missing), converting only those rows."""
    return column.array[rows].to_numpy(dtype=np.float64, na_value=np.nan)


def _times(
    values: np.ndarray, rows: np.ndarray | None, rank: np.ndarray, rounded: np.ndarray, rounding
) -> np.ndarray:
    """``values[rows]`` (a new array; ``rows`` None: ``values`` as they are, ``rank`` theirs), with those of the
    ranks in ``rounded`` rounded by ``rounding`` (``np.ceil`` for starts, ``np.floor`` for ends: HTA's)."""
    out = values[rows] if rows is not None else values
    if rounded.size:
        mine = rank[rows] if rows is not None else rank
        hit = mine == rounded[0] if rounded.size == 1 else np.isin(mine, rounded)
        if hit.all():
            rounding(out, out=out)
        else:
            out[hit] = rounding(out[hit])
    return out


def _before_last_step(
    rank: np.ndarray, start: np.ndarray, step_rank: np.ndarray, step_start: np.ndarray
) -> np.ndarray:
    """Boolean per event: it does not start at or after the start of its rank's last profiler step (a
    rank without steps keeps everything; so does a rank whose step starts are all missing)."""
    keep = np.ones(len(rank), dtype=bool)
    for r in distinct(step_rank).tolist():
        limit = np.fmax.reduce(step_start[step_rank == r])  # the latest start, missing ones skipped
        mine = rank == r
        keep[mine] = ~(start[mine] >= limit)
    return keep


def gpu_work(
    events: pd.DataFrame,
    include_last_step: bool = False,
    *,
    rank: np.ndarray | None = None,
    bookkeeping: np.ndarray | None = None,
    stream: np.ndarray | None = None,
) -> pd.DataFrame:
    """GPU work of every rank by HTA's definitions.

    Columns: ``rank`` (-1 when unknown), ``device``, ``stream``, ``name``, ``channel``,
    ``correlation``, ``start``, ``end`` (HTA-rounded), ``kernel_type`` (popprof's), ``hta_kernel_type``
    (HTA's) and ``launch_start``
    (start of the host event with the same correlation, NaN when there is none).
    Vectorised: correlation ids are joined through one int64 key per (rank, id). ``rank`` (each event's
    rank, -1 when unknown), ``bookkeeping`` (the events' ``is_bookkeeping``) and ``stream`` (the events with a
    stream): when the caller has them. When HTA's rounding changed any time, ``start_exact`` and ``end_exact``
    hold the trace's own times of the same rows (:func:`exact_times`: popprof's figures read those).
    """
    bookkeeping = is_bookkeeping(events) if bookkeeping is None else bookkeeping
    stream = events["stream"].notna().to_numpy() if stream is None else stream
    on_stream = stream & ~bookkeeping
    rank = events["rank"].fillna(-1).to_numpy(dtype=np.int64) if rank is None else rank
    start = events["start_us"].to_numpy(dtype=np.float64)  # read only: the rows needed are taken from it
    correlation = events["correlation"]
    host = ~on_stream & correlation.notna().to_numpy() & ~bookkeeping
    step_names = _profiler_step_names(events)
    filtering = (not include_last_step) and leaves_last_step_out(events)
    # HTA rounding, per rank, when the rank's times have fractional parts (applied to the rows taken)
    fractional = has_fraction(start)
    rounded = distinct(rank[fractional]) if fractional.any() else np.empty(0, dtype=np.int64)
    host_rows = np.flatnonzero(host)
    host_start = _times(start, host_rows, rank, rounded, np.ceil)
    host_ranks = distinct(rank[host_rows]) if filtering else None
    if filtering:
        step_rows = np.flatnonzero(category_mask(events["name"].array, step_names) & ~on_stream)
        if step_rows.size:
            before = _before_last_step(
                rank[host_rows], host_start, rank[step_rows], _times(start, step_rows, rank, rounded, np.ceil)
            )
            host_rows, host_start = host_rows[before], host_start[before]
    host_corr = _correlations(correlation, host_rows)
    host_keys = correlation_keys(rank[host_rows], host_corr)
    index = pd.Index(host_keys)
    if not index.is_unique:  # a correlation id launched twice: the last launch is the one
        last = ~index.duplicated(keep="last")
        host_keys, host_rows, host_start = host_keys[last], host_rows[last], host_start[last]
        index = pd.Index(host_keys)
    work_rows = np.flatnonzero(on_stream)
    # Kineto's stream -1 is no stream (cuda_sync's Event Sync and Context Sync): not GPU work to HTA
    no_stream = (events["stream"].array[work_rows] == -1).to_numpy(dtype=bool, na_value=False)
    if no_stream.any():
        work_rows = work_rows[~no_stream]
    work_corr = _correlations(correlation, work_rows)
    position = index.get_indexer(correlation_keys(rank[work_rows], work_corr))
    matched = position >= 0
    if filtering:
        # a rank whose host events carry no correlation at all cannot tell launches apart: keep its work
        work_rank = rank[work_rows]
        linked = work_rank == host_ranks[0] if host_ranks.size == 1 else np.isin(work_rank, host_ranks)
        keep = matched | ~linked
        work_rows, position, matched, work_corr = (
            work_rows[keep],
            position[keep],
            matched[keep],
            work_corr[keep],
        )
    launch_start = np.where(
        matched, host_start[np.maximum(position, 0)] if len(host_rows) else np.nan, np.nan
    )
    dur = events["dur_us"].to_numpy(dtype=np.float64)[work_rows]
    work_end = start[work_rows] + np.where(np.isnan(dur), 0.0, dur)  # fillna(0.0), from the start unrounded
    exact = (start[work_rows], work_end.copy()) if rounded.size else None  # the trace's own, for popprof's
    work_end = _times(work_end, None, rank[work_rows], rounded, np.floor)
    work_start = _times(start, work_rows, rank, rounded, np.ceil)
    device = events["device"].array
    order = np.lexsort((work_start, np.asarray(device.codes)[work_rows], rank[work_rows]))
    work_rows, launch_start = work_rows[order], launch_start[order]  # rows by (rank, device, start)
    work_start, work_end = work_start[order], work_end[order]
    work_corr = work_corr[order]
    names = events["name"].array[work_rows]
    stream = events["stream"].array[work_rows]
    hta_types = hta_kernel_types(names)
    exchange = np.asarray(events["device_category"].array[work_rows] == "exchange", dtype=bool)
    copies = np.asarray(events["channel"].array[work_rows].isin(_COPY_CHANNELS), dtype=bool)
    columns = {} if exact is None else {"start_exact": exact[0][order], "end_exact": exact[1][order]}
    return pd.DataFrame(
        {
            "rank": rank[work_rows],
            "device": device[work_rows],
            "stream": stream.to_numpy(dtype=np.float64, na_value=np.nan).astype(np.int64),
            "name": names,
            "channel": events["channel"].array[work_rows],
            "correlation": work_corr,
            "start": work_start,
            "end": work_end,
            "kernel_type": kernel_types(hta_types, exchange, copies),
            "hta_kernel_type": hta_types,
            "launch_start": launch_start,
            **columns,
        },
        copy=False,  # every column is a new array of this call's: no second copy
    )


def exact_times(work: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The work items' start and end in the trace's own times (:func:`gpu_work`'s ``start`` / ``end`` are
    HTA's, rounded to whole microseconds on a rank whose times have fractions)."""
    if "start_exact" in work:
        return work["start_exact"].to_numpy(), work["end_exact"].to_numpy()
    return work["start"].to_numpy(), work["end"].to_numpy()
