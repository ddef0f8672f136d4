"""Number formatting shared by rule messages (thousands separators, percentages, durations)."""

from __future__ import annotations


def num(value: float) -> str:
    """An integer-valued figure with thousands separators: ``650,112``."""
    return f"{value:,.0f}"


def nbytes(value: float) -> str:
    """Bytes: ``650,112 B``."""
    return f"{value:,.0f} B"


def pct(share: float) -> str:
    """A share as a percentage with one decimal: ``101.7 %``."""
    return f"{share * 100:.1f} %"


def threshold_pct(share: float) -> str:
    """A threshold as a compact percentage: ``95 %`` or ``2.5 %``."""
    return f"{share * 100:.4g} %"


def duration(us: float) -> str:
    """A duration given in microseconds, in a readable unit: ``850 us``, ``45.2 ms``, ``1.23 s``."""
    if abs(us) >= 1e6:
        return f"{us / 1e6:,.2f} s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:,.1f} ms"
    return f"{us:,.0f} us"


def ranked(items: list[tuple[str, float]], formatter, limit: int = 3) -> str:
    """``'a' (1.2 ms), 'b' (0.4 ms)`` from (label, amount) pairs, largest first."""
    return ", ".join(f"{label} ({formatter(amount)})" for label, amount in items[:limit])


def offset(us: float) -> str:
    """A time relative to a reference, signed: ``+1.2 ms``, ``-40 us``."""
    return ("-" if us < 0 else "+") + duration(abs(us))
