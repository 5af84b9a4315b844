"""The runbook index: BM25 (Okapi, via rank_bm25) over runbook titles and text.

Tokens are lower-cased words with a light suffix stemmer (rotate/rotation/rotating → rotat),
stop words dropped; hyphenated names are indexed whole and by part (payment-db, payment, db),
and the title counts twice. A document matches only when it shares a token with the query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

from pipeline.data.records import Runbook

EXCERPT_CHARS = 400
MAX_STEPS = 10

_WORD = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
_STEP = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(.+)$")
_STOP = frozenset(
    "a an and are as at be by can do does for from how i in is it its me my of on or our "
    "should so that the their then there this to we what when where which who why will with "
    "you your".split()
)
_SUFFIXES = ("ations", "ation", "ings", "ing", "ions", "ion", "ies", "es", "ed", "s", "e")


def stem(word: str) -> str:
    """A light suffix stemmer: enough to meet rotate/rotation/rotating and pods/pod."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def tokenize(text: str) -> list[str]:
    """Index tokens of a text."""
    tokens: list[str] = []
    for word in _WORD.findall(text.lower()):
        parts = re.split(r"[-_]", word)
        if len(parts) > 1:
            tokens.append(word)
        tokens.extend(stem(p) for p in parts if p not in _STOP and len(p) > 1)
    return tokens


@dataclass(frozen=True, slots=True)
class RunbookHit:
    """One ranked document."""

    runbook: Runbook
    score: float
    excerpt: str
    steps: list[str]


class RunbookIndex:
    """A BM25 index over a set of runbooks."""

    def __init__(self, runbooks: Sequence[Runbook]) -> None:
        self._runbooks = list(runbooks)
        self._tokens = [tokenize(f"{r.title} {r.title} {' '.join(r.tags)} {r.text}")
                        for r in self._runbooks]
        self._bm25 = BM25Okapi(self._tokens) if self._runbooks else None
        # what a hit shows, worked out once per runbook rather than on every search
        self._paragraphs = [_paragraphs(r.text) for r in self._runbooks]
        self._steps = [steps(r.text) for r in self._runbooks]

    def __len__(self) -> int:
        return len(self._runbooks)

    def search(self, query: str, *, limit: int = 5) -> list[RunbookHit]:
        """Documents sharing a token with the query, best BM25 score first."""
        terms = tokenize(query)
        if self._bm25 is None or not terms:
            return []
        scores = self._bm25.get_scores(terms)
        wanted = set(terms)
        ranked = sorted(
            (i for i, tokens in enumerate(self._tokens) if wanted.intersection(tokens)),
            key=lambda i: (-float(scores[i]), self._runbooks[i].doc_id),
        )
        return [self._hit(i, float(scores[i]), wanted) for i in ranked[:limit]]

    def _hit(self, index: int, score: float, terms: set[str]) -> RunbookHit:
        runbook = self._runbooks[index]
        return RunbookHit(runbook=runbook, score=round(score, 3),
                          excerpt=_excerpt(self._paragraphs[index], terms),
                          steps=list(self._steps[index]))


def steps(text: str) -> list[str]:
    """The numbered or bulleted lines of a runbook, without their markers."""
    found = []
    for line in text.splitlines():
        match = _STEP.match(line)
        if match:
            found.append(match.group(1).strip())
    return found[:MAX_STEPS]


def _paragraphs(text: str) -> list[tuple[str, frozenset[str]]]:
    """The paragraphs of a runbook, each with its index tokens."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return [(p, frozenset(tokenize(p))) for p in paragraphs]


def _excerpt(paragraphs: Sequence[tuple[str, frozenset[str]]], terms: set[str]) -> str:
    """The paragraph sharing the most tokens with the query, cut at EXCERPT_CHARS."""
    if not paragraphs:
        return ""
    best, _ = max(paragraphs, key=lambda p: len(terms.intersection(p[1])))
    best = " ".join(best.split())
    return best if len(best) <= EXCERPT_CHARS else best[:EXCERPT_CHARS].rsplit(" ", 1)[0] + " …"
