"""Values given at a time: "peaked at 61.4 at 13:41", "0.731% at 07:46", a series' point
`["2026-11-30T13:40:00Z", 46.9]`. A claim that pairs a number with a time its evidence pairs
only with other numbers (the series peaked at 60.4 at 13:41; 61.4 was the baseline's maximum)
gives the value of another moment: each number is stated somewhere, the pairing is not. Pure
functions; the post-check (`guards`) applies them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.rules.facts import Fact, FactKind, FactSet, extract_facts
from pipeline.rules.intervals import time_of_day

_AT = re.compile(r"\s+(?:at|on|by)\s+(?:about\s+|around\s+)?", re.IGNORECASE)
"""What stands between a value and its time: "60.4 at 13:41"."""
_POINT = re.compile(r'\[\s*"([^"]{8,40})"\s*,\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*\]')
"""A series' point as JSON: `["2026-11-30T13:40:00Z", 46.9]`."""
_SPAN = 40
"""Enough text on either side of "at" to hold a value with its unit, or a timestamp."""


def timed_values(text: str) -> list[tuple[int, int, Fact]]:
    """Each number `text` gives at a time, as (the time in seconds since midnight, the time's
    precision in seconds: 60 for "13:41", 1 for "13:41:05", the number as a fact)."""
    found: list[tuple[int, int, Fact]] = []
    for match in _AT.finditer(text):
        before = text[max(0, match.start() - _SPAN):match.start()]
        after = text[match.end():match.end() + _SPAN]
        value = next((f for f in reversed(extract_facts(before, single_digits=True))
                      if f.kind is FactKind.QUANTITY and before.endswith(f.text)), None)
        moment = next((f for f in extract_facts(after)
                       if f.kind is FactKind.TIMESTAMP and after.startswith(f.text)), None)
        if value is not None and moment is not None and (clock := _clock(moment)) is not None:
            found.append((*clock, value))
    for point in _POINT.finditer(text):
        moment = next((f for f in extract_facts(point.group(1))
                       if f.kind is FactKind.TIMESTAMP), None)
        numbers = [f for f in extract_facts(point.group(2), single_digits=True)
                   if f.kind is FactKind.QUANTITY]
        if moment is not None and numbers and (clock := _clock(moment)) is not None:
            found.append((*clock, numbers[0]))
    return found


def _clock(fact: Fact) -> tuple[int, int] | None:
    """A timestamp's time of day in seconds, and its precision in seconds."""
    found = time_of_day(fact)
    return None if found is None else (found[0] // 1000, 1 if found[1] else 60)


def timed_conflict(text: str, evidence: Iterable[str]) -> list[Fact]:
    """The numbers `text` gives at a time that its evidence gives, at that time, only other
    numbers of that dimension, as facts; none where the evidence gives no value at that time."""
    stated = [pair for item in evidence for pair in timed_values(item)]
    if not stated:
        return []
    differing = []
    for at, precision, fact in timed_values(text):
        values = [v for t, p, v in stated
                  if abs(t - at) < max(precision, p) and t // max(precision, p) ==
                  at // max(precision, p) and _comparable(fact, v)]
        if values and not FactSet(values).supports(fact):
            differing.append(fact)
    return differing


def _comparable(a: Fact, b: Fact) -> bool:
    """Numbers of one unit, or both bare: a bare number at a time may be another series'."""
    return (a.unit or "") == (b.unit or "")
