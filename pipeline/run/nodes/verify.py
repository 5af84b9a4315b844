"""The verify node: the Verifier on the verified-only input, its checks held to the evidence
(`pipeline.rules.guards`), the verdict by rule, and the Composer's input when there is one."""

from __future__ import annotations

from models.evaluation import VerifierStatus
from models.state import PipelineState
from models.verifier import VerifierOutput
from pipeline.errors import BudgetExceededError, RunFailure
from pipeline.model import Model
from pipeline.rules.guards import post_check
from pipeline.rules.verdict import effective_verdict
from pipeline.rules.verifier_input import build_verifier_input
from pipeline.run.attempts import AttemptLog, call_with_retry
from pipeline.run.nodes.common import (
    NodeContext,
    NodeInput,
    Step,
    attempt_log,
    document,
    gatekeeper_of,
    logged,
)
from pipeline.run.nodes.compose import prepare_composition
from pipeline.serialization import canonical_bytes, sha256_hex


def verify_node(
    state: PipelineState, *, verifier: Model, log: AttemptLog
) -> PipelineState:
    """Call the Verifier on the verified-only input, post-check it, compute the verdict."""
    outcome = gatekeeper_of(state)
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
    checked = post_check(output, verifier_input, unsaid=outcome.unsaid,
                         elsewhere=outcome.worded_elsewhere, belied=outcome.belied)
    assert state.verdict_ceiling is not None
    verdict = effective_verdict(
        output.verdict, claims=outcome.verified_output.claims, checks=checked.claim_checks,
        ceiling=state.verdict_ceiling, groundedness_score=output.groundedness_score,
        worded_beyond=outcome.unsaid,
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


def body(ctx: NodeContext, inp: NodeInput) -> Step:
    """Call the Verifier on the verified-only input, post-check it, compute the verdict and,
    when there is one, the Composer's input."""
    log = attempt_log(ctx, inp)
    pipeline = verify_node(inp.state.pipeline, verifier=ctx.agents.verifier, log=log)
    if pipeline.effective_verdict is not None:
        pipeline = prepare_composition(
            pipeline, document(inp.head.run_id, inp.raw_output),
            failures=[i.error for i in inp.invocations if i.error])
    state = logged(inp.state, log).model_copy(update={"pipeline": pipeline})
    return Step(state, [("verify", "completed", {
        "verifier_status": pipeline.verifier_status.value,
        "effective_verdict": pipeline.effective_verdict.value
        if pipeline.effective_verdict else None,
        "cycle": pipeline.evidence_retry_count,
        "withheld_actions": len(pipeline.withheld_actions)})], log.attempts)
