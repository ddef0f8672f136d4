"""JSON out: the one writer (orjson) of every JSON document popprof prints or writes.

:func:`plain` makes any value JSON-ready (numpy scalars and arrays become Python numbers and
lists, NaN, infinities, ``pd.NA`` and ``NaT`` become ``null``, timestamps ISO text) and keeps
counts whole: a float that is a whole number under a key naming a count (``*_bytes``,
``*cycles``, ``events``, ``tiles``, ...; ``docs/figures.md``) is written as an integer, so
``summary --format json`` prints ``23878396``, never ``23878396.0``.

:func:`dumps` writes it indented with a final newline, and times to the nanosecond: a float under
a key naming microseconds (``*_us``, a value of a row whose ``unit`` is ``us``, a part of the time
account) is rounded to three decimals, so a 98.718 us total of kernel times on a clock near 1.4e12
us prints ``98.718``, not ``98.718017578125`` (the float noise of end - start on such a clock, below
the trace's 1 ns resolution). Documents built in memory (:func:`plain` alone) keep every figure as
computed.
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

from .units import TIME_DECIMALS

#: A key whose value counts whole things: bytes, cycles, events, tiles, steps, ... (never a share or a time).
COUNT_KEY = re.compile(
    r"(?:^|[._])(?:bytes|cycles|events|tiles?|count|instances|steps?|runs|threads|launches|work_items|"
    r"streams|ipus|replicas|gaps|rows|hz)$|^(?:num|n)_|^(?:tile|ipu|rank|compilation)$"
)

#: A key whose value is a time in microseconds (``span_us``, ``self_us``, ...): written to the nanosecond.
TIME_KEY = re.compile(r"(?:^|_)us$")

#: Keys of mappings whose every number is a time in microseconds: the time account's parts.
TIME_MAPPINGS = frozenset({"parts"})


#: Metric units that count whole things (a diff row or a baseline entry with one of these holds whole values).
COUNT_UNITS = frozenset({"bytes", "cycles", "events", "tiles", "tile", "threads", "steps", "step", "runs"})

#: Keys of a document row that hold the row's value in its ``unit``.
_VALUE_KEYS = frozenset({"value", "base", "new", "change", "abs_change", "limit", "base_total", "new_total"})

#: Keys of a row in unit ``us`` that hold a time: its values, and the whole an estimated gain is a share of.
_TIME_VALUE_KEYS = _VALUE_KEYS | {"whole"}


def _whole(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def plain(value: object, key: str = "", *, count: bool = False, nanoseconds: bool = False) -> object:
    """``value`` as JSON-ready Python data (see the module docstring); ``key`` is the key it sits under,
    ``count`` says that it is a count whatever the key. Times are rounded to the nanosecond only with
    ``nanoseconds`` (what :func:`dumps` writes): a document built in memory keeps every figure as
    computed, so that two sections showing one figure hold the same float."""
    return _plain(value, key, count, False, nanoseconds)


def _plain(value: object, key: str, count: bool, time: bool, ns: bool) -> object:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, bool | str | int) and not isinstance(value, np.generic):
        return value
    if isinstance(value, float | np.floating):
        number = float(value)
        if not math.isfinite(number):
            return None
        if count or COUNT_KEY.search(key):
            return _whole(number)
        return round(number, TIME_DECIMALS) if ns and (time or TIME_KEY.search(key)) else number
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    if isinstance(value, Mapping):
        unit = value.get("unit")
        counts, times = unit in COUNT_UNITS, unit == "us"
        inner = time or key in TIME_MAPPINGS
        return {
            str(k): _plain(
                v, str(k), counts and k in _VALUE_KEYS, inner or (times and k in _TIME_VALUE_KEYS), ns
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset | np.ndarray | pd.Series | pd.Index):
        return [_plain(v, key, count, time, ns) for v in value]
    if isinstance(value, pd.DataFrame):
        return [_plain(row, "", False, False, ns) for row in value.to_dict(orient="records")]
    if isinstance(value, pd.Timestamp | _dt.datetime | _dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return _plain(float(value), key, count, time, ns)
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "item"):  # other numpy-like scalars
        return _plain(value.item(), key, count, time, ns)
    return str(value)


def times_to_the_nanosecond(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its float columns in microseconds (names matching :data:`TIME_KEY`) rounded as
    :func:`dumps` rounds them: the same figures in a table's CSV as in the JSON."""
    times = [c for c in frame.columns if TIME_KEY.search(str(c)) and frame[c].dtype.kind == "f"]
    return frame.assign(**{c: frame[c].round(TIME_DECIMALS) for c in times}) if times else frame


def dumps(data: object, *, sort_keys: bool = False) -> str:
    """``data`` as indented JSON text with a final newline (made plain first, times to the nanosecond: see
    :func:`plain`)."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    return orjson.dumps(plain(data, nanoseconds=True), option=option).decode()
