"""The binder: for a claim written without bindings (another agent's answer), the values in the
run's tool outputs that carry its facts, as evidence bindings the Gatekeeper then checks like
any other.

Every value of every output is a candidate: each scalar (a log line of a text output, a string
or number of a JSON one) and each small object (a log pattern, an alert, a metric series' peak,
whose fields together state a fact and its context). A candidate supports a fact of the claim
when it states the same fact (`FactSet.supports`: identifiers and names by whole token, numbers
within the claim's rounding, times to the claim's precision). The binder takes, one by one, the
candidate that supports the most of what is still unsupported (identifiers, codes and versions
weigh most, then numbers and times, then names; the claim's own words break ties), so that each
found fact is bound once. A fact found nowhere but stated with another value beside the claim's
other facts (the same log line, another pool size) is bound where that value stands: the
post-check then sees the difference and the claim is contradicted. What the claim quotes word
for word is bound where an output states it as written. A claim none of whose facts
is found anywhere gets no binding: it cannot be an observation.

A negative observation ("no alerts fired for payment-db") binds to a query that found nothing
through its scope (`$.scope.service`, `$.scope.filter`), as the contract requires.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from models.executor import EvidenceBinding
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from pipeline.rules import lexicon
from pipeline.rules.facts import (
    COUNTS,
    IDENTIFYING_KINDS,
    Fact,
    FactKind,
    FactSet,
    extract_facts,
    form_of,
)
from pipeline.rules.facts import identifier_family as _family
from pipeline.rules.jsonpath import Segment, format_path
from pipeline.rules.projection import RESERVED_KEYS, listing_header
from pipeline.rules.statements import content_stems
from pipeline.rules.text import normalize, value_text

MAX_BINDINGS = 6
"""Most bindings one claim gets: enough for a claim that restates a line, a deploy and a
metric; more would make a claim of a whole answer."""

_RECORD_CHARS = 600
"""Largest object (as compact JSON) taken whole as one candidate; larger ones by their parts."""
_MATCH_CHARS = 3000
"""Longest candidate text bound whole; a longer value is bound by the fact it supports."""
_WEIGHT = {FactKind.VERSION: 3.0, FactKind.ERROR_CODE: 3.0, FactKind.IDENTIFIER: 3.0,
           FactKind.QUANTITY: 2.0, FactKind.TIMESTAMP: 2.0, FactKind.NAME: 1.5,
           FactKind.SERVICE: 1.0}
_WORD_WEIGHT = 0.2
_ANCHORS = IDENTIFYING_KINDS | {FactKind.TIMESTAMP}
_SETTLED_KINDS = frozenset({FactKind.QUANTITY, FactKind.IDENTIFIER, FactKind.TIMESTAMP})
_ANY_SERVICE = re.compile(r"\b(?:any|all|every|other)\s+services?\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")


@dataclass(frozen=True, slots=True)
class _Candidate:
    invocation: ToolInvocation
    path: str
    text: str
    facts: FactSet
    stated: tuple[Fact, ...]
    words: frozenset[str]


def bind(claim: str, invocations: Sequence[ToolInvocation], *, negative: bool = False,
         quoted: Sequence[str] = ()) -> list[EvidenceBinding]:
    """The bindings of `claim` (plain text) into `invocations`' projections; empty when none
    of its facts is found. `quoted`: what the claim quotes word for word (`prose.quotations`)."""
    words = _content_words(claim)
    candidates = [c for inv in invocations if _usable(inv) for c in _candidates(inv)]
    facts = _unabbreviated(_claim_facts(claim), candidates)
    chosen = _supporting(claim, facts, words, candidates)
    if chosen and (ordinal := _ordinal(claim)) is not None:
        record = _ordinal_record(ordinal, chosen[0], facts, words, quoted, candidates)
        if record is not chosen[0]:
            chosen = _supporting(claim, facts, words, candidates, start=record)
    elif (named := _named_record(facts, chosen, candidates)) is not None:
        chosen = _supporting(claim, facts, words, candidates, start=named[0], anchor=named[1])
    chosen = _described(facts, words, chosen, candidates)
    chosen = _undescribed_lines(claim, facts, chosen)
    supported = {f for c in chosen for f in facts if c.facts.supports(f)}
    chosen += _conflicting(claim, [f for f in facts if f not in supported], facts, candidates,
                           taken=chosen)
    chosen += _quoting(quoted, candidates, taken=chosen)
    if not chosen:
        chosen = _by_words(words, candidates)
    # a negative observation rests first on the queries that found nothing, through their
    # scope: they keep half the room, whatever else its words meet
    empty = (_scope_bindings(claim, words, invocations, room=MAX_BINDINGS // 2,
                             alone=not chosen) if negative else [])
    return [_binding(c, facts) for c in chosen[:MAX_BINDINGS - len(empty)]] + empty


def _claim_facts(claim: str) -> list[Fact]:
    return list(dict.fromkeys(extract_facts(claim, single_digits=True)))


def _unabbreviated(facts: list[Fact], candidates: list[_Candidate]) -> list[Fact]:
    """The claim's facts, a pod named by its suffix ("pod 2w9m4") read as the one identifier
    of the outputs that ends so (`checkout-service-bd1f30671-2w9m4`): a member of its
    replica set's family, whose other pods' records are another object's."""
    short = {f.key for f in facts if f.kind is FactKind.IDENTIFIER and f.shape == "id"
             and not _SEPARATOR.search(f.key)}
    if not short:
        return facts
    whole: dict[str, set[Fact]] = {}
    for candidate in candidates:
        for stated in candidate.stated:
            tail = stated.key.rpartition("-")[2]
            if tail in short and tail != stated.key and stated.kind is FactKind.IDENTIFIER:
                whole.setdefault(tail, set()).add(stated)
    return [next(iter(whole[f.key])) if f.key in short and len(whole.get(f.key, ())) == 1
            else f for f in facts]


_SEPARATOR = re.compile(r"[-_.:/]")


def _content_words(text: str) -> frozenset[str]:
    """Lowercase words of three letters or more, function words left out, a plural's "s"
    dropped ("errors" meets "ERROR")."""
    words = (w.casefold() for w in _WORD.findall(text))
    return frozenset(w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words
                     if w not in lexicon.FUNCTION_WORDS and len(w) > 2)


def _usable(invocation: ToolInvocation) -> bool:
    return (invocation.status is LifecycleStatus.READY and invocation.projection is not None
            and invocation.evidence_status is EvidenceStatus.EVIDENCE_FOUND)


def _candidates(invocation: ToolInvocation) -> Iterator[_Candidate]:
    """Every value of `invocation`'s projection; the rows of a listing (`$.lines[7]`) with
    the words of its header too, which name what each column holds ("COUNT", "RESTARTS")."""
    assert invocation.projection is not None
    document = invocation.projection.model_dump(mode="json")
    header = _content_words(" ".join(listing_header(document.get("lines"))))
    for key, value in document.items():
        if key not in RESERVED_KEYS:
            for candidate in _walk(invocation, value, (key,)):
                yield (dataclasses.replace(candidate, words=candidate.words | header)
                       if header and _LINE.fullmatch(candidate.path) else candidate)


_LINE = re.compile(r"\$\.lines\[\d+\]")


def _walk(invocation: ToolInvocation, value: Any, path: tuple[Segment, ...]
          ) -> Iterator[_Candidate]:
    if isinstance(value, dict):
        text = value_text(value)
        if value and len(text) <= _RECORD_CHARS and _flat(value):
            yield _candidate(invocation, path, text)
        for key, item in value.items():
            yield from _walk(invocation, item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(invocation, item, (*path, index))
    elif value is not None and value != "":
        yield _candidate(invocation, path, value_text(value))


def _flat(record: dict[str, Any]) -> bool:
    """A record of scalars (or lists of scalars): one log pattern, one deploy, one alert; not
    a container of records, whose records are candidates of their own."""
    return all(not isinstance(v, dict | list) or (
        isinstance(v, list) and not any(isinstance(i, dict | list) for i in v))
        for v in record.values())


def _candidate(invocation: ToolInvocation, path: tuple[Segment, ...], text: str) -> _Candidate:
    stated = tuple(extract_facts(text, single_digits=True))
    return _Candidate(invocation, format_path(path), text, FactSet(stated, texts=[text]), stated,
                      _content_words(text))


def _supporting(claim: str, facts: list[Fact], words: frozenset[str],
                candidates: list[_Candidate], *, start: _Candidate | None = None,
                anchor: Fact | None = None) -> list[_Candidate]:
    """Greedy cover of the claim's facts: each step the candidate adding the most weight
    (after `start`, the record the claim is about when it says which: "the first 500", or
    the one its `anchor` names)."""
    chosen: list[_Candidate] = [] if start is None else [start]
    open_facts = [f for f in facts if start is None or not start.facts.supports(f)]
    while open_facts and len(chosen) < MAX_BINDINGS:
        best: _Candidate | None = None
        best_score, best_found = 0.0, []
        for candidate in candidates:
            if candidate in chosen:
                continue
            found = [f for f in open_facts if candidate.facts.supports(f)
                     and not (chosen and _settled(claim, f, facts, chosen[0], candidate,
                                                  candidates))
                     and not (start is not None and _picked(f, start, candidate, anchor)
                              and not _range_end(claim, f, facts, start))]
            overlap = len(words & candidate.words)
            if not found or not (_in_context(claim, found, facts, candidate, overlap)
                                 or _ends_range(claim, found, facts, candidate, chosen)):
                continue
            score = sum(_WEIGHT[f.kind] for f in found) + _WORD_WEIGHT * overlap
            better = score > best_score or (
                score == best_score and best is not None and len(candidate.text) < len(best.text))
            if better:
                best, best_score, best_found = candidate, score, found
        if best is None:
            break
        chosen.append(best)
        open_facts = [f for f in open_facts if f not in best_found]
    return chosen


def _settled(claim: str, fact: Fact, facts: list[Fact], primary: _Candidate,
             candidate: _Candidate, candidates: Sequence[_Candidate] = ()) -> bool:
    """Whether the value that carries most of the claim already says otherwise about a fact
    of it, so that no other value may be taken for it.

    A number: one of the same output ("child 5386 in slot 7" against the line of child 5386
    that says slot 9, while another line says slot 7), or any, when that value states the
    number's pair ("the pool from 50 to 10" against a deploy "from 50 to 20", while a runbook
    says 10); never a record of the main value's list for a range's end (a range over a
    list: "PIDs from 24200 to 25505", "slots 6 through 10", the ends of two lines). An
    identifier or a time: one of the same
    output, when the main value holds another of the claim's anchors and the two are records
    of one list ("the 15:07:42 failure was req-0790b42a" against the line of req-0790b42a at
    15:07:55, while another line is at 15:07:42: a record's attributes swapped), or one of any
    output when another record of that list states it (`_listed_beside`), unless the
    claim lists several of the fact's family. A value that names an anchor of the claim of
    its own (another pod, another time: a claim that lists several) is not held back, nor
    one of another output for a number the main one does not pair (claims join sources: "512
    errors after v2.3.1 went out")."""
    if fact.kind not in _SETTLED_KINDS or not primary.facts.conflicts(fact):
        return False
    anchors = [f for f in facts if f.kind in _ANCHORS and f is not fact]
    if fact.kind is FactKind.QUANTITY:
        if _sibling(candidate, primary) and any(_ranged(claim, f, fact) for f in facts):
            return False
        if _crossed(claim, fact, facts, primary, candidate) or _counted(fact, primary):
            return True
        given = FactSet(facts, texts=[claim])
        pairs = any(f is not fact and f.kind is FactKind.QUANTITY
                    and f.shape in (fact.shape, "")  # "from 8 to 46 connections"
                    and _near(claim, f, fact) and primary.facts.supports(f)
                    and _pair_stated(primary, fact, f, given) for f in facts)
        if not pairs:  # a number of another record of its list: only when crossed (above)
            return False
        if sum(1 for f in facts if primary.facts.supports(f)) < 2:
            return False
    elif ((candidate.invocation is not primary.invocation
           and not _listed_beside(fact, primary, candidates))
          or (candidate.invocation is primary.invocation
              and _siblings(candidate.path) != _siblings(primary.path))
          or any(f is not fact and (_family(f) == _family(fact) or _one_form(f, fact))
                 for f in facts)  # a list ("rdd_2_4, rdd_2_1 and rdd_30_0")
          or not any(primary.facts.supports(f) for f in anchors)):
        return False
    return not any(candidate.facts.supports(f) and not primary.facts.supports(f)
                   for f in anchors)


def _one_form(a: Fact, b: Fact) -> bool:
    """Whether two identifiers are of one form (`rdd_2_4` and `rdd_30_0`, `facts.form_of`):
    a claim that gives both lists records of one kind, whatever their families."""
    return (a.kind is b.kind is FactKind.IDENTIFIER and a.shape == b.shape
            and form_of(a) == form_of(b) != "")


def _listed_beside(fact: Fact, primary: _Candidate, candidates: Sequence[_Candidate]) -> bool:
    """Whether another record of the main value's list states `fact`: the list's records are
    what the claim speaks of ("the first 500 came from pod 2w9m4" against the line of that
    500, which names 5dv2q, while other lines name 2w9m4), so another output naming it (the
    event of 2w9m4's start) does not pair it with that record."""
    if _RECORD_PATH.fullmatch(primary.path) is None:
        return False
    family = _siblings(primary.path)
    return any(c.invocation is primary.invocation and c is not primary
               and _siblings(c.path) == family and c.facts.supports(fact) for c in candidates)


_ORDINAL = re.compile(
    r"\b(?<!at\s)(first|earliest|last|latest|final|most\s+recent)\b"
    r"(?!\s+(?:\d+\s+)?(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|night|time"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b)", re.IGNORECASE)
"""An ordinal that picks one record of a list ("the first 500", "the last failed password"),
not "at first" nor "the last two hours"."""

_ORDINAL_WORDS = frozenset({"first", "earliest", "last", "latest", "final", "most", "recent"})


def _ordinal(claim: str) -> str | None:
    """"first" or "last" when `claim` (its quotations aside) picks one record of a list by
    its place; None otherwise."""
    found = _ORDINAL.search(re.sub(r"`[^`]*`|\"[^\"]*\"", " ", claim))
    if found is None:
        return None
    return "first" if found.group(1).casefold() in ("first", "earliest") else "last"


def _ordinal_record(ordinal: str, primary: _Candidate, facts: list[Fact],
                    words: frozenset[str], quoted: Sequence[str],
                    candidates: list[_Candidate]) -> _Candidate:
    """The record a claim that says "the first X" (or "the last") is about: of the records of
    the list that holds its main value, those that are X, the earliest (or latest) by their
    time, by their place when they state none. X is what the claim quotes, else the words and
    the names, codes and versions the claim shares with its main value: "the first `POST
    /api/checkout 500`" is the first line that holds that text, not the line whose time the
    claim gives. `primary` itself when it is no record of a list, or when nothing else is X."""
    own = _RECORD_PATH.match(primary.path)
    if own is None:
        return primary
    family = _siblings(primary.path)
    records = [c for c in candidates if c.invocation is primary.invocation
               and _RECORD_PATH.fullmatch(c.path) and _siblings(c.path) == family]
    record = next((c for c in records if c.path == own.group(0)), None)
    if record is None:
        return primary
    kinds = (FactKind.ERROR_CODE, FactKind.VERSION, FactKind.SERVICE, FactKind.NAME)
    marks = [f for f in facts if f.kind in kinds and record.facts.supports(f)]
    wanted = [q.casefold() for q in quoted if q.casefold() in _spaced(record.text)]
    described = (words & record.words) - _ORDINAL_WORDS
    if not wanted and len(described) + len(marks) < 2:
        return primary  # too little to say which records are "X"

    def is_x(candidate: _Candidate) -> bool:
        if wanted:
            return all(w in _spaced(candidate.text) for w in wanted)
        return described <= candidate.words and all(candidate.facts.supports(f) for f in marks)

    same = [c for c in records if is_x(c)]
    if len(same) < 2:
        return primary
    times = [_time_of(c) for c in same]
    if all(t is not None for t in times):  # by time; by place in the list where any has none
        same = [c for _, _, c in sorted(zip(times, range(len(same)), same, strict=True),
                                        key=lambda item: (item[0], item[1]))]
    picked = same[0] if ordinal == "first" else same[-1]
    return primary if picked is record else picked


def _described(facts: list[Fact], words: frozenset[str], chosen: list[_Candidate],
               candidates: list[_Candidate]) -> list[_Candidate]:
    """`chosen`, a value of one record of a JSON list taken for a number or a time the claim
    gives of another record of that list, the one its words describe ("CPU usage peaked at
    10:17" against the request rate series' summary, which peaks at 10:17, while the CPU
    series' summary peaks at 09:10), replaced by that record's same field: the post-check
    then sees the difference. A claim that gives several numbers or times of one sort may
    speak of several records, and is left as it is."""
    result = list(chosen)
    for taken in chosen:
        if not _FIELD.search(taken.path) or taken.path.startswith("$.lines"):
            continue
        for fact in facts:
            if (fact.kind not in (FactKind.QUANTITY, FactKind.TIMESTAMP)
                    or not taken.facts.supports(fact) or _own_time(taken, fact)
                    or any(f is not fact and f.sort == fact.sort for f in facts)):
                continue
            better = _better_described(taken, fact, facts, words, candidates)
            if better is not None:
                result = [c for c in result if c is not taken and c is not better] + [better]
                break
    return result


def _undescribed_lines(claim: str, facts: list[Fact], chosen: list[_Candidate]
                       ) -> list[_Candidate]:
    """`chosen` without a line of a text output taken only for an identifier that the claim
    gives of what another line taken describes, when that line states another value of the
    identifier's sort ("the election address of peer 2 is /10.10.34.13:3888" against
    "Cannot open channel to 2 at election address /10.10.34.12:3888", while a listener's
    line elsewhere in the log holds /10.10.34.13:3888): the post-check then sees the
    difference. The dropped line shares none of the claim's words, the line kept at least
    two; a claim that gives several identifiers of one sort may list several records."""
    stems = content_stems(_without_identifiers(claim, facts))
    lines = [c for c in chosen if _LINE.fullmatch(c.path)]
    dropped: list[_Candidate] = []
    for fact in facts:
        if (fact.kind is not FactKind.IDENTIFIER
                or any(f is not fact and f.sort == fact.sort for f in facts)):
            continue
        for taken in lines:
            if (not taken.facts.supports(fact) or stems & content_stems(taken.text)
                    or any(taken.facts.supports(f) for f in facts if f is not fact)):
                continue
            if any(other is not taken and other.invocation is taken.invocation
                   and other.facts.conflicts(fact)
                   and len(stems & content_stems(other.text)) >= 2 for other in lines):
                dropped.append(taken)
    return [c for c in chosen if c not in dropped]


def _without_identifiers(text: str, facts: list[Fact]) -> str:
    """`text` with its identifiers blanked: their parts are no words of the claim."""
    for fact in facts:
        if fact.kind is FactKind.IDENTIFIER:
            text = text.replace(fact.text, " ")
    return text


def _better_described(taken: _Candidate, fact: Fact, facts: list[Fact],
                      words: frozenset[str], candidates: list[_Candidate]) -> _Candidate | None:
    """The same field of another record of `taken`'s list that the claim's words describe
    better than `taken` (words of one class alike: "request rate" and "rps"), that states
    another value of `fact`'s sort, and that loses none of the claim's other numbers and
    times `taken` states (a claim of two series: "traffic rose to 56.4 rps at 13:54, while
    its error rate stayed flat"); None when none."""
    field = _FIELD.sub("[*]", taken.path)
    said = _classed(words)
    mine = said & _classed(taken.words)
    best, margin = None, 0
    for other in candidates:
        if (other.invocation is not taken.invocation or other.path == taken.path
                or _FIELD.sub("[*]", other.path) != field or not other.facts.conflicts(fact)
                or any(f is not fact and f.kind in (FactKind.QUANTITY, FactKind.TIMESTAMP)
                       and taken.facts.supports(f) and not other.facts.supports(f)
                       for f in facts)):
            continue
        theirs = said & _classed(other.words)
        gain = len(theirs - mine) - len(mine - theirs)
        if gain > margin:
            best, margin = other, gain
    return best


def _own_time(record: _Candidate, fact: Fact) -> bool:
    """Whether `fact` is the time `record` opens with: an event's or a line's own time, which
    names that record rather than describes it."""
    first = next((f for f in record.stated if f.kind is FactKind.TIMESTAMP), None)
    return (fact.kind is FactKind.TIMESTAMP and first is not None
            and record.text.startswith(first.text) and FactSet([first]).supports(fact))


_CLASS_OF_WORD = {w: name for name, ws in lexicon.SYNONYMS.items() for w in ws}


def _classed(words: frozenset[str]) -> frozenset[str]:
    """`words`, each of a class of `lexicon.SYNONYMS` as that class ("rps", "traffic" and
    "rate" alike)."""
    return frozenset(_CLASS_OF_WORD.get(w, w) for w in words)


_FIELD = re.compile(r"\[\d+\]")


def _picked(fact: Fact, record: _Candidate, candidate: _Candidate,
            anchor: Fact | None = None) -> bool:
    """Whether the record a claim picks ("the last failed password", the line of the one
    time it gives) says otherwise about `fact`, so that no other record of its list may be
    taken for it; and, when the claim names one object of a family (one pod), whether
    `candidate` is the record of another object of that family, taken for nothing."""
    if (candidate.invocation is not record.invocation
            or _siblings(candidate.path) != _siblings(record.path)):
        return False
    if fact.kind in _SETTLED_KINDS and record.facts.conflicts(fact):
        return True
    return (anchor is not None and anchor.kind is FactKind.IDENTIFIER
            and _names_another(candidate, anchor))


def _names_another(candidate: _Candidate, anchor: Fact) -> bool:
    """Whether `candidate` states another member of `anchor`'s family and not `anchor`."""
    return (not candidate.facts.supports(anchor)
            and any(_family(f) == _family(anchor) for f in candidate.stated))


def _named_record(facts: list[Fact], chosen: list[_Candidate], candidates: list[_Candidate]
                  ) -> tuple[_Candidate, Fact] | None:
    """The record a claim is about when it names it by the one time or object of its
    family it gives ("Sun Dec 04 16:32:58 2005 | … state 6", "6g9wr | 0/1 |
    CrashLoopBackOff"), while a value taken for it stands in another record of that list,
    of another time or object: the record of the claim's anchor alone in that list, and the
    anchor. None when no value taken is such a record."""
    for anchor in facts:
        if (anchor.kind not in (FactKind.IDENTIFIER, FactKind.TIMESTAMP)
                or any(f is not anchor and _family(f) == _family(anchor) for f in facts)):
            continue
        for taken in chosen:
            if not _RECORD_PATH.fullmatch(taken.path) or not _names_another(taken, anchor):
                continue
            named = [c for c in candidates if c.invocation is taken.invocation
                     and _RECORD_PATH.fullmatch(c.path)
                     and _siblings(c.path) == _siblings(taken.path)
                     and c.facts.supports(anchor)]
            if len(named) == 1:
                return named[0], anchor
    return None


_RECORD_PATH = re.compile(r".*\[\d+\]")
"""The path of the record a value stands in: `$.lines[7]` of itself, `$.hits[3]` of
`$.hits[3].message`."""


def _time_of(candidate: _Candidate) -> str | None:
    """A record's first time as a sortable key (an ISO time); None when it states none."""
    keys = [f.key for f in candidate.stated if f.kind is FactKind.TIMESTAMP]
    return keys[0] if keys and keys[0][:4].isdigit() else None


_ALIKE = 0.6
"""Share of their words two records of one form hold in common (lines of one log template)."""


def _crossed(claim: str, fact: Fact, facts: list[Fact], primary: _Candidate,
             candidate: _Candidate) -> bool:
    """Whether two records of one list each hold one of two numbers of the claim and, for the
    other, a value the claim does not give: "child 5386 in slot 7" against "child 3667 in
    slot 7" and "child 5386 in slot 9" (the numbers of two records crossed), unlike a claim
    that gives both records' pairs."""
    if (candidate.invocation is not primary.invocation or candidate.path == primary.path
            or _siblings(candidate.path) != _siblings(primary.path)
            or len(primary.words & candidate.words)
            < _ALIKE * len(primary.words | candidate.words)):
        return False  # records of one list and one form ("Found child N in scoreboard slot M")
    held = [f for f in facts if f is not fact and f.kind is FactKind.QUANTITY
            and primary.facts.supports(f) and not candidate.facts.supports(f)
            and candidate.facts.conflicts(f)]
    if not held:
        return False
    given = FactSet(facts, texts=[claim])
    sorts = {f.sort for f in held}
    return any(g.sort in sorts and not given.supports(g) and not primary.facts.supports(g)
               for g in candidate.stated)


def _sibling(candidate: _Candidate, record: _Candidate) -> bool:
    """Whether `candidate` is another record of the list `record` stands in."""
    return (candidate.invocation is record.invocation and candidate.path != record.path
            and _RECORD_PATH.fullmatch(candidate.path) is not None
            and _siblings(candidate.path) == _siblings(record.path))


def _counted(fact: Fact, primary: _Candidate) -> bool:
    """Whether the main value counts what a count of the claim counts, another number of
    them ("on 4 pods" against "21 OOMKilled events on 3 objects"): the step "4." of a runbook
    is then no count of pods."""
    return fact.unit in COUNTS and any(
        s.kind is FactKind.QUANTITY and s.unit == fact.unit for s in primary.stated)


_PAIR_CHARS = 16
"""Widest gap between two numbers of a claim that state one change ("from 50 to 20", "20 of
50 connections"); numbers further apart (a port in a quoted URL, a count of another thing)
are no pair."""


def _ranged(claim: str, a: Fact, b: Fact) -> bool:
    """Whether two numbers or two times of `claim` are the ends of one range ("24200 to
    25505", "6 through 10", "102-136 ms", "2008-11-09 to 2008-11-11", "between 49 and 64
    requests"; not "ports 9000 and 8030", two values)."""
    if a is b or a.kind is not b.kind or a.kind not in (FactKind.QUANTITY, FactKind.TIMESTAMP):
        return False
    ends = [re.escape(a.text), re.escape(b.text)]
    return any(re.search(rf"(?<![\w.]){x}\s*(?:to|through|thru|until|till|-|–)\s*{y}(?!\w)"
                         rf"|\bbetween\s+{x}\s+and\s+{y}(?!\w)", claim)
               for x, y in (ends, ends[::-1]))


def _pair_stated(record: _Candidate, fact: Fact, paired: Fact, given: FactSet) -> bool:
    """Whether `record` states `paired` beside a value of `fact`'s kind that the claim does
    not give ("from 50 to 20" for a claim's "from 50 to 10", "2000 ms for 5 minutes" for its
    "1000 ms for 5 minutes"): what the record says in place of `fact`. A record that states
    the number alone (a log line's "max 20", a pattern's "retrying in 40 ms"), or beside
    another number the claim gives too ("from 1024Mi to 512Mi" for "from 1024Mi to 512Mi,
    below the 690 MiB"), says nothing in its place, and another value may state it."""
    own = [s for s in record.stated if s.kind is FactKind.QUANTITY]
    return any(FactSet([s]).supports(paired) and any(
        t is not s and t.shape in (fact.shape, "") and not given.supports(t)
        and _near(record.text, s, t) for t in own) for s in own)


def _range_end(claim: str, fact: Fact, facts: list[Fact], record: _Candidate) -> bool:
    """Whether `fact` ends a range of the claim whose other end `record` states ("between 24
    and 154 ms" against the line of the 24 ms): the range spans several records of its list,
    so another of them states this end."""
    return any(_ranged(claim, f, fact) and record.facts.supports(f) for f in facts)


def _ends_range(claim: str, found: list[Fact], facts: list[Fact], candidate: _Candidate,
                chosen: Sequence[_Candidate]) -> bool:
    """Whether `candidate` states only ends of the claim's ranges whose other end a value
    taken from the same list states: "between 24 and 154 ms", one line each. The range is
    their context, as two records of one list."""
    return all(any(_range_end(claim, f, facts, c) for c in chosen
                   if c.invocation is candidate.invocation and c.path != candidate.path
                   and _siblings(c.path) == _siblings(candidate.path))
               for f in found)


def _near(claim: str, a: Fact, b: Fact) -> bool:
    """Whether two numbers of `claim` stand within a few words of each other."""
    spans = [[m.span() for m in re.finditer(rf"(?<![\w.:/]){re.escape(f.text)}(?!\w)", claim)]
             for f in (a, b)]
    return any(max(x[0], y[0]) - min(x[1], y[1]) <= _PAIR_CHARS
               for x in spans[0] for y in spans[1])


_RECORD = re.compile(r"\[\d+\].*$")


def _siblings(path: str) -> str:
    """The list a value's record stands in, whatever its index and field: `$.lines[*]`,
    `$.result.hits[*]` (of `$.result.hits[3].message` too)."""
    return _RECORD.sub("[*]", path)


def _quoting(quoted: Sequence[str], candidates: list[_Candidate], *,
             taken: list[_Candidate]) -> list[_Candidate]:
    """For each quotation no value taken holds, the shortest value that holds it as
    written (case aside): a quoted log message is bound where the log states it, even when it
    carries no fact ("`Interrupted while waiting for message on queue`")."""
    added: list[_Candidate] = []
    for quote in quoted:
        wanted = quote.casefold()
        if any(wanted in _spaced(c.text) for c in (*taken, *added)):
            continue
        holding = [c for c in candidates if wanted in _spaced(c.text)]
        if holding:
            added.append(min(holding, key=lambda c: len(c.text)))
    return added


def _spaced(text: str) -> str:
    return " ".join(text.split()).casefold()


def _by_words(words: frozenset[str], candidates: list[_Candidate]) -> list[_Candidate]:
    """For a claim whose facts are found nowhere (or that states none: "the runbook
    rb-dependency-latency is the best match"), the one value that uses most of its words, when
    it uses at least three and half of them; the post-check then reads the claim against it."""
    best, overlap = None, 0
    for candidate in candidates:
        shared = len(words & candidate.words)
        if shared > overlap or (shared == overlap and best is not None
                                and len(candidate.text) < len(best.text)):
            best, overlap = candidate, shared
    if best is None or overlap < max(3, len(words) / 2):
        return []
    return [best]


def _in_context(claim: str, found: list[Fact], facts: list[Fact], candidate: _Candidate,
                overlap: int) -> bool:
    """Whether a candidate's support is about what the claim is about: a distinctive fact (an
    identifier, a code or a version names one thing), or with another of the claim's facts,
    or beside two of its words. A bare number or time found alone in an unrelated value (the
    "10" of some other series for a pool cut "from 50 to 10") supports nothing. A time that
    ends a range of the claim's ("the log spans 2008-11-09 to 2008-11-11") is its context: the
    two ends are two records of one list. For a time, words count as the word check reads
    them too ("the timeouts start at 13:12:32" describes the pattern of lines that "timed
    out", `first_ts` 13:12:32); a number is not placed so loosely (the "3" of "attempt 3 of
    3" is no pod's restart count for sharing the words of "orders-api")."""
    if any(f.kind in IDENTIFYING_KINDS for f in found) or overlap >= 2:
        return True
    others = [f for f in facts if f not in found]
    return len(found) >= 2 or any(candidate.facts.supports(f) for f in others) or any(
        f.kind is FactKind.TIMESTAMP and _ranged(claim, f, g) for f in found for g in others
    ) or (all(f.kind is FactKind.TIMESTAMP for f in found)
          and len(content_stems(claim) & content_stems(candidate.text)) >= 2)


def _conflicting(claim: str, unsupported: list[Fact], facts: list[Fact],
                 candidates: list[_Candidate], *, taken: list[_Candidate]) -> list[_Candidate]:
    """For each fact found nowhere: the candidate that states another value of its kind and
    shape beside the claim's context (another of its facts, or two of its words, read as
    the word check reads them: "the timeouts start at 12:58" is about the pattern of lines
    that "timed out", `first_ts` 13:12:32). The claim's other facts are its context wherever
    they are stated, bound or not ("24 such warnings …, none in the two hours before" is
    about the pattern counted "(0 in the preceding 120 minutes)", which counts 42)."""
    added: list[_Candidate] = []
    stems = content_stems(claim)
    for fact in unsupported:
        if fact.kind is FactKind.SERVICE or fact.kind is FactKind.NAME:
            continue  # another service is an absence, never a contradiction
        context = [f for f in facts if f is not fact]
        best, best_score = None, 0.0
        for candidate in candidates:
            if candidate in taken or candidate in added or not candidate.facts.conflicts(fact):
                continue
            shared = sum(_WEIGHT[f.kind] for f in context if candidate.facts.supports(f))
            overlap = len(stems & content_stems(candidate.text))
            if not shared and overlap < 2:
                continue
            score = shared + _WORD_WEIGHT * overlap + 2 * _closeness(fact, candidate.stated)
            if score > best_score or (score == best_score and best is not None
                                      and len(candidate.text) < len(best.text)):
                best, best_score = candidate, score
        if best is not None:
            added.append(best)
    return added


def _closeness(fact: Fact, stated: Sequence[Fact]) -> float:
    """How near the candidate's nearest value of the fact's kind and shape is (1 for a digit
    swapped in a count, near 0 for another order of magnitude): the value the claim got
    wrong is most likely the one closest to what it says."""
    if fact.value is None:
        return 0.0
    near = [1 - abs(fact.value - other.value) / max(abs(fact.value), abs(other.value), 1e-9)
            for other in stated
            if other.kind is fact.kind and other.shape == fact.shape and other.value is not None]
    return max(near, default=0.0)


def _binding(candidate: _Candidate, facts: list[Fact]) -> EvidenceBinding:
    text = candidate.text
    if len(text) > _MATCH_CHARS:
        found = [f.text for f in facts if candidate.facts.supports(f) and f.text in text]
        text = max(found, key=len) if found else text[:_MATCH_CHARS]
    return EvidenceBinding(invocation_id=candidate.invocation.tool_call_id,
                           tool_name=candidate.invocation.tool_name, path=candidate.path,
                           matched_text=normalize(text))


def _scope_bindings(claim: str, words: frozenset[str], invocations: Sequence[ToolInvocation],
                    *, room: int, alone: bool = True) -> list[EvidenceBinding]:
    """A negative observation's bindings to queries that found nothing: the scope's service,
    or the words of its filter, that the claim names. Of the queries of a service it names,
    those of the kind it speaks of ("no alerts": the alert query, by its tool's or its file's
    name), when any is; every one of them otherwise, when nothing else backs the claim
    (`alone`)."""
    found: list[EvidenceBinding] = []
    by_service: list[tuple[bool, EvidenceBinding]] = []
    lowered = claim.casefold()
    stems = content_stems(claim)
    for invocation in invocations:
        if (invocation.status is not LifecycleStatus.READY or invocation.projection is None
                or invocation.evidence_status is not EvidenceStatus.NO_EVIDENCE):
            continue
        scope = invocation.projection.scope
        service = scope.service
        if service and _ANY_SERVICE.search(claim):
            continue  # "no deploy of any service": not a query of one service
        named = _WORD_PARTS.sub(" ", f"{invocation.tool_name} {scope.filter or ''}")
        if service and service.casefold() in lowered:
            kind = bool(stems & (content_stems(named) - _GENERIC_STEMS - content_stems(service)))
            by_service.append((kind, EvidenceBinding(
                invocation_id=invocation.tool_call_id, tool_name=invocation.tool_name,
                path="$.scope.service", matched_text=service)))
            continue
        shared = sorted(words & _content_words(scope.filter or ""), key=len, reverse=True) or [
            s for s in sorted(stems & (content_stems(_WORD_PARTS.sub(" ", scope.filter or ""))
                                       - _GENERIC_STEMS), key=len, reverse=True)
            if s.casefold() in (scope.filter or "").casefold()]  # bound as the filter writes it
        if shared:
            found.append(EvidenceBinding(invocation_id=invocation.tool_call_id,
                                         tool_name=invocation.tool_name,
                                         path="$.scope.filter",
                                         matched_text=_as_written(scope.filter or "", shared[0])))
    of_kind = [b for kind, b in by_service if kind] or (
        [b for _, b in by_service] if alone else [])
    return (of_kind + found)[:room]


_WORD_PARTS = re.compile(r"[-_.:/\\\"{}]+")
_GENERIC_STEMS = content_stems("list get search query file json txt log csv yaml yml out")
"""The words of a query's file or tool name that say nothing of what it looked for."""


def _as_written(text: str, word: str) -> str:
    """`word` as `text` spells it (the filter keeps its case; the word was case folded)."""
    match = re.search(re.escape(word), text, re.IGNORECASE)
    return match.group(0) if match else word

