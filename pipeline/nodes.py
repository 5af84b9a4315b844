"""The deterministic node bodies: each takes the state and returns it with its output added.

They import no broker and no database: the Celery tasks and `verity verify` drive the same
functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from models.common import Intent, Verdict
from models.composer import ComposerAudit, ComposerOutput, ComposerReply
from models.evaluation import StageStatus, VerifierStatus
from models.executor import ExecutorEvidenceV2
from models.fallback import FallbackReason
from models.gatekeeper import GatekeeperOutcome
from models.invocation import ToolInvocation
from models.state import PipelineState
from models.verifier import VerifierOutput
from pipeline import fallback as fallbacks
from pipeline.actions import runbook_steps
from pipeline.agents.base import SingleTurnModel
from pipeline.attempts import AttemptLog, call_with_retry
from pipeline.composer_input import build_composition
from pipeline.errors import BudgetExceededError, GuardRejectedError, RunFailure
from pipeline.executor_output import parse_executor_output
from pipeline.gatekeeper import gatekeep, schema_problems
from pipeline.guards import post_check, unsaid_words
from pipeline.routing import Route
from pipeline.serialization import canonical_bytes, sha256_hex
from pipeline.statements import assemble, audit, check_reply
from pipeline.tools.builtin import BUILTIN_TOOLS
from pipeline.verdict import effective_verdict
from pipeline.verifier_input import build_verifier_input, mark_untrusted


def parse_node(state: PipelineState, raw: str) -> tuple[PipelineState, dict[str, Any] | None]:
    """Classify the Executor's raw output: OK with its document, or INVALID_OUTPUT."""
    parsed = parse_executor_output(raw)
    if parsed.ok:
        return state.model_copy(update={"executor_status": StageStatus.OK}), parsed.document
    update = {
        "executor_status": StageStatus.INVALID_OUTPUT,
        "parse_failure": parsed.failure.value if parsed.failure else None,
        "failure_stage": "execute",
    }
    return state.model_copy(update=update), None


def structural_problems(raw: str) -> list[str]:
    """Why the Executor's raw output fails initial validation (parse, then
    `schema.executor_v2`); empty when it passes. What the structural repair is told."""
    parsed = parse_executor_output(raw)
    if parsed.document is None:
        reason = parsed.failure.value if parsed.failure else "unreadable"
        return [f"not an executor_evidence_v2 JSON object ({reason})"]
    return schema_problems(parsed.document)


def gatekeep_node(
    state: PipelineState, document: Mapping[str, Any], invocations: Sequence[ToolInvocation]
) -> PipelineState:
    """Run the Gatekeeper and mark the evidence that reads as instructions to an agent; a
    reject records its failure stage."""
    outcome = gatekeep(document, invocations)
    outcome = outcome.model_copy(update={
        "verified_evidence": mark_untrusted(outcome.verified_evidence, invocations),
        "unsaid": unsaid_words(outcome, invocations)})
    update: dict[str, Any] = {
        "gatekeeper": outcome,
        "verdict_ceiling": outcome.result.severity.ceiling,
        "runbook_steps": runbook_steps(outcome.verified_evidence, invocations),
    }
    if outcome.result.severity.ceiling is None:
        update["failure_stage"] = "gatekeep"
    return state.model_copy(update=update)


def verify_node(
    state: PipelineState, *, verifier: SingleTurnModel, log: AttemptLog
) -> PipelineState:
    """Call the Verifier on the verified-only input, post-check it, compute the verdict."""
    outcome = _gatekeeper(state)
    verifier_input = build_verifier_input(
        outcome, query=state.query, intent=state.intent, retry_context=state.retry_context
    )
    payload = canonical_bytes(verifier_input)
    base = {"verifier_input_sha256": sha256_hex(payload)}
    try:
        output = call_with_retry(
            verifier, role="verifier", payload=payload,
            parse=VerifierOutput.model_validate_json, log=log, cycle=state.evidence_retry_count,
        )
    except RunFailure as exc:
        update = {**base, "verifier_status": VerifierStatus.FAILED, "failure_stage": "verify",
                  "budget_exceeded": isinstance(exc, BudgetExceededError)}
        return state.model_copy(update=update)
    checked = post_check(output, verifier_input, unsaid=outcome.unsaid)
    assert state.verdict_ceiling is not None
    verdict = effective_verdict(
        output.verdict, claims=outcome.verified_output.claims, checks=checked.claim_checks,
        ceiling=state.verdict_ceiling, groundedness_score=output.groundedness_score,
    )
    return state.model_copy(update={
        **base,
        "verifier_status": VerifierStatus.COMPLETED,
        "verifier_output": output,
        "claim_checks": checked.claim_checks,
        "evidence_gaps": checked.evidence_gaps,
        "downgrades": checked.downgrades,
        "effective_verdict": verdict,
    })


def prepare_composition(state: PipelineState, document: Mapping[str, Any]) -> PipelineState:
    """Build the Composer input from the verified, checked material; record the actions the
    action guard withheld."""
    assert state.verifier_output is not None and state.effective_verdict is not None
    composition = build_composition(
        query=state.query,
        verdict=state.effective_verdict,
        claims=_gatekeeper(state).verified_output.claims,
        checks=state.claim_checks,
        gaps=state.evidence_gaps,
        executor_output=ExecutorEvidenceV2.model_validate(document),
        rationale=state.verifier_output.rationale,
        runbook_steps=state.runbook_steps,
        evidence=[*(e.matched_text for e in _gatekeeper(state).verified_evidence),
                  *sorted({e.tool_name for e in _gatekeeper(state).verified_evidence}
                          | {t.name for t in BUILTIN_TOOLS})],
        unsaid=_gatekeeper(state).unsaid,
    )
    return state.model_copy(update={"composer_input": composition.composer_input,
                                    "withheld_actions": composition.withheld_actions})


def compose_node(
    state: PipelineState, *, composer: SingleTurnModel, log: AttemptLog
) -> PipelineState:
    """Call the Composer; its reply is cited statements, each held to what it cites
    (`pipeline.statements`). The published answer is assembled from them; a reply with a
    statement that fails takes the technical retry, then the fallback. The audit of the last
    reply (what it cited, what was refused and why) is kept either way."""
    composer_input = state.composer_input
    assert composer_input is not None and composer_input.verdict is not Verdict.REJECT
    last: list[ComposerAudit] = []

    def parse(text: str) -> ComposerOutput:
        try:
            reply = ComposerReply.model_validate_json(text)
        except ValidationError:
            last.append(ComposerAudit(status="invalid", statements=0, accepted=0))
            raise
        checked = check_reply(reply, composer_input)
        last.append(audit(checked))
        refused = next((c for c in checked if not c.accepted), None)
        if refused is not None:
            raise GuardRejectedError(
                f"composer {refused.field}[{refused.index}] {refused.problem}")
        return assemble(composer_input, checked)

    try:
        output = call_with_retry(
            composer, role="composer", payload=canonical_bytes(composer_input), parse=parse,
            log=log, cycle=state.evidence_retry_count,
        )
    except RunFailure as exc:
        return state.model_copy(update={
            "composer_status": StageStatus.FAILED, "failure_stage": "compose",
            "composer_audit": last[-1] if last else None,
            "budget_exceeded": isinstance(exc, BudgetExceededError)})
    return state.model_copy(update={"composer_status": StageStatus.OK, "composer_output": output,
                                    "composer_audit": last[-1] if last else None})


def fallback_node(state: PipelineState, route: Route) -> PipelineState:
    """The deterministic fallback for the route's fixed type."""
    assert route.fallback_type is not None and route.reason is not None
    if state.intent is Intent.KNOWLEDGE_QUERY and state.gatekeeper is None:  # knowledge path
        return state.model_copy(update={"fallback": fallbacks.knowledge_fallback(
            query=state.query, fallback_type=route.fallback_type, reason=route.reason)})
    evidence = state.gatekeeper.verified_evidence if state.gatekeeper else []
    if route.reason is FallbackReason.VERIFIER_REJECT:
        assert state.composer_input is not None
        result = fallbacks.semantic_unsupported(state.composer_input, evidence)
    elif route.reason in _UNAVAILABLE:
        result = fallbacks.semantic_unavailable(
            query=state.query, reason=route.reason,
            composer_input=state.composer_input, evidence=evidence,
        )
    else:
        result = fallbacks.evidence_validation_failed(query=state.query, reason=route.reason)
    return state.model_copy(update={"fallback": result})


_UNAVAILABLE = frozenset({
    FallbackReason.VERIFIER_UNAVAILABLE, FallbackReason.COMPOSER_UNAVAILABLE,
    FallbackReason.BUDGET_EXCEEDED, FallbackReason.PLANNER_UNAVAILABLE,
})


def _gatekeeper(state: PipelineState) -> GatekeeperOutcome:
    if state.gatekeeper is None:
        raise ValueError("the Gatekeeper has not run")
    return state.gatekeeper

