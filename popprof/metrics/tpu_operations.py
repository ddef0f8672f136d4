"""TPU ops against the roofline, from XLA's own cost analysis in an XPlane profile.

On a TPU, XLA's compiler records for each HLO instruction its cost analysis (``flops``, ``bytes_accessed``,
``model_flops``) in the op's event metadata; the XPlane reader keeps them per op with the op's count and
device-clock time (metadata key ``xplane.tpu_ops``, ``docs/readers.md``). popprof models nothing here: the
FLOPs and bytes are XLA's, as xprof's op profile reads them.

**Rows.** One per HLO op name (``fusion.12``, ``copy-done.2``, ``all-reduce``), summed over the profile's
chips, as xprof's op profile lists the ops of a host's chips together: ``category`` is the op's
``hlo_category`` (``loop fusion``, ``convolution fusion``, ``copy-done``, ``all-reduce``, ...),
``device_time_us`` the summed ``device_duration_ps`` of its events (the device's own clock, which xprof's op
profile reads: ``tsl::profiler::GetDeviceEventTimespan``), ``flops_per_call`` and ``bytes_per_call`` XLA's
``flops`` and ``bytes_accessed`` (summed over the chips' calls, divided by the calls), and ``tflops``,
``tbps``, ``intensity`` and ``bound`` as for GPU operators (:func:`popprof.metrics.peaks.with_rates`), against
the chip's bf16 peak and HBM bandwidth (``data/device_peaks.csv``: the chip kind the TPU plane records,
``TPU v6 Lite``, matched as for a GPU's name). An op whose metadata has no cost stats keeps its count and time,
with null FLOPs and bytes.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..model.profile import Profile
from . import peaks

#: the metadata key the XPlane reader writes: one record per (chip, op)
META_KEY = "xplane.tpu_ops"
#: the peak table's dtype a TPU op is judged against: XLA's cost analysis counts FLOPs whatever their dtype, and
#: the chip's headline peak (its matrix units' bf16 rate) is the roof xprof's op profile draws too
TPU_PEAK_DTYPE = "bf16"
_COST_NUMBERS = ("flops", "model_flops", "bytes_accessed")


def op_records(profile: Profile) -> pd.DataFrame:
    """The reader's per-(chip, op) records as a frame: ``device``, ``name``, ``count``, ``device_time_ps`` and
    the cost stats (``flops``, ``model_flops``, ``bytes_accessed`` as nullable Float64; ``hlo_category``,
    ``deduplicated_name`` as text or None). Empty when the profile holds no TPU ops."""
    text = profile.meta.get(META_KEY)
    try:
        records = json.loads(str(text)) if text else []
    except ValueError:
        records = []
    records = [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    frame = pd.DataFrame.from_records(records)
    if frame.empty or "name" not in frame.columns:
        return pd.DataFrame({c: [] for c in ("device", "name", "count", "device_time_ps", *_COST_NUMBERS)})
    for column in _COST_NUMBERS:
        values = frame[column] if column in frame.columns else pd.Series(np.nan, index=frame.index)
        frame[column] = pd.to_numeric(values, errors="coerce").astype("Float64")
    for column in ("hlo_category", "deduplicated_name"):
        if column not in frame.columns:
            frame[column] = None
    frame["count"] = pd.to_numeric(frame["count"], errors="coerce").fillna(0).astype("int64")
    frame["device_time_ps"] = (
        pd.to_numeric(frame["device_time_ps"], errors="coerce").fillna(0).astype("int64")
    )
    return frame


def tpu_operations(profile: Profile) -> pd.DataFrame:
    """One row per HLO op name (see the module docstring), by device time (largest first): ``name``,
    ``category``, ``input_shapes`` (None: XLA's ops carry no recorded input shapes), ``count``,
    ``device_time_us``, ``flops_per_call``, ``bytes_per_call``, ``tflops``, ``tbps``, ``bound``,
    ``input_types`` (None), ``peak_tflops``, ``peak_tbps``, ``intensity``, ``peak_dtype``,
    ``model_flops_per_call`` and ``deduplicated_name``. Empty when the profile holds no TPU ops."""
    return profile.cached("operations.tpu", lambda: _tpu_operations(profile))


def _tpu_operations(profile: Profile) -> pd.DataFrame:
    records = op_records(profile)
    if records.empty:
        return pd.DataFrame()
    table = _per_name(records)
    peak = peaks.peak(peaks.profile_device(profile)[1], TPU_PEAK_DTYPE)
    table["peak_tflops"] = pd.array([peak.tflops if peak else None] * len(table), dtype="Float64")
    table["peak_tbps"] = pd.array([peak.tbps if peak else None] * len(table), dtype="Float64")
    peaks.with_rates(table)
    table["model_flops_per_call"] = table["model_flops_total"] / table["count"].where(table["count"] > 0)
    table["peak_dtype"] = TPU_PEAK_DTYPE
    table["input_shapes"] = None
    table["input_types"] = None
    table = table.sort_values(["device_time_us", "name"], ascending=[False, True], kind="stable")
    return table.drop(columns=["flops_total", "bytes_total", "model_flops_total"]).reset_index(drop=True)


def _per_name(records: pd.DataFrame) -> pd.DataFrame:
    """The records summed per op name over the chips: calls, device time in microseconds, and the cost totals
    (each chip's per-call figure times its calls; missing when any chip's op lacks the figure)."""
    count = records["count"].to_numpy(dtype=np.float64)
    frame = pd.DataFrame(
        {
            "name": records["name"].astype(str),
            "category": records["hlo_category"].where(records["hlo_category"].notna(), "other").astype(str),
            "deduplicated_name": records["deduplicated_name"],
            "count": records["count"],
            "device_time_us": records["device_time_ps"].to_numpy(dtype=np.float64) / 1e6,
        }
    )
    for column, total in (
        ("flops", "flops_total"),
        ("bytes_accessed", "bytes_total"),
        ("model_flops", "model_flops_total"),
    ):
        frame[total] = records[column].to_numpy(dtype=np.float64, na_value=np.nan) * count
    grouped = frame.groupby("name", sort=False)
    table = grouped.agg(
        category=("category", "first"),
        deduplicated_name=("deduplicated_name", "first"),
        count=("count", "sum"),
        device_time_us=("device_time_us", "sum"),
    )
    for total in ("flops_total", "bytes_total", "model_flops_total"):
        # min_count: a name some chip's record lacks the figure for stays missing, not a partial sum
        summed = grouped[total].sum(min_count=1)
        missing = frame[total].isna().groupby(frame["name"], sort=False).any()
        table[total] = pd.array(summed.where(~missing).to_numpy(dtype=np.float64), dtype="Float64")
    return table.reset_index()
