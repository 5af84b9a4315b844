"""`verity verify`: parse → gatekeep → verify → compose (or the fallback) on a run bundle,
through the run's graph (`pipeline/graph.py`)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from models.agent import ExecutorStep, KnowledgeAnswer, Plan, Transcript
from models.bundle import RunBundle, RunResult
from models.run import LlmAttempt
from models.state import NextStep, PipelineState, RuntimeState
from pipeline.agents.base import SingleTurnModel
from pipeline.agents.protocols import Agents
from pipeline.bodies.common import Event, NodeContext
from pipeline.config import VeritySettings
from pipeline.errors import BundleError
from pipeline.evaluation import run_result
from pipeline.graph import GRAPH, GraphError
from pipeline.inprocess import MemoryRun, drive
from pipeline.routing import Node
from pipeline.tools.registry import ToolRegistry


@dataclass
class VerifiedRun:
    """The result of verifying a bundle, with the trace and the model attempts behind it."""

    result: RunResult
    events: list[Event] = field(default_factory=list)
    attempts: list[LlmAttempt] = field(default_factory=list)


def load_bundle(text: str) -> RunBundle:
    """Parse and validate a bundle; every problem is one line in a BundleError."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BundleError(f"bundle is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BundleError("bundle must be a JSON object")
    try:
        bundle = RunBundle.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "bundle"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise BundleError(f"bundle has the wrong shape: {where}: {first['msg']}{more}") from None
    seen: set[str] = set()
    for invocation in bundle.invocations:
        if invocation.tool_call_id in seen:
            raise BundleError(f"duplicate tool_call_id {invocation.tool_call_id!r} in bundle")
        seen.add(invocation.tool_call_id)
    return bundle


def verify_bundle(
    bundle: RunBundle,
    *,
    verifier: SingleTurnModel,
    composer: SingleTurnModel,
    run_id: str | None = None,
    settings: VeritySettings | None = None,
) -> VerifiedRun:
    """Drive the graph from execute over the bundle's stored output: parse, gatekeep, verify,
    compose or the fallback, with the same bodies and routing as a live run. A bundle has no
    tools, so an evidence retry it would earn is recorded and composed instead. Never raises
    on content."""
    run_id = run_id or uuid.uuid4().hex
    retry = bundle.retry_context
    pipeline = PipelineState(query=bundle.query, intent=bundle.intent, retry_context=retry,
                             evidence_retry_count=retry.evidence_retry_count if retry else 0)
    plan = Plan(intent=bundle.intent, steps=[])
    state = RuntimeState(pipeline=pipeline, transcript=Transcript(query=bundle.query, plan=plan),
                         next=NextStep(node=Node.EXECUTE.value))
    run = MemoryRun(run_id=run_id, state=state, invocations=list(bundle.invocations))
    agents = Agents(planner=_NoTools(), executor=_StoredOutput(bundle.executor_output_raw),
                    verifier=verifier, composer=composer, knowledge=_NoTools(),
                    classify_intent=lambda _query: bundle.intent,
                    validate_knowledge=lambda _answer, _lookup: [])
    ctx = NodeContext(agents=agents, registry=ToolRegistry(),
                      settings=settings or VeritySettings(), evidence_retry=False)
    drive(GRAPH, ctx, run)
    result = run_result(run_id, run.state.pipeline, bundle.invocations)
    return VerifiedRun(result=result, events=run.events, attempts=run.attempts)


@dataclass(frozen=True)
class _StoredOutput:
    """The Executor of a bundle: its one step is the output the run stored."""

    raw: str

    def step(self, transcript: Transcript, **_: Any) -> ExecutorStep:
        return ExecutorStep(final_output=self.raw)


class _NoTools:
    """The Planner and knowledge answerer of a bundle: never asked (the graph enters later)."""

    def plan(self, *_: Any, **__: Any) -> Plan:
        raise GraphError("a bundle is verified from its stored output; nothing is planned")

    def answer(self, *_: Any, **__: Any) -> KnowledgeAnswer:
        raise GraphError("a bundle is verified from its stored output; nothing is answered")
