"""The run's graph, declared once: its nodes, what each runs, and what may follow it.

    plan ─┬─ DIAGNOSIS ─► execute ⟲ (tool chord) ─► gatekeep ─► verify ─► compose ─► finalize
          │                 │                          │          │ │        │
          │                 └ INVALID_OUTPUT           └ REJECT   │ └ REJECT, FAILED, budget
          │                   or model failure ──────────────────┴──────► fallback ─► finalize
          │             plan ◄── verify: LOW_CONFID with a critical gap (one EVIDENCE_GAP_ONLY
          │                      cycle that supplements the first, `rules/evidence_retry.py`)
          └─ KNOWLEDGE_QUERY ─► (one lookup) ─► knowledge ─► finalize | fallback

`GRAPH` is a pure table: per node its body (`pipeline/run/nodes/<node>.py`), its Celery queue,
what it reads, and an edge function that routes the body's step by the rules of
`pipeline/rules/routing.py`.
Every driver steps through it with `Graph.advance`: the Celery runtime (`pipeline/run/runtime.py`
with `tasks/`), `verity verify` (`pipeline/verification.py`, entering at gatekeep) and the
in-process runner (`pipeline/inprocess.py`). None of them writes the sequence again.

Tool calls a step requests (`Step.invocations`) fan out before the next node: as one Celery
chord in the runtime, one after another in process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from models.common import FallbackType, Intent
from models.fallback import FallbackReason
from models.gatekeeper import RuleId
from models.state import NextStep, RuntimeState
from pipeline.rules import routing
from pipeline.rules.evidence_retry import start_gap_cycle
from pipeline.rules.routing import Node, Route
from pipeline.run.nodes import compose, execute, fallback, gatekeep, knowledge, plan, verify
from pipeline.run.nodes.common import NodeContext, NodeInput, Step, document

Body = Callable[[NodeContext, NodeInput], Step]
"""A node body: reads the node's input, returns what to commit."""
Edge = Callable[[NodeContext, NodeInput, Step], Step]
"""Routes a body's step: sets `state.next` (and may move the state on, as the gap cycle does)."""


class GraphError(RuntimeError):
    """A node routed somewhere its declaration does not allow: a bug, never input."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of the graph."""

    node: str
    queue: str
    """The Celery queue its task runs on: control (fast), llm (model calls) or tools
    (`celeryconfig.task_routes` is derived from it)."""
    body: Body | None
    """None for the terminal node, which the driver itself commits."""
    edge: Edge | None
    successors: frozenset[str]
    reads_output: bool = False
    """Whether its input includes the stored Executor output."""
    reads_invocations: bool = False
    """Whether its input includes the run's tool invocations."""


@dataclass(frozen=True)
class Graph:
    """Nodes by name, the entry node and the terminal one."""

    nodes: Mapping[str, NodeSpec]
    entry: str = Node.PLAN.value
    terminal: str = Node.FINALIZE.value

    def spec(self, node: str) -> NodeSpec:
        """The declaration of `node`; GraphError for a name the graph does not have."""
        try:
            return self.nodes[node]
        except KeyError:
            raise GraphError(f"the graph has no node {node!r}") from None

    def advance(self, ctx: NodeContext, node: str, inp: NodeInput) -> Step:
        """Run `node`'s body on `inp` and route its step: the returned state's `next` is the
        node to run after it, with the tool calls it requested fanned out first."""
        spec = self.spec(node)
        if spec.body is None or spec.edge is None:
            raise GraphError(f"{node} is terminal: its driver commits it")
        step = spec.edge(ctx, inp, spec.body(ctx, inp))
        following = step.state.next
        if following is None or following.node not in spec.successors:
            raise GraphError(f"{node} routed to {following and following.node!r}, "
                             f"not one of {sorted(spec.successors)}")
        requested = [i.tool_call_id for i in step.invocations]
        if requested != following.tool_call_ids:
            following = following.model_copy(update={"tool_call_ids": requested})
            step.state = step.state.model_copy(update={"next": following})
        for _node, kind, payload in step.events:
            if _node == node and kind == "completed":
                payload["route"] = following.node
        return step

    def with_nodes(self, **specs: NodeSpec) -> Graph:
        """This graph with some nodes replaced (benchmarks and tests swap bodies)."""
        return dataclasses.replace(self, nodes={**self.nodes, **specs})


# -- edges ----------------------------------------------------------------------------------


def _routed(step: Step, route: Route, *, node: str | None = None) -> Step:
    if route.node is Node.FALLBACK:
        following = NextStep(node=Node.FALLBACK.value, fallback_type=route.fallback_type,
                             reason=route.reason)
    else:
        following = NextStep(node=node or route.node.value)
    step.state = step.state.model_copy(update={"next": following})
    return step


def _failed(step: Step) -> Route | None:
    """The fallback of a body whose model call failed, if it did."""
    failure = step.state.failure
    if failure is None:
        return None
    return Route(Node.FALLBACK, failure.fallback_type, failure.reason)


def _budget(state: RuntimeState, route: Route) -> Route:
    if state.pipeline.budget_exceeded:
        return Route(Node.FALLBACK, FallbackType.SEMANTIC_UNAVAILABLE,
                     FallbackReason.BUDGET_EXCEEDED)
    return route


def _after_plan(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    failed = _failed(step)
    if failed is not None:
        return _routed(step, failed)
    if step.state.pipeline.intent is Intent.KNOWLEDGE_QUERY:
        return _routed(step, Route(Node.KNOWLEDGE))
    return _routed(step, Route(Node.EXECUTE))


def _after_execute(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    failed = _failed(step)
    if failed is not None:
        return _routed(step, failed)
    if step.invocations:  # more tool calls: their results come back to the Executor
        return _routed(step, Route(Node.EXECUTE))
    pipeline = step.state.pipeline
    return _routed(step, routing.after_execute(pipeline.executor_status,
                                               repaired=pipeline.structural_repair))


def _after_gatekeep(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    pipeline = step.state.pipeline
    assert pipeline.gatekeeper is not None
    result = pipeline.gatekeeper.result
    repair_failed = pipeline.structural_repair and RuleId.SCHEMA in result.failed_rules
    return _routed(step, routing.after_gatekeep(result.severity, repair_failed=repair_failed))


def _after_verify(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    pipeline = step.state.pipeline
    gatekeeper = pipeline.gatekeeper
    assert gatekeeper is not None and pipeline.verdict_ceiling is not None
    gaps = routing.valid_critical_gaps(
        pipeline.evidence_gaps,
        verified_claim_ids={c.claim_id for c in gatekeeper.verified_output.claims},
        known_tools=ctx.registry.names() if ctx.evidence_retry else None,
    )
    eligible = pipeline.effective_verdict is not None and routing.evidence_retry_eligible(
        verdict=pipeline.effective_verdict, ceiling=pipeline.verdict_ceiling, valid_gaps=gaps,
        evidence_retry_count=pipeline.evidence_retry_count)
    route = _budget(step.state, routing.after_verify(
        verifier_status=pipeline.verifier_status, verdict=pipeline.effective_verdict,
        ceiling=pipeline.verdict_ceiling, valid_gaps=gaps,
        evidence_retry_count=pipeline.evidence_retry_count,
        retry_supported=ctx.evidence_retry,
    ))
    if eligible and not ctx.evidence_retry:
        step.events.append(("verify", "evidence_retry_unavailable",
                            {"reason": "a bundle has no tools to call; composing instead"}))
    if route.node is Node.PLAN:
        count = pipeline.evidence_retry_count + 1
        step.state = start_gap_cycle(step.state, document(inp.head.run_id, inp.raw_output), gaps)
        step.evidence_retry_count = count
        step.events.append(("verify", "evidence_retry", {"gaps": len(gaps), "cycle": count}))
    return _routed(step, route)


def _after_compose(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    return _routed(step, _budget(step.state, routing.after_compose(
        step.state.pipeline.composer_status)))


def _after_fallback(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    return _routed(step, Route(Node.FINALIZE))


def _after_knowledge(ctx: NodeContext, inp: NodeInput, step: Step) -> Step:
    failed = _failed(step)
    if failed is not None:
        return _routed(step, failed)
    if step.state.knowledge_errors or step.state.knowledge is None:
        return _routed(step, Route(Node.FALLBACK, FallbackType.EVIDENCE_VALIDATION_FAILED,
                                   FallbackReason.KNOWLEDGE_REFERENCE_INVALID))
    return _routed(step, Route(Node.FINALIZE))


def _spec(node: Node, queue: str, body: Body | None, edge: Edge | None, *successors: Node,
          output: bool = False, invocations: bool = False) -> NodeSpec:
    return NodeSpec(node=node.value, queue=queue, body=body, edge=edge,
                    successors=frozenset(s.value for s in successors),
                    reads_output=output, reads_invocations=invocations)


_F = Node.FALLBACK
GRAPH = Graph(nodes={spec.node: spec for spec in (
    _spec(Node.PLAN, "llm", plan.body, _after_plan, Node.EXECUTE, Node.KNOWLEDGE, _F),
    _spec(Node.EXECUTE, "llm", execute.body, _after_execute, Node.EXECUTE, Node.GATEKEEP, _F,
          invocations=True),
    _spec(Node.GATEKEEP, "control", gatekeep.body, _after_gatekeep, Node.VERIFY, _F,
          output=True, invocations=True),
    _spec(Node.VERIFY, "llm", verify.body, _after_verify, Node.COMPOSE, Node.PLAN, _F,
          output=True, invocations=True),
    _spec(Node.COMPOSE, "llm", compose.body, _after_compose, Node.FINALIZE, _F),
    _spec(Node.FALLBACK, "control", fallback.body, _after_fallback, Node.FINALIZE),
    _spec(Node.KNOWLEDGE, "llm", knowledge.body, _after_knowledge, Node.FINALIZE, _F,
          invocations=True),
    _spec(Node.FINALIZE, "control", None, None, invocations=True),
)})
"""The run's graph."""

TOOL_QUEUE = "tools"
"""Where a step's requested tool calls run (`verity.node.tool`)."""
QUEUES: tuple[str, ...] = tuple(sorted({spec.queue for spec in GRAPH.nodes.values()}
                                       | {TOOL_QUEUE}))
"""The Celery queues the run's nodes and tools use (`celeryconfig.task_routes` routes to them)."""
BATCH_QUEUE = "batch"
"""Where batch re-verification's tasks run (`verity.batch.*`), apart from live runs."""
WORKER_QUEUES: tuple[str, ...] = (*QUEUES, BATCH_QUEUE)
"""Every queue a worker may consume."""
