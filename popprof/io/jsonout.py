"""JSON out: the one writer (orjson) of every JSON document popprof prints or writes.

:func:`plain` makes any value JSON-ready (numpy scalars and arrays become Python numbers and
lists, NaN, infinities, ``pd.NA`` and ``NaT`` become ``null``, timestamps ISO text) and keeps
counts whole: a float that is a whole number under a key naming a count (``*_bytes``,
``*cycles``, ``events``, ``tiles``, ...; ``docs/figures.md``) is written as an integer, so
``summary --format json`` prints ``23878396``, never ``23878396.0``. :func:`dumps` writes it
indented with a final newline.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import PurePath

import numpy as np
import orjson
import pandas as pd

#: A key whose value counts whole things: bytes, cycles, events, tiles, steps, ... (never a share or a time).
COUNT_KEY = re.compile(
    r"(?:^|[._])(?:bytes|cycles|events|tiles?|count|instances|steps?|runs|threads|launches|work_items|"
    r"streams|ipus|replicas|gaps|rows|hz)$|^(?:num|n)_|^(?:tile|ipu|rank|compilation)$"
)

#: Metric units that count whole things (a diff row or a baseline entry with one of these holds whole values).
COUNT_UNITS = frozenset({"bytes", "cycles", "events", "tiles", "tile", "threads", "steps", "step", "runs"})

#: Keys of a document row that hold the row's value in its ``unit``.
_VALUE_KEYS = frozenset({"value", "base", "new", "change", "abs_change", "limit", "base_total", "new_total"})


def _whole(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def plain(value: object, key: str = "", *, count: bool = False) -> object:
    """``value`` as JSON-ready Python data (see the module docstring); ``key`` is the key it sits under."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, bool | str | int) and not isinstance(value, np.generic):
        return value
    if isinstance(value, float | np.floating):
        number = float(value)
        if not math.isfinite(number):
            return None
        return _whole(number) if count or COUNT_KEY.search(key) else number
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    if isinstance(value, Mapping):
        unit_counts = value.get("unit") in COUNT_UNITS
        return {str(k): plain(v, str(k), count=unit_counts and k in _VALUE_KEYS) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset | np.ndarray | pd.Series | pd.Index):
        return [plain(v, key, count=count) for v in value]
    if isinstance(value, pd.DataFrame):
        return [plain(row) for row in value.to_dict(orient="records")]
    if isinstance(value, pd.Timestamp | _dt.datetime | _dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return plain(float(value), key, count=count)
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "item"):  # other numpy-like scalars
        return plain(value.item(), key, count=count)
    return str(value)


def dumps(data: object, *, sort_keys: bool = False) -> str:
    """``data`` as indented JSON text with a final newline (made plain first, see :func:`plain`)."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    return orjson.dumps(plain(data), option=option).decode()
