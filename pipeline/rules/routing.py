"""Routing rules: which node runs next. Pure functions of explicit statuses and verdicts.

No execution status string is ever read as a verdict, and neither a groundedness threshold
nor a feature flag decides the evidence retry.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from models.common import FallbackType, Verdict
from models.evaluation import StageStatus, VerifierStatus
from models.fallback import FallbackReason
from models.gatekeeper import Severity
from models.verifier import EvidenceGap

MAX_EVIDENCE_RETRIES = 1


class Node(StrEnum):
    """Pipeline nodes; task names are `verity.node.<value>`."""

    PLAN = "plan"
    EXECUTE = "execute"
    GATEKEEP = "gatekeep"
    VERIFY = "verify"
    COMPOSE = "compose"
    FALLBACK = "fallback"
    FINALIZE = "finalize"
    KNOWLEDGE = "knowledge"


@dataclass(frozen=True, slots=True)
class Route:
    """The next node and, for a fallback, its fixed type and reason."""

    node: Node
    fallback_type: FallbackType | None = None
    reason: FallbackReason | None = None
    evidence_gap_only: bool = False


def _fallback(fallback_type: FallbackType, reason: FallbackReason) -> Route:
    return Route(Node.FALLBACK, fallback_type, reason)


def after_execute(executor_status: StageStatus, *, repaired: bool = False) -> Route:
    """Legal structured output goes to the Gatekeeper; anything else to the fallback (after
    the one structural repair, with that as the reason)."""
    if executor_status is StageStatus.OK:
        return Route(Node.GATEKEEP)
    reason = (FallbackReason.STRUCTURAL_REPAIR_FAILED if repaired
              else FallbackReason.EXECUTOR_INVALID_OUTPUT)
    return _fallback(FallbackType.EVIDENCE_VALIDATION_FAILED, reason)


def after_gatekeep(severity: Severity, *, repair_failed: bool = False) -> Route:
    """A reject bypasses the Verifier; a schema reject after the structural repair says so."""
    if severity is Severity.REJECT:
        reason = (FallbackReason.STRUCTURAL_REPAIR_FAILED if repair_failed
                  else FallbackReason.GATEKEEPER_REJECT)
        return _fallback(FallbackType.EVIDENCE_VALIDATION_FAILED, reason)
    return Route(Node.VERIFY)


def valid_critical_gaps(
    gaps: Sequence[EvidenceGap],
    *,
    verified_claim_ids: Collection[str],
    known_tools: Collection[str] | None = None,
) -> list[EvidenceGap]:
    """Critical gaps about verified claims, naming a known tool when they name one."""
    return [
        gap for gap in gaps
        if gap.critical
        and gap.description.strip()
        and (gap.claim_id is None or gap.claim_id in verified_claim_ids)
        and (gap.suggested_tool is None or known_tools is None or gap.suggested_tool in known_tools)
    ]


def evidence_retry_eligible(
    *,
    verdict: Verdict,
    ceiling: Verdict,
    valid_gaps: Sequence[EvidenceGap],
    evidence_retry_count: int,
) -> bool:
    """LOW_CONFID under a PASS ceiling, with a critical valid gap, and no retry yet."""
    return (
        verdict is Verdict.LOW_CONFID
        and ceiling is Verdict.PASS
        and bool(valid_gaps)
        and evidence_retry_count < MAX_EVIDENCE_RETRIES
    )


def after_verify(
    *,
    verifier_status: VerifierStatus,
    verdict: Verdict | None,
    ceiling: Verdict,
    valid_gaps: Sequence[EvidenceGap],
    evidence_retry_count: int,
    retry_supported: bool = True,
) -> Route:
    """PASS and LOW_CONFID compose (or retry once); REJECT and failures fall back."""
    if verifier_status is not VerifierStatus.COMPLETED or verdict is None:
        return _fallback(FallbackType.SEMANTIC_UNAVAILABLE, FallbackReason.VERIFIER_UNAVAILABLE)
    if verdict is Verdict.REJECT:
        return _fallback(FallbackType.SEMANTIC_UNSUPPORTED, FallbackReason.VERIFIER_REJECT)
    if retry_supported and evidence_retry_eligible(
        verdict=verdict, ceiling=ceiling, valid_gaps=valid_gaps,
        evidence_retry_count=evidence_retry_count,
    ):
        return Route(Node.PLAN, evidence_gap_only=True)
    return Route(Node.COMPOSE)


def after_compose(composer_status: StageStatus) -> Route:
    """A composed answer is finalized; a failed Composer falls back."""
    if composer_status is StageStatus.OK:
        return Route(Node.FINALIZE)
    return _fallback(FallbackType.SEMANTIC_UNAVAILABLE, FallbackReason.COMPOSER_UNAVAILABLE)
