"""Device peaks: TFLOP/s per dtype and memory TB/s, from ``data/device_peaks.csv`` (a public source per row).

The device is the first row whose ``pattern`` (a regular expression, case-insensitive) matches the name a
trace's ``deviceProperties`` gives its GPU; rows are in file order, the more specific ones first
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
    text = profile.meta.get("chrome.top.deviceProperties")
    if not text:
        return []
    try:
        props = json.loads(str(text))
    except ValueError:
        return []
    return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []


def device_names(profile: Profile) -> list[str]:
    """The GPU names a trace's ``deviceProperties`` holds (empty when it names none)."""
    return [str(p["name"]) for p in device_properties(profile) if p.get("name")]


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
    """``(GPU name, peak table device)`` of a profile: its first named GPU and the device matched for it."""
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
