"""How the reports write numbers: microseconds, ratios, shares, rates, counts, axis ticks."""

from __future__ import annotations

import math


def us(ms: float | None) -> str:
    """Milliseconds as microseconds: ``4.3``, ``1,253``; ``-`` for none."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return "-"
    value = ms * 1e3
    return f"{value:.1f}" if value < 1000 else f"{value:,.0f}"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def count(n: int) -> str:
    if n >= 10**6:
        return f"{n / 1e6:.1f}M"
    if n >= 10**3:
        return f"{n / 1e3:.1f}k"
    return str(n)


def tick_label(value: float) -> str:
    """A tick of the speedup axis as a plain number: ``0.5``, ``2``, ``10``."""
    return f"{value:g}" if value > 0 else ""


def minor_tick_label(value: float) -> str:
    """Minor ticks of the log axis: only the 2s and 5s of each decade, so labels never crowd."""
    if value <= 0:
        return ""
    leading = value / 10 ** math.floor(math.log10(value) + 1e-9)
    return tick_label(value) if round(leading, 6) in (2.0, 5.0) else ""
