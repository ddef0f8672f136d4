"""The GPU work of a Kineto trace as HolisticTraceAnalysis (HTA) counts it.

HTA's definitions (0.5.0), which popprof follows so its figures match the tool GPU
engineers know (documented in ``docs/traces.md``):

- **GPU work** = events on a GPU stream (``events.stream`` set: Kineto's ``args.stream``
  is an integer): kernels, memcpy and memset. Host runtime calls (``cudaDeviceSynchronize``
  ...) have no stream and are never device time.
- **Kernel type** by name: ``COMMUNICATION`` = ``^nccl.*Kernel``; ``MEMORY`` =
  ``^(Memcpy|Memset|dma)``; ``COMPUTATION`` = anything else not matching
  ``(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)``; the rest ``OTHER``.
- **Last profiler step left out**: when a trace holds at least two distinct
  ``ProfilerStep#N`` annotations, only GPU work launched (same ``correlation``) by a host
  event starting before the last ``ProfilerStep`` is kept; the last step is incomplete.
- **Rounding**: when any start time of a rank has a fractional part (ns-resolution traces),
  starts are rounded up and ends down to whole microseconds, as HTA does.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .activity import is_bookkeeping

COMPUTATION, COMMUNICATION, MEMORY, OTHER = "COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"
KERNEL_TYPES: tuple[str, ...] = (COMPUTATION, COMMUNICATION, MEMORY, OTHER)
_COMM = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
#: Kineto categories of kernels, memcpy and memset (HTA's idle-time breakdown reads only these).
KERNEL_CHANNELS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")


def kernel_type(name: str) -> str:
    """HTA's kernel type of one kernel name."""
    if _COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    if not _NOT_COMPUTE.match(name):
        return COMPUTATION
    return OTHER


def kernel_types(names: pd.Series) -> pd.Categorical:
    """Kernel type of each event, classifying each distinct name once."""
    cat = pd.Categorical(names)
    lut = np.array([KERNEL_TYPES.index(kernel_type(str(c))) for c in cat.categories] + [3], dtype=np.int8)
    return pd.Categorical.from_codes(lut[np.asarray(cat.codes)], categories=list(KERNEL_TYPES))


def _profiler_step_names(events: pd.DataFrame) -> np.ndarray:
    """Boolean per name category: holds ``ProfilerStep``."""
    cats = events["name"].cat.categories
    return np.asarray(cats.str.contains("ProfilerStep", regex=False), dtype=bool)


def gpu_work(events: pd.DataFrame, include_last_step: bool = False) -> pd.DataFrame:
    """GPU work of every rank by HTA's definitions.

    Columns: ``rank`` (-1 when unknown), ``device``, ``stream``, ``name``, ``channel``,
    ``correlation``, ``start``, ``end`` (HTA-rounded), ``kernel_type`` and ``launch_start``
    (start of the host event with the same correlation, NaN when there is none).
    """
    on_stream = events["stream"].notna().to_numpy() & ~is_bookkeeping(events)
    rank = events["rank"].fillna(-1).to_numpy(dtype=np.int64)
    start = events["start_us"].to_numpy(dtype=np.float64, copy=True)
    end = start + events["dur_us"].fillna(0.0).to_numpy(dtype=np.float64)
    corr = events["correlation"]
    host = ~on_stream & corr.notna().to_numpy() & ~is_bookkeeping(events)
    step_names = _profiler_step_names(events)
    is_step = np.append(step_names, False)[np.asarray(events["name"].array.codes)] & ~on_stream
    filtering = (not include_last_step) and int(step_names.sum()) >= 2
    # HTA rounding, per rank, when the rank's times have fractional parts
    ranks = np.unique(rank)
    for r in ranks:
        rows = rank == r
        if np.any(start[rows] % 1 != 0):
            s = np.ceil(start[rows])
            end[rows] = np.floor(end[rows])
            start[rows] = s
    host_frame = pd.DataFrame({"rank": rank[host], "correlation": corr.to_numpy(dtype=np.float64,
                                                                                   na_value=np.nan)[host],
                               "launch_start": start[host]})
    if filtering:
        last_step = pd.Series(start[is_step]).groupby(rank[is_step]).max()
        limit = last_step.reindex(host_frame["rank"]).to_numpy()
        host_frame = host_frame[~(host_frame["launch_start"].to_numpy() >= limit)]  # NaN limit keeps all
    host_frame = host_frame.drop_duplicates(["rank", "correlation"], keep="last")
    work = pd.DataFrame({
        "rank": rank[on_stream],
        "device": events["device"][on_stream].to_numpy(),
        "stream": events["stream"][on_stream].to_numpy(dtype=np.int64),
        "name": events["name"][on_stream].to_numpy(),
        "channel": events["channel"][on_stream].to_numpy(),
        "correlation": corr[on_stream].to_numpy(dtype=np.float64, na_value=np.nan),
        "start": start[on_stream],
        "end": end[on_stream],
    })
    work = work.merge(host_frame, on=["rank", "correlation"], how="inner" if filtering else "left")
    work["device"] = work["device"].astype("str")
    work["kernel_type"] = kernel_types(work["name"].astype("str"))
    return work.sort_values(["rank", "device", "start"], kind="stable").reset_index(drop=True)
