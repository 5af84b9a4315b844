"""A claim that pairs one identifier with a time to the second ("the first OOMKill hit
inventory-service-dce91a01f-q964j at 08:41:46", "09:00:02 | first x509 failure, from pod
settlement-service-53d6ad094-skmqn"), read against every record of the run's outputs: when
the records that hold that time name another of the identifier's peers (another pod of the
replica set, another instance) and none names it (a record naming no peer, a group's summary,
says nothing of it), the claim gives one record's time to another record's object, and is
contradicted.

Both values are in the evidence, so no fact differs; only the records say they do not belong
together. A claim that names several peers, or times to the minute only (a window's bounds,
"between 13:10 and 13:14"), is left alone: which time goes with which is not one reading.
Pure functions; the gatekeep node reads the records (`run_records`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from models.gatekeeper import GatekeeperOutcome
from models.invocation import ToolInvocation
from pipeline.rules.facts import (
    Fact,
    FactKind,
    ends_with_part,
    extract_facts,
    identifier_family,
)
from pipeline.rules.listed import record_text

_SECONDS = re.compile(r"(?<![\d:])([01]\d|2[0-3]):[0-5]\d:[0-5]\d(?![\d:])")
"""A time of day to the second, as a claim and a record write it (`08:41:46`,
`2026-11-30T08:41:46Z`)."""
_LOOSE_SHAPES = frozenset({"uuid", "ip", "hex"})
"""Identifier shapes whose peers share no prefix: any other of the shape is a peer."""
_DEPTH = 3


@dataclass(frozen=True, slots=True)
class Record:
    """One record of an output: its text and the identifiers it names."""

    text: str
    names: tuple[Fact, ...]


def run_records(invocations: Sequence[ToolInvocation]) -> list[Record]:
    """Every record of every list of the run's outputs (a text output's lines, a JSON list's
    items, at any depth up to `_DEPTH`) that holds a time to the second."""
    records = []
    for invocation in invocations:
        if invocation.projection is None:
            continue
        for text in _items(invocation.projection.model_dump(mode="json"), 0):
            if _SECONDS.search(text):
                names = tuple(f for f in extract_facts(text) if f.kind is FactKind.IDENTIFIER)
                records.append(Record(text, names))
    return records


def pairing_problem(text: str, records: Sequence[Record]) -> str | None:
    """Why `text`, which names one identifier of its family and times to the second, pairs
    them against `records`: a time whose records name another peer and never it."""
    named = [f for f in extract_facts(text) if f.kind is FactKind.IDENTIFIER]
    times = {m.group(0) for m in _SECONDS.finditer(text)}
    if not named or not times:
        return None
    for one in named:
        whole = _whole(one, records)
        if any(_peer(_whole(f, records), whole) for f in named):
            continue  # the claim names several of one family: not one pairing
        for time in sorted(times):
            holding = [r for r in records if time in r.text]
            if not holding or any(_names(r, whole) for r in holding):
                continue
            others = [f for r in holding for f in r.names if _peer(f, whole)]
            if others:  # records naming no peer (a group's summary) say nothing of it
                return (f"gives {time} to {one.text}, but the records at {time} name "
                        f"{others[0].text}")
    return None


def pairing_conflicts(outcome: GatekeeperOutcome, invocations: Sequence[ToolInvocation]
                      ) -> dict[str, str]:
    """Per verified claim id: why it pairs an identifier with another record's time
    (`pairing_problem`); claims without such a pairing left out. The records are read only
    when a claim gives a time to the second."""
    timed = [c for c in outcome.verified_output.claims if _SECONDS.search(c.text)]
    records = run_records(invocations) if timed else []
    return {claim.claim_id: problem for claim in timed
            if (problem := pairing_problem(claim.text, records))}


def _whole(fact: Fact, records: Sequence[Record]) -> Fact:
    """`fact`, or the one identifier of `records` it is the last part of ("q964j" of
    `inventory-service-dce91a01f-q964j`)."""
    if re.search(r"[-_]", fact.key):
        return fact
    ends = {f.key: f for r in records for f in r.names if ends_with_part(f.key, fact.key)}
    return next(iter(ends.values())) if len(ends) == 1 else fact


def _peer(fact: Fact, of: Fact) -> bool:
    """Whether `fact` is another identifier of `of`'s kind: of its family, or of its shape
    where identifiers share no prefix."""
    if fact.key == of.key or fact.kind is not FactKind.IDENTIFIER or fact.shape != of.shape:
        return False
    return of.shape in _LOOSE_SHAPES or identifier_family(fact) == identifier_family(of)


def _names(record: Record, fact: Fact) -> bool:
    return any(f.key == fact.key for f in record.names) or fact.key in record.text.casefold()


def _items(value: object, depth: int) -> Iterator[str]:
    if isinstance(value, list):
        for item in value:
            if isinstance(item, (str, dict)):
                yield record_text(item)
            if depth < _DEPTH and isinstance(item, (dict, list)):
                yield from _items(item, depth + 1)
    elif isinstance(value, dict) and depth < _DEPTH:
        for inner in value.values():
            yield from _items(inner, depth + 1)
