"""Concrete facts in text: timestamps, versions, error codes, quantities, identifiers, services.

The lexical verifier, the Verifier post-check and the Composer no-new-facts guard all compare
facts the same way, through `extract_facts` and `FactSet`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum


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


@dataclass(frozen=True, slots=True)
class Fact:
    """One concrete fact: its kind, its text, a comparison key and, for quantities, a value."""

    kind: FactKind
    text: str
    key: str
    value: float | None = None
    unit: str | None = None
    tolerance: float = 0.0


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
)
_UNIT_ALT = "|".join(
    re.escape(u) for u in sorted(_UNITS, key=len, reverse=True) if u not in {"%"}
)

# A pattern that can only start on a digit (or a hex digit, or "v") says so first, in a lookahead:
# re tries every position, and that one-character test is far cheaper than the lookbehinds that
# follow it (the status-code pattern took 7 times as long without it).
_PATTERNS: list[tuple[FactKind, re.Pattern[str]]] = [
    (FactKind.TIMESTAMP, re.compile(
        r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
        r"(?!\w)(?!:\d)")),
    (FactKind.TIMESTAMP, re.compile(
        r"(?<![\w:.])\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?!\w)(?!:\d)")),
    (FactKind.IDENTIFIER, re.compile(
        r"(?=[0-9a-fA-F])"
        r"(?:\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        r"|(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?![\w.]))")),
    (FactKind.VERSION, re.compile(
        r"(?=[v\d])(?:(?<![\w.])v?\d+\.\d+\.\d+(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?![\w.])"
        r"|(?<![\w.])v\d+(?:\.\d+)?(?![\w.]))")),
    (FactKind.ERROR_CODE, re.compile(
        r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\bE[A-Z]{4,}\b"
        r"|\b[A-Z][A-Za-z]*(?:Error|Exception|BackOff|Killed|Timeout|Failure)\b"
        r"|\bOOM\b|\bSQLSTATE\s+[0-9A-Z]{5}\b")),
    (FactKind.ERROR_CODE, re.compile(
        r"(?=[1-5])"
        r"(?:(?:(?<=HTTP )|(?<=HTTP/1\.1 )|(?<=status )|(?<=status: )|(?<=status=)|(?<=code )"
        r"|(?<=code=)|(?<=returning )|(?<=returned ))[1-5]\d{2}\b"
        # not the tail of a larger number: "1,432 errors" is a count, not error code 432
        r"|(?<![\d,.])\b[45]\d{2}(?=s\b|\s+(?:errors?|responses?|status))"
        r"|(?<![\d,.])\b[1-5]\d{2}(?= (?:Internal|Bad|Service|Gateway|Not|Too|Forbidden"
        r"|Unauthorized|OK|Created|Conflict|Request|Payload|Unprocessable|Precondition|Method)))")),
    (FactKind.IDENTIFIER, re.compile(
        r"\b(?=[A-Za-z0-9_-]*\d)[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+\b"
        r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b")),
    (FactKind.QUANTITY, re.compile(
        r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
        rf"(?:(?-i:[kKMB]|bn)(?!\w)|\s?%|\s?(?:{_UNIT_ALT})(?![\w/])|\s(?:{_COUNT_NOUNS})\b)?",
        re.IGNORECASE)),
    (FactKind.NAME, re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+\b")),
    (FactKind.SERVICE, re.compile(r"\b[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+\b")),
]

_SERVICE_PARTS = frozenset(
    "service svc api db gateway gw worker workers cache queue proxy frontend backend server web "
    "redis postgres postgresql mysql kafka broker lb ingress cluster app job cron scheduler "
    "consumer producer store storage auth payments payment checkout cart inventory search "
    "orders order billing notification notifications shipping catalog user users".split()
)
_MAGNITUDES = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9}
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def extract_facts(text: str, *, single_digits: bool = False) -> list[Fact]:
    """Every concrete fact in `text`, in the order the patterns claim them (no overlaps).

    A bare single digit says too little to be a claim's fact; as evidence (`single_digits`)
    it still supports a claim such as "4 times".
    """
    taken = bytearray(len(text))
    facts: list[Fact] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            fact = _make_fact(kind, match.group(), single_digits=single_digits)
            if fact is not None:
                taken[start:end] = b"\x01" * (end - start)
                facts.append(fact)
    return facts


def _make_fact(kind: FactKind, raw: str, *, single_digits: bool) -> Fact | None:
    if kind is FactKind.TIMESTAMP:
        return Fact(kind, raw, _timestamp_key(raw))
    if kind is FactKind.VERSION:
        return Fact(kind, raw, raw.lower().removeprefix("v"))
    if kind is FactKind.QUANTITY:
        return _make_quantity(raw, single_digits=single_digits)
    if kind is FactKind.SERVICE:
        parts = re.split(r"[-_]", raw)
        return Fact(kind, raw, raw.lower()) if _SERVICE_PARTS.intersection(parts) else None
    return Fact(kind, raw, raw.casefold())


def _timestamp_key(raw: str) -> str:
    """ISO timestamps with an offset become UTC; others keep their wall-clock text."""
    text = raw.replace(" ", "T")
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
    unit_text = rest.strip().lower()
    digits = number.replace(",", "").lstrip("+-")
    if not unit_text and len(digits.split(".")[0]) < 2 and "." not in digits and not single_digits:
        return None  # a bare single digit says too little to check
    value = float(number.replace(",", ""))
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    magnitude = _MAGNITUDES.get(rest.strip()) if rest[:1] != " " else None
    if magnitude is not None:  # 1.2M messages: a count, not mebibytes or minutes
        return Fact(FactKind.QUANTITY, raw, f"{value * magnitude:g}", value * magnitude, "",
                    0.5 * 10.0**-decimals * magnitude)
    dimension, factor = _UNITS.get(unit_text, (unit_text.rstrip("s") or "", 1.0))
    tolerance = 0.5 * 10.0**-decimals * factor
    key = f"{value * factor:g}{dimension}"
    return Fact(FactKind.QUANTITY, raw, key, value * factor, dimension, tolerance)


def _quantities_match(claim: Fact, other: Fact) -> bool:
    assert claim.value is not None and other.value is not None
    if claim.unit and other.unit and claim.unit != other.unit:
        return False
    tolerance = max(claim.tolerance, 1e-9 * abs(claim.value))
    if math.isclose(claim.value, other.value) or abs(claim.value - other.value) <= tolerance:
        return True
    # 42% against a bare ratio of 0.42
    return claim.unit == "percent" and not other.unit and abs(claim.value / 100 - other.value) <= (
        tolerance / 100
    )


FactMemo = dict[str, list[Fact]]
"""Evidence texts' facts, by text. One verification checks every claim against evidence whose
texts repeat (each excerpt of a source carries the source's scope: service, window, filter),
so its checks share one memo; it lives as long as that verification, no longer."""


class FactSet:
    """The facts of a body of evidence, indexed for `supports` and `conflicts` checks."""

    def __init__(self, facts: Iterable[Fact], *, texts: Iterable[str] = ()) -> None:
        self._by_kind: dict[FactKind, list[Fact]] = {kind: [] for kind in FactKind}
        for fact in facts:
            self._by_kind[fact.kind].append(fact)
        self._keys = {(f.kind, f.key) for kinds in self._by_kind.values() for f in kinds}
        self._lower_text = " ".join(texts).lower()

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

    def has_kind(self, kind: FactKind) -> bool:
        """True when the evidence states any fact of this kind."""
        return bool(self._by_kind[kind])

    def supports(self, fact: Fact) -> bool:
        """True when the evidence states this fact (numbers within the claim's rounding)."""
        if fact.kind is FactKind.QUANTITY:
            return any(_quantities_match(fact, other) for other in self._by_kind[fact.kind])
        if fact.kind is FactKind.TIMESTAMP:
            return any(_timestamps_match(fact.key, other.key) for other in self._by_kind[fact.kind])
        if fact.kind is FactKind.ERROR_CODE and fact.key.isdigit():
            value = float(fact.key)
            bare = (f for f in self._by_kind[FactKind.QUANTITY] if not f.unit)
            if any(f.value == value for f in bare):
                return True
        if fact.kind in (FactKind.SERVICE, FactKind.IDENTIFIER, FactKind.NAME):
            return (fact.kind, fact.key) in self._keys or _word_in(fact.key, self._lower_text)
        return (fact.kind, fact.key) in self._keys

    def conflicts(self, fact: Fact) -> bool:
        """True when the evidence states facts of the same sort, none of which is this one."""
        if fact.kind is FactKind.SERVICE or self.supports(fact):
            return False
        same = self._by_kind[fact.kind]
        if fact.kind is FactKind.QUANTITY:
            same = [f for f in same if f.unit == fact.unit and fact.unit]
        return bool(same)


def _timestamps_match(claim_key: str, evidence_key: str) -> bool:
    if evidence_key.startswith(claim_key):
        return True
    # a time of day against a full timestamp: compare the time part
    time_part = evidence_key.partition("T")[2]
    return bool(time_part) and ":" in claim_key and time_part.startswith(claim_key.zfill(5))


def _word_in(word: str, text: str) -> bool:
    # "_" may follow: kubelet writes pod names as <pod>_<namespace>
    return re.search(rf"(?<![A-Za-z0-9-]){re.escape(word)}(?![A-Za-z0-9-])", text) is not None
