"""The effective verdict: the model's verdict, bounded by the spec's rules and the ceiling."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from models.common import Verdict
from models.gatekeeper import VerifiedClaim
from models.verifier import ClaimCheck, FactCheck, FactClass, Verification

PASS_MIN_GROUNDEDNESS = 0.5

FACT_CLASS = {
    Verification.DIRECT_OBSERVATION: FactClass.DIRECT_EVIDENCE,
    Verification.REASONABLE_INFERENCE: FactClass.INDIRECT_SUPPORT,
    Verification.OVERSTATED: FactClass.INDIRECT_SUPPORT,
    Verification.UNSUPPORTED: FactClass.NO_EVIDENCE,
    Verification.EXTERNAL_UNKNOWN: FactClass.NO_EVIDENCE,
    Verification.CONTRADICTED: FactClass.CONTRADICTED,
}
"""The spec's fixed mapping from claim-check verification to `facts_checked` class."""

_SUPPORTING = frozenset({Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE})


def facts_checked(checks: Sequence[ClaimCheck]) -> list[FactCheck]:
    """Derive compatibility `facts_checked` from claim checks."""
    return [
        FactCheck(claim_id=c.claim_id, classification=FACT_CLASS[c.verification]) for c in checks
    ]


def rule_verdict(claims: Sequence[VerifiedClaim], checks: Sequence[ClaimCheck]) -> Verdict:
    """The verdict the spec's conditions allow for these claim checks.

    A critical claim without a check counts as unsupported.
    """
    by_id = {c.claim_id: c.verification for c in checks}
    critical = [by_id.get(c.claim_id, Verification.UNSUPPORTED) for c in claims if c.critical]
    if Verification.CONTRADICTED in critical:
        return Verdict.REJECT
    if (
        critical
        and all(v in _SUPPORTING for v in critical)
        and Verification.DIRECT_OBSERVATION in critical
    ):
        return Verdict.PASS
    return Verdict.LOW_CONFID


def effective_verdict(
    model_verdict: Verdict,
    *,
    claims: Sequence[VerifiedClaim],
    checks: Sequence[ClaimCheck],
    ceiling: Verdict,
    groundedness_score: float,
    worded_beyond: Collection[str] = (),
) -> Verdict:
    """Start from the model verdict; apply the spec's rules; never exceed the ceiling. A
    critical claim worded beyond every output of its tool calls (`worded_beyond`, claim ids:
    `guards.unsaid_words`) is not shown, so a run that rests on it cannot pass."""
    if any(c.critical and c.claim_id in worded_beyond for c in claims):
        ceiling = min(ceiling, Verdict.LOW_CONFID, key=lambda v: v.rank)
    verdict = min(
        (model_verdict, rule_verdict(claims, checks), ceiling), key=lambda v: v.rank
    )
    if verdict is Verdict.PASS and groundedness_score < PASS_MIN_GROUNDEDNESS:
        return Verdict.LOW_CONFID
    return verdict


def imported_ceiling(ceiling: Verdict | None, unverifiable_critical: Sequence[str]
                     ) -> Verdict | None:
    """The ceiling of an imported answer: a critical claim that no tool output states counts
    as unsupported (as a critical claim without a check does), so the answer cannot pass."""
    if ceiling is None or not unverifiable_critical:
        return ceiling
    return min(ceiling, Verdict.LOW_CONFID, key=lambda v: v.rank)
