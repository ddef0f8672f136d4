"""Baselines: a profile's metrics as small, diff-friendly JSON that is safe to commit.

A baseline holds the format tag, versions, the profile's name and source
format, a target summary, which tables the profile had, and every metric of
the shared registry that the profile could evaluate (value and unit). It holds
no paths, host names or metadata. Reading one back gives a
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

import pandas as pd

from .. import metrics as registry
from .._version import __version__
from ..io.atomic import refuse_overwriting_inputs, write_text_atomic
from ..io.versioning import check_format
from ..model.errors import InputError
from ..model.profile import Profile

BASELINE_FORMAT = "popprof-baseline"
FORMAT_VERSION = 1
META_PREFIX = registry.STORED_PREFIX
META_FORMAT = "baseline.format_version"

#: Target fields written to a baseline (nothing that can identify a host or a path).
TARGET_FIELDS = (
    "source_format",
    "ipu_arch",
    "target_type",
    "num_ipus",
    "tiles_per_ipu",
    "num_tiles",
    "bytes_per_tile",
    "clock_hz",
    "num_replicas",
    "ipus_per_replica",
    "poplar_version",
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
    return json.dumps(baseline_document(profile), indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_baseline(profile: Profile, out: str | os.PathLike[str], *, protect: list = ()) -> Path:
    """Write the baseline of ``profile`` to ``out`` atomically; returns the path.

    ``protect`` lists input paths ``out`` must not be (so an input is never overwritten).
    """
    out = Path(out)
    refuse_overwriting_inputs(out, [profile.source, *protect])
    write_text_atomic(out, dumps_baseline(profile))
    return out


def parse_baseline(document: object, path: str | os.PathLike[str] = "<baseline>") -> Profile:
    """Turn a parsed baseline document into a Profile (target table + metric values in metadata)."""
    version = check_format(document, path, tag=BASELINE_FORMAT, what="baseline", supported=FORMAT_VERSION)
    metrics = document.get("metrics")
    if not isinstance(metrics, dict):
        raise InputError(path, 'baseline has no "metrics" object', "write it again with `popprof baseline`")
    meta: dict[str, object] = {
        META_FORMAT: version,
        "source_format": "baseline",
        "baseline.tool_version": document.get("tool_version", ""),
        "baseline.tables": json.dumps(_names(document.get("tables"))),
    }
    for name, entry in metrics.items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(
                path,
                f"metric {name!r} has a non-numeric value {value!r}",
                "write the baseline again with `popprof baseline`",
            )
        meta[META_PREFIX + str(name)] = repr(float(value))
    target = document.get("target") if isinstance(document.get("target"), dict) else {}
    target_row = {k: target[k] for k in TARGET_FIELDS if k in target and target[k] is not None}
    if "source_format" in target_row:
        meta["baseline.source_format"] = target_row["source_format"]
    target_row["source_format"] = "baseline"
    name = str(document.get("profile") or Path(path).stem)
    tables = {"target": pd.DataFrame([target_row])}
    return Profile(name, tables, source=str(path), metadata=meta)


def _names(value: object) -> list[str]:
    """The table names a baseline lists (anything else than a list of strings counts as none)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def read_baseline(path: str | os.PathLike[str]) -> Profile:
    """Read a baseline JSON file into a Profile (see :func:`parse_baseline`)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read baseline ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            path,
            f"baseline is not valid JSON ({exc.msg} at line {exc.lineno})",
            "write it again with `popprof baseline`",
        ) from None
    return parse_baseline(document, path)
