"""Durations an answer works out from times: "30 seconds later", "within 30 seconds of the
scale-up", "14 minutes before the onset". No output states such a duration; the times it lies
between do. A duration that is the interval between two times of the claim or its evidence is
a reading of them, not a value its evidence gives otherwise. Pure functions; the post-check
(`guards`) applies them.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence

from pipeline.rules.facts import Fact, FactKind, FactSet, extract_facts

_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?(?:[.,](\d+))?")
"""The time of day of a timestamp's key (`2026-11-30T14:03:12`, `dec-10T07:28:16`, `14:03`)."""

_BOUND = re.compile(r"\b(?:within|under|less\s+than|inside|in\s+under|no\s+more\s+than|"
                    r"at\s+most|up\s+to)\s+(?:a|an|about|roughly|some)?\s*$", re.IGNORECASE)
"""Words before a duration that make it a bound, not a value ("within 30 seconds")."""

_DAY_MS = 86_400_000


def interval_durations(text: str, evidence: Iterable[str]) -> list[Fact]:
    """The durations of `text` that are the interval between two times of `text` and
    `evidence` (within the duration's rounding: "three minutes" is 150 to 210 s), or at least
    one such interval when the claim gives the duration as a bound ("within 30 seconds")."""
    durations = [f for f in extract_facts(text) if f.kind is FactKind.QUANTITY
                 and f.shape == "duration" and f.value is not None]
    if not durations:
        return []
    clocks = sorted({ms for t in (text, *evidence) for ms in _times(t)})
    gaps = [b - a for a, b in zip(clocks, clocks[1:], strict=False)]
    found = []
    for fact in durations:
        assert fact.value is not None
        slack = max(fact.tolerance, 0.1 * fact.value)
        if _BOUND.search(text[:_start(text, fact)]):
            # some two times lie within it: the closest two do
            hit = bool(gaps) and min(gaps) <= fact.value + slack
        else:
            hit = any(_apart(clocks, start, fact.value, slack) for start in clocks)
        if hit:
            found.append(fact)
    return found


def _apart(clocks: list[int], start: int, duration: float, slack: float) -> bool:
    """Whether a time of `clocks` (sorted) lies `duration` after `start`, within `slack`, the
    day wrapping at midnight."""
    # a day or more is no time of day apart from another (24 hours would be `start` itself)
    for target in (start + duration, *([start + duration - _DAY_MS]
                                       if duration + slack < _DAY_MS else [])):
        at = bisect_left(clocks, target - slack)
        if at < len(clocks) and clocks[at] <= target + slack:
            return True
    return False


def _times(text: str) -> list[int]:
    """Each time of day in `text`, in milliseconds since midnight."""
    return [clock[0] for fact in extract_facts(text) if fact.kind is FactKind.TIMESTAMP
            and (clock := time_of_day(fact)) is not None]


def time_of_day(fact: Fact) -> tuple[int, bool] | None:
    """A timestamp's time of day in milliseconds since midnight, and whether it gives its
    seconds ("13:41:05") or only its minute ("13:41"); None when it gives no time of day."""
    match = _CLOCK.search(fact.key.rpartition("T")[2] if "T" in fact.key else fact.key)
    if match is None:
        return None
    hours, minutes, seconds, fraction = match.groups()
    ms = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds or 0)) * 1000
    return ms + int((fraction or "0")[:3].ljust(3, "0")), seconds is not None


def _start(text: str, fact: Fact) -> int:
    at = text.find(fact.text)
    return at if at >= 0 else 0


_WINDOW_JOIN = re.compile(r"\s*(?:-|–|—|to|until|till|through)\s*|\s+and\s+")
"""What stands between the two bounds of a window ("13:12–13:15", "from 10:16 to 10:17");
"and" only after "between" ("between 13:59 and 14:03")."""
_BETWEEN = re.compile(r"\bbetween\s+$", re.IGNORECASE)
_MINUTE_MS = 60_000


def window_bounds(text: str, evidence: Iterable[str]) -> list[Fact]:
    """The times of `text` that bound a window it gives ("between 13:59 and 14:03") when a
    time of `evidence` lies within that window: the bounds frame what the claim saw, they are
    no times it says anything happened at, so no output need state them (the last vacuum at
    14:02:16 is "between 13:59 and 14:03"). A window none of whose evidence lies within it
    keeps its bounds, to be compared as any time is."""
    times = [f for f in extract_facts(text) if f.kind is FactKind.TIMESTAMP]
    clocks = [ms for t in evidence for ms in _times(t)]
    found: list[Fact] = []
    for first, second in zip(times, times[1:], strict=False):
        start, end = _start(text, first), _start(text, second)
        join = _WINDOW_JOIN.fullmatch(text, start + len(first.text), end)
        if start < 0 or join is None or (
                "and" in join.group() and not _BETWEEN.search(text, 0, start)):
            continue
        opens, closes = time_of_day(first), time_of_day(second)
        if opens is None or closes is None:
            continue
        last = closes[0] + (999 if closes[1] else _MINUTE_MS - 1)  # to the bound's precision
        if any(_within(ms, opens[0], last) for ms in clocks):
            found += [first, second]
    return found


def _within(ms: int, opens: int, closes: int) -> bool:
    """Whether a time of day lies in a window, one that spans midnight too."""
    if opens <= closes:
        return opens <= ms <= closes
    return ms >= opens or ms <= closes


def worked_out(text: str, evidence: Sequence[str], known: FactSet) -> list[Fact]:
    """The facts of `text` that are readings of the times it binds to, not values its
    evidence must state: the durations between them (`interval_durations`: "30 seconds
    later") and the bounds of a window its evidence lies in that no evidence states
    (`window_bounds`: "between 13:59 and 14:03"). The post-check and the offline Verifier
    leave them out alike."""
    return [*interval_durations(text, evidence),
            *(f for f in window_bounds(text, evidence) if not known.supports(f))]
