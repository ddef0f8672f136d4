"""Reader for popprof baselines (``popprof baseline PATH -o baseline.json``).

A baseline is a JSON object tagged ``"format": "popprof-baseline"`` holding a
profile's metrics; it reads into a Profile with a ``target`` table and the
metric values in its metadata, which :func:`popprof.compare` uses directly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from ..io.versioning import check_format
from ..model.errors import InputError
from ..model.profile import Profile

FORMAT = "baseline"
TAG = b'"popprof-baseline"'
BASELINE_FORMAT = "popprof-baseline"
FORMAT_VERSION = 1
META_PREFIX = STORED_PREFIX = "baseline.metric."  # metadata keys of stored metric values
META_FORMAT = "baseline.format_version"
#: The stored text of a metric whose value is null in the baseline: not measured, read back as None (never 0)
NOT_MEASURED = "null"

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
        # null: not measured, kept as such (a family member null here is "not in" the baseline, never 0)
        if value is None:
            meta[META_PREFIX + str(name)] = NOT_MEASURED
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


def sniff(path: Path, head: bytes) -> bool:
    """A JSON object whose head carries the baseline format tag."""
    return path.is_file() and head.lstrip()[:1] == b"{" and TAG in head


def read(path: Path, **_options: object) -> Profile:
    """Read a baseline file."""
    return read_baseline(path)
