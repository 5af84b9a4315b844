"""The compose node: the Composer's cited statements, each held to what it cites
(`pipeline.rules.statements`); the published answer is assembled from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from models.common import Verdict
from models.composer import ComposerAudit, ComposerOutput, ComposerReply
from models.evaluation import StageStatus
from models.executor import ExecutorEvidenceV2
from models.state import PipelineState
from pipeline.errors import BudgetExceededError, GuardRejectedError, RunFailure
from pipeline.model import Model
from pipeline.rules.composer_input import build_composition
from pipeline.rules.statements import assemble, audit, check_reply
from pipeline.run.attempts import AttemptLog, call_with_retry
from pipeline.run.nodes.common import (
    NodeContext,
    NodeInput,
    Step,
    attempt_log,
    gatekeeper_of,
    logged,
)
from pipeline.serialization import canonical_bytes
from pipeline.tools.builtin import BUILTIN_TOOLS


def prepare_composition(state: PipelineState, document: Mapping[str, Any], *,
                        failures: Sequence[str] = ()) -> PipelineState:
    """Build the Composer input from the verified, checked material; record the actions the
    action guard withheld. `failures` are the errors the run's failed tool calls answered:
    part of what the run holds, so a gap may say why a call failed in their words."""
    assert state.verifier_output is not None and state.effective_verdict is not None
    composition = build_composition(
        query=state.query,
        verdict=state.effective_verdict,
        claims=gatekeeper_of(state).verified_output.claims,
        checks=state.claim_checks,
        gaps=state.evidence_gaps,
        executor_output=ExecutorEvidenceV2.model_validate(document),
        rationale=state.verifier_output.rationale,
        runbook_steps=state.runbook_steps,
        evidence=[*(e.matched_text for e in gatekeeper_of(state).verified_evidence),
                  *sorted({e.tool_name for e in gatekeeper_of(state).verified_evidence}
                          | {t.name for t in BUILTIN_TOOLS}), *failures],
        # worded from outputs it does not cite: a reading a check report may grant, but not
        # words Verity states as its own
        unsaid={*gatekeeper_of(state).unsaid, *gatekeeper_of(state).worded_elsewhere},
    )
    return state.model_copy(update={"composer_input": composition.composer_input,
                                    "withheld_actions": composition.withheld_actions})


def compose_node(
    state: PipelineState, *, composer: Model, log: AttemptLog
) -> PipelineState:
    """Call the Composer; its reply is cited statements, each held to what it cites
    (`pipeline.rules.statements`). The published answer is assembled from them; a reply with a
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


def body(ctx: NodeContext, inp: NodeInput) -> Step:
    """Call the Composer on the filtered material; its guard refuses facts absent from it."""
    log = attempt_log(ctx, inp)
    pipeline = compose_node(inp.state.pipeline, composer=ctx.agents.composer, log=log)
    state = logged(inp.state, log).model_copy(update={"pipeline": pipeline})
    return Step(state, [("compose", "completed", {
        "composer_status": pipeline.composer_status.value})], log.attempts)
