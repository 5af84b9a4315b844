"""The fallback node: the fixed safe fallback of the type and reason the run was routed with."""

from __future__ import annotations

from models.common import Intent
from models.fallback import FallbackReason
from models.state import NextStep, PipelineState
from pipeline.rules import fallback as fallbacks
from pipeline.rules.routing import Node, Route
from pipeline.run.nodes.common import (
    NodeContext,
    NodeInput,
    Step,
)


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


def body(ctx: NodeContext, inp: NodeInput) -> Step:
    """The deterministic fallback of the type and reason the run was routed here with."""
    step: NextStep | None = inp.state.next
    assert step is not None
    route = Route(Node.FALLBACK, step.fallback_type, step.reason)
    pipeline = fallback_node(inp.state.pipeline, route)
    return Step(inp.state.model_copy(update={"pipeline": pipeline}), [("fallback", "completed", {
        "fallback_type": route.fallback_type.value if route.fallback_type else None,
        "reason": route.reason.value if route.reason else None})])
