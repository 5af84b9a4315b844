"""A value a claim gives as the extreme of its kind ("the slowest was 4565 ms", "the largest
batch had 31 entries"), read against the list of records it binds into: the value of the same
field in every record of the list. The word is said when the value is that extreme (no output
says "slowest"; the list does), and the claim is contradicted when another record of the
list holds a more extreme one.

The same field is what precedes the value in its own record (`"latency_ms": `, `took `,
`time: `): each other record's number after the same words is that record's value. A claim
whose value has no such words before it, or whose list holds no other value, is left alone.
Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from models.gatekeeper import GatekeeperOutcome
from pipeline.rules.facts import Fact, FactKind, extract_facts
from pipeline.rules.listed import Listed

SUPERLATIVES: dict[str, str] = {
    "slowest": "max", "longest": "max", "highest": "max", "largest": "max", "biggest": "max",
    "heaviest": "max", "fastest": "min", "shortest": "min", "lowest": "min", "smallest": "min",
    "quickest": "min",
}
"""Superlatives of a quantity, and the extreme each names ("most" and "least" are left out:
"most of the 512 errors" is a share, not an extreme)."""
_WORD = re.compile(r"\b(" + "|".join(SUPERLATIVES) + r")\b", re.IGNORECASE)
_NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"
_CONTEXT = 16
"""Characters before a value that name its field in its record."""
_REACH = 60
"""Characters at most between a superlative and the value it is said of."""


@dataclass(frozen=True, slots=True)
class Extreme:
    """What the list says of a claim's superlatives."""

    held: frozenset[str]
    """The superlatives whose value is the extreme of its field in the list."""
    problem: str | None
    """Why one is not: a record of the list holds a more extreme value."""


def extremes(text: str, bound: str, records: Sequence[str]) -> Extreme:
    """The superlatives of `text` read against `records`, the list that holds `bound` (the
    record a value of the claim is bound to)."""
    held: set[str] = set()
    for found in _WORD.finditer(text):
        word = found.group(1).casefold()
        fact = _said_of(text, found)
        if fact is None or fact.number is None:
            continue
        field = _field(bound, fact.number)
        if field is None:
            continue
        values = [v for record in records for v in _values(record, field)]
        if len(values) < 2:
            continue
        extreme = max(values) if SUPERLATIVES[word] == "max" else min(values)
        if abs(extreme - fact.number) <= 1e-9 * max(1.0, abs(extreme)):
            held.add(word)
        else:
            return Extreme(frozenset(held), f"says {fact.text} is the {word}, but a record of "
                           f"its list has {extreme:g} after {field.strip()!r}")
    return Extreme(frozenset(held), None)


def names_an_extreme(text: str) -> bool:
    """Whether `text` uses a superlative of a quantity (`SUPERLATIVES`)."""
    return _WORD.search(text) is not None


def extreme_values(outcome: GatekeeperOutcome, lists: Mapping[str, list[Listed]]
                   ) -> dict[str, Extreme]:
    """Per verified claim id that uses a superlative: what the lists it binds into
    (`listed.claim_lists`) say of it, the first list that belies it if any does."""
    found: dict[str, Extreme] = {}
    for claim in outcome.verified_output.claims:
        if not names_an_extreme(claim.text):
            continue
        held: set[str] = set()
        for listed in lists.get(claim.claim_id, []):
            extreme = extremes(claim.text, listed.bound, listed.records)
            held |= extreme.held
            if extreme.problem is not None:
                found[claim.claim_id] = Extreme(frozenset(held), extreme.problem)
                break
        else:
            found[claim.claim_id] = Extreme(frozenset(held), None)
    return found


def _said_of(text: str, found: re.Match[str]) -> Fact | None:
    """The quantity nearest after the superlative in its clause, else nearest before it."""
    clause_end = re.search(r"[.;]\s|$", text[found.end():])
    after = text[found.end():found.end() + min(_REACH, clause_end.start() if clause_end
                                               else _REACH)]
    facts = [f for f in extract_facts(after) if f.kind is FactKind.QUANTITY]
    if facts:
        return facts[0]
    before = text[max(0, found.start() - _REACH):found.start()]
    facts = [f for f in extract_facts(before) if f.kind is FactKind.QUANTITY]
    return facts[-1] if facts else None


def _field(record: str, number: float) -> str | None:
    """The words before `number` in `record` (its field), when it is there once."""
    places = [m for m in re.finditer(_NUMBER, record) if _parsed(m.group()) == number
              and not record[m.end():m.end() + 1].isdigit()]
    if len(places) != 1:
        return None
    field = record[max(0, places[0].start() - _CONTEXT):places[0].start()]
    field = re.split(r"[\d]", field)[-1]  # from after the last digit before it
    return field if len(field.strip()) >= 2 else None


def _values(record: str, field: str) -> list[float]:
    return [_parsed(m.group(1)) for m in re.finditer(re.escape(field) + f"({_NUMBER})", record)]


def _parsed(number: str) -> float:
    try:
        return float(number.replace(",", ""))
    except ValueError:
        return float("nan")
