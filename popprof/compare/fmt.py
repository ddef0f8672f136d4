"""Formatting of metric values, changes and relative changes for reports."""

from __future__ import annotations

import math


def fmt_value(value: float | None, unit: str) -> str:
    """A metric value with thousands separators and its unit (ratios as plain fractions)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return str(value)
    return _number(value, unit, "")


def fmt_change(value: float | None, unit: str) -> str:
    """An absolute change with its sign."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if math.isinf(value):
        return f"{value:+}"
    return _number(value, unit, "+")


def _number(value: float, unit: str, sign: str) -> str:
    """A finite value in its unit: ratios with 4 decimals, integers with separators, else 6 digits
    (microseconds with one decimal); ``sign`` is ``""`` or ``"+"`` (always show the sign)."""
    if unit == "ratio":
        return f"{value:{sign}.4f}"
    if value == int(value) and abs(value) < 1e15:
        text = f"{int(value):{sign},}"
    else:
        text = f"{value:{sign},.1f}" if unit == "us" else f"{value:{sign},.6g}"
    return text + {"bytes": " B", "us": " us"}.get(unit, "")


def fmt_rel(value: float | None) -> str:
    """A relative change as a percentage; growth from zero shows as ``new``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if math.isinf(value):
        return "new" if value > 0 else "-inf"
    return f"{value * 100:+.2f} %"
