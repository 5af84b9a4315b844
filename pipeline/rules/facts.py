"""Concrete facts in text: timestamps, versions, error codes, quantities, identifiers, services.

The lexical verifier, the Verifier post-check and the Composer no-new-facts guard all compare
facts the same way, through `extract_facts` and `FactSet`.

Each fact has a kind and, within it, a shape (`Fact.sort`: `identifier/hex`, `identifier/ip`,
`quantity/duration` ...): identifiers of every common shape (hex with or without `0x`, grouped
hex, UUIDs, block ids, alphanumeric ids, IPv4/IPv6 with or without a port, `key=value` values,
paths, URLs, hosts), numbers with and without units, durations and timestamps. Evidence
supports a fact when it states the same value (identifiers by whole token, never inside a
longer one); it conflicts with one when it states values of the same kind and shape and none
is this one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from pipeline.rules.lexicon import NUMBER_WORDS


class FactKind(StrEnum):
    """What sort of concrete fact a span of text states."""

    TIMESTAMP = "timestamp"
    VERSION = "version"
    ERROR_CODE = "error_code"
    QUANTITY = "quantity"
    IDENTIFIER = "identifier"
    NAME = "name"
    SERVICE = "service"


IDENTIFYING_KINDS = frozenset({FactKind.VERSION, FactKind.ERROR_CODE, FactKind.IDENTIFIER})
"""Kinds whose absence from the evidence means the claim made them up."""

KEY_KINDS = IDENTIFYING_KINDS | {FactKind.SERVICE, FactKind.NAME, FactKind.QUANTITY}
"""A claim's key facts: entities, codes, identifiers and numbers. One absent from the claim's
verified evidence is fabricated, whatever class a Verifier gave the claim (spec: REJECT when a
claim fabricates a key entity, error code or conclusion)."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One concrete fact: its kind, its text, a comparison key and, for quantities, a value."""

    kind: FactKind
    text: str
    key: str
    value: float | None = None
    unit: str | None = None
    tolerance: float = 0.0
    shape: str = ""
    """The fact's shape within its kind: for identifiers hex, uuid, block, ip, url, path,
    host, kv (a `key=value` value) or id; for quantities their dimension ("" for a bare
    number); for error codes http or name. The post-check compares a claim's fact with the
    evidence's facts of its kind and shape only."""
    number: float | None = None
    """A quantity's number as written, before its unit is applied."""

    @property
    def sort(self) -> str:
        """Kind and shape, the unit of comparison: `identifier/hex`, `quantity/duration`."""
        return f"{self.kind.value}/{self.shape}" if self.shape else self.kind.value


# Units: canonical dimension and the factor to its base unit.
_UNITS: dict[str, tuple[str, float]] = {
    "%": ("percent", 1.0), "percent": ("percent", 1.0),
    "ns": ("duration", 1e-6), "µs": ("duration", 1e-3), "us": ("duration", 1e-3),
    "ms": ("duration", 1.0), "s": ("duration", 1e3), "sec": ("duration", 1e3),
    "secs": ("duration", 1e3), "second": ("duration", 1e3),
    "seconds": ("duration", 1e3), "min": ("duration", 6e4), "mins": ("duration", 6e4),
    "minute": ("duration", 6e4), "minutes": ("duration", 6e4), "h": ("duration", 3.6e6),
    "hr": ("duration", 3.6e6), "hrs": ("duration", 3.6e6), "hour": ("duration", 3.6e6),
    "hours": ("duration", 3.6e6), "day": ("duration", 8.64e7), "days": ("duration", 8.64e7),
    "b": ("bytes", 1.0), "byte": ("bytes", 1.0), "bytes": ("bytes", 1.0),
    "kb": ("bytes", 1e3), "mb": ("bytes", 1e6), "gb": ("bytes", 1e9), "tb": ("bytes", 1e12),
    "kib": ("bytes", 1024.0), "mib": ("bytes", 1024.0**2), "gib": ("bytes", 1024.0**3),
    "ki": ("bytes", 1024.0), "mi": ("bytes", 1024.0**2), "gi": ("bytes", 1024.0**3),
    "rps": ("rate", 1.0), "req/s": ("rate", 1.0), "qps": ("rate", 1.0),
    "rpm": ("rate", 1 / 60), "x": ("factor", 1.0), "m": ("m", 1.0),
    "cores": ("cores", 1.0), "core": ("cores", 1.0), "millicores": ("cores", 1e-3),
}
_COUNT_NOUNS = (
    "errors|error|requests|request|responses|response|pods|pod|replicas|replica|restarts|restart"
    "|events|event|alerts|alert|lines|line|hits|hit|timeouts|timeout|connections|connection"
    "|retries|retry|failures|failure|exceptions|exception|kills|nodes|node|instances|instance"
    "|deployments|deployment|users|orders|messages|message|jobs|job|times|attempts|attempt"
    "|tries|calls|call|queries|query|rows|records|record|workers|threads|processes"
    "|containers|container|hosts|host|partitions|consumers|items|files|checks|probes|sessions"
    "|objects|object|warnings|warning|warn"
)
_COUNT_ADJECTIVES = "such|more|new|other|distinct|separate|similar|further|additional|unique"
"""Words that may stand between a count and its noun ("24 such warnings", "3 more pods")."""
COUNTS = frozenset(noun.rstrip("s") for noun in _COUNT_NOUNS.split("|"))
_SAME_COUNT = {"object": "pod", "replica": "pod", "warn": "warning"}
"""Nouns that count the same things: the objects of a service's Kubernetes events and the
replicas of its deployment are its pods ("21 OOMKilled events on 3 objects" is on 3 pods);
lines of the WARN level are warnings ("42 WARN lines", as "91 ERROR lines" are errors)."""
"""The dimensions of counts ("512 errors", "512 lines", "512 times"): the same count told of
under another noun, never another unit."""
_UNIT_ALT = "|".join(
    re.escape(u) for u in sorted(_UNITS, key=len, reverse=True) if u not in {"%"}
)

_COUNTED_WORDS = "|".join(w for w, n in NUMBER_WORDS.items() if n >= 2 and n == int(n)
                          and not w.endswith("ed") and w not in {"twice", "double", "triple"})
_DURATION_UNITS = "seconds|minutes|hours|days"
_DURATION_UNIT = "second|minute|hour|day"

_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_TLDS = "com|net|org|edu|gov|io|cn|de|uk|jp|ru|fr|br|in|info|biz|cloud|dev|example"

# Patterns in priority order: a span claimed by one is never read by a later one. A pattern that
# can only start on a digit (or a hex digit, or "v") says so first, in a lookahead: re tries
# every position, and that one-character test is far cheaper than the lookbehinds that follow
# it (the status-code pattern took 7 times as long without it). Each is (kind, shape, pattern);
# a pattern with a group named `v` states only that group (the value of `key=value`).
_PATTERNS: list[tuple[FactKind, str, re.Pattern[str]]] = [
    (FactKind.IDENTIFIER, "url", re.compile(
        r"(?=[a-z])\b[a-z][a-z0-9+.-]*://[^\s\"'<>()\[\]{}]+(?<![.,;:])")),
    (FactKind.TIMESTAMP, "", re.compile(
        r"(?=\d)\b\d{4}-\d{2}-\d{2}(?:(?:[T ]|-(?=\d{2}\.))\d{2}[:.]\d{2}(?:[:.]\d{2}"
        r"(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?!\w)(?!:\d)")),
    (FactKind.TIMESTAMP, "", re.compile(
        rf"(?=[A-Z])\b(?:{_MONTHS}) +\d{{1,2}} \d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d+)?(?!\w)")),
    # a day of a month without its time ("on Jul 2 and Jul 13"): that day, at any time
    (FactKind.TIMESTAMP, "", re.compile(
        rf"(?=[A-Z])\b(?:{_MONTHS}) +\d{{1,2}}\b(?![:.,]\d)(?! \d{{2}}:)")),
    (FactKind.TIMESTAMP, "", re.compile(
        r"(?=\d)(?<![\w/.])\d{2}/\d{2}/\d{2}(?:\d{2})? \d{2}:\d{2}:\d{2}(?!\w)")),
    # a log's compact date and time, `yymmdd hhmmss` (HDFS: "081109 203615"): that instant
    (FactKind.TIMESTAMP, "", re.compile(
        r"(?=\d)(?<![\w:.,/-])\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
        r" (?:[01]\d|2[0-3])[0-5]\d[0-5]\d(?![\w:.,/-])")),
    (FactKind.TIMESTAMP, "", re.compile(
        r"(?=\d)(?<![\w:.])\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?!\w)(?!:\d)")),
    (FactKind.IDENTIFIER, "uuid", re.compile(
        r"(?=[0-9a-fA-F]{8}-)\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
        r"-[0-9a-fA-F]{12}\b")),
    (FactKind.IDENTIFIER, "ip", re.compile(
        r"(?=\d)(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?!\w)(?!\.\d)")),
    (FactKind.IDENTIFIER, "ip", re.compile(
        r"(?=[0-9a-fA-F]{1,4}:|::)(?<![\w:])(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4}){4,8}"
        r"|(?:[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{1,4})*)?::(?:[0-9a-fA-F]{1,4}"
        r"(?::[0-9a-fA-F]{1,4})*)?)(?![\w:])")),
    (FactKind.IDENTIFIER, "hex", re.compile(r"(?=0)\b0[xX][0-9a-fA-F]+\b")),
    # grouped hex (WWIDs, MACs, serials): 6005-08b4-0001-00c6, 00:1a:2b:3c:4d:5e
    (FactKind.IDENTIFIER, "hex", re.compile(
        r"(?=[0-9a-fA-F]{2,}[-:][0-9a-fA-F]{2})\b(?=[0-9a-fA-F:-]*\d)[0-9a-fA-F]{2,}"
        r"(?:([-:])[0-9a-fA-F]{2,})"
        r"(?:\1[0-9a-fA-F]{2,}){2,}\b(?![.-]\w)")),
    (FactKind.IDENTIFIER, "block", re.compile(r"(?=b)\bblk_-?\d+\b")),
    (FactKind.VERSION, "", re.compile(
        r"(?=[v\d])(?:(?<![\w.])v?\d+\.\d+\.\d+(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?![\w.])"
        r"|(?<![\w.])v\d+(?:\.\d+)?(?![\w.]))")),
    (FactKind.ERROR_CODE, "", re.compile(
        r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\bE(?!RROR\b)[A-Z]{4,}\b"
        r"|\b[A-Z][A-Za-z]*(?:Error|Exception|BackOff|Killed|Timeout|Failure)\b"
        r"|\bOOM\b|\bSQLSTATE\s+[0-9A-Z]{5}\b")),
    (FactKind.ERROR_CODE, "http", re.compile(
        r"(?=[1-5])"
        r"(?:(?:(?<=HTTP )|(?<=HTTP/1\.1 )|(?<=status )|(?<=status: )|(?<=status=)|(?<=code )"
        r"|(?<=code=)|(?<=returning )|(?<=returned ))[1-5]\d{2}\b"
        # not the tail of a larger number: "1,432 errors" is a count, not error code 432
        r"|(?<![\d,.])\b[45]\d{2}(?=s\b|\s+(?:errors?|responses?|status))"
        # a status named on its own by an article or an ordinal: "the first 503."
        r"|(?:(?<=\b[Aa] )|(?<=\b[Aa]n )|(?<=\b[Tt]he )|(?<=\bfirst )|(?<=\blast ))"
        r"[45]\d{2}(?=[.,;:)]|$)"
        r"|(?<![\d,.])\b[1-5]\d{2}(?= (?:Internal|Bad|Service|Gateway|Not|Too|Forbidden"
        r"|Unauthorized|OK|Created|Conflict|Request|Payload|Unprocessable|Precondition|Method)))")),
    (FactKind.IDENTIFIER, "path", re.compile(
        r"(?=[/~]|\.\.?/)(?<![\w/.:~-])(?:~|\.{1,2})?(?:/[\w.+@%$-]+){2,}/?")),
    (FactKind.IDENTIFIER, "host", re.compile(
        rf"(?=[A-Za-z0-9])\b[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
        rf"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.(?:{_TLDS})\b(?![.-]\w)")),
    # three labels or more under a two-letter country domain: 62-192-102-94.dsl.easynet.nl
    (FactKind.IDENTIFIER, "host", re.compile(
        r"(?=[A-Za-z0-9-]+\.[A-Za-z0-9-]+\.)(?<![\w.-])[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?){2,}\.[a-z]{2}\b(?![.-]\w)")),
    (FactKind.IDENTIFIER, "id", re.compile(
        r"\b(?=[A-Za-z0-9_-]*\d)[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+\b")),
    (FactKind.IDENTIFIER, "hex", re.compile(
        r"(?=[0-9a-fA-F]{8})\b(?:(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}"
        r"|(?=[0-9A-F]*[A-F])(?=[0-9A-F]*\d)[0-9A-F]{8,})\b")),
    (FactKind.QUANTITY, "", re.compile(
        r"(?=[-+\d])(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
        rf"(?:(?-i:[kKMB]|bn)(?!\w)|\s?%|\s?(?:{_UNIT_ALT})(?![\w/])"
        rf"|\s(?:(?:{_COUNT_ADJECTIVES})\s+)?(?:{_COUNT_NOUNS})\b)?"
        r"(?![\w.]\w)",
        re.IGNORECASE)),
    # a duration in words ("the preceding two hours"): the same fact as "120 minutes"; a
    # a duration with a half in words ("two and a half hours", "half a minute", "an hour and a
    # half"): the interval a claim works out between two times, or a duration to find
    (FactKind.QUANTITY, "words", re.compile(
        rf"\b(?:(?:{_COUNTED_WORDS}|one|an?)\s+and\s+a\s+half\s+(?:{_DURATION_UNIT})s?"
        rf"|half\s+an?\s+(?:{_DURATION_UNIT})|(?:one|an?)\s+(?:{_DURATION_UNIT})\s+and\s+a"
        r"\s+half)\b", re.IGNORECASE)),
    # number of times ("up to five times"), which no list of the claim counts for it
    (FactKind.QUANTITY, "words", re.compile(
        rf"\b(?:{_COUNTED_WORDS})\s+(?:{_DURATION_UNITS}|times|attempts|retries|tries)\b",
        re.IGNORECASE)),
    # letters and digits in one word (storage1231, node246, J12): an identifier, matched whole;
    # not an ordinal ("for the 35th time" counts, it names nothing)
    (FactKind.IDENTIFIER, "id", re.compile(
        r"(?=[A-Za-z0-9])\b(?!\d+(?:st|nd|rd|th)\b)(?=[A-Za-z.:]*\d)(?=[\d.:]*[A-Za-z])"
        r"[A-Za-z0-9]+"
        r"(?:[.:]+[A-Za-z0-9]+)*\b(?![.-]\w)")),
    (FactKind.IDENTIFIER, "kv", re.compile(
        r"(?<=\w)=(?P<v>[^\s,;=()\[\]{}\"']+)")),
    (FactKind.NAME, "", re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+\b")),
    (FactKind.SERVICE, "", re.compile(r"\b[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+\b")),
]

_SERVICE_PARTS = frozenset(
    "service svc api db gateway gw worker workers cache queue proxy frontend backend server web "
    "redis postgres postgresql mysql kafka broker lb ingress cluster app job cron scheduler "
    "consumer producer store storage auth payments payment checkout cart inventory search "
    "orders order billing notification notifications shipping catalog user users".split()
)
_MAGNITUDES = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9}
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


# A pattern that can only match where one of these strings occurs is not run on a text without
# one (most texts are short and have no URL, no `key=value`, no IPv6 address).
_GATES: dict[str, tuple[str, ...]] = {
    "url": ("://",), "uuid": ("-",), "block": ("blk_",), "path": ("/",), "kv": ("=",),
}
_TIME_GATES = (("-",), tuple(_MONTHS.split("|")), tuple(_MONTHS.split("|")), ("/",), (" ",),
               (":",))
_IP_GATES = ((".",), (":",))
_HEX_GATES = (("0x", "0X"), ("-", ":"), ())


_TRANSPARENT = frozenset({"url", "host"})
"""Shapes whose parts are facts of their own too: a URL's host, port and path, a host's
service name (`payment-db.svc.cluster.local`)."""


# kinds and shapes that cannot match a text without a digit (most short texts have none)
_DIGIT_KINDS = frozenset({FactKind.TIMESTAMP, FactKind.VERSION, FactKind.QUANTITY})
_DIGIT_SHAPES = frozenset({"uuid", "ip", "hex", "block", "id", "http"})
_DIGIT = re.compile(r"\d")


def _gated() -> list[tuple[FactKind, str, re.Pattern[str], str | re.Pattern[str] | None, bool]]:
    times, ips, hexes = iter(_TIME_GATES), iter(_IP_GATES), iter(_HEX_GATES)
    hosts = iter(((f".{tld}" for tld in _TLDS.split("|")), (".",)))
    gated = []
    for kind, shape, pattern in _PATTERNS:
        if kind is FactKind.TIMESTAMP:
            gate = next(times)
        elif shape == "ip":
            gate = next(ips)
        elif shape == "hex":
            gate = next(hexes)
        elif shape == "host":
            gate = tuple(next(hosts))
        else:
            gate = _GATES.get(shape, ())
        digits = (kind in _DIGIT_KINDS and shape != "words") or shape in _DIGIT_SHAPES
        gated.append((kind, shape, pattern, _gate_of(gate), digits))
    return gated


def _gate_of(literals: tuple[str, ...]) -> str | re.Pattern[str] | None:
    """One literal is tested with `in`, several with one compiled search (both in C)."""
    if not literals:
        return None
    if len(literals) == 1:
        return literals[0]
    return re.compile("|".join(re.escape(g) for g in literals))


_GATED = _gated()


def extract_facts(text: str, *, single_digits: bool = False) -> list[Fact]:
    """Every concrete fact in `text`, in the order the patterns claim them (no overlaps).

    A bare single digit says too little to be a claim's fact; as evidence (`single_digits`)
    it still supports a claim such as "4 times". A run reads the same short texts several
    times (its claims in the post-check, the Composer's input, the guards), so the facts of
    recent texts are kept (facts are immutable).
    """
    if len(text) > _CACHED_TEXT_MAX:
        return list(_extract_long(text, single_digits))
    return list(_extract_cached(text, single_digits))


_CACHED_TEXT_MAX = 2000
"""Longer texts (whole projections, read once per claim that binds to them) have a cache of
their own, a few deep, so that a handful of them cannot evict the many short ones."""


def _extract(text: str, single_digits: bool) -> tuple[Fact, ...]:
    taken = bytearray(len(text))
    facts: list[Fact] = []
    quantities: list[tuple[int, int, int]] = []  # start, end, index in `facts`
    digits = _DIGIT.search(text) is not None
    for kind, shape, pattern, gate, needs_digit in _GATED:
        if needs_digit and not digits:
            continue
        if gate is not None and (gate not in text if isinstance(gate, str)
                                 else gate.search(text) is None):
            continue
        for match in pattern.finditer(text):
            start, end = match.span("v") if shape == "kv" else match.span()
            if any(taken[start:end]) or (kind is FactKind.QUANTITY and _step(text, start, end)):
                continue
            fact = _make_fact(kind, shape, text[start:end], single_digits=single_digits)
            if fact is not None:
                if shape not in _TRANSPARENT:
                    taken[start:end] = b"\x01" * (end - start)
                if kind is FactKind.QUANTITY and shape != "words":
                    quantities.append((start, end, len(facts)))
                facts.append(fact)
    for index, fact in _range_starts(text, facts, quantities):
        facts[index] = fact
    return tuple(facts)


_RANGE_JOIN = re.compile(r"\s*(?:-|–|—|to|through|until)\s*|\s+and\s+")
"""What stands between the two ends of a range ("40–60 ms", "4.0 to 4.6 seconds"); "and"
joins them only after "between" ("between 24 and 154 ms", not "ports 9000 and 8030")."""
_BETWEEN = re.compile(r"\bbetween\s+$", re.IGNORECASE)


def _range_starts(text: str, facts: list[Fact], quantities: list[tuple[int, int, int]]
                  ) -> list[tuple[int, Fact]]:
    """The bare numbers that start a range whose other end gives the unit, each with that
    unit (by index in `facts`): a range names its unit once, at its end, so the 4.0 of "4.0
    to 4.6 seconds" is 4.0 seconds, not a bare 4.0 (which 4006 ms would not state, and every
    other bare number of the evidence would seem to contradict)."""
    found = []
    ordered = sorted(quantities)
    for (start, end, index), (after, _, other) in zip(ordered, ordered[1:], strict=False):
        first, second = facts[index], facts[other]
        join = _RANGE_JOIN.fullmatch(text, end, after)
        if first.unit or not second.unit or second.number is None or join is None:
            continue
        if "and" in join.group() and not _BETWEEN.search(text, 0, start):
            continue
        number = _NUMBER.match(second.text.lstrip())
        if number is None:
            continue
        unit = second.text.lstrip()[number.end():]
        ranged = _make_quantity(f"{first.text}{unit}", single_digits=True)
        if ranged is not None and ranged.unit == second.unit:
            found.append((index, dataclasses.replace(ranged, text=first.text)))
    return found


_extract_cached = functools.lru_cache(maxsize=16384)(_extract)
_extract_long = functools.lru_cache(maxsize=16)(_extract)

_STEP_BEFORE = re.compile(r"(?:^|[.:;!?]\s+|\n\s*)$")
_STEP_AFTER = re.compile(r"[.)]\s+[A-Z]")


def _step(text: str, start: int, end: int) -> bool:
    """Whether the number at `text[start:end]` numbers a step of a list ("… 4. Look for a
    leak"): a runbook's step 4 counts nothing, and no claim's "4 pods" is stated by it."""
    return (_STEP_AFTER.match(text, end) is not None and text[start:end].isdigit()
            and _STEP_BEFORE.search(text[max(0, start - 4):start]) is not None)


def clear_caches() -> None:
    """Forget the facts and tokens of every text read so far (benchmarks measure cold runs)."""
    _extract_cached.cache_clear()
    _extract_long.cache_clear()
    tokens.cache_clear()


def _make_fact(kind: FactKind, shape: str, raw: str, *, single_digits: bool) -> Fact | None:
    if kind is FactKind.TIMESTAMP:
        return Fact(kind, raw, _timestamp_key(raw))
    if kind is FactKind.VERSION:
        return Fact(kind, raw, raw.lower().removeprefix("v"))
    if kind is FactKind.QUANTITY and shape == "words":
        fact = _make_quantity(_in_digits(raw))
        return None if fact is None else dataclasses.replace(fact, text=raw)
    if kind is FactKind.QUANTITY:
        return _make_quantity(raw, single_digits=single_digits)
    if kind is FactKind.SERVICE:
        parts = re.split(r"[-_]", raw)
        return Fact(kind, raw, raw.lower()) if _SERVICE_PARTS.intersection(parts) else None
    if kind is FactKind.IDENTIFIER:
        raw = raw.rstrip(".") if shape == "path" else raw  # a sentence's full stop
        return Fact(kind, raw, identifier_key(raw), shape=shape)
    if kind is FactKind.ERROR_CODE:  # an HTTP status is not compared with a named error
        return Fact(kind, raw, raw.casefold(), shape="http" if raw.isdigit() else "name")
    return Fact(kind, raw, raw.casefold())


_HALF = re.compile(r"\band\s+a\s+half\b|^half\s+an?\b", re.IGNORECASE)


def _in_digits(raw: str) -> str:
    """A quantity in words as digits and its unit: "five times" is "5 times", "two and a half
    hours" "2.5 hours", "half a minute" "0.5 minutes", "an hour and a half" "1.5 hours"."""
    halved = _HALF.search(raw) is not None
    words = _HALF.sub(" ", raw).split()
    unit = words[-1].casefold()
    first = words[0].casefold() if len(words) > 1 else ""
    number = float(NUMBER_WORDS.get(first, 1)) if first else 0.0
    if halved:
        number += 0.5
        unit = unit if unit.endswith("s") else unit + "s"
    return f"{number:g} {unit}"


def identifier_key(token: str) -> str:
    """An identifier's comparison key: case folded, a hex number without its `0x`."""
    key = token.casefold()
    return key[2:] if key.startswith("0x") and len(key) > 2 else key


_BGL_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})-(\d{2})\.(\d{2})(?:\.(\d{2}))?")
_MONTH_DAY = re.compile(r"([A-Z][a-z]{2}) +(\d{1,2})(?: |$)")
_COMPACT_TIME = re.compile(r"^(\d\d)(\d\d)(\d\d) (\d\d)(\d\d)(\d\d)$")
"""`yymmdd hhmmss` (HDFS's `081109 203615`), read as this century's date."""


_LAST_PART = re.compile(r"[-_]+[^-_]*$")


def ends_with_part(whole: str, part: str) -> bool:
    """Whether identifier key `whole` ends with `part` as its last `-` or `_` part: a pod named
    by its suffix ("lfpm6") is `search-api-cda7299da-lfpm6`."""
    return whole.endswith(("-" + part, "_" + part))


def identifier_family(fact: Fact) -> tuple[str, str]:
    """A fact's sort and, for an identifier, its text before its last `-` or `_` part: the
    pods of one replica set (`checkout-service-bd1f30671-*`) are one family, request ids
    (`req-*`) another, HDFS blocks (`blk_2304…`, `blk_-2826…`) a third."""
    stem = _LAST_PART.sub("", fact.text) if fact.kind is FactKind.IDENTIFIER else ""
    return fact.sort, stem.casefold()


def _timestamp_key(raw: str) -> str:
    """ISO timestamps with an offset become UTC; others keep their wall-clock text, as
    `<date>T<time>` (`Jun 5 10:01:02` is `jun-05T10:01:02`, fractions after a dot)."""
    raw = _BGL_TIME.sub(lambda m: f"{m[1]}T{m[2]}:{m[3]}" + (f":{m[4]}" if m[4] else ""), raw)
    raw = _COMPACT_TIME.sub(
        lambda m: f"20{m[1]}-{m[2]}-{m[3]}T{m[4]}:{m[5]}:{m[6]}", raw)
    raw = _MONTH_DAY.sub(lambda m: f"{m[1].lower()}-{int(m[2]):02d}T", raw)
    text = raw.replace(" ", "T").replace(",", ".")
    if "T" in text and (text.endswith("Z") or re.search(r"[+-]\d{2}:?\d{2}$", text)):
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return text.rstrip("Z")
        utc = moment.astimezone(UTC).replace(tzinfo=None)
        return utc.isoformat(timespec="seconds" if ":" in text[14:] else "minutes")
    return text


def _make_quantity(raw: str, *, single_digits: bool = False) -> Fact | None:
    match = _NUMBER.match(raw.lstrip())
    assert match is not None
    number = match.group()
    rest = raw.lstrip()[match.end():]
    unit_text = rest.strip().lower().rpartition(" ")[2]  # "such warnings": a count of warnings
    digits = number.replace(",", "").lstrip("+-")
    if not unit_text and len(digits.split(".")[0]) < 2 and "." not in digits and not single_digits:
        return None  # a bare single digit says too little to check
    value = float(number.replace(",", ""))
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    magnitude = _MAGNITUDES.get(rest.strip()) if rest[:1] != " " else None
    if magnitude is not None:  # 1.2M messages: a count, not mebibytes or minutes
        return Fact(FactKind.QUANTITY, raw, f"{value * magnitude:g}", value * magnitude, "",
                    0.5 * 10.0**-decimals * magnitude, number=value * magnitude)
    dimension, factor = _UNITS.get(unit_text, (unit_text.rstrip("s") or "", 1.0))
    dimension = _SAME_COUNT.get(dimension, dimension)
    tolerance = 0.5 * 10.0**-decimals * factor
    key = f"{value * factor:g}{dimension}"
    return Fact(FactKind.QUANTITY, raw, key, value * factor, dimension, tolerance,
                shape=dimension, number=value)


_REL = 1e-15
"""Relative float error only (a few ulps): 1000000000001 is not 1000000000000."""


def _quantities_match(claim: Fact, other: Fact) -> bool:
    assert claim.value is not None and other.value is not None
    if claim.unit in COUNTS and other.unit in COUNTS:
        return claim.value == other.value  # "322 times" of "322 ERROR lines"
    if claim.unit and other.unit and claim.unit != other.unit:
        return False
    # float error only: ids and epoch seconds are numbers too, and 1131241563 is not 1131241564
    tolerance = max(claim.tolerance, _REL * abs(claim.value))
    if math.isclose(claim.value, other.value, rel_tol=_REL) or abs(
            claim.value - other.value) <= tolerance:
        return True
    if not claim.unit or not other.unit:
        # a value restated without its unit, or a bare number given one: compare as written
        mine = claim.value if not claim.unit else claim.number
        theirs = other.value if not other.unit else other.number
        scale = (claim.number / claim.value) if claim.unit and claim.value and claim.number else 1.0
        if mine is not None and theirs is not None and (math.isclose(
                mine, theirs, rel_tol=_REL) or abs(mine - theirs) <= tolerance * scale):
            return True
    # 42% against a bare ratio of 0.42
    return claim.unit == "percent" and not other.unit and abs(claim.value / 100 - other.value) <= (
        tolerance / 100
    )


def _unit_changed(claim: Fact, other: Fact) -> bool:
    """The same number as written under another unit: 16 MB against 16 ms."""
    return bool(claim.unit and other.unit and claim.unit != other.unit
                and not (claim.unit in COUNTS and other.unit in COUNTS)
                and claim.number is not None and claim.number == other.number)


FactMemo = dict[str, list[Fact]]
"""Evidence texts' facts, by text. One verification checks every claim against evidence whose
texts repeat (each excerpt of a source carries the source's scope: service, window, filter),
so its checks share one memo; it lives as long as that verification, no longer."""


_TOKEN = re.compile(r"[^\s\"'`()\[\]{}<>,;|]+")
_TOKEN_PARTS = re.compile(r"[=:/@+#]")
_TOKEN_WORDS = re.compile(r"[-_.]")
_TRIM = ".:!?*"
# kinds compared by the whole token; a service or a name of another kind is never a
# contradiction, only an absence
_TOKEN_KINDS = frozenset({FactKind.SERVICE, FactKind.IDENTIFIER, FactKind.NAME})
_NEVER_CONFLICT = frozenset({FactKind.SERVICE})


@functools.lru_cache(maxsize=4096)
def tokens(text: str) -> frozenset[str]:
    """The whole tokens of `text`, case folded: each run between spaces, quotes, brackets,
    commas and semicolons, then its parts between `= : / @ + #` (a `key=value`'s value, a
    host and its port, a path's segments), then their parts between `- _ .`."""
    found: set[str] = set()
    for token in _TOKEN.findall(text.casefold()):
        token = token.strip(_TRIM)
        if not token:
            continue
        found.add(token)
        for part in _TOKEN_PARTS.split(token):
            part = part.strip(_TRIM)
            if part:
                found.add(part)
                found.update(part.split("_"))
                found.update(part.split("."))
                found.update(_TOKEN_WORDS.split(part))
    return frozenset(found)


_STATUS_CLASS = re.compile(r"[1-5]xx")

_MAX_INSTANTS = 200
"""Most instants of one body of evidence whose gaps are measured (a claim's evidence holds
a few; a whole output a few hundred)."""
_CLOCK = re.compile(r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?")
_ISO_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


def _instant(key: str) -> tuple[str, float] | None:
    """A timestamp key as (its day, or "" when it names none; seconds into that day)."""
    day = _ISO_DAY.match(key)
    clock = _CLOCK.search(key, day.end() if day else 0)
    if clock is None:
        return (day.group(0), 0.0) if day else None
    hours, minutes, seconds, fraction = clock.groups()
    value = int(hours) * 3600 + int(minutes) * 60 + int(seconds or 0)
    return (day.group(0) if day else "",
            value + (float(f"0.{fraction}") if fraction else 0.0))


def _between(a: tuple[str, float], b: tuple[str, float]) -> float:
    """Milliseconds from `a` to `b`: across days when both name theirs."""
    days = 0.0
    if a[0] and b[0] and a[0] != b[0]:
        days = (datetime.fromisoformat(b[0]) - datetime.fromisoformat(a[0])).days * 86400.0
    return (days + b[1] - a[1]) * 1000.0


class FactSet:
    """The facts of a body of evidence, indexed for `supports` and `conflicts` checks.

    Identifiers, services and names match by whole token (after case folding), never by
    substring: `storage1231` is not in `storage12311`.
    """

    def __init__(self, facts: Iterable[Fact], *, texts: Iterable[str] = ()) -> None:
        self._by_kind: dict[FactKind, list[Fact]] = {kind: [] for kind in FactKind}
        self._sorts: set[tuple[FactKind, str]] = set()
        for fact in facts:
            self._by_kind[fact.kind].append(fact)
            self._sorts.add((fact.kind, fact.shape))
        self._keys = {(f.kind, f.key) for kinds in self._by_kind.values() for f in kinds}
        self._texts = list(texts)
        self._token_set: set[str] | None = None
        self._gaps: list[float] | None = None

    @property
    def _tokens(self) -> set[str]:
        # built on the first check that needs it: most facts are found by key
        if self._token_set is None:
            self._token_set = set().union(*(tokens(t) for t in self._texts))
        return self._token_set

    @classmethod
    def from_texts(cls, texts: Iterable[str], *, memo: FactMemo | None = None) -> FactSet:
        """Index every fact of every text (single digits included: this is the evidence),
        each distinct text once; a text already in `memo` is not extracted again."""
        unique = list(dict.fromkeys(texts))
        memo = {} if memo is None else memo
        facts: list[Fact] = []
        for text in unique:
            found = memo.get(text)
            if found is None:
                found = memo[text] = extract_facts(text, single_digits=True)
            facts.extend(found)
        return cls(facts, texts=unique)

    def states_token(self, token: str) -> bool:
        """True when a text of the evidence has `token` as a whole token (case folded)."""
        return token.casefold() in self._tokens

    def has_kind(self, kind: FactKind) -> bool:
        """True when the evidence states any fact of this kind."""
        return bool(self._by_kind[kind])

    def has_sort(self, fact: Fact) -> bool:
        """True when the evidence states a fact of this fact's kind and shape."""
        return (fact.kind, fact.shape) in self._sorts

    def supports(self, fact: Fact) -> bool:
        """True when the evidence states this fact (numbers within the claim's rounding)."""
        if fact.kind is FactKind.QUANTITY:
            if any(_quantities_match(fact, other) for other in self._by_kind[fact.kind]):
                return True
            if fact.unit == "duration" and fact.value is not None and any(
                    abs(gap - fact.value) <= fact.tolerance for gap in self._time_gaps()):
                return True  # "three seconds apart", "ten minutes after the deploy"
            # a bare number inside an identifier or an address (node-246, port 50010)
            return not fact.unit and fact.text.replace(",", "") in self._tokens
        if fact.kind is FactKind.TIMESTAMP:
            return any(_timestamps_match(fact.key, other.key) for other in self._by_kind[fact.kind])
        if fact.kind is FactKind.ERROR_CODE and fact.key.isdigit():
            value = float(fact.key)
            bare = (f for f in self._by_kind[FactKind.QUANTITY] if not f.unit)
            if any(f.value == value for f in bare) or fact.key in self._tokens:
                return True  # "512 ERROR lines" states the 512 of "512 errors"
        if (fact.kind, fact.key) in self._keys:
            return True
        if fact.shape == "id" and _STATUS_CLASS.fullmatch(fact.key):
            return fact.key in self._tokens  # the 5xx of http_5xx_rate
        if fact.kind is FactKind.ERROR_CODE and self._code_begun(fact):
            return True
        if fact.kind in _TOKEN_KINDS:
            # a hex number by its text: 0x41 is not the 41 of some other token
            token = fact.text.casefold() if fact.shape == "hex" else fact.key
            return (token in self._tokens or self._parts_stated(fact)
                    or self._directory_stated(fact) or self._tail_stated(fact)
                    or self._url_stated(fact))
        return False

    def _code_begun(self, fact: Fact) -> bool:
        """A named error code that begins a longer one at a word of it: the OOM of
        `OOMKilled` ("OOM-killed")."""
        return any(other.text.startswith(fact.text) and other.text[len(fact.text):][:1].isupper()
                   for other in self._by_kind[FactKind.ERROR_CODE])

    def _tail_stated(self, fact: Fact) -> bool:
        """An identifier of several parts that ends a longer one the evidence states: the
        attempt `m_000001_0` of `attempt_1445144423722_0020_m_000001_0`, as a log names it
        in full and an answer by its last parts."""
        if fact.shape != "id" or not _ID_PARTS.search(fact.key):
            return False
        return any(token.endswith(fact.key) and token[-len(fact.key) - 1] in "-_"
                   for token in self._tokens if len(token) > len(fact.key))

    def _url_stated(self, fact: Fact) -> bool:
        """A URL the evidence states with more after it: the file of
        `hdfs://host:9000/logs/a.log:160424+7292`, a split of it."""
        if fact.shape != "url":
            return False
        return any(other.shape == "url" and other.key.startswith(fact.key)
                   and other.key[len(fact.key)] in ":/?#"
                   for other in self._by_kind[FactKind.IDENTIFIER] if other.key != fact.key)

    def _time_gaps(self) -> list[float]:
        """The time between any two instants the evidence states, in milliseconds: a
        duration a claim derives from them ("ten minutes after the deploy") is stated by
        them. Times of day without a date are compared as times of day."""
        if self._gaps is None:
            instants = sorted({i for f in self._by_kind[FactKind.TIMESTAMP]
                               if (i := _instant(f.key)) is not None})[:_MAX_INSTANTS]
            self._gaps = [abs(_between(a, b)) for n, a in enumerate(instants)
                          for b in instants[n + 1:]]
        return self._gaps

    def _directory_stated(self, fact: Fact) -> bool:
        """A directory of a path the evidence states: a file deleted from
        `/mnt/…/subdir40/blk_-2826…` was deleted from `/mnt/…/subdir40`."""
        if fact.shape != "path":
            return False
        prefix = fact.key.rstrip("/") + "/"
        return any(token.startswith(prefix) for token in self._tokens)

    def _parts_stated(self, fact: Fact) -> bool:
        """host:port restated from a host and a port stated apart; not from a host stated
        only with another port (`/10.10.34.13:33198` and `/10.10.34.11:3888` make no
        `10.10.34.13:3888`)."""
        if fact.shape != "ip" or fact.key.count(":") != 1:
            return False
        host, port = fact.key.split(":")
        if host not in self._tokens or port not in self._tokens:
            return False
        with_ports = {f.key.partition(":")[0] for f in self._by_kind[FactKind.IDENTIFIER]
                      if f.shape == "ip" and f.key.count(":") == 1}
        return host not in with_ports or (FactKind.IDENTIFIER, host) in self._keys

    def conflicts(self, fact: Fact) -> bool:
        """True when the evidence states facts of the same kind and shape, none of which is
        this one (for quantities: of the same dimension, bare numbers among bare numbers), or
        this fact's number under another unit."""
        if fact.kind in _NEVER_CONFLICT or self.supports(fact):
            return False
        if fact.kind is FactKind.QUANTITY and any(
                _unit_changed(fact, other) for other in self._by_kind[fact.kind]):
            return True
        if fact.kind in _FORMED_KINDS:
            form = form_of(fact)
            return any(other.shape == fact.shape and form_of(other) == form
                       for other in self._by_kind[fact.kind])
        return self.has_sort(fact)


_ID_PARTS = re.compile(r"[-_]")
_FORMED_KINDS = frozenset({FactKind.IDENTIFIER, FactKind.NAME})
_CAMEL_WORD = re.compile(r"[A-Z][a-z0-9]*")


def form_of(fact: Fact) -> str:
    """What an identifier or a name is an instance of, so that only facts of one form are
    compared: an identifier's parts between separators, each part with a digit as `#`
    (`rdd_2_4` and `rdd_30_0` are `rdd_#_#`; `m_000001_0` is not
    `attempt_#_#_m_#_#`, nor `35th` `dns-#`); a name's first word (`KubePodCrashLooping`
    and `KubeContainerWaiting` are two alerts, `ResourceManager` and `TaskImpl` two
    unrelated names). Another identifier of another form is an absence, never a
    contradiction."""
    if fact.kind is FactKind.NAME:
        first = _CAMEL_WORD.match(fact.text)
        return first.group().casefold() if first else fact.key
    if fact.shape not in ("id", "kv"):
        return ""
    return re.sub(r"[^-_.:]*\d[^-_.:]*", "#", fact.key)


def _timestamps_match(claim_key: str, evidence_key: str) -> bool:
    if evidence_key.startswith(claim_key):
        return True
    # a time of day against a full timestamp: compare the time part
    time_part = evidence_key.partition("T")[2]
    return bool(time_part) and ":" in claim_key and time_part.startswith(claim_key.zfill(5))
