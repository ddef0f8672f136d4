"""Baselines: a profile's metrics as small, diff-friendly JSON that is safe to commit.

A baseline holds the format tag, versions, the profile's name and source
format, a target summary, which tables the profile had, and every metric of
the shared registry that the profile could evaluate (value and unit). It holds
no paths, host names or metadata; the names it holds besides the profile's are the registry's, a trace's
counters' and its 10 largest GPU annotations' (``trace.gpu_annotation_us.<name>``: redact a trace whose
``record_function`` names are private first). Reading one back gives a
:class:`~popprof.model.profile.Profile` with a ``target`` table and the metric values
in its metadata (``baseline.metric.<name>``), so ``popprof.diff(baseline, new)``
works like any other diff; per-tile, per-program, per-event and liveness
sections are unavailable against a baseline.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .. import metrics as registry
from .._version import __version__
from ..io import jsonout
from ..io.atomic import refuse_overwriting_inputs, write_text_atomic
from ..model.profile import Profile
from ..readers.baseline import (
    BASELINE_FORMAT,
    FORMAT_VERSION,
    META_FORMAT,
    TARGET_FIELDS,
)


def is_baseline(profile: Profile) -> bool:
    """True when ``profile`` was read from a baseline file (it carries metrics, not tables)."""
    return META_FORMAT in profile.meta


def metric_values(profile: Profile) -> dict[str, float | None]:
    """The registry's metrics of ``profile``: computed from its tables, or as stored in a baseline."""
    return registry.compute(profile)


def _number(value: float) -> int | float:
    """Integral values as ints (bytes, cycles, counts), others as floats: stable, readable JSON."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return int(value)
    return value


def baseline_document(profile: Profile) -> dict:
    """The baseline of ``profile`` as a JSON-ready dict."""
    values = metric_values(profile)
    metrics = {}
    for name, value in values.items():
        if value is None or not math.isfinite(value):
            continue
        m = registry.describe(name)
        metrics[name] = {"unit": m.unit if m else "", "value": _number(value)}
    target = {}
    for key in TARGET_FIELDS:
        value = profile.target_value(key)
        if value is not None:
            value = value.item() if hasattr(value, "item") else value
            target[key] = _number(value) if isinstance(value, float) else value
    if is_baseline(profile) and profile.meta.get("baseline.source_format"):
        target["source_format"] = profile.meta["baseline.source_format"]
    tables = (
        sorted(json.loads(profile.meta.get("baseline.tables", "[]")))
        if is_baseline(profile)
        else [t for t in profile.table_names if t != "metadata"]
    )
    return {
        "format": BASELINE_FORMAT,
        "format_version": FORMAT_VERSION,
        "tool": "popprof",
        "tool_version": __version__,
        "profile": profile.name,
        "target": target,
        "tables": sorted(tables),
        "metrics": metrics,
    }


def dumps_baseline(profile: Profile) -> str:
    """The baseline JSON text: sorted keys, two-space indent, trailing newline."""
    return jsonout.dumps(baseline_document(profile), sort_keys=True)


def write_baseline(profile: Profile, out: str | os.PathLike[str], *, protect: list = ()) -> Path:
    """Write the baseline of ``profile`` to ``out`` atomically; returns the path.

    ``protect`` lists input paths ``out`` must not be (so an input is never overwritten).
    """
    out = Path(out)
    refuse_overwriting_inputs(out, [profile.source, *protect])
    write_text_atomic(out, dumps_baseline(profile))
    return out
