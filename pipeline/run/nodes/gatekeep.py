"""The gatekeep node: the Executor's output parsed, then every evidence binding checked against
the run's stored invocations (the Gatekeeper, `pipeline.rules.gatekeeper`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from models.evaluation import StageStatus
from models.invocation import ToolInvocation
from models.state import PipelineState
from pipeline.rules.actions import runbook_steps
from pipeline.rules.derived import derived
from pipeline.rules.executor_output import parse_executor_output
from pipeline.rules.gatekeeper import gatekeep, schema_problems
from pipeline.rules.guards import unsaid_words
from pipeline.rules.verdict import imported_ceiling
from pipeline.rules.verifier_input import mark_untrusted
from pipeline.run.nodes.common import (
    NodeContext,
    NodeInput,
    Step,
    document,
)


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
    reading = derived(outcome, invocations)
    wording = unsaid_words(outcome, invocations, allowed=reading.allowed)
    outcome = outcome.model_copy(update={
        "verified_evidence": mark_untrusted(outcome.verified_evidence, invocations),
        "unsaid": wording.unsaid, "worded_elsewhere": wording.elsewhere,
        "belied": reading.belied})
    if state.unverifiable_critical:
        warnings = [*outcome.result.warnings, *(
            f"critical claim {claim_id} of the imported answer: no tool output states its "
            "facts; not verifiable" for claim_id in state.unverifiable_critical)]
        outcome = outcome.model_copy(update={
            "result": outcome.result.model_copy(update={"warnings": warnings})})
    update: dict[str, Any] = {
        "gatekeeper": outcome,
        "verdict_ceiling": imported_ceiling(outcome.result.severity.ceiling,
                                            state.unverifiable_critical),
        "runbook_steps": runbook_steps(outcome.verified_evidence, invocations),
    }
    if outcome.result.severity.ceiling is None:
        update["failure_stage"] = "gatekeep"
    return state.model_copy(update=update)


def body(ctx: NodeContext, inp: NodeInput) -> Step:
    """Check every evidence binding against the run's stored invocations."""
    pipeline = gatekeep_node(inp.state.pipeline, document(inp.head.run_id, inp.raw_output),
                                   inp.invocations)
    assert pipeline.gatekeeper is not None
    result = pipeline.gatekeeper.result
    return Step(inp.state.model_copy(update={"pipeline": pipeline}), [("gatekeep", "completed", {
        "severity": result.severity.value, "failed_rules": [r.value for r in result.failed_rules],
        "bindings": len(result.checked_bindings)})])
