"""Counts of the things a claim lists: "two pods, A and B" says both that A and B are among
them and that there are two. When the record the claim rests on names those same things and
counts them otherwise ("on 3 objects", its objects A, B and C), the count is wrong, however
right each name is. Pure functions; the post-check (`guards`) applies them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.rules import lexicon
from pipeline.rules.facts import Fact, FactKind, FactSet, extract_facts

_COUNTED = re.compile(
    r"\b(\d+|" + "|".join(w for w, n in lexicon.NUMBER_WORDS.items() if n == int(n) and n >= 2
                          and not w.endswith("ed")) + r")\s+"
    r"(?:\w+\s+)?(pods?|objects?|replicas?|containers?|instances?)\b", re.IGNORECASE)
"""A count of things a claim may list after it ("two pods", "3 distinct pods")."""


def listed_counts(text: str) -> list[tuple[Fact, frozenset[str]]]:
    """Each count of `text` followed by as many identifiers as it counts, as (the count as a
    fact, "N pods", and the identifiers' keys)."""
    found = []
    for match in _COUNTED.finditer(text):
        word = match.group(1).casefold()
        number = int(word) if word.isdigit() else int(lexicon.NUMBER_WORDS[word])
        listed = frozenset(f.key for f in extract_facts(text[match.end():])
                           if f.kind is FactKind.IDENTIFIER)
        if len(listed) == number:
            (fact,) = [f for f in extract_facts(f"{number} {match.group(2)}")
                       if f.kind is FactKind.QUANTITY]
            found.append((fact, listed))
    return found


def listed_count_conflict(text: str, evidence: Iterable[str]) -> list[Fact]:
    """The counts `text` gives of the things it lists ("two pods, A and B") that a text of its
    evidence naming all those things counts otherwise ("on 3 objects"), as facts."""
    counts = listed_counts(text)
    if not counts:
        return []
    differing = []
    for item in evidence:
        stated = FactSet.from_texts([item])
        for fact, listed in counts:
            if (fact not in differing and all(stated.states_token(key) for key in listed)
                    and any(f.kind is FactKind.QUANTITY and f.unit == fact.unit
                            for f in extract_facts(item, single_digits=True))
                    and not stated.supports(fact)):
                differing.append(fact)
    return differing
