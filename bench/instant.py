"""A runtime whose node bodies return at once: the cost measured is the runtime's own
(coordinator, persistence, chord), not the agents'. Loaded by workers through
VERITY_RUNTIME_FACTORY=bench.instant:build_runtime."""

from __future__ import annotations

import json
from typing import Any

from models.agent import ExecutorStep, Plan, PlanStep, ToolCallRequest, Transcript
from models.common import Intent
from models.invocation import QueryScope
from pipeline.agents.base import ModelReply
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.ids import mint_tool_call_id
from pipeline.prompts import Prompt
from pipeline.runtime import Agents, Runtime
from pipeline.store import RunStore
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
    return Runtime(store=RunStore.open(resolve_database_url(settings)), registry=registry,
                   agents=agents, settings=settings, source_loader=lambda _source: None)
