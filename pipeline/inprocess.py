"""The graph driven in this process, with the run held in memory: no broker, no database.

`drive` steps a `MemoryRun` through `pipeline/run/graph.py` exactly as the Celery runtime steps a
stored run — the same bodies, the same routing, the same events — running each requested tool
call inline. `verity verify` drives it from execute over a bundle's stored output
(`pipeline/verification.py`); `run_in_process` drives a whole investigation over an incident
source, for tests, benchmarks and scripts.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from models.agent import Plan, ToolCallRequest, Transcript
from models.bundle import RunResult
from models.common import RunStatus
from models.invocation import ToolInvocation
from models.run import DEFAULT_TENANT, LlmAttempt, RunHead
from models.state import NextStep, PipelineState, RuntimeState
from pipeline.agents.protocols import Agents, Planner
from pipeline.config import VeritySettings
from pipeline.rules.routing import Node
from pipeline.run.evaluation import run_result
from pipeline.run.graph import GRAPH, Graph, GraphError
from pipeline.run.nodes.common import Event, NodeContext, NodeInput
from pipeline.run.nodes.execute import with_results
from pipeline.tools.registry import ToolRegistry, run_tool

if TYPE_CHECKING:
    from pipeline.data.source import DataSource

MAX_STEPS = 64
"""More node steps than any run of the graph takes: a bound, never reached by a sound graph."""

ToolCaller = Callable[[ToolInvocation], ToolInvocation]
"""Runs one PROJECTING invocation to READY or ERROR."""


@dataclass
class MemoryRun:
    """A run held in memory: what the store would hold for it."""

    run_id: str
    state: RuntimeState
    invocations: list[ToolInvocation] = field(default_factory=list)
    raw_output: str | None = None
    events: list[Event] = field(default_factory=list)
    attempts: list[LlmAttempt] = field(default_factory=list)
    version: int = 0
    visited: list[str] = field(default_factory=list)
    tenant_id: str = DEFAULT_TENANT
    """The owner a stored copy would have; an in-memory run looks up no previous turn."""


def drive(
    graph: Graph,
    ctx: NodeContext,
    run: MemoryRun,
    *,
    call_tool: ToolCaller | None = None,
    stop_before: str | None = None,
) -> MemoryRun:
    """Step `run` until its next node is the terminal one (or `stop_before`)."""
    for _ in range(MAX_STEPS):
        following = run.state.next
        if following is None or following.node in (graph.terminal, stop_before):
            return run
        _run_tools(run, following.tool_call_ids, call_tool)
        spec = graph.spec(following.node)
        head = RunHead(run_id=run.run_id, tenant_id=run.tenant_id, status=RunStatus.RUNNING,
                       version=run.version, node=run.visited[-1] if run.visited else None)
        inp = NodeInput(head, run.state, run.raw_output if spec.reads_output else None,
                        list(run.invocations) if spec.reads_invocations else [])
        step = graph.advance(ctx, following.node, inp)
        run.visited.append(following.node)
        run.state, run.version = step.state, run.version + 1
        run.events += step.events
        run.attempts += step.attempts
        run.invocations += step.invocations
        if step.executor_output_raw is not None:
            run.raw_output = step.executor_output_raw
    raise GraphError(f"run {run.run_id} did not reach {graph.terminal} in {MAX_STEPS} steps")


def _run_tools(run: MemoryRun, ids: Sequence[str], call_tool: ToolCaller | None) -> None:
    if not ids:
        return
    if call_tool is None:
        raise GraphError("this run asked for tool calls and its driver has no tools")
    by_id = {i.tool_call_id: n for n, i in enumerate(run.invocations)}
    for tool_call_id in ids:
        n = by_id[tool_call_id]
        run.invocations[n] = call_tool(run.invocations[n])


# -- a whole investigation over an incident source ----------------------------------------


@dataclass(frozen=True)
class LoopResult:
    """An in-process investigation: the plan, the whole transcript and the final output."""

    plan: Plan
    transcript: Transcript
    invocations: list[ToolInvocation]
    final_output: str
    run: MemoryRun


@dataclass
class _KnownServices:
    """The offline planner told which services the source has."""

    planner: Any
    known_services: Sequence[str]

    def plan(self, query: str, **kw: Any) -> Plan:
        plan: Plan = self.planner.plan(query, known_services=self.known_services, **kw)
        return plan


def investigate(
    query: str,
    *,
    source: DataSource,
    registry: ToolRegistry,
    agents: Agents | None = None,
    settings: VeritySettings | None = None,
    stop_before: str | None = None,
) -> MemoryRun:
    """Run `query` over `source` through the graph in this process, every tool inline (the
    offline agents unless `agents` are given), until its next node is `finalize` (or
    `stop_before`). `result(run)` is then what finalize would release."""
    from pipeline.factory import offline_agents  # the agents' modules import the graph's

    agents = agents or offline_agents()
    settings = settings or VeritySettings()
    state = RuntimeState(pipeline=PipelineState(query=query, intent=agents.classify_intent(query)),
                         next=NextStep(node=GRAPH.entry))
    run = MemoryRun(run_id=uuid.uuid4().hex, state=state)
    ctx = NodeContext(agents=agents, registry=registry, settings=settings)

    def call(pending: ToolInvocation) -> ToolInvocation:
        request = ToolCallRequest(tool_call_id=pending.tool_call_id,
                                  tool_name=pending.tool_name, arguments=pending.arguments)
        return run_tool(registry, request, source=source,
                        max_items=settings.projection_max_items,
                        max_bytes=settings.projection_max_bytes)

    return drive(GRAPH, ctx, run, call_tool=call, stop_before=stop_before)


def result(run: MemoryRun) -> RunResult:
    """What finalize releases for a run driven to its end."""
    return run_result(run.run_id, run.state.pipeline, run.invocations,
                      prompts_used=run.state.prompts_used)


def run_in_process(
    query: str,
    *,
    source: DataSource,
    registry: ToolRegistry,
    known_services: Sequence[str] = (),
    max_items: int = 50,
    max_bytes: int = 16384,
) -> LoopResult:
    """Plan and investigate `query` over `source` with the offline agents, up to the
    Gatekeeper: the plan, the transcript with its results and the Executor's final output."""
    from pipeline.factory import offline_agents

    agents = offline_agents()
    if known_services:
        planner: Planner = _KnownServices(agents.planner, known_services)
        agents = dataclasses.replace(agents, planner=planner)
    settings = VeritySettings(projection_max_items=max_items, projection_max_bytes=max_bytes)
    run = investigate(query, source=source, registry=registry, agents=agents,
                      settings=settings, stop_before=Node.GATEKEEP.value)
    transcript = run.state.transcript
    if run.raw_output is None or transcript is None:
        raise GraphError(f"the investigation of {query!r} ended without an Executor output")
    return LoopResult(transcript.plan, with_results(transcript, run.invocations),
                      list(run.invocations), run.raw_output, run)
