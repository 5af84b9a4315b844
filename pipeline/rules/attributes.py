"""Numbers named by what they measure: "the limit is 64", "averaged 6.68%", "peak 1.04 cores",
"(count 43)". A claim that gives a number as an attribute its evidence gives another number
(the line says "64 requests in flight (limit 16)", the series "mean 2.96%, peak 6.68%") states
the value of something else: the number is right, what it is said to be is not. Data and pure
functions; the post-check (`guards`) applies them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.rules import lexicon
from pipeline.rules.facts import Fact, FactKind, FactSet, extract_facts

ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "mean": ("mean", "average", "averaged", "averages", "averaging", "avg"),
    "peak": ("peak", "peaks", "peaked", "peaking", "max", "maximum"),
    "minimum": ("min", "minimum"),
    "limit": ("limit",),
    "count": ("count",),
}
"""What a number may be named as, each class with the words that name it. A limit and a
maximum stay apart: a series' "max 0.456%" is its peak, a pool's "max 20" its limit."""

_CLASS_OF = {word: name for name, words in ATTRIBUTES.items() for word in words}
_NAMED = re.compile(
    r"\b(" + "|".join(sorted(_CLASS_OF, key=len, reverse=True)) + r")\b"
    r"((?:\s+(?:is|was|were|of|at|to|about|around)\b|[\s\"':=(])*)", re.IGNORECASE)
"""An attribute's word and what may stand between it and its number: a verb, a preposition,
a JSON key's quote and colon (`"count": 84`)."""
_NUMBER_CHARS = 40
"""Enough of the text after an attribute's word to hold its number and unit."""


def named_numbers(text: str) -> list[tuple[str, Fact]]:
    """Each number of `text` that stands right after a word naming what it measures, as (the
    attribute's class, the number as a fact)."""
    found: list[tuple[str, Fact]] = []
    for match in _NAMED.finditer(text):
        rest = text[match.end():match.end() + _NUMBER_CHARS]
        number = next((f for f in extract_facts(rest, single_digits=True)
                       if f.kind is FactKind.QUANTITY and rest.startswith(f.text)), None)
        if number is not None:
            found.append((_CLASS_OF[match.group(1).casefold()], number))
    return found


def attribute_conflict(text: str, evidence: Iterable[str]) -> list[Fact]:
    """The numbers `text` names as an attribute ("the limit is 64") that its evidence names
    with other numbers only ("limit 16"), as facts; none when the evidence names no number
    so, or names this one."""
    stated: dict[str, list[Fact]] = {}
    for item in evidence:
        for name, fact in named_numbers(item):
            stated.setdefault(name, []).append(fact)
    differing = []
    for name, fact in named_numbers(text):
        values = [v for v in stated.get(name, []) if _comparable(fact, v)]
        if values and not FactSet(values).supports(fact):
            differing.append(fact)
    return differing


def _comparable(a: Fact, b: Fact) -> bool:
    """Numbers of one dimension, or one of them bare ("limit 16" of "64 requests")."""
    return not a.unit or not b.unit or a.unit == b.unit


_ACCOUNT = re.compile(
    r"\buser(?:\s*=\s*|\s+)(?!ids?\b|names?\b|agents?\b|test\s+\w+ing\b)([a-z_][\w.-]*)"
    r"|\bpassword\s+for\s+(?!(?:invalid\s+|illegal\s+)?user\b)([a-z_][\w.-]*)",
    re.IGNORECASE)
"""An account named as one ("for user admin", "user=root", "session opened for user test",
"Failed password for root", "for invalid user oracle"): sshd's and PAM's wording, and the
wording of an answer that restates them."""


def named_accounts(text: str) -> set[str]:
    """The account names `text` gives as such, case-folded ("the user is root": no name)."""
    names = {(m.group(1) or m.group(2)).rstrip(".").casefold() for m in _ACCOUNT.finditer(text)}
    return names - lexicon.FUNCTION_WORDS - lexicon.NEGATIONS


def account_conflict(text: str, evidence: Iterable[str]) -> list[Fact]:
    """The accounts `text` names ("a failed password for user admin") that its evidence, naming
    accounts, names none of (the line it binds to is "Failed password for root"), as facts;
    none when the evidence names no account, or names this one."""
    stated = set().union(*(named_accounts(item) for item in evidence))
    if not stated:
        return []
    return [Fact(kind=FactKind.IDENTIFIER, text=name, key=name, shape="account")
            for name in sorted(named_accounts(text) - stated)]
