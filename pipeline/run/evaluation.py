"""Mapping a finished pipeline state onto `self_evaluation` and the run result."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from models.bundle import FinalAnswer, RunResult
from models.evaluation import (
    TRACEABILITY_VERSION,
    PromptUse,
    SelfEvaluation,
    StageStatus,
    VerifierEvaluation,
    VerifierStatus,
)
from models.invocation import ToolInvocation
from models.state import PipelineState
from pipeline.prompts import prompt_audit
from pipeline.rules.verdict import facts_checked

RULESET_VERSION = "verity.rules.v2"


def verifier_evaluation(
    state: PipelineState, *, prompts_used: Sequence[PromptUse] | None = None
) -> VerifierEvaluation:
    """Exactly the spec's fields; verdicts only when the Verifier completed. `prompts_used`
    (what the run's model attempts used, `pipeline.prompts.prompts_used`) goes into the prompt
    audit beside the catalog."""
    completed = state.verifier_status is VerifierStatus.COMPLETED
    output = state.verifier_output if completed else None
    outcome = state.gatekeeper
    fallback = state.fallback
    return VerifierEvaluation(
        executor_status=state.executor_status,
        verifier_status=state.verifier_status,
        model_verdict=output.verdict if output else None,
        effective_verdict=state.effective_verdict if completed else None,
        verdict=state.effective_verdict if completed else None,
        verdict_ceiling=state.verdict_ceiling,
        groundedness_score=output.groundedness_score if output else None,
        rationale=output.rationale if output else None,
        claim_checks=state.claim_checks,
        # always the fixed mapping of the post-checked claim checks: a model-provided list
        # could name dropped claims or keep a class the post-check downgraded
        facts_checked=facts_checked(state.claim_checks) if output else [],
        evidence_gaps=state.evidence_gaps,
        downgrades=state.downgrades,
        executor_structured_output=outcome.verified_output if outcome else None,
        verified_evidence=outcome.verified_evidence if outcome else [],
        gatekeeper_result=outcome.result if outcome else None,
        composer_status=state.composer_status,
        composer_output=state.composer_output,
        composer_audit=state.composer_audit,
        prompt_audit=prompt_audit(prompts_used),
        traceability_version=TRACEABILITY_VERSION,
        evidence_retry_count=state.evidence_retry_count,
        fallback_type=fallback.fallback_type if fallback else None,
        failure_stage=state.failure_stage,
        failure_reason=fallback.reason if fallback else None,
    )


def rule_evaluation(state: PipelineState) -> dict[str, Any]:
    """The deterministic rule channel: Gatekeeper outcome, ceiling and post-check changes."""
    result = state.gatekeeper.result if state.gatekeeper else None
    return {
        "ruleset": RULESET_VERSION,
        "executor_status": state.executor_status.value,
        "parse_failure": state.parse_failure,
        "gatekeeper_status": result.status if result else None,
        "gatekeeper_severity": result.severity.value if result else None,
        "failed_rules": [r.value for r in result.failed_rules] if result else [],
        "verdict_ceiling": state.verdict_ceiling.value if state.verdict_ceiling else None,
        "downgrades": len(state.downgrades),
        "untrusted_evidence": [e.evidence_id for e in state.gatekeeper.verified_evidence
                               if e.untrusted] if state.gatekeeper else [],
        # positions and reasons, not texts: an action may repeat a claim that failed its checks
        "withheld_actions": [{"index": w.index, "reason": w.reason}
                             for w in state.withheld_actions],
    }


def aiops_rule_evaluation(invocations: Sequence[ToolInvocation]) -> dict[str, Any]:
    """The invocation statistics channel."""
    lifecycle = Counter(inv.status.value for inv in invocations)
    evidence = Counter(inv.evidence_status.value for inv in invocations if inv.evidence_status)
    return {
        "invocations": len(invocations),
        "lifecycle": dict(sorted(lifecycle.items())),
        "evidence": dict(sorted(evidence.items())),
        "truncated": sum(1 for inv in invocations if inv.projection and inv.projection.truncated),
        "tools": sorted({inv.tool_name for inv in invocations}),
    }


def run_result(
    run_id: str, state: PipelineState, invocations: Sequence[ToolInvocation], *,
    prompts_used: Sequence[PromptUse] | None = None,
) -> RunResult:
    """The released outcome: SUCCESS with the composed answer, or FALLBACK with its text.
    `prompts_used`: what the run's model attempts used (`RuntimeState.prompts_used`)."""
    evaluation = SelfEvaluation(
        rule_evaluation=rule_evaluation(state),
        aiops_rule_evaluation=aiops_rule_evaluation(invocations),
        verifier_evaluation=verifier_evaluation(state, prompts_used=prompts_used),
    )
    completed = state.verifier_status is VerifierStatus.COMPLETED
    verdict = state.effective_verdict if completed else None
    if state.fallback is None and state.composer_status is StageStatus.OK:
        assert state.composer_output is not None
        answer = FinalAnswer(**state.composer_output.model_dump())
        return RunResult(run_id=run_id, status="SUCCESS", verdict=verdict, fallback_type=None,
                         final_answer=answer, self_evaluation=evaluation)
    if state.fallback is None:
        raise ValueError("a run ends with a composed answer or a fallback")
    fallback = state.fallback
    answer = FinalAnswer(answer_summary=fallback.answer_summary,
                         recommended_actions=fallback.recommended_actions,
                         user_facing_answer=fallback.user_facing_answer)
    return RunResult(run_id=run_id, status="FALLBACK", verdict=verdict,
                     fallback_type=fallback.fallback_type, final_answer=answer,
                     self_evaluation=evaluation)
