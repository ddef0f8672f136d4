"""Formatting of metric values, changes and relative changes for reports."""

from __future__ import annotations

import math


def fmt_value(value: float | None, unit: str) -> str:
    """A metric value with thousands separators and its unit (ratios as plain fractions)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return str(value)
    if unit == "ratio":
        return f"{value:.4f}"
    if value == int(value) and abs(value) < 1e15:
        text = f"{int(value):,}"
    else:
        text = f"{value:,.1f}" if unit == "us" else f"{value:,.6g}"
    suffix = {"bytes": " B", "us": " us"}.get(unit, "")
    return text + suffix


def fmt_change(value: float | None, unit: str) -> str:
    """An absolute change with its sign."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if math.isinf(value):
        return f"{value:+}"
    if unit == "ratio":
        return f"{value:+.4f}"
    if value == int(value) and abs(value) < 1e15:
        text = f"{value:+,.0f}"
    else:
        text = f"{value:+,.1f}" if unit == "us" else f"{value:+,.6g}"
    return text + {"bytes": " B", "us": " us"}.get(unit, "")


def fmt_rel(value: float | None) -> str:
    """A relative change as a percentage; growth from zero shows as ``new``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if math.isinf(value):
        return "new" if value > 0 else "-inf"
    return f"{value * 100:+.2f} %"
