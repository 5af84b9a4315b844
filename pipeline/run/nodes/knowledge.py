"""The knowledge node: one answer from the single runbook lookup, citing returned documents.

Its fallbacks (knowledge wording, `pipeline.rules.fallback.knowledge_fallback`) say why: an answer
that cites what the lookup did not return is KNOWLEDGE_REFERENCE_INVALID, also when the model
kept doing so through its retries; a model that could not answer (provider down, invalid
output after retries) is KNOWLEDGE_UNAVAILABLE; a spent token budget is BUDGET_EXCEEDED, as
for every role.
"""

from __future__ import annotations

from models.agent import KnowledgeAnswer
from models.common import FallbackType
from models.composer import ComposerOutput
from models.evaluation import StageStatus
from models.fallback import FallbackReason
from models.invocation import LifecycleStatus
from pipeline.errors import AttemptsExhaustedError, GuardRejectedError, RunFailure
from pipeline.run.nodes.common import (
    NodeContext,
    NodeInput,
    Step,
    attempt_log,
    find,
    logged,
    model_failure,
)

NODE = "knowledge"


def body(ctx: NodeContext, inp: NodeInput) -> Step:
    """Answer from the lookup; the answer's document references are validated."""
    state = inp.state
    assert state.transcript is not None
    lookup = find(inp.invocations, state.transcript.turns[0].tool_calls[0].tool_call_id)
    pipeline = state.pipeline.model_copy(update={"executor_status": StageStatus.OK})
    answer: KnowledgeAnswer | None = None
    errors = ["the lookup call did not complete"]
    log = attempt_log(ctx, inp)
    if lookup is not None and lookup.status is LifecycleStatus.READY:
        try:
            answer = ctx.agents.knowledge.answer(pipeline.query, lookup, log=log)
        except RunFailure as exc:
            reason, fallback_type = failure_reason(exc)
            failed = model_failure(logged(state, log), exc, stage=NODE, reason=reason,
                                   fallback_type=fallback_type)
            return Step(failed, [(NODE, "failed", {"error": type(exc).__name__})], log.attempts)
        errors = ctx.agents.validate_knowledge(answer, lookup)
    state = logged(state, log)
    if errors or answer is None:
        pipeline = pipeline.model_copy(update={"failure_stage": NODE})
    else:
        pipeline = pipeline.model_copy(update={
            "composer_status": StageStatus.OK, "composer_output": _knowledge_output(answer)})
    new = state.model_copy(update={"pipeline": pipeline, "knowledge": answer,
                                   "knowledge_errors": errors})
    return Step(new, [(NODE, "completed", {"errors": errors})], log.attempts)


def failure_reason(exc: RunFailure) -> tuple[FallbackReason, FallbackType]:
    """Why a knowledge answerer that raised gives no answer, by error type: its citation guard
    refused every attempt (the exhaustion's cause), or it could not answer at all."""
    refused = isinstance(exc, GuardRejectedError) or (
        isinstance(exc, AttemptsExhaustedError) and isinstance(exc.__cause__, GuardRejectedError))
    if refused:
        return FallbackReason.KNOWLEDGE_REFERENCE_INVALID, FallbackType.EVIDENCE_VALIDATION_FAILED
    return FallbackReason.KNOWLEDGE_UNAVAILABLE, FallbackType.SEMANTIC_UNAVAILABLE


def _knowledge_output(answer: KnowledgeAnswer) -> ComposerOutput:
    lines = [f"- {item.text} [{', '.join(item.document_ids)}]" for item in answer.items]
    return ComposerOutput(
        answer_summary=answer.items[0].text,
        recommended_actions=[],
        user_facing_answer="From the runbooks:\n" + "\n".join(lines),
    )
