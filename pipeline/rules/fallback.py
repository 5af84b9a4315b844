"""Deterministic safe fallbacks: fixed types, text from filtered material only."""

from __future__ import annotations

from collections.abc import Sequence

from models.common import FallbackType
from models.composer import ComposerInput
from models.fallback import FallbackReason, SafeFallback, VerifiedSource
from models.gatekeeper import VerifiedEvidence
from pipeline.rules.rendering import render

_NOT_VALIDATED = (
    "The investigation's evidence could not be validated, so no diagnosis is given. "
    "Nothing from the unvalidated draft is shown."
)
_UNAVAILABLE = (
    "The evidence could not be checked by the Verifier, so no diagnosis is given."
)
_RETRY_ACTION = "Run the diagnosis again; if it fails the same way, inspect the run's audit."
_KNOWLEDGE_NOT_CITED = (
    "No answer is given: an answer must cite only documents the runbook lookup returned, and "
    "none could be given that does. Nothing unchecked is shown."
)
_KNOWLEDGE_UNAVAILABLE = (
    "The question could not be answered from the runbooks this time, so no answer is given."
)
_KNOWLEDGE_ACTION = "Ask the question again; if it fails the same way, inspect the run's audit."


def evidence_validation_failed(*, query: str, reason: FallbackReason) -> SafeFallback:
    """Invalid Executor output, a Gatekeeper reject or a failed repair: nothing is shown."""
    return SafeFallback(
        fallback_type=FallbackType.EVIDENCE_VALIDATION_FAILED,
        reason=reason,
        answer_summary=_NOT_VALIDATED,
        recommended_actions=[_RETRY_ACTION],
        user_facing_answer=f"Question: {query}\n\n{_NOT_VALIDATED}",
        verified_sources=[],
    )


def knowledge_fallback(
    *, query: str, fallback_type: FallbackType, reason: FallbackReason
) -> SafeFallback:
    """A knowledge question that gets no answer, in knowledge wording: an answer that does not
    hold to the lookup's documents (KNOWLEDGE_REFERENCE_INVALID), or a model that could not
    answer (KNOWLEDGE_UNAVAILABLE, a spent budget, a failed Planner)."""
    text = (_KNOWLEDGE_NOT_CITED if reason is FallbackReason.KNOWLEDGE_REFERENCE_INVALID
            else _KNOWLEDGE_UNAVAILABLE)
    return SafeFallback(
        fallback_type=fallback_type,
        reason=reason,
        answer_summary=text,
        recommended_actions=[_KNOWLEDGE_ACTION],
        user_facing_answer=f"Question: {query}\n\n{text}",
        verified_sources=[],
    )


def semantic_unsupported(
    composer_input: ComposerInput, evidence: Sequence[VerifiedEvidence]
) -> SafeFallback:
    """Effective verdict REJECT: the composer-safe answer, no conclusion."""
    return _from_composer_input(
        composer_input, evidence,
        fallback_type=FallbackType.SEMANTIC_UNSUPPORTED, reason=FallbackReason.VERIFIER_REJECT,
    )


def semantic_unavailable(
    *,
    query: str,
    reason: FallbackReason,
    composer_input: ComposerInput | None = None,
    evidence: Sequence[VerifiedEvidence] = (),
) -> SafeFallback:
    """Verifier or Composer exhausted its retries: filtered material only, if any exists."""
    if composer_input is None:
        return SafeFallback(
            fallback_type=FallbackType.SEMANTIC_UNAVAILABLE,
            reason=reason,
            answer_summary=_UNAVAILABLE,
            recommended_actions=[_RETRY_ACTION],
            user_facing_answer=f"Question: {query}\n\n{_UNAVAILABLE}",
            verified_sources=[],
        )
    return _from_composer_input(
        composer_input, evidence, fallback_type=FallbackType.SEMANTIC_UNAVAILABLE, reason=reason
    )


def _from_composer_input(
    composer_input: ComposerInput,
    evidence: Sequence[VerifiedEvidence],
    *,
    fallback_type: FallbackType,
    reason: FallbackReason,
) -> SafeFallback:
    answer = render(composer_input)
    allowed = {c.claim_id for c in composer_input.allowed_claims}
    return SafeFallback(
        fallback_type=fallback_type,
        reason=reason,
        answer_summary=answer.answer_summary,
        recommended_actions=answer.recommended_actions,
        user_facing_answer=answer.user_facing_answer,
        verified_sources=[
            VerifiedSource(claim_id=e.claim_id, invocation_id=e.invocation_id,
                           tool_name=e.tool_name, path=e.path)
            for e in evidence if e.claim_id in allowed
        ],
    )
