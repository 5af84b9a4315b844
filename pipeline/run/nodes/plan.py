"""The plan node: the Planner turns the question (or, in the gap cycle, the gaps) into a plan."""

from __future__ import annotations

from models.agent import ExecutorTurn, ToolCallRequest, Transcript
from models.common import FallbackType, Intent
from models.fallback import FallbackReason
from models.invocation import LifecycleStatus, ToolInvocation
from pipeline.errors import RunFailure
from pipeline.ids import mint_tool_call_id
from pipeline.run.nodes.common import (
    Event,
    NodeContext,
    NodeInput,
    Step,
    attempt_log,
    logged,
    model_failure,
)

LOOKUP_TOOL = "search_runbooks"
"""A knowledge question's single lookup."""


def body(ctx: NodeContext, inp: NodeInput) -> Step:
    """Plan the cycle; a knowledge question also requests its one lookup call."""
    record, state = inp.head, inp.state
    pipeline = state.pipeline
    gap_mode = pipeline.evidence_retry_count > 0
    previous = None
    if state.session_id and not gap_mode:
        previous = ctx.previous_turn(record.tenant_id, state.session_id, record.run_id)
    log = attempt_log(ctx, inp)
    try:
        made = ctx.agents.planner.plan(
            pipeline.query, registry=ctx.registry, previous_turn=previous,
            gaps=list(state.retry_gaps) if gap_mode else None, log=log,
        )
    except RunFailure as exc:
        failed = model_failure(logged(state, log), exc, stage="plan",
                               reason=FallbackReason.PLANNER_UNAVAILABLE,
                               fallback_type=FallbackType.SEMANTIC_UNAVAILABLE)
        return Step(failed, [("plan", "failed", {"error": type(exc).__name__})], log.attempts)
    state = logged(state, log)
    events: list[Event] = [("plan", "completed", {
        "intent": pipeline.intent.value, "steps": [s.tool_name for s in made.steps],
        "evidence_gap_only": gap_mode, "previous_turn": previous.run_id if previous else None})]
    if pipeline.intent is Intent.KNOWLEDGE_QUERY:
        step = next((s for s in made.steps if s.tool_name == LOOKUP_TOOL), None)
        lookup = ToolCallRequest(
            tool_call_id=mint_tool_call_id(record.run_id, "lookup"), tool_name=LOOKUP_TOOL,
            arguments=step.arguments if step else {"query": pipeline.query},
        )
        transcript = Transcript(query=pipeline.query, plan=made,
                                turns=[ExecutorTurn(tool_calls=[lookup])])
        new = state.model_copy(update={"plan": made, "transcript": transcript})
        pending = ToolInvocation(tool_call_id=lookup.tool_call_id, tool_name=lookup.tool_name,
                                 arguments=lookup.arguments, status=LifecycleStatus.PROJECTING)
        return Step(new, events, log.attempts, invocations=[pending], turn=1)
    transcript = Transcript(query=pipeline.query, plan=made, previous_turn=previous,
                            gaps=list(state.retry_gaps) if gap_mode else [])
    return Step(state.model_copy(update={"plan": made, "transcript": transcript}), events,
                log.attempts)
