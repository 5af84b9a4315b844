"""The execute node: one step of the Executor loop.

A step either asks for tool calls (stored as PROJECTING rows; they fan out as one chord and the
node runs again with their results) or returns the final output, which gets the one no-tool
structural repair if it fails initial validation, and is then parsed. In the gap cycle the
parsed output supplements the first cycle's verified claims (`pipeline.rules.evidence_retry`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from models.agent import ExecutorTurn, ToolCallRequest, Transcript
from models.common import FallbackType
from models.fallback import FallbackReason
from models.invocation import LifecycleStatus, ToolInvocation
from pipeline.errors import RunFailure
from pipeline.rules.evidence_retry import supplement
from pipeline.run.attempts import AttemptLog
from pipeline.run.nodes.common import (
    Event,
    NodeContext,
    NodeInput,
    Step,
    attempt_log,
    logged,
    model_failure,
)
from pipeline.run.nodes.gatekeep import parse_node, structural_problems


def body(ctx: NodeContext, inp: NodeInput) -> Step:
    """Ask the Executor for its next step, with every result of the calls it asked for."""
    state = inp.state
    assert state.transcript is not None
    transcript = with_results(state.transcript, inp.invocations)
    log = attempt_log(ctx, inp)
    try:
        step = ctx.agents.executor.step(transcript, registry=ctx.registry, log=log)
    except RunFailure as exc:
        failed = model_failure(logged(state, log), exc, stage="execute",
                               reason=FallbackReason.EXECUTOR_UNAVAILABLE,
                               fallback_type=FallbackType.EVIDENCE_VALIDATION_FAILED)
        return Step(failed, [("execute", "failed", {"error": type(exc).__name__})],
                    log.attempts)
    state = logged(state, log)
    events: list[Event] = []
    for own_id, presented in step.refused_duplicates.items():  # refused by the agent itself
        events.append(_duplicate_event(presented, own_id=own_id))
    fresh = unique_calls(step.tool_calls, {i.tool_call_id for i in inp.invocations}, events)
    more_turns = len(transcript.turns) < ctx.settings.executor_max_turns
    if step.final_output is None and fresh and more_turns:
        stored = state.transcript
        assert stored is not None
        turns = [*stored.turns, ExecutorTurn(
            tool_calls=fresh, assistant_content=step.assistant_content, not_run=step.not_run,
            refused_duplicates=step.refused_duplicates)]
        pending = [ToolInvocation(tool_call_id=c.tool_call_id, tool_name=c.tool_name,
                                  arguments=c.arguments, status=LifecycleStatus.PROJECTING)
                   for c in fresh]
        events.append(("execute", "tool_calls", {
            "turn": len(turns), "tools": [c.tool_name for c in fresh]}))
        new = state.model_copy(update={"transcript": stored.model_copy(update={"turns": turns})})
        return Step(new, events, log.attempts, invocations=pending, turn=len(turns))
    raw, repaired = _structural_repair(ctx, transcript, step.final_output or "", log=log,
                                       events=events)
    state = logged(state, log)
    pipeline, document = parse_node(state.pipeline, raw)
    pipeline = pipeline.model_copy(update={"structural_repair": repaired})
    if document is not None and state.carried is not None:
        raw = json.dumps(supplement(state.carried, document), ensure_ascii=False)
        events.append(("execute", "supplemented", {
            "carried_claims": len(state.carried.get("claims", [])),
            "new_claims": len(document.get("claims", []))}))
    events.append(("execute", "completed", {
        "executor_status": pipeline.executor_status.value,
        "parse_failure": pipeline.parse_failure, "turns": len(transcript.turns)}))
    return Step(state.model_copy(update={"pipeline": pipeline}), events, log.attempts,
                executor_output_raw=raw)


def unique_calls(
    calls: Sequence[ToolCallRequest], used: set[str], events: list[Event]
) -> list[ToolCallRequest]:
    """The calls to run: a tool_call_id seen before in the run, or twice in this turn, is the
    second action of that id — an error that never overwrites the first (harness-contracts);
    each one is recorded as an event naming the id."""
    seen = set(used)
    fresh = []
    for call in calls:
        if call.tool_call_id in seen:
            events.append(_duplicate_event(call.tool_call_id, tool_name=call.tool_name))
            continue
        seen.add(call.tool_call_id)
        fresh.append(call)
    return fresh


def _duplicate_event(tool_call_id: str, *, tool_name: str | None = None,
                     own_id: str | None = None) -> Event:
    payload: dict[str, str | None] = {"tool_call_id": tool_call_id, "tool_name": tool_name}
    if own_id is not None:
        payload["answered_as"] = own_id  # the is_error result the model got names it
    payload["error"] = (f"duplicate tool_call_id {tool_call_id!r}: the second action is "
                        "refused and the first invocation kept")
    return ("execute", "duplicate_tool_call", payload)


def _structural_repair(
    ctx: NodeContext, transcript: Transcript, raw: str, *, log: AttemptLog, events: list[Event]
) -> tuple[str, bool]:
    """The single no-tool structural repair: an output that fails initial validation goes back
    to the Executor once, with what was wrong. Returns the output to keep and whether a repair
    was asked for; a repair that fails to come back keeps the original output."""
    problems = structural_problems(raw)
    if not problems:
        return raw, False
    try:
        repaired = ctx.agents.executor.repair(transcript, raw, problems, log=log)
    except RunFailure as exc:
        events.append(("execute", "structural_repair", {
            "problems": len(problems), "error": type(exc).__name__}))
        return raw, True
    if repaired is None:
        return raw, False
    left = structural_problems(repaired)
    events.append(("execute", "structural_repair", {
        "problems": len(problems), "problems_left": len(left)}))
    return repaired, True


def with_results(transcript: Transcript, invocations: Sequence[ToolInvocation]) -> Transcript:
    """The transcript with each turn's calls paired with their stored invocations."""
    by_id = {i.tool_call_id: i for i in invocations}
    turns = [
        turn.model_copy(update={"results": [by_id[c.tool_call_id] for c in turn.tool_calls
                                            if c.tool_call_id in by_id]})
        for turn in transcript.turns
    ]
    return transcript.model_copy(update={"turns": turns})
