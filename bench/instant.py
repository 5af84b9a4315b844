"""A runtime whose node bodies return at once: the cost measured is the runtime's own
(coordinator, store persistence, the tool chord), not the agents' nor the deterministic
nodes'. Loaded by workers through VERITY_RUNTIME_FACTORY=bench.instant:build_runtime.

Every node still reads its input and commits its output under the run's version; the bodies
only decide the next step: plan -> execute (asks for TOOL_CALLS noop tools, one chord) ->
execute -> gatekeep -> verify -> compose -> finalize.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from models.agent import (
    ExecutorStep,
    ExecutorTurn,
    Plan,
    PlanStep,
    ToolCallRequest,
    Transcript,
)
from models.common import Intent
from models.composer import ComposerOutput
from models.evaluation import StageStatus
from models.invocation import LifecycleStatus, QueryScope, ToolInvocation
from models.state import NextStep
from pipeline.agents.protocols import Agents
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.ids import mint_tool_call_id
from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.run.graph import GRAPH, Graph
from pipeline.run.nodes.common import NodeContext, NodeInput, Step
from pipeline.run.runtime import Runtime
from pipeline.store import open_store
from pipeline.tools.registry import Tool, ToolRegistry
from pipeline.tools.source import ArgsModel, ToolOutput

TOOL_CALLS = 3
"""Tool calls per run: one chord of this many tool tasks."""


class NoopArgs(ArgsModel):
    """Which call this is."""

    index: int = 0


def _noop(_source: Any, args: NoopArgs) -> ToolOutput:
    return ToolOutput(result={"hits": [{"message": f"noop {args.index} ok"}]},
                      scope=QueryScope(service="bench-service"), found=True)


NOOP = Tool(name="noop", description="Returns at once.", arguments=NoopArgs, function=_noop)


class InstantPlanner:
    def plan(self, query: str, *, registry: ToolRegistry, **_: Any) -> Plan:
        steps = [PlanStep(tool_name="noop", arguments={"index": i}, reason="bench")
                 for i in range(TOOL_CALLS)]
        return Plan(intent=Intent.DIAGNOSIS, service="bench-service", steps=steps)


class InstantExecutor:
    def step(self, transcript: Transcript, *, registry: ToolRegistry) -> ExecutorStep:
        if not transcript.turns:
            return ExecutorStep(tool_calls=[
                ToolCallRequest(tool_call_id=mint_tool_call_id(transcript.query, i),
                                tool_name=s.tool_name, arguments=s.arguments)
                for i, s in enumerate(transcript.plan.steps)])
        calls = transcript.turns[0].tool_calls
        claims = [{
            "claim_id": f"c{i}", "text": f"noop {i} ok", "kind": "FINDING", "critical": True,
            "status": "CONFIRMED", "evidence_bindings": [{
                "invocation_id": call.tool_call_id, "tool_name": "noop",
                "path": "$.hits[0].message", "matched_text": f"noop {i} ok"}],
        } for i, call in enumerate(calls)]
        return ExecutorStep(final_output=json.dumps({"claims": claims}))

    def repair(self, *_: Any, **__: Any) -> None:
        return None


class InstantVerifier:
    model = "instant-verifier"

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        ids = [c["claim_id"] for c in
               json.loads(payload)["verified_executor_output"]["claims"]]
        return ModelReply(text=json.dumps({
            "verdict": "PASS", "groundedness_score": 1.0, "rationale": "instant",
            "claim_checks": [{"claim_id": i, "verification": "direct_observation"}
                             for i in ids]}))


class InstantComposer:
    model = "instant-composer"

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        return ModelReply(text=json.dumps({
            "answer_summary": "noop ok", "recommended_actions": [],
            "user_facing_answer": "noop ok"}))


def _plan(ctx: NodeContext, inp: NodeInput) -> Step:
    plan = Plan(intent=Intent.DIAGNOSIS, service="bench-service", steps=[])
    transcript = Transcript(query=inp.state.pipeline.query, plan=plan)
    return Step(inp.state.model_copy(update={
        "plan": plan, "transcript": transcript, "next": NextStep(node="execute")}))


def _execute(ctx: NodeContext, inp: NodeInput) -> Step:
    state = inp.state
    assert state.transcript is not None
    if inp.invocations:
        return Step(state.model_copy(update={"next": NextStep(node="gatekeep")}),
                      executor_output_raw='{"claims": []}')
    calls = [ToolCallRequest(tool_call_id=mint_tool_call_id(inp.head.run_id, i),
                             tool_name="noop", arguments={"index": i})
             for i in range(TOOL_CALLS)]
    transcript = state.transcript.model_copy(update={"turns": [ExecutorTurn(tool_calls=calls)]})
    pending = [ToolInvocation(tool_call_id=c.tool_call_id, tool_name=c.tool_name,
                              arguments=c.arguments, status=LifecycleStatus.PROJECTING)
               for c in calls]
    step = NextStep(node="execute", tool_call_ids=[c.tool_call_id for c in calls])
    return Step(state.model_copy(update={"transcript": transcript, "next": step}),
                  invocations=pending, turn=1)


def _then(node: str) -> Callable[[NodeContext, NodeInput], Step]:
    def body(ctx: NodeContext, inp: NodeInput) -> Step:
        return Step(inp.state.model_copy(update={"next": NextStep(node=node)}))

    return body


def _compose(ctx: NodeContext, inp: NodeInput) -> Step:
    pipeline = inp.state.pipeline.model_copy(update={
        "composer_status": StageStatus.OK,
        "composer_output": ComposerOutput(answer_summary="noop ok", recommended_actions=[],
                                          user_facing_answer="noop ok")})
    return Step(inp.state.model_copy(update={
        "pipeline": pipeline, "next": NextStep(node="finalize")}))


def _as_set(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    """The instant bodies route themselves: keep the `next` they set."""
    return step


INSTANT_BODIES = {
    "plan": _plan, "execute": _execute, "gatekeep": _then("verify"),
    "verify": _then("compose"), "compose": _compose,
}
INSTANT_GRAPH: Graph = GRAPH.with_nodes(**{
    name: dataclasses.replace(GRAPH.spec(name), body=body, edge=_as_set)
    for name, body in INSTANT_BODIES.items()})
"""The run's graph with instant bodies: the same nodes, queues and successors."""


def build_runtime(settings: VeritySettings) -> Runtime:
    """The instant runtime over the configured store."""
    registry = ToolRegistry()
    registry.register(NOOP)
    agents = Agents(
        planner=InstantPlanner(), executor=InstantExecutor(), verifier=InstantVerifier(),
        composer=InstantComposer(), knowledge=None,  # type: ignore[arg-type]
        classify_intent=lambda _query: Intent.DIAGNOSIS,
        validate_knowledge=lambda _answer, _lookup: [],
    )
    return Runtime(store=open_store(resolve_database_url(settings)), registry=registry,
                   agents=agents, settings=settings, source_loader=lambda _source: None,
                   graph=INSTANT_GRAPH)
