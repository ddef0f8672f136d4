"""Record lists of a rocprofiler-sdk file as numpy columns: one pass per field over the parsed records.

A record that lacks a field, or holds something that is not a whole number there, fails the whole column;
then :func:`_locate` finds the first such record so the error names it (``kernel_dispatch[12] has no
end_timestamp``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...model.errors import InputError

#: a field read from a record: its name in messages and how it is reached
Getter = Callable[[dict], object]


def integers(path: Path, where: str, records: Sequence[dict], field: str, get: Getter) -> np.ndarray:
    """``get(record)`` for every record as int64; InputError naming the first record without it."""
    try:
        return np.fromiter((get(r) for r in records), dtype=np.int64, count=len(records))
    except (KeyError, TypeError, ValueError, OverflowError):
        raise _locate(path, where, records, field, get) from None


def optional_integers(records: Sequence[dict], get: Getter, missing: int = -1) -> np.ndarray:
    """``get(record)`` as int64, ``missing`` where a record lacks it or holds no whole number."""

    def one(record: dict) -> int:
        try:
            value = get(record)
        except (KeyError, TypeError):
            return missing
        return value if isinstance(value, int) and not isinstance(value, bool) else missing

    return np.fromiter((one(r) for r in records), dtype=np.int64, count=len(records))


def _shown(value: object) -> str:
    """A field's value as the file wrote it, cut to 40 characters: ``"abc"``, ``null``, ``1.5``."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _locate(path: Path, where: str, records: Sequence[dict], field: str, get: Getter) -> InputError:
    for index, record in enumerate(records):
        try:
            value = get(record)
        except (KeyError, TypeError):
            what = "is not an object" if not isinstance(record, dict) else f"has no {field}"
            return InputError(path, f"{where}[{index}] {what}", "the file may be damaged; write it again")
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**63) <= value < 2**63:
            return InputError(
                path,
                f"{where}[{index}].{field} is {_shown(value)}, not a whole number",
                "the file may be damaged; write it again",
            )
    return InputError(path, f"{where}: cannot read {field}")


def start_end(path: Path, where: str, records: Sequence[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The records' ``start_timestamp`` and ``end_timestamp`` (ns)."""
    start = integers(path, where, records, "start_timestamp", lambda r: r["start_timestamp"])
    end = integers(path, where, records, "end_timestamp", lambda r: r["end_timestamp"])
    return start, end


def correlations(records: Sequence[dict]) -> np.ndarray:
    """``correlation_id.internal`` of every record (-1 where absent)."""
    return optional_integers(records, lambda r: r["correlation_id"]["internal"])


def names_of(codes: np.ndarray, table: Sequence[str], fallback: str) -> tuple[np.ndarray, list[str]]:
    """Dense name codes for integer ``codes`` looked up in ``table`` (``fallback.format(code)`` off its end).

    Returns codes into the returned distinct labels, each label once, in order of first code.
    """
    distinct, inverse = np.unique(codes, return_inverse=True)
    labels = [table[c] if 0 <= c < len(table) and table[c] else fallback.format(c) for c in distinct.tolist()]
    unique_labels = list(dict.fromkeys(labels))
    position = {label: i for i, label in enumerate(unique_labels)}
    lut = np.array([position[label] for label in labels], dtype=np.int32)
    return lut[inverse.reshape(-1)], unique_labels
