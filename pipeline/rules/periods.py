"""The period a negative observation speaks of, against the windows its queries looked at.

"No deploys of payment-db in the last 24 hours" rests on a deploy query of 11:00–15:00: four
hours were looked at, not twenty-four. "No alerts fired all night" on a query of 07:00–09:00
says the same beyond its reach. A negative observation can only speak of the time its queries
covered; a period it names that is longer than every window it rests on says more than its
evidence. Only lengths are compared (a period placed elsewhere in time is the fact check's
business). Pure functions; the post-check (`guards.scope_problem`) applies them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from models.invocation import TimeWindow
from pipeline.rules import lexicon

_HOUR = 3600.0
_UNIT_S = {"second": 1.0, "sec": 1.0, "minute": 60.0, "min": 60.0, "hour": _HOUR, "hr": _HOUR,
           "day": 24 * _HOUR, "week": 7 * 24 * _HOUR, "month": 28 * 24 * _HOUR}
"""Seconds per unit; a month at its shortest."""
_NAMED_S = {"night": 6 * _HOUR, "overnight": 6 * _HOUR, "day": 8 * _HOUR,
            "week": 5 * 24 * _HOUR, "weekend": 2 * 24 * _HOUR, "month": 28 * 24 * _HOUR,
            "morning": 3 * _HOUR, "afternoon": 3 * _HOUR, "evening": 3 * _HOUR}
"""The shortest a named stretch of time can fairly mean ("all night": six hours at least)."""

_COUNT = "|".join(sorted((re.escape(w) for w in lexicon.NUMBER_WORDS), key=len, reverse=True))
_UNITS = "|".join(_UNIT_S)
_LAST = re.compile(
    rf"\b(?:last|past|previous|preceding)\s+(?:(?P<n>\d+(?:\.\d+)?|{_COUNT}|a|an|one)\s+)?"
    rf"(?P<u>{_UNITS})s?\b", re.IGNORECASE)
"""A period counted back from now: "the last 24 hours", "the past week"."""
_SPAN = re.compile(
    rf"\b(?:in|over|for|during|across|throughout)\s+(?:the\s+)?(?:whole\s+|entire\s+|full\s+)?"
    rf"(?P<n>\d+(?:\.\d+)?|{_COUNT}|a|an|one)\s+(?P<u>{_UNITS})s?\b", re.IGNORECASE)
"""A period of a length: "in 24 hours", "for two days"."""
_NAMED = re.compile(
    r"\b(?:all|the\s+whole|the\s+entire|throughout\s+the|all\s+through\s+the)\s+"
    r"(?P<u>night|day|week|weekend|month|morning|afternoon|evening)\b|\b(?P<o>overnight)\b",
    re.IGNORECASE)
"""A named stretch: "all night", "the whole day", "overnight"."""


def stated_periods(text: str) -> list[tuple[str, float]]:
    """Each period `text` names, as written, with its length in seconds."""
    found: list[tuple[str, float]] = []
    for pattern in (_LAST, _SPAN):
        for match in pattern.finditer(text):
            count = (match["n"] or "one").casefold()
            number = (float(count) if count[0].isdigit()
                      else 1.0 if count in ("a", "an", "one") else lexicon.NUMBER_WORDS[count])
            found.append((match[0], number * _UNIT_S[match["u"].casefold()]))
    for match in _NAMED.finditer(text):
        found.append((match[0], _NAMED_S[(match["u"] or match["o"]).casefold()]))
    return found


def window_seconds(window: TimeWindow) -> float | None:
    """The length of a query's window; None when its ends are not ISO 8601 times."""
    try:
        start = datetime.fromisoformat(window.start.replace("Z", "+00:00"))
        end = datetime.fromisoformat(window.end.replace("Z", "+00:00"))
        return (end - start).total_seconds()
    except (TypeError, ValueError):
        return None


def period_problem(text: str, windows: Iterable[TimeWindow]) -> str | None:
    """Why a negative observation speaks of a longer period than any window its queries looked
    at (within a tenth); None when it names none, or its queries have no known window."""
    lengths = [s for s in (window_seconds(w) for w in windows) if s is not None]
    if not lengths:
        return None
    longest = max(lengths)
    for said, seconds in stated_periods(text):
        if seconds > 1.1 * longest:
            return (f"speaks of {said!r}, but its queries looked at {_hours(longest)} at "
                    "most")
    return None


def _hours(seconds: float) -> str:
    if seconds >= 2 * 24 * _HOUR:
        return f"{seconds / (24 * _HOUR):g} days"
    if seconds >= 2 * _HOUR:
        return f"{seconds / _HOUR:g} hours"
    return f"{seconds / 60:g} minutes"
