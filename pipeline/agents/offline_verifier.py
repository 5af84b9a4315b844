"""The offline Verifier: a lexical comparison of each claim's facts with its verified evidence.

Classification of one claim, from its own verified evidence only:
- a number, identifier, error code, version or time that differs from the evidence, or an
  identifying fact (error code, version, identifier) the evidence never states: contradicted;
- no fact and few of its words in the evidence: unsupported;
- some facts missing, or an entity the evidence never names: overstated (unsupported if none
  of its facts is there);
- all facts present: direct_observation for findings, reasonable_inference for conclusions
  (root causes, contributing factors, correlations, or causal wording).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from models.executor import ClaimKind
from models.gatekeeper import VerifiedClaim, VerifiedEvidence
from models.verifier import ClaimCheck, EvidenceGap, Verification, VerifierInput, VerifierOutput
from pipeline.agents.base import ModelReply
from pipeline.facts import IDENTIFYING_KINDS, Fact, FactKind, FactMemo, extract_facts
from pipeline.guards import evidence_facts
from pipeline.prompts import Prompt
from pipeline.verdict import rule_verdict

MODEL_NAME = "offline-lexical-verifier-1"
_CONCLUSION_KINDS = frozenset(
    {ClaimKind.ROOT_CAUSE, ClaimKind.CONTRIBUTING_FACTOR, ClaimKind.CORRELATION}
)
_CAUSAL = re.compile(
    r"\b(caus\w*|because|due to|led to|leads? to|result\w* in|trigger\w*|responsible)\b", re.I
)
_WORD = re.compile(r"[a-z][a-z0-9_-]{3,}")
_STOP = frozenset(
    "that this with from were have been into than then there their about after before during "
    "while which when what also only more most over under between within".split()
)
_SCORE = {
    Verification.DIRECT_OBSERVATION: 1.0, Verification.REASONABLE_INFERENCE: 0.7,
    Verification.OVERSTATED: 0.4, Verification.UNSUPPORTED: 0.0,
    Verification.EXTERNAL_UNKNOWN: 0.0, Verification.CONTRADICTED: 0.0,
}
_TOOL_FOR_KIND = {
    FactKind.QUANTITY: "query_metrics", FactKind.ERROR_CODE: "search_logs",
    FactKind.VERSION: "list_deployments", FactKind.TIMESTAMP: "search_logs",
    FactKind.IDENTIFIER: "get_events", FactKind.SERVICE: "search_logs",
}


class OfflineVerifier:
    """Deterministic Verifier used without an API key; also a reference for the guards."""

    model = MODEL_NAME

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Verify the serialized VerifierInput; answer with VerifierOutput JSON."""
        output = verify(VerifierInput.model_validate_json(payload))
        return ModelReply(text=output.model_dump_json())


def verify(verifier_input: VerifierInput) -> VerifierOutput:
    """Check every verified claim against its own verified evidence."""
    claims = verifier_input.verified_executor_output.claims
    checks: list[ClaimCheck] = []
    gaps: list[EvidenceGap] = []
    memo: FactMemo = {}
    for claim in claims:
        evidence = [e for e in verifier_input.verified_evidence if e.claim_id == claim.claim_id]
        check, missing = classify(claim, evidence, memo=memo)
        checks.append(check)
        if claim.critical and check.verification in (
            Verification.UNSUPPORTED, Verification.OVERSTATED, Verification.EXTERNAL_UNKNOWN
        ):
            gaps.append(_gap(claim, missing))
    ceiling = verifier_input.verdict_ceiling
    verdict = min(rule_verdict(claims, checks), ceiling, key=lambda v: v.rank)
    return VerifierOutput(
        verdict=verdict,
        groundedness_score=_groundedness(claims, checks),
        rationale=_rationale(checks),
        claim_checks=checks,
        evidence_gaps=gaps,
    )


def classify(
    claim: VerifiedClaim, evidence: Sequence[VerifiedEvidence], *, memo: FactMemo | None = None
) -> tuple[ClaimCheck, list[Fact]]:
    """One claim's verification class, and the facts its evidence does not state (`memo`:
    evidence texts already extracted in this verification)."""
    refs = [e.evidence_id for e in evidence]
    known = evidence_facts(evidence, memo=memo)
    facts = extract_facts(claim.text)
    conflicting = [f for f in facts if known.conflicts(f)]
    invented = [f for f in facts if f.kind in IDENTIFYING_KINDS and not known.supports(f)]
    missing = [f for f in facts if not known.supports(f)]

    def check(verification: Verification, note: str) -> tuple[ClaimCheck, list[Fact]]:
        return ClaimCheck(
            claim_id=claim.claim_id, verification=verification, evidence_refs=refs, note=note
        ), missing

    if conflicting or invented:
        return check(Verification.CONTRADICTED, "a stated value differs from or is absent from "
                     "its evidence")
    if not facts:
        overlap = _word_overlap(claim.text, [e.matched_text for e in evidence])
        if overlap < 0.3:
            return check(Verification.UNSUPPORTED, "its evidence does not state what it says")
        if overlap < 0.6 or _is_conclusion(claim):
            return check(Verification.REASONABLE_INFERENCE, "follows from its evidence")
        return check(Verification.DIRECT_OBSERVATION, "its evidence states it")
    if missing:
        if len(missing) == len(facts):
            return check(Verification.UNSUPPORTED, "none of its facts is in its evidence")
        return check(Verification.OVERSTATED, "some of its facts are not in its evidence")
    if _is_conclusion(claim):
        return check(Verification.REASONABLE_INFERENCE, "facts observed; the link is inferred")
    return check(Verification.DIRECT_OBSERVATION, "every fact is in its evidence")


def _is_conclusion(claim: VerifiedClaim) -> bool:
    return claim.kind in _CONCLUSION_KINDS or _CAUSAL.search(claim.text) is not None


def _word_overlap(text: str, evidence: Sequence[str]) -> float:
    words = {w for w in _WORD.findall(text.lower()) if w not in _STOP}
    if not words:
        return 0.0
    haystack = " ".join(evidence).lower()
    return sum(1 for w in words if w in haystack) / len(words)


def _gap(claim: VerifiedClaim, missing: Sequence[Fact]) -> EvidenceGap:
    kinds = sorted({f.kind for f in missing}, key=lambda k: k.value)
    what = ", ".join(k.value.replace("_", " ") for k in kinds) or "its statement"
    return EvidenceGap(
        claim_id=claim.claim_id,
        description=f"Claim {claim.claim_id} needs evidence for its {what}.",
        critical=claim.critical,
        suggested_tool=_TOOL_FOR_KIND[kinds[0]] if kinds else "search_logs",
    )


def _groundedness(claims: Sequence[VerifiedClaim], checks: Sequence[ClaimCheck]) -> float:
    weights = {c.claim_id: 2.0 if c.critical else 1.0 for c in claims}
    total = sum(weights.values())
    if not total:
        return 0.0
    score = sum(weights[c.claim_id] * _SCORE[c.verification] for c in checks) / total
    return round(score, 3)


def _rationale(checks: Sequence[ClaimCheck]) -> str:
    counts: dict[str, int] = {}
    for check in checks:
        counts[check.verification.value] = counts.get(check.verification.value, 0) + 1
    parts = [f"{name}: {n}" for name, n in sorted(counts.items())]
    return "Lexical check of each claim against its verified evidence. " + "; ".join(parts) + "."

