"""A comparison a claim makes between two values it gives ("lowered the limit to 512Mi, below
the 690 MiB the service used", "5 ms above the 2 ms budget"): the word is said when the two
values compare so (no output says "below"; the values do), and the claim is contradicted when
they compare the other way. A comparison with a value the claim does not give ("above
baseline") is left to the word check. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.rules.facts import Fact, FactKind, extract_facts

_LESS = ("below", "beneath", "less than", "lower than", "fewer than", "smaller than",
         "short of")
_MORE = ("above", "more than", "higher than", "greater than", "larger than", "exceeds",
         "exceeded", "exceeding", "exceed", "beyond")
"""Comparison words; "over" and "under" are left out: they are as often about a period ("4392 ms
over the 2 hours"), and no output needs to say them (`lexicon.FUNCTION_WORDS`)."""
_WORD = re.compile(r"\b(" + "|".join(w.replace(" ", r"\s+") for w in (*_LESS, *_MORE))
                   + r")\b", re.IGNORECASE)
_BOUNDING = re.compile(r"\b(?:to|from|of|in|for|by|with|at|after|within|on|into|reached|hit|"
                       r"took|lasted|waited|peaked|rose|fell|climbed|dropped)\s*$",
                       re.IGNORECASE)
"""A word just before the comparison that makes it a bound on the value after it."""
_REACH = 45
"""Characters at most between a comparison word and each value it compares."""


@dataclass(frozen=True, slots=True)
class Compared:
    """What the values of a claim say of its comparison words."""

    held: frozenset[str]
    """The words of the comparisons that hold ("below"; "more", "than")."""
    problem: str | None
    """Why one does not: its two values compare the other way."""


def compared(text: str) -> Compared:
    """The comparisons of `text` between the nearest value before the word and the nearest
    after it, both of one dimension."""
    held: set[str] = set()
    for found in _WORD.finditer(text):
        if _BOUNDING.search(text[:found.start()]):
            continue  # "going to more than 4 s": a bound on one value, no comparison of two
        left = _nearest(text[max(0, found.start() - _REACH):found.start()], last=True)
        right = _nearest(text[found.end():found.end() + _REACH], last=False)
        if (left is None or right is None or left.value is None or right.value is None
                or left.shape != right.shape):
            continue
        word = " ".join(found.group(1).casefold().split())
        less = word in _LESS
        if (left.value < right.value) if less else (left.value > right.value):
            held.update(word.split())
        else:
            return Compared(frozenset(held), f"says {left.text} is {word} {right.text}")
    return Compared(frozenset(held), None)


def _nearest(text: str, *, last: bool) -> Fact | None:
    facts = [f for f in extract_facts(text) if f.kind is FactKind.QUANTITY]
    if not facts:
        return None
    return facts[-1] if last else facts[0]
