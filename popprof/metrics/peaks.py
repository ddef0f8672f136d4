"""Device peaks: TFLOP/s per dtype and memory TB/s, from ``data/device_peaks.csv`` (a public source per row).

The device is the first row whose ``pattern`` (a regular expression, case-insensitive) matches the name a
trace's ``deviceProperties`` gives its GPU (an XPlane profile's TPU: the chip kind its plane records,
``TPU v6 Lite``; a GPU without a name, a nameless Kineto entry or an XPlane GPU plane: the name its properties
give, ``data/device_signatures.csv``); rows are in file order, the more specific ones first
(``GB200`` before ``B200``, ``A100.*80GB`` before ``A100``). The ``kind`` column says which peak a row is:
``matrix dense`` (fp16 / bf16 / fp8 / tf32: tensor or matrix cores without structured sparsity, half the
datasheets' "with sparsity" figure) or ``vector`` (fp32, fp64). A GPU no row matches has no peak: its
operators' ``bound`` is null (``docs/operations.md``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..model.profile import Profile


class Peak(NamedTuple):
    """One device's roofline for one dtype: ``tflops`` (TFLOP/s), ``tbps`` (memory TB/s), ``device``."""

    device: str
    tflops: float
    tbps: float

    @property
    def ridge(self) -> float:
        """The ridge point: the arithmetic intensity (FLOP per byte) where compute and memory limits meet."""
        return self.tflops / self.tbps


@lru_cache(maxsize=1)
def device_peaks() -> pd.DataFrame:
    """The peak table: ``device, pattern, dtype, tflops, memory_tbps, kind, source``, one row per (device,
    dtype)."""
    with (
        resources.files("popprof.metrics").joinpath("data/device_peaks.csv").open("r", encoding="utf-8") as f
    ):
        return pd.read_csv(f)


def device_properties(profile: Profile) -> list[dict]:
    """The devices a Kineto trace's top-level ``deviceProperties`` lists, one dict each (empty when it lists
    none or is not a list of objects)."""
    return _dicts(profile, "chrome.top.deviceProperties")


def _dicts(profile: Profile, key: str) -> list[dict]:
    """The objects of the JSON list a metadata ``key`` holds (empty when it is missing, not JSON, or not a
    list; items that are not objects left out)."""
    text = profile.meta.get(key)
    if not text:
        return []
    try:
        items = json.loads(str(text))
    except ValueError:
        return []
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def xplane_devices(profile: Profile) -> list[dict]:
    """The device planes' own stats an XPlane profile keeps (``xplane.gpus``: one dict per GPU or TPU plane, a
    TPU's with ``device_type_string`` such as ``TPU v6 Lite``); empty for other profiles."""
    return _dicts(profile, "xplane.gpus")


@lru_cache(maxsize=1)
def device_signatures() -> pd.DataFrame:
    """GPUs known by their properties alone: ``name, compute_major, compute_minor, sms, memory_min_gib,
    memory_max_gib, clock_mhz, source`` (a public source per row; ``clock_mhz`` the peak clock where it alone
    tells two GPUs apart, else empty)."""
    with (
        resources.files("popprof.metrics")
        .joinpath("data/device_signatures.csv")
        .open("r", encoding="utf-8") as f
    ):
        return pd.read_csv(f)


def named_by_signature(props: dict) -> str | None:
    """The name of the GPU a ``deviceProperties`` entry describes when it gives none (ROCm 7's Kineto writes
    ``"name": ""``): the one row of :func:`device_signatures` its compute capability, compute units
    (``numSms``) and memory (``totalGlobalMem``) match; None when no row or several match.

    Where the entry gives the peak clock (``clockRate`` in kHz, as an XPlane GPU plane's ``clock_rate``; a
    Kineto entry has none), the one such row whose ``clock_mhz`` is that clock wins (an MI355X at 2400 MHz, an
    MI350X at 2200); otherwise only the rows without a clock count (``AMD Instinct MI350X or MI355X``)."""
    memory = props.get("totalGlobalMem")
    if not all(type(props.get(k)) is int for k in ("computeMajor", "computeMinor", "numSms")) or (
        type(memory) is not int
    ):
        return None
    table = device_signatures()
    gib = memory / 2**30
    rows = table[
        (table["compute_major"] == props["computeMajor"])
        & (table["compute_minor"] == props["computeMinor"])
        & (table["sms"] == props["numSms"])
        & (table["memory_min_gib"] <= gib)
        & (gib <= table["memory_max_gib"])
    ]
    clock = props.get("clockRate")
    if type(clock) is int and clock > 0:
        timed = rows[rows["clock_mhz"] * 1000 == clock]
        if len(timed) == 1:
            return str(timed["name"].iloc[0])
    rows = rows[rows["clock_mhz"].isna()]
    return str(rows["name"].iloc[0]) if len(rows) == 1 else None


#: an XPlane GPU plane's stats (``popprof/readers/xplane/planes.py``) by the ``deviceProperties`` key they are
XPLANE_PROPERTIES: dict[str, str] = {
    "compute_cap_major": "computeMajor",
    "compute_cap_minor": "computeMinor",
    "core_count": "numSms",
    "memory_size": "totalGlobalMem",
    "clock_rate": "clockRate",
}


def xplane_name(plane: dict) -> str:
    """The name of an XPlane device plane: a TPU's chip kind (``device_type_string``, ``TPU v6 Lite``); a GPU,
    whose plane records no name, named by its stats (compute capability, cores, memory, clock: :data:`
    XPLANE_PROPERTIES`, :func:`named_by_signature`); "" when neither gives one."""
    if plane.get("device_type_string"):
        return str(plane["device_type_string"])
    props = {key: plane[stat] for stat, key in XPLANE_PROPERTIES.items() if stat in plane}
    return named_by_signature(props) or ""


def _name(props: dict) -> str:
    """A ``deviceProperties`` entry's GPU name: its own when the peak table knows it, else the name its
    properties give (:func:`named_by_signature`; ROCm's ``""`` or generic ``AMD Radeon Graphics``), else its
    own."""
    own = str(props.get("name") or "")
    if own and match_device(own) is not None:
        return own
    return named_by_signature(props) or own


def device_names(profile: Profile) -> list[str]:
    """The device names a trace holds: a Kineto trace's ``deviceProperties`` GPU names (a GPU whose name the
    peak table does not know named by its properties where they identify it, :func:`_name`), else an XPlane's
    device planes' (:func:`xplane_name`: a TPU's chip kind, ``TPU v6 Lite``, a GPU's by its stats); empty when
    it names none."""
    names = [_name(p) for p in device_properties(profile)]
    names = [name for name in names if name]
    if names:
        return names
    return [name for name in map(xplane_name, xplane_devices(profile)) if name]


def device_section(profile: Profile) -> dict | None:
    """The device the roofline reads its peaks for, as the summary says it: ``name`` (the first named device,
    :func:`device_names`), ``named_by`` (``"name"`` when the trace names it, ``"properties"`` when its
    properties do, :func:`named_by_signature`), ``peaks`` (the peak table's device, None without a row) and,
    without one, ``no_peaks`` (why). None when the trace names no device."""
    names = device_names(profile)
    if not names:
        return None
    name = names[0]
    props = device_properties(profile)
    own = [str(p.get("name") or "") for p in props] if props else []
    planes = [p.get("device_type_string") for p in xplane_devices(profile)] if not props else []
    by_name = name in own or name in planes
    device = match_device(name)
    out = {"name": name, "named_by": "name" if by_name else "properties", "peaks": device}
    if device is None:
        out["no_peaks"] = (
            "its properties fit GPUs whose peaks differ"
            if not by_name and " or " in name
            else "no row of the peak table matches it"
        )
    return out


def match_device(name: str | None) -> str | None:
    """The peak table's device for a GPU name (None when no row matches)."""
    if not name:
        return None
    table = device_peaks()
    for device, pattern in zip(table["device"], table["pattern"], strict=True):
        if re.search(str(pattern), name, re.IGNORECASE):
            return str(device)
    return None


def profile_device(profile: Profile) -> tuple[str | None, str | None]:
    """``(device name, peak table device)`` of a profile: its first named GPU (or TPU chip) and the device
    matched for it."""
    names = device_names(profile)
    name = names[0] if names else None
    return name, match_device(name)


def peak(device: str | None, dtype: str | None) -> Peak | None:
    """The roofline of ``device`` for ``dtype`` (a :data:`popprof.metrics.flops.PEAK_DTYPES` value); None when
    the table holds no such row."""
    if device is None or dtype is None:
        return None
    table = device_peaks()
    rows = table[(table["device"] == device) & (table["dtype"] == dtype)]
    if rows.empty:
        return None
    return Peak(device, float(rows["tflops"].iloc[0]), float(rows["memory_tbps"].iloc[0]))


def with_rates(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (``count``, ``device_time_us``, ``flops_total``, ``bytes_total``, ``peak_tflops``,
    ``peak_tbps``) with the roofline's columns added in place: ``flops_per_call``, ``bytes_per_call``,
    ``tflops`` and ``tbps`` (the totals over the device time), ``intensity`` (FLOP per byte) and ``bound``
    (``"compute"`` at or above the ridge point, ``"memory"`` below, None where a figure or the peak is unknown).
    ``count`` becomes int64. The one definition the GPU operators and the TPU ops share."""
    count = table["count"]
    seconds = table["device_time_us"].where(table["device_time_us"] > 0) * 1e-6
    table["count"] = count.astype("int64")
    table["flops_per_call"] = table["flops_total"] / count
    table["bytes_per_call"] = table["bytes_total"] / count
    table["tflops"] = table["flops_total"] / seconds / 1e12
    table["tbps"] = table["bytes_total"] / seconds / 1e12
    table["intensity"] = table["flops_per_call"] / table["bytes_per_call"].where(table["bytes_per_call"] > 0)
    ridge = table["peak_tflops"] / table["peak_tbps"]
    known = (table["intensity"].notna() & ridge.notna()).to_numpy(dtype=bool)
    above = (table["intensity"].fillna(0) >= ridge.fillna(np.inf)).to_numpy(dtype=bool)
    table["bound"] = pd.Series(np.where(above, "compute", "memory"), dtype=object, index=table.index).where(
        known, None
    )
    return table
