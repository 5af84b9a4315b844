"""The Composer guard on claims: a root cause is stated only as the verdict allows.

The no-new-facts guard checks words: every service, number or id of the answer is in the
Composer's input. That is not enough: under LOW_CONFID an obedient Composer's "The root cause
is X." passes it when X occurs anywhere in the input, say in a possible direction. This guard
reads the answer statement by statement:
- PASS: a stated root cause needs an allowed ROOT_CAUSE claim, and states no fact beyond the
  allowed ROOT_CAUSE claims (and the question);
- LOW_CONFID: a root cause appears only as a possible direction: hedged ("may", "possible",
  "not confirmed" ...) or under a heading that is;
- REJECT: no root cause at all, hedged or not ("no root cause is confirmed" is fine).
A line that restates an allowed claim of another kind word for word is that claim, verified,
and passes. Pure functions only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from models.common import Verdict
from models.composer import ComposerInput, ComposerOutput
from models.executor import ClaimKind
from pipeline.facts import FactSet, extract_facts
from pipeline.text import normalize

_CAUSAL = re.compile(
    r"\broot[\s-]*caus(?:e|es|ed)\b|\b(?:primary|main|underlying|actual|real|likely)\s+cause\b"
    r"|\bthe\s+cause\s+(?:of|is|was)\b|\bcaused\s+(?:by|the|this|these|it|all)\b"
    r"|\b(?:is|are|was|were)\s+(?:causing|responsible\s+for|to\s+blame)\b"
    r"|\bis\s+(?:what|why)\s+(?:caused|broke)\b", re.IGNORECASE)
_HEDGE = re.compile(
    r"\b(?:possible|possibly|may|might|could|perhaps|probably|likely|unlikely|suspect\w*"
    r"|hypothes\w+|unconfirmed|not\s+(?:yet\s+)?confirmed|directions?|candidates?|uncertain"
    r"|unclear|if|whether|would)\b"
    r"|\b(?:to|would|will|could|can)\s+(?:confirm|verify|determine|establish|settle|find|identify"
    r"|rule\s+out|tell)\b", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:no|not|cannot|can't|never|neither|nor|none|without|unable)\b", re.IGNORECASE)
_NEGATED_AFTER = re.compile(
    r"^\W*(?:\w+\W+){0,2}?(?:is|was|remains|has|have|could|can)?\s*(?:not|unknown|unclear"
    r"|undetermined|unconfirmed|cannot|never|yet\s+to)\b", re.IGNORECASE)
_CLAUSES = re.compile(r"[;:]\s+|\s+but\s+|(?<=[.!?])\s+")
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class _Statement:
    """A clause of the answer, with what its heading says about it."""

    text: str
    hedged: bool
    """Under a heading that hedges (Possible directions, not confirmed ...)."""
    asserted: bool
    """Under a heading that itself states a root cause (Root cause: ...)."""


def conclusion_problems(output: ComposerOutput, composer_input: ComposerInput) -> list[str]:
    """What the answer says about the root cause that its verdict does not allow: empty means
    the answer may ship."""
    verdict = composer_input.verdict
    roots = [c.text for c in composer_input.allowed_claims if c.kind is ClaimKind.ROOT_CAUSE]
    verified = {normalize(c.text).casefold() for c in composer_input.allowed_claims
                if c.kind is not ClaimKind.ROOT_CAUSE}
    backing = FactSet.from_texts([composer_input.original_query, *roots])
    problems: list[str] = []
    for statement in _statements(output):
        if normalize(statement.text).casefold() in verified:
            continue
        stance = _stance(statement)
        if stance is None:
            continue
        if verdict is Verdict.REJECT:
            problems.append(f"names a root cause under REJECT: {_quote(statement.text)}")
        elif stance == "hedged":
            continue
        elif verdict is Verdict.LOW_CONFID:
            problems.append("states a confirmed root cause under LOW_CONFID (only a possible "
                            f"direction is allowed): {_quote(statement.text)}")
        elif not roots:
            problems.append("states a root cause that no allowed ROOT_CAUSE claim supports: "
                            f"{_quote(statement.text)}")
        else:
            beyond = [f.text for f in extract_facts(statement.text) if not backing.supports(f)]
            if beyond:
                problems.append(f"states a root cause beyond the allowed ROOT_CAUSE claims "
                                f"({', '.join(beyond)}): {_quote(statement.text)}")
    return problems


def _stance(statement: _Statement) -> str | None:
    """None when the clause states no root cause (or denies one), "hedged" when it offers one
    as a possibility, "asserted" when it states one."""
    match = _CAUSAL.search(statement.text)
    if match is None and not statement.asserted:
        return None
    if match is not None:
        if (_NEGATION.search(statement.text[:match.start()])
                or _NEGATED_AFTER.search(statement.text[match.end():])):
            return None
    return "hedged" if statement.hedged or _HEDGE.search(statement.text) else "asserted"


def _statements(output: ComposerOutput) -> Iterator[_Statement]:
    """Every clause of the summary, the actions and the answer, with its heading's stance."""
    for text in (output.answer_summary, *output.recommended_actions):
        for clause in _clauses(text):
            yield _Statement(clause, hedged=False, asserted=False)
    for block in re.split(r"\n\s*\n", output.user_facing_answer):
        lines = [line for line in block.splitlines() if line.strip()]
        hedged = asserted = False
        if len(lines) > 1 and lines[0].rstrip().endswith(":") and _ITEM.match(lines[1]):
            heading = lines.pop(0)
            hedged = bool(_HEDGE.search(heading))
            asserted = not hedged and _stance(_Statement(heading, False, False)) == "asserted"
        for line in lines:
            item = _ITEM.sub("", line)
            if normalize(item):
                yield _Statement(item, hedged=hedged, asserted=asserted)
            for clause in _clauses(item):
                if clause != item:
                    yield _Statement(clause, hedged=hedged, asserted=False)


def _clauses(text: str) -> list[str]:
    return [c for c in (part.strip() for part in _CLAUSES.split(text)) if c]


def _quote(text: str) -> str:
    text = normalize(text)
    return repr(text if len(text) <= 80 else text[:79] + "…")
