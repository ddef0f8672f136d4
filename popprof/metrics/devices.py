"""Per-device figures, the same table for GPU traces and IPU profiles (HTA's definitions on GPUs).

``device_breakdown(profile)`` has one row per (rank, device):

| column | GPU (Kineto trace; HTA 0.5.0 definitions) | IPU (``steps``; ``.pvti`` events) |
|---|---|---|
| ``span_us`` | HTA's window: first GPU-work start to last end (kernel_time) | sum of the IPU's step cycles / clock |
| ``busy_us`` | union of GPU work | step time (pvti: union of device events) |
| ``idle_pct`` | (span - busy) / span (HTA ``get_temporal_breakdown``) | 0 for steps (pvti: gaps) |
| ``compute_pct`` | union of COMPUTATION kernels / span | compute steps |
| ``non_compute_pct`` | 100 - idle - compute | everything else |
| ``communication_pct`` | union of COMMUNICATION kernels (below) / span | exchange + global_exchange |
| ``memory_pct`` | union of MEMORY (memcpy / memset) work / span | host_io |
| ``comm_comp_overlap_pct`` | overlapped communication / communication (HTA) | 0 (BSP: never overlap) |
| ``host_wait_pct`` | host blocked on device: the rank's ``host_wait`` calls in the span / span; TPU: none | missing |
| ``work_items`` / ``streams`` | kernels, memcpy, memset / their streams | steps (pvti: device events) / 0 |

On GPUs the work is that launched before the last ``ProfilerStep`` when the trace holds two or more
(``trace/gpu_work.py``): HTA leaves the last, incomplete step out of the window. ``host_wait_pct`` is
never above 100, and missing on a TPU, none of whose runtime calls is known to block. From a
``.pvti``, an IPU's ``span_us`` runs from its first to its last device event.

GPU communication is the device map's ``exchange`` (NCCL/RCCL and other collectives, as ``check`` reads it);
``hta=True`` gives HTA's own figures (its NCCL kernels only).

The other functions give HTA's other tables: :func:`kernel_breakdown`
(``get_gpu_kernel_breakdown`` kernel-type time with overlaps), :func:`idle_breakdown`
(``get_idle_time_breakdown``: HTA's host wait, i.e. the device idle with the host not submitting, kernel
wait and other, per stream) and
:func:`launch_delays` (``get_cuda_kernel_launch_stats``). See ``docs/traces.md``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..model.profile import Profile
from ..trace import masks
from ..trace import spans as im
from ..trace.activity import category_mask, distinct
from ..trace.gpu_work import (
    COMMUNICATION,
    COMPUTATION,
    KERNEL_CHANNELS,
    KERNEL_TYPES,
    MEMORY,
    correlation_keys,
    exact_times,
    gpu_work,
    has_fraction,
)
from ..trace.nesting import thread_bounds

BREAKDOWN_COLUMNS = [
    "platform",
    "rank",
    "device",
    "span_us",
    "busy_us",
    "idle_us",
    "compute_us",
    "non_compute_us",
    "communication_us",
    "memory_us",
    "host_wait_us",
    "idle_pct",
    "compute_pct",
    "non_compute_pct",
    "communication_pct",
    "memory_pct",
    "comm_comp_overlap_pct",
    "host_wait_pct",
    "work_items",
    "streams",
]
#: HTA's ``consecutive_kernel_delay`` default: a gap shorter than this (us) between two kernels of a
#: stream whose launch came before the previous kernel ended is launch overhead ("kernel wait").
CONSECUTIVE_KERNEL_DELAY_US = 30.0
#: Launch calls HTA correlates with their GPU work (plus their HIP equivalents, which HTA lacks).
LAUNCH_CALLS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemcpyAsync",
    "hipMemsetAsync",
)
_KIND_LABELS = (COMPUTATION, COMMUNICATION, MEMORY)


def launches_without_device(profile: Profile) -> dict[str, int]:
    """Kernel launch calls (:data:`LAUNCH_CALLS`, on the host) of a trace that holds no device activity at
    all, by call name: the device side was launched but not recorded. Empty when the trace has device
    events or no launch calls."""
    events = profile.get("events")
    if events is None or events.empty or masks.device_activity_mask(profile).any():
        return {}
    host = events["stream"].isna() if "stream" in events.columns else pd.Series(True, index=events.index)
    calls = events.loc[events["name"].isin(LAUNCH_CALLS) & host, "name"].astype(str)
    return {str(k): int(v) for k, v in calls.value_counts().items()}


def named_devices_without_activity(profile: Profile) -> list[str]:
    """The GPUs a trace's ``deviceProperties`` names (their ``name``, one per device) when the trace holds
    no device activity and no kernel launch at all: the devices were there, but no kernel, copy or launch
    was recorded (the profiler ran without CUDA activity). Empty otherwise (launches without device events
    are :func:`launches_without_device`)."""
    from .peaks import device_properties

    events = profile.get("events")
    props = device_properties(profile)
    if (
        not props
        or events is None
        or masks.device_activity_mask(profile).any()
        or launches_without_device(profile)
    ):
        return []
    return [str(p.get("name") or "unnamed") for p in props]


def device_work(profile: Profile) -> pd.DataFrame | None:
    """The trace's GPU work items (:func:`popprof.trace.gpu_work.gpu_work`, sorted by rank, device and start),
    built once per profile; None without work on a stream. ``start`` / ``end`` are HTA's (a ns-resolution
    rank's times rounded to whole microseconds: HTA's figures, its idle causes and launch statistics);
    popprof's device table, kernel-type breakdown and top kernels read the trace's own
    (:func:`popprof.trace.gpu_work.exact_times`), so that they agree with the time account."""
    events = profile.get("events")
    if events is None or events.empty or not masks.stream_mask(profile).any():
        return None
    return profile.cached(
        "devices.gpu_work",
        lambda: gpu_work(
            events,
            rank=masks.rank_array(profile),
            bookkeeping=masks.bookkeeping_mask(profile),
            stream=masks.stream_mask(profile),
        ),
    )


def _work_groups(profile: Profile, work: pd.DataFrame) -> list[tuple[int, str, slice]]:
    """``(rank, device, rows)`` of each (rank, device) of the GPU work, in the order of
    ``work.groupby(["rank", "device"], sort=True, observed=True)``: the work comes sorted by
    (rank, device, start), so each is one run of rows (work without a device is in none, as in groupby)."""

    def build() -> list[tuple[int, str, slice]]:
        rank = work["rank"].to_numpy()
        codes = np.asarray(work["device"].array.codes)
        labels = work["device"].array.categories
        bounds = thread_bounds(rank, codes).tolist()  # the runs of equal (rank, device code)
        return [
            (rank[lo], labels[codes[lo]], slice(lo, hi))
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
            if codes[lo] >= 0
        ]

    return profile.cached("devices.work_groups", build)


def _percent_of(part: float | None, whole: float) -> float | None:
    if part is None:
        return None
    return 100.0 * part / whole if whole > 0 else None


def _row(
    platform: str,
    rank,
    device,
    span: float,
    busy: float,
    compute: float,
    comm: float,
    memory: float,
    overlap: float | None,
    host_wait: float | None,
    kernels: int,
    streams: int,
) -> dict:
    idle = max(span - busy, 0.0)
    non_compute = max(span - compute - idle, 0.0)
    return {
        "platform": platform,
        "rank": rank,
        "device": device,
        "span_us": span,
        "busy_us": busy,
        "idle_us": idle,
        "compute_us": compute,
        "non_compute_us": non_compute,
        "communication_us": comm,
        "memory_us": memory,
        "host_wait_us": host_wait,
        "idle_pct": _percent_of(idle, span),
        "compute_pct": _percent_of(compute, span),
        "non_compute_pct": _percent_of(non_compute, span),
        "communication_pct": _percent_of(comm, span),
        "memory_pct": _percent_of(memory, span),
        "comm_comp_overlap_pct": overlap,
        "host_wait_pct": _percent_of(host_wait, span),
        "work_items": kernels,
        "streams": streams,
    }


def _host_wait_by_rank(profile: Profile) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each rank's host calls blocking on the device, as (start, end) arrays (bookkeeping left out)."""
    events = profile.events
    rows = np.flatnonzero(masks.host_wait_mask(profile) & ~masks.bookkeeping_mask(profile))
    if rows.size == 0:
        return {}
    rank = masks.rank_array(profile)[rows]
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    dur = events["dur_us"].to_numpy(dtype=np.float64)[rows]
    end = start + np.where(np.isnan(dur), 0.0, dur)  # fillna(0.0)
    return {int(r): (start[rank == r], end[rank == r]) for r in np.unique(rank)}


def host_wait_in_window(
    waits: dict[int, tuple[np.ndarray, np.ndarray]], rank: int, lo: float, hi: float
) -> float:
    """The union of ``rank``'s host waits inside the device's window ``[lo, hi]`` (never longer than it).

    The host-wait share is this over the window (``docs/figures.md``): waits outside the
    window (before the first kernel, after the last) are not part of the device's span.
    """
    if rank not in waits or hi <= lo:
        return 0.0
    start, end = waits[rank]
    return im.union_length(np.clip(start, lo, hi), np.clip(end, lo, hi))


def _kind_unions(
    profile: Profile, work: pd.DataFrame, hta: bool = False
) -> list[dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per (rank, device) of :func:`_work_groups`: the merged intervals of each kernel type of
    :data:`_KIND_LABELS` (``merge_intervals``: merging them again gives them back), computed once per scope
    for the per-device table and the kernel-type breakdown; ``hta``: by HTA's kernel types."""

    def build() -> list[dict[str, tuple[np.ndarray, np.ndarray]]]:
        starts, ends = (work["start"].to_numpy(), work["end"].to_numpy()) if hta else exact_times(work)
        kinds = np.asarray(work["hta_kernel_type" if hta else "kernel_type"].array.codes)
        same_times = "start_exact" not in work
        if hta and same_times and np.array_equal(kinds, np.asarray(work["kernel_type"].array.codes)):
            return _kind_unions(profile, work)  # every collective is an NCCL kernel: the same unions
        out = []
        for _, _, part in _work_groups(profile, work):
            start, end, kind = starts[part], ends[part], kinds[part]
            merged = {}
            for k in _KIND_LABELS:
                mine = kind == KERNEL_TYPES.index(k)
                merged[k] = im.merge_intervals(start[mine], end[mine])
            out.append(merged)
        return out

    return profile.cached("devices.kind_unions.hta" if hta else "devices.kind_unions", build)


def _length(intervals: tuple[np.ndarray, np.ndarray]) -> float:
    """Total length of merged intervals (:func:`popprof.trace.spans.union_length` of what they merge)."""
    start, end = intervals
    return float((end - start).sum())


def _gpu_breakdown(profile: Profile, work: pd.DataFrame, hta: bool = False) -> list[dict]:
    waits = _host_wait_by_rank(profile)
    rows = []
    starts, ends = (work["start"].to_numpy(), work["end"].to_numpy()) if hta else exact_times(work)
    streams = work["stream"].to_numpy()
    groups = _work_groups(profile, work)
    for (rank, device, part), spans in zip(groups, _kind_unions(profile, work, hta), strict=True):
        start, end = starts[part], ends[part]
        span = float(end.max() - start.min())
        busy = im.union_length(start, end)
        comp, comm, mem = (_length(spans[k]) for k in _KIND_LABELS)
        overlap = None
        if comm > 0:
            states = im.state_durations([spans[COMMUNICATION], spans[COMPUTATION]])
            overlap = 100.0 * states.get(3, 0.0) / comm
        rows.append(
            _row(
                "gpu",
                None if rank < 0 else int(rank),
                device,
                span,
                busy,
                comp,
                comm,
                mem,
                overlap,
                None  # no TPU runtime call is known to block: not measured, not zero
                if str(device).startswith("tpu:")
                else host_wait_in_window(waits, int(rank), float(start.min()), float(end.max())),
                len(start),
                len(distinct(streams[part])),
            )
        )
    return rows


def _ipu_breakdown_steps(profile: Profile) -> list[dict]:
    steps = profile.steps
    clock = profile.target_value("clock_hz")
    scale = 1e6 / float(clock) if clock and not pd.isna(clock) and float(clock) > 0 else None
    cycles = steps["cycles"].fillna(0).astype("float64")
    table = cycles.groupby([steps["ipu"], steps["category"].astype("str")]).sum().unstack(fill_value=0.0)
    rows = []
    for ipu, by_cat in table.iterrows():
        total = float(by_cat.sum())
        unit = scale if scale is not None else 1.0
        comm = float(by_cat.get("exchange", 0.0) + by_cat.get("global_exchange", 0.0))
        row = _row(
            "ipu",
            None,
            f"ipu:{int(ipu)}",
            total * unit,
            total * unit,
            float(by_cat.get("compute", 0.0)) * unit,
            comm * unit,
            float(by_cat.get("host_io", 0.0)) * unit,
            0.0,
            None,
            0,
            0,
        )
        if scale is None:  # shares stand; absolute times need the clock
            for key in (
                "span_us",
                "busy_us",
                "idle_us",
                "compute_us",
                "non_compute_us",
                "communication_us",
                "memory_us",
            ):
                row[key] = None
        row["work_items"] = int((steps["ipu"] == ipu).sum())
        rows.append(row)
    return rows


def _event_breakdown(profile: Profile) -> list[dict]:
    """Device events without streams (``.pvti``): one row per device (``ipu`` when unnamed)."""
    events = profile.events
    mask = masks.device_activity_mask(profile) & ~masks.bookkeeping_mask(profile)
    if not mask.any():
        return []
    dev = events[mask]
    start = dev["start_us"].to_numpy(dtype=np.float64)
    end = start + dev["dur_us"].fillna(0.0).to_numpy(dtype=np.float64)
    ok = ~np.isnan(start)
    category = dev["device_category"].astype("str").to_numpy()
    device = (
        dev["device"].astype("str").fillna("ipu").to_numpy()
        if dev["device"].notna().any()
        else np.full(len(dev), "ipu", dtype=object)
    )
    rank = dev["rank"].fillna(-1).to_numpy(dtype=np.int64)
    waits = _host_wait_by_rank(profile)
    rows = []
    for key in sorted(set(zip(rank.tolist(), device.tolist(), strict=True))):
        sel = ok & (rank == key[0]) & (device == key[1])
        if not sel.any():
            continue
        s, e, c = start[sel], end[sel], category[sel]
        comp = im.union_length(s[c == "compute"], e[c == "compute"])
        comm = im.union_length(s[c == "exchange"], e[c == "exchange"])
        overlap = None
        if comm > 0:
            states = im.state_durations(
                [(s[c == "exchange"], e[c == "exchange"]), (s[c == "compute"], e[c == "compute"])]
            )
            overlap = 100.0 * states.get(3, 0.0) / comm
        rows.append(
            _row(
                "ipu",
                None if key[0] < 0 else key[0],
                key[1],
                float(e.max() - s.min()),
                im.union_length(s, e),
                comp,
                comm,
                im.union_length(s[c == "host_io"], e[c == "host_io"]),
                overlap,
                host_wait_in_window(waits, key[0], float(s.min()), float(e.max())) if waits else None,
                int(sel.sum()),
                0,
            )
        )
    return rows


def device_breakdown(profile: Profile, hta: bool = False) -> pd.DataFrame:
    """One row per (rank, device): busy, idle, compute, communication, memory shares (see the module doc).

    GPU traces follow HolisticTraceAnalysis's ``get_temporal_breakdown`` and
    ``get_comm_comp_overlap``, with popprof's communication (the device map's ``exchange``: collectives that
    are not NCCL kernels too); ``hta=True``: HTA's own kernel types, its figures exactly. IPU profiles read
    ``steps`` (per IPU) or, for ``.pvti`` traces, the device events. Empty when the profile has no device
    activity.
    """
    key = "devices.breakdown.hta" if hta else "devices.breakdown"
    return profile.cached(key, lambda: _breakdown(profile, hta)).copy()


def _breakdown(profile: Profile, hta: bool = False) -> pd.DataFrame:
    rows: list[dict] = []
    work = device_work(profile)
    if work is not None:  # a GPU trace (events on streams)
        rows = _gpu_breakdown(profile, work, hta) if not work.empty else []
    elif profile.has("steps") and not profile.steps.empty:
        rows = _ipu_breakdown_steps(profile)
    elif profile.has("events") and not profile.events.empty:
        rows = _event_breakdown(profile)
    frame = pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS)
    frame["rank"] = frame["rank"].astype("Int64")
    for col in ("work_items", "streams"):
        frame[col] = frame[col].astype("int64")
    return frame


def kernel_breakdown(profile: Profile, hta: bool = False) -> pd.DataFrame:
    """Time per kernel type and overlap of types, per (rank, device) (HTA ``get_gpu_kernel_breakdown``).

    Columns ``rank``, ``device``, ``kernel_type`` (``COMPUTATION``, ``COMMUNICATION``,
    ``MEMORY`` or e.g. ``COMPUTATION overlapping COMMUNICATION``), ``time_us`` (each type's
    work merged first, then the timeline split by which types run) and ``pct`` of the
    rank/device's typed time. ``hta=True``: by HTA's kernel types (its figures exactly). Found once per
    profile scope, and once for both when HTA's kernel types are popprof's.
    """
    work = device_work(profile)
    if work is None:
        return _kernel_frame([])
    unions = _kind_unions(profile, work, hta)
    if hta and unions is _kind_unions(profile, work):
        return kernel_breakdown(profile)
    return profile.cached(
        "devices.kernel_breakdown.hta" if hta else "devices.kernel_breakdown",
        lambda: _kernel_frame(_kernel_rows(profile, work, unions)),
    ).copy()


def _kernel_rows(
    profile: Profile, work: pd.DataFrame, unions: list[dict[str, tuple[np.ndarray, np.ndarray]]]
) -> list[dict]:
    """The rows of :func:`kernel_breakdown` from each (rank, device)'s kernel-type unions."""
    rows = []
    groups = _work_groups(profile, work)
    for (rank, device, _), spans in zip(groups, unions, strict=True):
        states = im.state_durations([spans[k] for k in _KIND_LABELS])
        total = sum(states.values())
        for state, time in sorted(states.items()):
            label = " overlapping ".join(k for bit, k in enumerate(_KIND_LABELS) if state & (1 << bit))
            rows.append(
                {
                    "rank": None if rank < 0 else int(rank),
                    "device": device,
                    "kernel_type": label,
                    "time_us": time,
                    "pct": 100.0 * time / total if total > 0 else None,
                }
            )
    return rows


def _kernel_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["rank", "device", "kernel_type", "time_us", "pct"])
    frame["rank"] = frame["rank"].astype("Int64")
    return frame


#: Columns of :func:`top_kernels`: nsys's and HTA's kernel statistics (``std_us`` is the sample
#: standard deviation, None for a kernel that ran once).
KERNEL_STAT_COLUMNS = ["name", "kernel_type", "count", "total_us", "mean_us", "min_us", "max_us", "std_us"]


def top_kernels(profile: Profile, top: int = 10) -> pd.DataFrame:
    """The GPU work names taking the most time, with ``count``, ``total_us``, ``mean_us``, ``min_us``,
    ``max_us`` and ``std_us`` of their durations (:data:`KERNEL_STAT_COLUMNS`), the trace's own times."""
    work = device_work(profile)
    if work is None:
        return pd.DataFrame(columns=KERNEL_STAT_COLUMNS)
    names = work["name"].array
    codes = np.asarray(names.codes)
    named = codes >= 0  # as groupby's: work without a name is in no group
    start, end = exact_times(work)
    dur = pd.Series((end - start)[named])
    # one groupby over the name codes (category order, as observed=True gives), each statistic from it
    grouped = dur.groupby(codes[named], sort=True)
    out = pd.DataFrame(
        {
            "count": grouped.size(),
            "total_us": grouped.sum(),
            "mean_us": grouped.mean(),
            "min_us": grouped.min(),
            "max_us": grouped.max(),
            "std_us": grouped.std(),
        }
    )
    out = out.sort_values("total_us", ascending=False, kind="stable").head(top)
    shown = names.categories.take(out.index.to_numpy()).astype("str")
    # each shown name's type as the work frame has it at its first item (the device map's exchange is
    # communication): a search per shown name, not a grouping of every item
    first = np.array([np.argmax(codes == code) for code in out.index.tolist()], dtype=np.intp)
    types = work["kernel_type"].array.take(first)
    out = out.reset_index(drop=True).assign(name=pd.array(shown, dtype="str"), kernel_type=np.asarray(types))
    return out[KERNEL_STAT_COLUMNS]


class _Gaps(NamedTuple):
    """The work items of every stream, sorted by (rank, device, stream, start), with the gap before each."""

    rows: np.ndarray  # rows of the GPU work
    rank: np.ndarray  # int64, -1 when unknown
    device_codes: np.ndarray  # codes of the work's device categories, -1 when missing
    stream: np.ndarray
    start: np.ndarray
    prev_end: np.ndarray  # end of the stream's previous item (NaN for a stream's first)
    gap: np.ndarray  # start - prev_end (NaN for a stream's first)
    launch: np.ndarray  # start of the launch call, NaN when it is not in the trace
    category: np.ndarray  # 0 host_wait, 1 kernel_wait, 2 other
    same: np.ndarray  # the item is on the previous item's stream


#: ``idle_category`` names by :class:`_Gaps` code.
IDLE_CAUSES = ("host_wait", "kernel_wait", "other")


def _gaps(work: pd.DataFrame, consecutive_kernel_delay_us: float) -> _Gaps:
    """HTA's per-item idle classification (``_analyze_idle_time_for_stream``), vectorised over streams."""
    channels = work["channel"].array
    rows = np.flatnonzero(category_mask(channels, channels.categories.isin(KERNEL_CHANNELS)))
    rank, stream = work["rank"].to_numpy()[rows], work["stream"].to_numpy()[rows]
    device_codes = np.asarray(work["device"].array.codes)[rows]
    start = work["start"].to_numpy()[rows]
    # ties on start (HTA sorts by ts alone, in no set order) go shortest first: a TPU's XLA Ops line has
    # zero-length ops at the picosecond a long copy-done starts (xprof's tpu_inference_2), and after the long
    # op each would end a gap that starts at its end, of minus its length
    end = work["end"].to_numpy(dtype=np.float64)[rows]
    order = np.lexsort((end, start, stream, device_codes, rank))
    rows = rows[order]
    rank, stream, device_codes, start = rank[order], stream[order], device_codes[order], start[order]
    same = np.zeros(len(rows), dtype=bool)
    same[1:] = (rank[1:] == rank[:-1]) & (stream[1:] == stream[:-1]) & (device_codes[1:] == device_codes[:-1])
    ends = work["end"].to_numpy(dtype=np.float64)[rows]
    # the stream's busy frontier: the latest end of its earlier items (the previous item's end, unless items
    # overlap: duplicated events, or one long item holding shorter ones); a gap is never below zero, so
    # overlapping items are not negative idle time (idle causes summing to minus 20 ms)
    frontier = pd.Series(ends).groupby(np.cumsum(~same)).cummax().to_numpy(dtype=np.float64)
    prev_end = np.full(len(rows), np.nan)
    prev_end[1:] = np.where(same[1:], frontier[:-1], np.nan)
    gap = np.maximum(start - prev_end, 0.0)  # NaN (a stream's first item) stays NaN
    launch = work["launch_start"].to_numpy(dtype=np.float64)[rows]
    # a launch call outside the trace (NaN) is never host_wait; HTA compares the file's first event instead
    host_wait = launch > prev_end
    kernel_wait = ~host_wait & (gap < consecutive_kernel_delay_us)
    category = np.where(host_wait, 0, np.where(kernel_wait, 1, 2))
    return _Gaps(rows, rank, device_codes, stream, start, prev_end, gap, launch, category, same)


#: Columns of :func:`idle_gaps`.
IDLE_GAP_COLUMNS = [
    "rank",
    "device",
    "stream",
    "name",
    "start_us",
    "prev_end_us",
    "gap_us",
    "launch_start_us",
    "correlation",
    "idle_category",
]


def idle_gaps(
    profile: Profile, consecutive_kernel_delay_us: float = CONSECUTIVE_KERNEL_DELAY_US
) -> pd.DataFrame:
    """Each work item of each stream with the gap before it and its cause (the rows :func:`idle_breakdown` sums).

    Columns :data:`IDLE_GAP_COLUMNS`: ``prev_end_us`` is the latest end of the stream's earlier items (the
    previous item's, unless items overlap) and ``gap_us`` = ``start_us`` - ``prev_end_us``, or 0 for an item
    starting before that (both NaN for a stream's first item, which
    :func:`idle_breakdown` counts as 0); ``launch_start_us`` is NaN when the launch call is not in the
    trace (then the gap is never ``host_wait``); ``correlation`` is the item's (NaN without one: MTIA's
    ``event_wait``, ``dma_request``). Times are HTA-rounded (``trace/gpu_work.py``).
    """
    work = device_work(profile)
    if work is None:
        return pd.DataFrame(columns=IDLE_GAP_COLUMNS)
    g = _gaps(work, consecutive_kernel_delay_us)
    device = work["device"].array
    labels = np.asarray(device.categories, dtype=object)
    return pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.where(g.rank >= 0, g.rank, 0), g.rank < 0),
            "device": pd.array(
                np.where(g.device_codes >= 0, labels[np.maximum(g.device_codes, 0)], None), dtype="str"
            ),
            "stream": g.stream,
            "name": work["name"].array[g.rows],
            "start_us": g.start,
            "prev_end_us": g.prev_end,
            "gap_us": g.gap,
            "launch_start_us": g.launch,
            "correlation": work["correlation"].to_numpy(dtype=np.float64)[g.rows],
            "idle_category": pd.array(np.asarray(IDLE_CAUSES, dtype=object)[g.category], dtype="str"),
        },
        columns=IDLE_GAP_COLUMNS,
    )


def idle_breakdown(
    profile: Profile, consecutive_kernel_delay_us: float = CONSECUTIVE_KERNEL_DELAY_US
) -> pd.DataFrame:
    """Idle time per (rank, device, stream) by cause (HTA ``get_idle_time_breakdown``).

    Kernels, memcpy and memset of each stream in start order; the gap before each is
    ``host_wait`` when its launch call started after the previous one ended (the host
    did not enqueue work fast enough), else ``kernel_wait`` when shorter than
    ``consecutive_kernel_delay_us``, else ``other``. A work item whose launch call is not in the
    trace is never ``host_wait`` (HTA's difference: docs/figures.md). Columns ``rank``, ``device``,
    ``stream``, ``idle_category``, ``idle_us``, ``idle_ratio`` (of the stream's idle time). Found once per
    profile scope for each delay (the summary and the host rules read it); each caller gets its own copy.
    """
    key = f"devices.idle_breakdown.{float(consecutive_kernel_delay_us)!r}"
    return profile.cached(key, lambda: _idle_breakdown(profile, consecutive_kernel_delay_us)).copy()


def _idle_breakdown(profile: Profile, consecutive_kernel_delay_us: float) -> pd.DataFrame:
    work = device_work(profile)
    columns = ["rank", "device", "stream", "idle_category", "idle_us", "idle_ratio"]
    if work is None:
        return pd.DataFrame(columns=columns)
    g = _gaps(work, consecutive_kernel_delay_us)
    device = work["device"].array
    rank, stream, device_codes, same = g.rank, g.stream, g.device_codes, g.same
    # the (rank, device, stream) runs of the sorted rows; a row without a device is in no group (as in groupby)
    run_start = np.flatnonzero(~same)
    run = np.cumsum(~same) - 1
    keep = device_codes >= 0
    # one group key per (run, cause): the order of groupby([rank, device, stream, cause], sort=True), whose
    # sums (the same rows in the same order) this gives
    key = (run * 3 + g.category)[keep]
    idle = pd.Series(np.nan_to_num(g.gap, nan=0.0)[keep]).groupby(key, sort=True).sum()
    group, idle_us = idle.index.to_numpy(), idle.to_numpy()
    picked = run_start[group // 3]
    totals = pd.Series(idle_us).groupby(group // 3).transform("sum").to_numpy()  # the stream's idle time
    out_rank = rank[picked]
    causes = np.array(IDLE_CAUSES, dtype=object)
    return pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.where(out_rank >= 0, out_rank, 0), out_rank < 0),
            "device": pd.array(
                np.asarray(device.categories, dtype=object)[device_codes[picked]], dtype="str"
            ),
            "stream": stream[picked],
            "idle_category": pd.array(causes[group % 3], dtype="str"),
            "idle_us": idle_us,
            "idle_ratio": np.where(totals > 0, idle_us / np.where(totals > 0, totals, 1.0), np.nan),
        },
        columns=columns,
    )


#: Columns of :func:`launch_delays`.
LAUNCH_DELAY_COLUMNS = [
    "rank",
    "device",
    "correlation",
    "launch",
    "name",
    "cpu_duration_us",
    "gpu_duration_us",
    "launch_delay_us",
]


class LaunchPairs(NamedTuple):
    """Launch calls joined with their GPU work: one entry per (call, work item) pair, in the join's order."""

    rank: np.ndarray  # int64, -1 when unknown
    correlation: np.ndarray  # float64
    call: np.ndarray  # event rows of the launch calls
    item: np.ndarray  # rows of the GPU work
    cpu: np.ndarray  # the call's duration (HTA-rounded)
    delay: np.ndarray  # work start - call end, clipped at 0 (-0.0 and NaN stay)


def launch_pairs(
    profile: Profile, work: pd.DataFrame, calls: tuple[str, ...] = LAUNCH_CALLS
) -> LaunchPairs | None:
    """The pairs of :func:`launch_delays` as arrays; None when the trace has no launch call. Joined once per
    profile scope for the profile's own GPU work (:func:`device_work`: the launch statistics and the
    launch-overhead figures both read them). ``calls``: the launch calls' names (the queue length adds the
    two HTA's queue counts beside these)."""
    if work is device_work(profile) and calls == LAUNCH_CALLS:
        return profile.cached("devices.launch_pairs", lambda: _launch_pairs(profile, work, calls))
    return _launch_pairs(profile, work, calls)


def _launch_pairs(profile: Profile, work: pd.DataFrame, calls: tuple[str, ...]) -> LaunchPairs | None:
    events = profile.events
    names = events["name"].array
    is_call = category_mask(names, names.categories.isin(calls))
    rows = np.flatnonzero(is_call & ~masks.stream_mask(profile) & events["correlation"].notna().to_numpy())
    if rows.size == 0:
        return None
    start = events["start_us"].to_numpy(dtype=np.float64)[rows]
    end = start + events["dur_us"].array[rows].to_numpy(dtype=np.float64, na_value=0.0)
    if has_fraction(start).any():  # HTA's rounding, as for the GPU work
        start, end = np.ceil(start), np.floor(end)
    rank = masks.rank_array(profile)[rows]
    correlation = events["correlation"].array[rows].to_numpy(dtype=np.float64, na_value=np.nan)
    call, item = _join_calls(rank, correlation, work["rank"].to_numpy(), work["correlation"].to_numpy())
    launched = ~np.isnan(work["launch_start"].to_numpy()[item])
    call, item = call[launched], item[launched]
    # HTA's delay: from the rounded end of the call, which for a call under a microsecond crossing no whole one
    # is before its rounded start; its time on the CPU is then 0, not -1 us (hta_rounded)
    delay = work["start"].to_numpy()[item] - end[call]
    cpu = np.maximum(end - start, 0.0)[call]
    return LaunchPairs(
        rank[call], correlation[call], rows[call], item, cpu, np.where(delay < 0, 0.0, delay)
    )  # np.where: Series.clip(lower=0), where -0.0 and NaN stay


def launch_delays(profile: Profile) -> pd.DataFrame:
    """Each launch call with its GPU work (HTA ``get_cuda_kernel_launch_stats``).

    Launch calls (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cudaMemcpyAsync``,
    ``cudaMemsetAsync`` and HIP equivalents) joined with the GPU work of the same
    ``correlation``; ``launch_delay_us`` = work start - (call start + call duration),
    clipped at 0. Columns ``rank``, ``device``, ``correlation``, ``launch``, ``name``,
    ``cpu_duration_us``, ``gpu_duration_us``, ``launch_delay_us``. Like HTA, the last
    profiler step is left out.
    """
    work = device_work(profile)
    pairs = None if work is None else launch_pairs(profile, work)
    if pairs is None:
        return pd.DataFrame(columns=LAUNCH_DELAY_COLUMNS)
    item = pairs.item
    return pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.where(pairs.rank >= 0, pairs.rank, 0), pairs.rank < 0),
            "device": work["device"].array[item].remove_unused_categories(),
            "correlation": pairs.correlation.astype("int64"),
            "launch": profile.events["name"].array[pairs.call].remove_unused_categories(),
            "name": work["name"].array[item].remove_unused_categories(),
            "cpu_duration_us": pairs.cpu,
            # an item under a microsecond crossing no whole one ends before it starts in HTA's rounding: 0 us
            "gpu_duration_us": np.maximum(work["end"].to_numpy()[item] - work["start"].to_numpy()[item], 0.0),
            "launch_delay_us": pairs.delay,
        }
    )


def _join_calls(
    call_rank: np.ndarray, call_correlation: np.ndarray, work_rank: np.ndarray, work_correlation: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions ``(call, work)`` of the inner join of launch calls and GPU work on (rank, correlation),
    in the order of ``merge(how="inner")``: by call, then work. Through one int64 key per pair when each
    (rank, correlation) names one call (the usual case), else by pandas' merge."""
    host_keys = correlation_keys(
        np.asarray(call_rank, dtype=np.int64), np.asarray(call_correlation, dtype=np.float64)
    )
    index = pd.Index(host_keys)
    if not index.is_unique:
        left = pd.DataFrame(
            {"rank": call_rank, "correlation": call_correlation, "call": np.arange(len(host_keys))}
        )
        right = pd.DataFrame(
            {"rank": work_rank, "correlation": work_correlation, "work": np.arange(len(work_rank))}
        )
        pairs = left.merge(right, on=["rank", "correlation"], how="inner")
        return pairs["call"].to_numpy(), pairs["work"].to_numpy()
    position = index.get_indexer(
        correlation_keys(
            np.asarray(work_rank, dtype=np.int64), np.asarray(work_correlation, dtype=np.float64)
        )
    )
    rows = np.flatnonzero(position >= 0)
    rows = rows[np.argsort(position[rows], kind="stable")]
    return position[rows], rows


def launch_summary(profile: Profile) -> pd.DataFrame:
    """Launch-delay statistics per (rank, device): count, mean, median, p95 and max (us)."""
    columns = ["rank", "device", "launches", "mean_us", "median_us", "p95_us", "max_us", "cpu_mean_us"]
    work = device_work(profile)
    pairs = None if work is None else launch_pairs(profile, work)
    if pairs is None or pairs.call.size == 0:
        return pd.DataFrame(columns=columns)
    device = work["device"].array
    key, rank, code = _rank_device_key(
        pairs.rank, np.asarray(device.codes)[pairs.item], len(device.categories)
    )
    # pandas' groupby over one int64 key per (rank, device): the rows of each group in their order, so the
    # statistics (compensated sums, medians, quantiles) are those of groupby(["rank", "device"], dropna=False)
    delay = pd.Series(pairs.delay).groupby(key, sort=True)
    labels = np.append(np.asarray(device.categories, dtype=object), None)  # a missing device stays missing
    return pd.DataFrame(
        {
            "rank": pd.arrays.IntegerArray(np.where(rank >= 0, rank, 0), rank < 0),
            "device": pd.array(labels[code], dtype="str"),
            "launches": delay.size().to_numpy(),
            "mean_us": delay.mean().to_numpy(),
            "median_us": delay.median().to_numpy(),
            "p95_us": delay.quantile(0.95).to_numpy(),  # linear interpolation, as numpy's percentile
            "max_us": delay.max().to_numpy(),
            "cpu_mean_us": pd.Series(pairs.cpu).groupby(key, sort=True).mean().to_numpy(),
        },
        columns=columns,
    )


def _rank_device_key(
    rank: np.ndarray, codes: np.ndarray, categories: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One int64 per (rank, device code) ordered as ``groupby(["rank", "device"], sort=True, dropna=False)``
    orders the groups (a missing rank, -1, and a missing device, code -1, after the others), with the rank
    and device code of each distinct key in ascending order."""
    unknown = max(int(rank.max()), -1) + 1 if rank.size else 0
    width = categories + 1
    key = np.where(rank >= 0, rank, unknown) * width + np.where(codes >= 0, codes, categories)
    groups = distinct(key)
    group_rank, group_code = groups // width, groups % width
    return (
        key,
        np.where(group_rank == unknown, -1, group_rank),
        np.where(group_code == categories, -1, group_code),
    )


def device_table(profiles) -> pd.DataFrame:
    """The per-device tables of several profiles, one after another, with a leading ``profile`` column."""
    frames = [device_breakdown(p).assign(profile=p.name) for p in profiles]
    frame = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=BREAKDOWN_COLUMNS + ["profile"])
    )
    return frame[["profile", *BREAKDOWN_COLUMNS]]
