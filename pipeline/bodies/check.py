"""The gatekeep and verify nodes: the deterministic binding checks, then the Verifier."""

from __future__ import annotations

from pipeline import nodes
from pipeline.bodies.common import NodeContext, NodeInput, Step, attempt_log, document, logged


def gatekeep(ctx: NodeContext, inp: NodeInput) -> Step:
    """Check every evidence binding against the run's stored invocations."""
    pipeline = nodes.gatekeep_node(inp.state.pipeline, document(inp.head.run_id, inp.raw_output),
                                   inp.invocations)
    assert pipeline.gatekeeper is not None
    result = pipeline.gatekeeper.result
    return Step(inp.state.model_copy(update={"pipeline": pipeline}), [("gatekeep", "completed", {
        "severity": result.severity.value, "failed_rules": [r.value for r in result.failed_rules],
        "bindings": len(result.checked_bindings)})])


def verify(ctx: NodeContext, inp: NodeInput) -> Step:
    """Call the Verifier on the verified-only input, post-check it, compute the verdict and,
    when there is one, the Composer's input."""
    log = attempt_log(ctx, inp)
    pipeline = nodes.verify_node(inp.state.pipeline, verifier=ctx.agents.verifier, log=log)
    if pipeline.effective_verdict is not None:
        pipeline = nodes.prepare_composition(pipeline, document(inp.head.run_id, inp.raw_output))
    state = logged(inp.state, log).model_copy(update={"pipeline": pipeline})
    return Step(state, [("verify", "completed", {
        "verifier_status": pipeline.verifier_status.value,
        "effective_verdict": pipeline.effective_verdict.value
        if pipeline.effective_verdict else None,
        "cycle": pipeline.evidence_retry_count,
        "withheld_actions": len(pipeline.withheld_actions)})], log.attempts)
