"""How tools print numbers, so that a claim restating a value prints it the same way.

Agents that quote a projected number format it with these same functions: one float, one text.
"""

from __future__ import annotations

import math

_ATTACHED_UNITS = frozenset({"%"})
_BARE_UNITS = frozenset({"", "count", "1", "ratio"})


def format_number(value: float) -> str:
    """Three significant figures for small values, whole numbers from 100 up; no trailing 0s."""
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}" if magnitude else "0"
    if "." in text and "e" not in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in {"-0", ""} else text


def format_value(value: float, unit: str) -> str:
    """A value with its unit: `41.8%`, `4210 ms`, `508 MiB`, `3` for counts."""
    number = format_number(value)
    if unit in _ATTACHED_UNITS:
        return f"{number}{unit}"
    if unit in _BARE_UNITS:
        return number
    return f"{number} {unit}"


def plural(count: int, noun: str) -> str:
    """`1 line`, `2 lines`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def rounded(value: float) -> float:
    """The value as the projection stores it: rounded like `format_number` prints it."""
    return float(format_number(value))
