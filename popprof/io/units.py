"""The one place that turns quantities into text and text into quantities.

Every number popprof prints for people goes through this module (the rules are in
``docs/figures.md``, "How numbers print"):

- **bytes**: the exact count with thousands separators, then the binary size with one
  decimal once it reaches 1 KiB: ``23,878,396 B (22.8 MiB)``, ``650 B``. A trailing ``.0``
  is dropped (``1,048,576 B (1 MiB)``). Axis ticks, where the exact count does not fit,
  show the bracketed part alone (:func:`bytes_short`); ``diff``'s text tables the binary size to 4
  significant figures (:func:`bytes_figures`: ``406.3 KiB``, ``+16 KiB``).
- **durations** (given in microseconds, the schema's time unit): below 1 ms in us with one
  decimal (``850.0 us``), below 1 s in ms with two (``45.20 ms``), else in s with three
  (``1.230 s``).
- **shares** (a fraction 0..1) as percentages with one decimal: ``24.3 %``; relative changes
  signed with two: ``+2.50 %``; limits and thresholds exactly as written: ``95 %``, ``2.5 %``.
- **ratios** (metrics of unit ``ratio``) with four decimals: ``0.2430``.
- **counts** (cycles, events, tiles, steps ...) as integers with separators: ``650,112``.
- **bandwidths and rates** (decimal units: GB/s = 1e9 bytes per second) as the figure without a unit
  prints, then the unit: ``25.5 GB/s``, ``1.54 GB/s``, ``312.0 TFLOP/s`` (:func:`bandwidth`, :func:`rate`).
- **estimated gains** as an upper bound with its share of the whole: ``up to 12.30 ms (5.6 % of the
  window)``.

Parsers: :func:`parse_bytes` (``"512M"``, ``"1.5 GiB"``), :func:`parse_share`
(``"1%"`` or ``0.01``).
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

#: What a missing figure prints as in running text (tables may pass ``missing="—"``).
MISSING = "n/a"

#: Decimals of a time in microseconds wherever popprof prints one: the nanosecond, the resolution of Kineto's
#: and rocprof's clocks. A time is rounded to it before anything else (JSON and CSV print it so; text rounds
#: it further), so that a figure computed as 47.349999 us from a clock near 1.4e12 us, and read back from
#: JSON as 47.35, print the same in every output.
TIME_DECIMALS = 3

_BINARY = (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def _absent(value: object) -> bool:
    """True for ``None``, ``pd.NA`` and NaN (a figure the profile does not have)."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and pd.NA  # noqa: PLR0124
    except TypeError:  # pd.NA's comparison raises in a boolean context
        return True


def _sign(value: float, signed: bool) -> str:
    if value < 0:
        return "-"
    return "+" if signed else ""


def _parts(value: object, signed: bool, missing: str) -> str | tuple[str, float]:
    """``(sign, magnitude)`` of a finite number, or the whole text of a missing or infinite one."""
    if _absent(value):
        return missing
    number = float(value)  # type: ignore[arg-type]
    if math.isinf(number):
        return f"{number:+}" if signed else str(number)
    return _sign(number, signed), abs(number)


def count(value: object, *, signed: bool = False, missing: str = MISSING) -> str:
    """An integer count with thousands separators: ``650,112`` (``+12`` when ``signed``)."""
    parts = _parts(value, signed, missing)
    if isinstance(parts, str):
        return parts
    sign, number = parts
    return f"{sign}{round(number):,}"


def bytes_short(value: object, *, signed: bool = False, missing: str = MISSING) -> str:
    """Bytes in the largest binary unit they reach, one decimal (``.0`` dropped): ``22.8 MiB``, ``650 B``."""
    if _absent(value):
        return missing
    size = float(value)  # type: ignore[arg-type]
    sign = _sign(size, signed)
    size = abs(size)
    for unit, scale in _BINARY:
        # the unit the size reaches, or the next one up when the lower unit would round to 1024.0
        if size >= scale or round(size / (scale >> 10), 1) >= 1024:
            text = f"{round(size / scale, 1):,.1f}".removesuffix(".0")
            return f"{sign}{text} {unit}"
    return f"{sign}{size:,.0f} B"


#: Significant figures of :func:`bytes_figures`.
BYTES_FIGURES = 4


def bytes_figures(value: object, *, signed: bool = False, missing: str = MISSING) -> str:
    """Bytes in the largest binary unit they reach with :data:`BYTES_FIGURES` significant figures, trailing zeros
    dropped: ``406.3 KiB``, ``1.563 MiB``, ``16 KiB``; below 1 KiB the whole count, ``650 B``. For text tables
    of many byte figures that must fit 80 columns (``popprof diff``'s); the exact count is in JSON and Markdown."""
    parts = _parts(value, signed, missing)
    if isinstance(parts, str):
        return parts
    sign, size = parts
    size = float(round(size))  # a count of bytes: 1,023.6 B is 1 KiB
    scales = [("B", 1), *reversed(_BINARY)]
    for k, (unit, scale) in enumerate(scales):
        if k + 1 < len(scales) and size >= scales[k + 1][1]:
            continue  # a larger unit is reached
        text = _significant(size / scale, BYTES_FIGURES) if scale > 1 else f"{size:,.0f}"
        if scale > 1 and float(text) >= 1024 and k + 1 < len(scales):  # 1023.96 KiB rounds to 1 MiB
            unit, scale = scales[k + 1]
            text = _significant(size / scale, BYTES_FIGURES)
        return f"{sign}{text} {unit}"
    return f"{sign}{size:,.0f} B"  # pragma: no cover - the last unit always returns


def _significant(number: float, figures: int) -> str:
    """``number`` (> 0) rounded half up to ``figures`` significant figures, trailing zeros dropped."""
    exact = Decimal(repr(number))
    digits = exact.adjusted() + 1  # digits before the point
    rounded = exact.quantize(Decimal(1).scaleb(digits - figures), rounding=ROUND_HALF_UP)
    if rounded.adjusted() + 1 > digits:  # 999.96 -> 1000.0: one digit more, one decimal less
        rounded = rounded.quantize(Decimal(1).scaleb(digits + 1 - figures), rounding=ROUND_HALF_UP)
    text = f"{rounded:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def nbytes(value: object, *, signed: bool = False, missing: str = MISSING) -> str:
    """Bytes, the one way: ``23,878,396 B (22.8 MiB)``; below 1 KiB ``650 B``."""
    if _absent(value):
        return missing
    size = float(value)  # type: ignore[arg-type]
    exact = count(size, signed=signed) + " B"
    if abs(size) < 1024:
        return exact
    return f"{exact} ({bytes_short(size, signed=signed)})"


def duration(us: object, *, signed: bool = False, missing: str = MISSING) -> str:
    """A duration given in microseconds: ``850.0 us``, ``45.20 ms``, ``1.230 s`` (to the nanosecond first:
    :data:`TIME_DECIMALS`)."""
    parts = _parts(us if _absent(us) else round(float(us), TIME_DECIMALS), signed, missing)  # type: ignore[arg-type]
    if isinstance(parts, str):
        return parts
    sign, value = parts
    if round(value, 1) < 1e3:
        return f"{sign}{value:.1f} us"
    if round(value / 1e3, 2) < 1e3:
        return f"{sign}{value / 1e3:.2f} ms"
    return f"{sign}{value / 1e6:,.3f} s"


def offset(us: object, *, missing: str = MISSING) -> str:
    """A time from the documented origin (the first event), always signed: ``+32.80 ms``."""
    return duration(us, signed=True, missing=missing)


def percent(share: object, *, signed: bool = False, digits: int = 1, missing: str = MISSING) -> str:
    """A share (a fraction, 0.243) as a percentage: ``24.3 %``."""
    if _absent(share):
        return missing
    value = float(share) * 100  # type: ignore[arg-type]
    if math.isinf(value):
        return "new" if value > 0 else "-inf"
    return f"{value:{'+' if signed else ''}.{digits}f} %"


def _change_digits(hundredths: float) -> int:
    """Decimals for a signed change given in percent or points: two, or as many as its first digit needs
    (up to six) when two would print a change that is there as ``+0.00``; below a millionth, two."""
    size = abs(hundredths)
    if size == 0 or size >= 0.005 or not math.isfinite(size):
        return 2
    digits = max(2, math.ceil(-math.log10(size)))
    return digits if digits <= 6 else 2


def relative(change: object, *, missing: str = "") -> str:
    """A relative change, signed with two decimals (``+2.50 %``; a smaller one to its first digit, ``+0.003
    %``, never ``+0.00 %`` for a change that is there); growth from zero is ``new``."""
    digits = 2 if _absent(change) else _change_digits(float(change) * 100)  # type: ignore[arg-type]
    return percent(change, signed=True, digits=digits, missing=missing)


def limit_percent(fraction: float) -> str:
    """A limit or threshold given as a fraction, as the percentage the user wrote: ``95 %``, ``2.9 %``.

    Exact decimal arithmetic, so ``0.029`` prints ``2.9 %`` and never ``2.9000000000000004 %``.
    """
    text = f"{Decimal(repr(float(fraction))) * 100:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} %"


def ratio(value: object, *, signed: bool = False, missing: str = MISSING) -> str:
    """A ratio with four decimals: ``0.2430``."""
    if _absent(value):
        return missing
    return f"{float(value):{'+' if signed else ''}.4f}"  # type: ignore[arg-type]


def number(value: object, *, signed: bool = False, missing: str = MISSING) -> str:
    """A figure without a unit: integers as counts (``1,234``), below 10 three significant digits
    (``0.686``), else one decimal (``12.3``, ``1,234.5``)."""
    if _absent(value):
        return missing
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    as_float = float(value)
    if not math.isfinite(as_float):
        return f"{as_float:+}" if signed else str(as_float)
    if as_float.is_integer() and abs(as_float) < 1e15:
        return count(as_float, signed=signed)
    sign = "+" if signed else ""
    return f"{as_float:{sign}.3g}" if abs(as_float) < 10 else f"{as_float:{sign},.1f}"


def rate(amount: object, unit: str, *, missing: str = MISSING) -> str:
    """A rate in a decimal unit (``GB/s``, ``TB/s``, ``TFLOP/s``): below 10 three significant digits
    (``1.54 GB/s``), else one decimal (``25.5 GB/s``, ``1,234.5 GB/s``); a whole number keeps its decimal."""
    if _absent(amount):
        return missing
    figure = float(amount)  # type: ignore[arg-type]
    if not math.isfinite(figure):
        return missing
    text = f"{figure:.3g}" if abs(figure) < 10 else f"{figure:,.1f}"
    return f"{text} {unit}"


def bandwidth(gb_per_s: object, *, missing: str = MISSING) -> str:
    """A bandwidth given in GB/s (1e9 bytes per second, nccl-tests' unit): ``25.5 GB/s``, ``1.54 GB/s``."""
    return rate(gb_per_s, "GB/s", missing=missing)


def value(amount: object, unit: str, *, signed: bool = False, missing: str = MISSING) -> str:
    """A metric value in its registry unit (``bytes``, ``us``, ``ratio``, a count's noun, ...)."""
    if unit == "bytes":
        return nbytes(amount, signed=signed, missing=missing)
    if unit == "us":
        return duration(amount, signed=signed, missing=missing)
    if unit == "ratio":
        return ratio(amount, signed=signed, missing=missing)
    if unit == "share":
        return percent(amount, signed=signed, missing=missing)
    if unit == "%":
        return percent(None if _absent(amount) else float(amount) / 100, signed=signed, missing=missing)  # type: ignore[arg-type]
    if unit.endswith("/s") and not _absent(amount):
        return f"{float(amount):{'+' if signed else ''},.2f} {unit}"  # type: ignore[arg-type]
    return number(amount, signed=signed, missing=missing)


def gain(value: object, unit: str, whole: object = None, basis: str = "", of: str | None = None) -> str:
    """An estimated gain (an upper bound) in words: ``up to 12.30 ms (5.6 % of rank 0 gpu:0's window) - <basis>``.

    ``unit`` is ``us`` or ``bytes``; ``of`` names ``whole`` (``rank 1 gpu:1's window``, ``tile 289's
    capacity``: :attr:`popprof.rules.base.Gain.whole_words` says it for a gain), ``the window`` or ``the
    memory`` when not given. The share is left out when ``whole`` is unknown, the basis when empty."""
    text = "up to " + (duration(value) if unit == "us" else nbytes(value))
    if not _absent(whole) and float(whole) > 0 and not _absent(value):  # type: ignore[arg-type]
        share = min(1.0, max(0.0, float(value) / float(whole)))  # type: ignore[arg-type]
        text += f" ({percent(share)} of {of or ('the window' if unit == 'us' else 'the memory')})"
    return text + (f" - {basis}" if basis else "")


def amount(quantity: object, unit: str) -> str:
    """A quantity with its unit spelled out: bytes the one way, ``256 levels``, ``100:1`` for a ratio limit."""
    if unit in ("bytes", "us"):
        return value(quantity, unit)
    if unit == "ratio":
        return f"{number(quantity)}:1"
    return f"{number(quantity)} {unit}"


def change(amount: object, unit: str) -> str:
    """An absolute change in its unit, always signed (empty when unknown); a share's change in percentage
    points (``+0.52 pp``; a smaller one to its first digit, ``+0.003 pp``), so it is never read as a relative
    change."""
    if unit == "share":
        if _absent(amount):
            return ""
        points = float(amount) * 100  # type: ignore[arg-type]
        return f"{points:+.{_change_digits(points)}f} pp"
    return value(amount, unit, signed=True, missing="")


# -- parsing ----------------------------------------------------------------------------------

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.I)
_SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_bytes(text: object) -> int:
    """``"512M"`` / ``"512 MiB"`` / ``"4096"`` -> bytes (suffixes are powers of 1024); ValueError otherwise."""
    match = _SIZE.match(str(text))
    if match is None:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match.group(1)) * _SCALE[match.group(2).lower()])


def parse_count(text: object) -> int:
    """A whole number written as text (``"256"``); ValueError otherwise."""
    match = _SIZE.match(str(text))
    if match is None or match.group(2) or match.group(3):
        raise ValueError(f"not a whole number: {text!r}")
    return int(float(match.group(1)))


def parse_share(raw: object) -> float:
    """A fraction from ``0.01``, ``"0.01"`` or a percentage ``"1%"`` / ``"1 %"`` (exact decimal);
    ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError(f"not a number: {raw!r}")
    if isinstance(raw, numbers.Real):
        return float(raw)
    text = str(raw).strip().replace("_", "")
    try:
        if text.endswith("%"):
            return float(Decimal(text[:-1].strip()) / 100)
        return float(text)
    except (ValueError, InvalidOperation):
        raise ValueError(f'not a number or a percentage like "1%": {raw!r}') from None
