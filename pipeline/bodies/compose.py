"""The compose and fallback nodes: the guarded answer, or the fixed safe fallback."""

from __future__ import annotations

from models.state import NextStep
from pipeline import nodes
from pipeline.bodies.common import NodeContext, NodeInput, Step, attempt_log, logged
from pipeline.routing import Node, Route


def compose(ctx: NodeContext, inp: NodeInput) -> Step:
    """Call the Composer on the filtered material; its guard refuses facts absent from it."""
    log = attempt_log(ctx, inp)
    pipeline = nodes.compose_node(inp.state.pipeline, composer=ctx.agents.composer, log=log)
    state = logged(inp.state, log).model_copy(update={"pipeline": pipeline})
    return Step(state, [("compose", "completed", {
        "composer_status": pipeline.composer_status.value})], log.attempts)


def fallback(ctx: NodeContext, inp: NodeInput) -> Step:
    """The deterministic fallback of the type and reason the run was routed here with."""
    step: NextStep | None = inp.state.next
    assert step is not None
    route = Route(Node.FALLBACK, step.fallback_type, step.reason)
    pipeline = nodes.fallback_node(inp.state.pipeline, route)
    return Step(inp.state.model_copy(update={"pipeline": pipeline}), [("fallback", "completed", {
        "fallback_type": route.fallback_type.value if route.fallback_type else None,
        "reason": route.reason.value if route.reason else None})])
