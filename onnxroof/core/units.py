"""Human formatting of SI quantities, for renderers only."""

from __future__ import annotations

import math

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """``si(1.23e9, "FLOP") == "1.23 GFLOP"`` (decimal prefixes)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if math.isinf(value):
        return "∞"
    magnitude = abs(value)
    for factor, prefix in _PREFIXES:
        if magnitude >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}".rstrip()
    return f"{value:.{digits}g} {unit}".rstrip()


def seconds(value: float) -> str:
    """``seconds(1.5e-3) == "1.5 ms"``."""
    return _submultiple(value, "s", ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")))


def joules(value: float | None) -> str:
    """``joules(6e-3) == "6 mJ"``; ``–`` when unknown."""
    if value is None:
        return "–"
    return _submultiple(value, "J", ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p")))


def _submultiple(value: float, unit: str, prefixes: tuple[tuple[float, str], ...]) -> str:
    """A quantity of at most a few units with the largest prefix that keeps it ≥ 1 (the smallest prefix below)."""
    if value <= 0:
        return f"0 {unit}"
    for factor, prefix in prefixes:
        if value >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    factor, prefix = prefixes[-1]
    return f"{value / factor:.3g} {prefix}{unit}"


def percent(share: float) -> str:
    return f"{100 * share:.1f}%"
