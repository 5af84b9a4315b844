"""Claims from prose, read by a model: the extractor's reply (`models.extractor`) laid over the
answer it came from, trusting nothing of the reply that code can check.

Each claim's text must stand in the answer exactly (`<\\/` read as `</`, the escape of the
frame the answer was sent in). Its span is the first occurrence that overlaps no claim kept
before it, cut as the splitter cuts its units (`prose.claim_span`: no list marker, no outer
table pipes). A text that is not in the answer is dropped, never written into it; so is one
whose every occurrence overlaps a kept claim, and one that states nothing (a question, a
lead-in). `plain` is `prose.plain_text` of the span, `section` the heading of the splitter's unit
that holds the span (None when no unit does), and `critical` is recomputed by
`prose.mark_critical`. A label may make the check stricter, never laxer: a claim is a root
cause when the reply or the splitter reads one, and hedged or an action only when the splitter
reads its words so too (a false root cause labelled an action or hedged is checked as a root
cause); a field it gets wrong (an unknown kind, a string for a bool) is read from the text as
the splitter reads it. The splitter's claims that the reply leaves out are added back: an
omission keeps no claim from the check.

A reply that is not a claim list, or of which no claim but actions survives, gives the
splitter's claims instead (`split_claims`), flagged as a fallback with its reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from models.executor import ClaimKind
from pipeline.rules.prose import (
    ProseClaim,
    claim_span,
    claim_units,
    mark_critical,
    read_claim,
    split_claims,
)

_FRAME_ESCAPE = "<\\/"
_SEPARATORS = re.compile(r"[\s-]+")


@dataclass(frozen=True, slots=True)
class Extraction:
    """The claims of one answer and how they were found."""

    claims: list[ProseClaim]
    fallback: bool = False
    """The claims are the splitter's: the extractor's reply was not usable."""
    reason: str | None = None
    """Why the reply was not used (a fallback only)."""
    dropped: int = 0
    """Claims of the reply left out: not in the answer, overlapping a kept one, or stating
    nothing."""
    omitted: int = 0
    """Claims the splitter reads that no claim of the reply overlaps: left out by the reply,
    added back."""

    @property
    def note(self) -> str:
        """One line on how the claims were found."""
        if self.fallback:
            return f"claims split by the deterministic splitter: {self.reason}"
        parts = [f"claims read by the extractor: {len(self.claims)} kept"]
        if self.dropped:
            parts.append(f"{self.dropped} of its reply dropped (not in the answer as written, "
                         "overlapping another or stating nothing)")
        if self.omitted:
            parts.append(f"{self.omitted} it left out added back from the splitter")
        return ", ".join(parts)

    def audit(self) -> dict[str, Any]:
        """Counts and the reason, never claim texts: what a stored check records."""
        return {"fallback": self.fallback, "reason": self.reason, "claims": len(self.claims),
                "dropped": self.dropped, "omitted": self.omitted}


def fallback(answer: str, reason: str) -> Extraction:
    """The splitter's claims of `answer`, flagged: the extractor gave nothing usable."""
    return Extraction(claims=split_claims(answer), fallback=True, reason=reason)


def claims_from_reply(answer: str, reply: str) -> Extraction:
    """The claims of `answer` that the extractor's `reply` (the answer tool's input as JSON
    text) names, as the module docstring lays them over the answer."""
    items = _items(reply)
    if items is None:
        return fallback(answer, "the extractor's reply is not a list of claims")
    if not items:
        return fallback(answer, "the extractor's reply lists no claim")
    units = claim_units(answer)
    kept: list[ProseClaim] = []
    for item in items:
        claim = _claim(answer, item, units, kept)
        if claim is not None:
            kept.append(claim)
    if not any(not c.action for c in kept):
        return fallback(answer, f"none of the {len(items)} claims of the extractor's reply is "
                        "a claim of the answer as written")
    dropped = len(items) - len(kept)
    missed = _omitted(answer, kept)
    kept = sorted([*kept, *missed], key=lambda c: c.start)  # what it left out is checked too
    return Extraction(claims=mark_critical(kept), dropped=dropped, omitted=len(missed))


def _items(reply: str) -> list[Any] | None:
    """The reply's claim list: `{"claims": [...]}` (or a bare list); None when it is not one."""
    try:
        document = json.loads(reply)
    except (ValueError, RecursionError):
        return None
    claims = document.get("claims") if isinstance(document, dict) else document
    return claims if isinstance(claims, list) else None


def _claim(answer: str, item: Any, units: list[tuple[int, int, str | None, bool]],
           kept: list[ProseClaim]) -> ProseClaim | None:
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        return None
    span = _locate(answer, item["text"].strip(), [(c.start, c.end) for c in kept])
    if span is None:
        return None
    start, end = span
    section, listed = next(((u_section, u_listed) for u_start, u_end, u_section, u_listed
                            in units if u_start <= start and end <= u_end), (None, False))
    claim = read_claim(answer, start, end, section, listed=listed)
    if claim is None:
        return None
    # a label may make the check stricter, never laxer: a root cause either reading sees is
    # one; a claim is hedged or an action only when its own words make it so
    said = _kind(item.get("kind")) or claim.kind
    kind = ClaimKind.ROOT_CAUSE if ClaimKind.ROOT_CAUSE in (said, claim.kind) else said
    return replace(claim, kind=kind,
                   hedged=claim.hedged and _flag(item.get("hedged"), True),
                   action=claim.action and _flag(item.get("action"), True))


def _locate(answer: str, text: str, taken: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The span of the first occurrence of `text` in `answer` that overlaps nothing taken."""
    if not text:
        return None
    for needle in dict.fromkeys((text, text.replace(_FRAME_ESCAPE, "</"))):
        at = answer.find(needle)
        while at != -1:
            start, end = claim_span(answer, at, at + len(needle))
            if start < end and not any(start < t_end and t_start < end
                                       for t_start, t_end in taken):
                return start, end
            at = answer.find(needle, at + 1)
    return None


def _kind(value: Any) -> ClaimKind | None:
    """A kind as the reply wrote it ("ROOT_CAUSE", "root cause"); None for any other value."""
    if not isinstance(value, str):
        return None
    name = _SEPARATORS.sub("_", value.strip()).upper()
    return ClaimKind[name] if name in ClaimKind.__members__ else None


def _flag(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _omitted(answer: str, kept: list[ProseClaim]) -> list[ProseClaim]:
    """The splitter's claims that no kept claim overlaps: a reply that leaves a claim out does
    not keep it from the check."""
    return [claim for claim in split_claims(answer)
            if not any(claim.start < c.end and c.start < claim.end for c in kept)]
