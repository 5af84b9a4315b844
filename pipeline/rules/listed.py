"""A claim read against the whole lists of records it binds into (`claim_lists`): the post-check
sees only the values a claim binds to, one record of a list, but some words are about every
other record of it. Pure functions; the gatekeep node reads the lists.

- Exclusivity: a claim that gives one identifier as the only one ("the errors come from
  search-api-cda7299da-2twzm only", "all 49 coupon lines came from pod r6mx2") is contradicted
  by a record of the list, of the kind it speaks of, that names another identifier of the same
  family (another pod of the replica set, another host of the cluster) and not this one
  (`exclusive_conflicts`; the post-check makes it contradicted, as it does a differing value).
- Tallies: a number word that counts records ("autovacuum ran five times", "the allocator
  twice logged ...") is said when the records the claim speaks of are that many
  (`tallied_words`); no output says "five", the list does.

The records a claim speaks of (`spoken_of`) are those that hold every word of the claim that
tells records of the list apart (a word some records use and others do not: "errors" against
the `"level": "ERROR"` of some; the words of exclusivity and counting aside).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from models.gatekeeper import GatekeeperOutcome
from models.invocation import ToolInvocation
from pipeline.rules import lexicon
from pipeline.rules.facts import (
    Fact,
    FactKind,
    ends_with_part,
    extract_facts,
    identifier_family,
)
from pipeline.rules.jsonpath import PathError, resolve
from pipeline.rules.statements import content_stems

_SOURCES = (r"pod|host|node|container|instance|thread|server|machine|replica|process|worker"
            r"|client|address|user|account|tenant|project|source")
_NOUN = rf"(?:(?:the|one|a\s+single)\s+)?(?:(?:{_SOURCES})s?\s*[,:]?\s+)?[`'\"(]?"
_ONLY_BEFORE = re.compile(
    r"\b(?:only|solely|exclusively)\s+(?:(?:on|from|in|by|at|to)\s+)?" + _NOUN + r"$",
    re.IGNORECASE)
"""Exclusivity just before the identifier: "only from pod X", "solely on X"."""
_ONLY_AFTER = re.compile(r"^[`'\")]*\s*(?:only|alone|exclusively)\b", re.IGNORECASE)
"""Just after it: "from X only", "X alone"."""
_SINGLE = re.compile(
    rf"\b(?:a\s+single|just\s+one|one\s+single)\s+(?:{_SOURCES})\s*[,:]?\s+[`'\"(]?$",
    re.IGNORECASE)
"""One source given as the only one: "the errors come from a single pod, X"."""
_ALL_FROM = re.compile(
    r"\b(?:all|every|each)\b[^.;:(),]*\b(?:from|on|by)\s+" + _NOUN + r"$", re.IGNORECASE)
"""A whole set given one source: "all 49 lines came from pod X", "every failure on X"."""
_EXCLUSIVE_STEMS = content_stems("only solely exclusively alone all every each single come "
                                 "came from times time once " + " ".join(lexicon.NUMBER_WORDS))
_TALLY = re.compile(r"\b(?:" + "|".join(w for w, n in lexicon.NUMBER_WORDS.items()
                                        if n == int(n) and 2 <= n <= 20) + r")\b",
                    re.IGNORECASE)
"""A number word that may count records: two to twenty, "twice", "double"."""
_INDEX = re.compile(r"\[(\d+)\]")


def claims_only(text: str) -> list[Fact]:
    """The identifiers `text` gives as the only ones of what it speaks of."""
    named = []
    for fact in extract_facts(text):
        if fact.kind is not FactKind.IDENTIFIER:
            continue
        at = text.find(fact.text)
        if at < 0:
            continue
        before, after = text[:at], text[at + len(fact.text):]
        if (_ONLY_BEFORE.search(before) or _ONLY_AFTER.search(after)
                or _ALL_FROM.search(before) or _SINGLE.search(before)):
            named.append(fact)
    return named


def exclusivity_problem(text: str, only: Fact, records: Sequence[str]) -> str | None:
    """Why `text`, which gives `only` as the only identifier of its family for what it speaks
    of, is contradicted by `records` (the texts of the records of one list): the first record
    it speaks of that names another of that family and not `only`; None when none does.

    What it speaks of is read in the clause that names `only` ("only pod lfpm6 fails; 2twzm
    keeps serving" speaks of failures). An identifier given by its last part ("lfpm6") has
    the family of the records' identifiers that end with it (`search-api-cda7299da-lfpm6`)."""
    spoken = spoken_of(_clause(text, only.text), records, aside=content_stems(only.text))
    facts = [[f for f in extract_facts(r) if f.kind is FactKind.IDENTIFIER]
             if i in spoken else [] for i, r in enumerate(records)]

    def names_it(fact: Fact) -> bool:
        return fact.key == only.key or ends_with_part(fact.key, only.key)

    family = next((identifier_family(f) for listed in facts for f in listed if names_it(f)),
                  identifier_family(only))
    for i in sorted(spoken):
        if any(names_it(f) for f in facts[i]):
            continue
        other = next((f for f in facts[i] if identifier_family(f) == family), None)
        if other is not None:
            return f"says only {only.text}, but a record it speaks of names {other.text}"
    return None


def spoken_of(clause: str, records: Sequence[str], *, aside: frozenset[str] = frozenset(),
              need_telling: bool = False) -> set[int]:
    """The indexes of the records `clause` speaks of: those holding every word of it (but
    `aside` and the words of exclusivity and counting) that some records use and others do
    not; every record when it has no such word, none then when `need_telling`."""
    stems = [content_stems(r) for r in records]
    words = content_stems(clause) - aside - _EXCLUSIVE_STEMS
    telling = {w for w in words if any(w in s for s in stems) and not all(w in s for s in stems)}
    if not telling and need_telling:
        return set()
    return {i for i, held in enumerate(stems) if telling <= held}


def tallied_words(text: str, lists: Sequence[Listed]) -> frozenset[str]:
    """The number words of `text` that count the records it speaks of in one of `lists`
    ("ran five times", "twice logged"): the clause of the word tells which records. Only a
    whole list counts: not a sample of lines beside a larger total (a log search's hits)."""
    said: set[str] = set()
    for found in _TALLY.finditer(text):
        word = found.group(0)
        count = lexicon.NUMBER_WORDS[word.casefold()]
        clause = _clause(text, word)
        if any(listed.complete
               and len(spoken_of(clause, listed.records, need_telling=True)) == count
               for listed in lists):
            said.add(word.casefold())
    return frozenset(said)


def _clause(text: str, part: str) -> str:
    """The clause of `text` (between `;`, `:` and sentence ends) that holds `part`."""
    return next((c for c in re.split(r"[;:]\s|\.\s", text) if part in c), text)


@dataclass(frozen=True, slots=True)
class Listed:
    """A list of records a claim binds into: the record it binds to, and every record."""

    bound: str
    records: list[str]
    complete: bool = True
    """Every record there is: the output is not truncated and states no larger total."""


def needs_lists(text: str) -> bool:
    """Whether a claim says something the lists it binds into judge: a number word that may
    count records, or an identifier given as the only one."""
    return _TALLY.search(text) is not None or bool(claims_only(text))


def claim_lists(outcome: GatekeeperOutcome, invocations: Sequence[ToolInvocation],
                claim_ids: Collection[str]) -> dict[str, list[Listed]]:
    """Per verified claim id of `claim_ids`: the lists of records its bindings stand in
    (`$.hits[6].pod`: `$.hits`, each record as JSON text; a text output's `$.lines`), each
    once. Only those claims: reading a list serialises every record of it."""
    outputs = {i.tool_call_id: i for i in invocations}
    documents: dict[str, Any] = {}
    lists: dict[str, list[Listed]] = {}
    seen: set[tuple[str, str, str]] = set()
    for item in outcome.verified_evidence:
        at = list(_INDEX.finditer(item.path))
        call = outputs.get(item.invocation_id)
        if (item.claim_id not in claim_ids or not at or call is None
                or call.projection is None):
            continue
        listed = item.path[:at[-1].start()]
        if (item.claim_id, item.invocation_id, listed) in seen:
            continue
        seen.add((item.claim_id, item.invocation_id, listed))
        if item.invocation_id not in documents:
            documents[item.invocation_id] = call.projection.model_dump(mode="json")
        records = _records(documents[item.invocation_id], listed)
        index = int(at[-1].group(1))
        if 0 <= index < len(records):
            total = documents[item.invocation_id].get("total")
            complete = not call.projection.truncated and not (
                isinstance(total, int) and total > len(records))
            lists.setdefault(item.claim_id, []).append(
                Listed(records[index], records, complete))
    return lists


def exclusive_conflicts(outcome: GatekeeperOutcome, lists: Mapping[str, list[Listed]]
                        ) -> dict[str, str]:
    """Per verified claim id: why its "only" is contradicted by a list of records it binds
    into (`exclusivity_problem`, `claim_lists`); claims without one left out."""
    conflicts: dict[str, str] = {}
    for claim in outcome.verified_output.claims:
        named = claims_only(claim.text)
        problem = next((p for listed in lists.get(claim.claim_id, []) for fact in named
                        if (p := exclusivity_problem(claim.text, fact, listed.records))), None)
        if problem is not None:
            conflicts[claim.claim_id] = problem
    return conflicts


def record_text(record: Any) -> str:
    """A record of a list as its rules read it: a line as it is, anything else as JSON."""
    if isinstance(record, str):
        return record
    return json.dumps(record, ensure_ascii=False, sort_keys=True)


def _records(document: Any, path: str) -> list[str]:
    try:
        listed = resolve(document, path)
    except PathError:
        return []
    return [record_text(r) for r in listed] if isinstance(listed, list) else []
