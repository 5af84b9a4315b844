"""The run, node by node, with its state in the store and no broker.

`tasks/` turns each `NodeOutcome.next` into Celery messages; everything that decides and
persists lives here. A node runs only when the run is at the version its message carries and
commits under that version, so a duplicate or redelivered message changes nothing; a node that
committed but died before dispatching is resent from the stored `next` step.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from models.agent import (
    ExecutorStep,
    ExecutorTurn,
    KnowledgeAnswer,
    Plan,
    PreviousTurn,
    ToolCallRequest,
    Transcript,
)
from models.common import FallbackType, Intent, RunStatus
from models.composer import ComposerOutput
from models.evaluation import StageStatus
from models.fallback import FallbackReason
from models.gatekeeper import RuleId
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from models.run import LlmAttempt, RunHead
from models.state import NextStep, PipelineState, RuntimeState
from models.verifier import EvidenceGap, RetryContext
from pipeline import nodes, routing
from pipeline.agents.base import SingleTurnModel
from pipeline.attempts import AttemptLog, RetryPolicy
from pipeline.config import VeritySettings
from pipeline.errors import BudgetExceededError, RunFailure, StaleStateError
from pipeline.evaluation import run_result
from pipeline.executor_output import parse_executor_output
from pipeline.ids import mint_tool_call_id
from pipeline.routing import Node, Route
from pipeline.store import RunStore
from pipeline.tools.registry import ToolRegistry, run_tool

KNOWLEDGE_NODE = "knowledge"
_NEEDS_OUTPUT = frozenset({Node.GATEKEEP.value, Node.VERIFY.value})
_NEEDS_INVOCATIONS = frozenset(
    {Node.EXECUTE.value, Node.GATEKEEP.value, Node.FINALIZE.value, KNOWLEDGE_NODE}
)
Event = tuple[str, str, dict[str, Any]]


class Planner(Protocol):
    """Turns a question (or the Verifier's gaps) into a plan."""

    def plan(
        self,
        query: str,
        *,
        registry: ToolRegistry,
        previous_turn: PreviousTurn | None = None,
        gaps: list[EvidenceGap] | None = None,
        log: AttemptLog | None = None,
    ) -> Plan:
        """The investigation plan; model calls are recorded in `log`."""
        ...


class Executor(Protocol):
    """One step of the Executor loop: more tool calls, or the final structured output.

    An Executor may also offer `repair(transcript, raw, problems, *, log) -> str`: the one
    no-tool structural repair of a final output that failed initial validation (see
    `RepairingExecutor`). Without it, such an output goes straight to the fallback.
    """

    def step(
        self, transcript: Transcript, *, registry: ToolRegistry, log: AttemptLog | None = None
    ) -> ExecutorStep:
        """The next step; model calls are recorded in `log`."""
        ...


class RepairingExecutor(Executor, Protocol):
    """An Executor that can repair the structure of its own final output, without tools."""

    def repair(
        self, transcript: Transcript, raw: str, problems: list[str], *,
        log: AttemptLog | None = None,
    ) -> str | None:
        """A corrected raw output for `raw`, told what was wrong (`problems`); None when this
        output is not one to repair (nothing is asked)."""
        ...


class KnowledgeAnswerer(Protocol):
    """Answers a knowledge question from the single lookup's result."""

    def answer(
        self, query: str, lookup: ToolInvocation, *, log: AttemptLog | None = None
    ) -> KnowledgeAnswer:
        """Answer items citing returned documents; model calls are recorded in `log`."""
        ...


@dataclass
class Agents:
    """The agents a run uses."""

    planner: Planner
    executor: Executor
    verifier: SingleTurnModel
    composer: SingleTurnModel
    knowledge: KnowledgeAnswerer
    classify_intent: Callable[[str], Intent]
    validate_knowledge: Callable[[KnowledgeAnswer, ToolInvocation], list[str]]


Body = Callable[["Runtime", "NodeInput"], "Commit"]
"""A node body: reads the node's input, returns what to commit (state, events, attempts ...)."""

OutcomeKind = Literal["committed", "redispatch", "stale", "cancelled", "terminal", "failed"]


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """What happened to one node message, and what to dispatch next (if anything)."""

    kind: OutcomeKind
    version: int
    next: NextStep | None = None


@dataclass(frozen=True, slots=True)
class NodeInput:
    """What one node reads, in one round trip."""

    head: RunHead
    state: RuntimeState
    raw_output: str | None
    invocations: list[ToolInvocation]


@dataclass
class Commit:
    """What a node body hands back to be committed under the run's version."""

    state: RuntimeState
    events: list[Event] = field(default_factory=list)
    attempts: list[LlmAttempt] = field(default_factory=list)
    executor_output_raw: str | None = None
    evidence_retry_count: int | None = None
    invocations: list[ToolInvocation] = field(default_factory=list)
    turn: int = 0


@dataclass
class Runtime:
    """Node bodies over one store, tool registry and agent set."""

    store: RunStore
    registry: ToolRegistry
    agents: Agents
    settings: VeritySettings
    source_loader: Callable[[str | None], Any]
    bodies: dict[str, Body] | None = None
    """Node bodies by node name; None means the pipeline's own (benchmarks swap them)."""

    # -- entry points ---------------------------------------------------------------------

    def submit(
        self,
        query: str,
        *,
        session_id: str | None = None,
        data_source: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """Create the run with its intent routed; the caller dispatches `coordinate(run, 0)`."""
        intent = self.agents.classify_intent(query)
        state = RuntimeState(
            pipeline=PipelineState(query=query, intent=intent),
            session_id=session_id,
            next=NextStep(node=Node.PLAN.value),
        )
        return self.store.create_run(
            query=query, intent=intent, session_id=session_id, run_id=run_id,
            data_source=data_source, state=_dump(state),
            events=[("submit", "accepted", {"intent": intent.value})],
        )

    def coordinate(self, run_id: str, version: int, node: str | None = None) -> NodeOutcome:
        """Entry and chord body: dispatch `node` (or the stored next step) at `version`.

        With the node in the message there is nothing to read: the node itself checks the
        version and the cancel flag before it runs.
        """
        if node is not None:
            return NodeOutcome("committed", version, NextStep(node=node))
        head, raw, _ = self.store.get_head(run_id)
        stop = self._stopped(head)
        if stop is not None:
            return stop
        step = (raw or {}).get("next")
        if head.version != version or not step:
            return NodeOutcome("stale", head.version)
        return NodeOutcome("committed", version, NextStep(node=step["node"]))

    def run_node(self, run_id: str, node: str, version: int) -> NodeOutcome:
        """Run `node` if the run is at `version`; commit its output under that version."""
        inp = self._load(run_id, node)
        record, state = inp.head, inp.state
        stop = self._stopped(record)
        if stop is not None:
            return stop
        if record.version != version:
            if record.version == version + 1 and record.node == node and state.next:
                return NodeOutcome("redispatch", record.version, state.next)
            return NodeOutcome("stale", record.version)
        if state.next is None or state.next.node != node:
            return NodeOutcome("stale", record.version)
        if node == Node.FINALIZE.value:
            return self._finalize(inp)
        delay = self.settings.node_delay(node)
        if delay:
            time.sleep(delay)
        try:
            commit = (self.bodies or _BODIES)[node](self, inp)
        except Exception as exc:  # a node that cannot go on fails the run, visibly
            return self._fail(record, state, node=node, error=exc)
        try:
            new_version = self.store.commit_node(
                run_id, expected_version=version, node=node, state=_dump(commit.state),
                status=RunStatus.RUNNING, events=commit.events, attempts=commit.attempts,
                executor_output_raw=commit.executor_output_raw,
                evidence_retry_count=commit.evidence_retry_count,
                invocations=commit.invocations, turn=commit.turn,
            )
        except StaleStateError:
            return NodeOutcome("stale", version)
        return NodeOutcome("committed", new_version, commit.state.next)

    def run_tool_call(self, run_id: str, tool_call_id: str) -> ToolInvocation | None:
        """Run one requested tool call at most once to completion; never raises.

        The execute node stored the call as a PROJECTING row; a redelivery of a finished call
        does nothing, and a result that arrives after a cancel is discarded.
        """
        found = self.store.get_tool_call(run_id, tool_call_id)
        if found is None:
            return None
        head, pending = found
        if head.status.terminal or head.cancel_requested:
            return None
        if pending.status is not LifecycleStatus.PROJECTING:
            return pending
        registry = self.registry
        if pending.tool_name in self.settings.failing_tools():
            registry = _failing(registry, pending.tool_name)
        request = ToolCallRequest(tool_call_id=tool_call_id, tool_name=pending.tool_name,
                                  arguments=pending.arguments)
        result = run_tool(
            registry, request, source=self.source_loader(head.data_source),
            max_items=self.settings.projection_max_items,
            max_bytes=self.settings.projection_max_bytes,
        )
        kept = self.store.complete_invocation(
            run_id, tool_call_id, status=result.status, evidence_status=result.evidence_status,
            projection=result.projection, error=result.error, unless_cancelled=True,
        )
        if not kept and self.store.is_cancel_requested(run_id):
            self.store.complete_invocation(
                run_id, tool_call_id, status=LifecycleStatus.ERROR,
                evidence_status=EvidenceStatus.ERROR, projection=None,
                error="discarded: the run was cancelled",
            )
            return None
        return result

    def cancel(self, run_id: str) -> bool:
        """Flag the run and end it CANCELLED now: no node commits or releases after this."""
        self.store.request_cancel(run_id)
        return self.store.cancel_run(run_id, reason="cancel requested")

    # -- helpers -------------------------------------------------------------------------

    def _load(self, run_id: str, node: str) -> NodeInput:
        head, raw, output, invocations = self.store.get_node_input(
            run_id, with_executor_output=node in _NEEDS_OUTPUT,
            with_invocations=node in _NEEDS_INVOCATIONS,
        )
        if raw is None:
            raise StaleStateError(f"run {run_id} has no runtime state")
        return NodeInput(head, RuntimeState.model_validate(raw), output, invocations)

    def _stopped(self, record: RunHead) -> NodeOutcome | None:
        if record.status.terminal:
            return NodeOutcome("terminal", record.version)
        if record.cancel_requested:
            self.store.cancel_run(record.run_id, reason="cancel requested")
            return NodeOutcome("cancelled", record.version)
        return None

    def _fail(
        self, record: RunHead, state: RuntimeState, *, node: str, error: Exception
    ) -> NodeOutcome:
        message = f"{type(error).__name__}: {error}".splitlines()[0][:500]
        try:
            version = self.store.commit_node(
                record.run_id, expected_version=record.version, node=node,
                state=_dump(state.model_copy(update={"next": None})), status=RunStatus.FAILED,
                events=[(node, "failed", {"error": message})],
            )
        except StaleStateError:
            return NodeOutcome("stale", record.version)
        return NodeOutcome("failed", version)

    def _finalize(self, inp: NodeInput) -> NodeOutcome:
        record = inp.head
        result = run_result(record.run_id, inp.state.pipeline, inp.invocations)
        try:
            released = self.store.finalize(record.run_id, result, expected_version=record.version)
        except StaleStateError:
            return NodeOutcome("stale", record.version)
        return NodeOutcome("committed" if released else "cancelled", record.version + 1)




def _failing(registry: ToolRegistry, name: str) -> ToolRegistry:
    """A copy of the registry whose `name` tool raises (fault injection)."""
    tools = {tool_name: registry.get(tool_name) for tool_name in registry.names()}
    tools[name] = dataclasses.replace(tools[name], function=_raise_injected)
    return ToolRegistry(tools)


def _raise_injected(*_args: object, **_kwargs: object) -> Any:
    raise RuntimeError("injected tool failure")


def _attempt_log(rt: Runtime, inp: NodeInput) -> AttemptLog:
    """The node's attempt log, continuing the run's attempt numbers and token count."""
    return AttemptLog(
        inp.head.run_id, start=inp.state.attempt_counters,
        token_budget=rt.settings.token_budget, tokens_used=inp.state.tokens_used,
        cycle=inp.state.pipeline.evidence_retry_count,
        policy=RetryPolicy.from_settings(rt.settings),
    )


def _logged(state: RuntimeState, log: AttemptLog) -> RuntimeState:
    return state.model_copy(update={"attempt_counters": log.counters(),
                                    "tokens_used": log.tokens_used})


def _model_failure(
    state: RuntimeState, exc: RunFailure, *, stage: str, reason: FallbackReason,
    fallback_type: FallbackType,
) -> RuntimeState:
    """Route a failed planner, executor or knowledge call to its fallback."""
    if isinstance(exc, BudgetExceededError):
        fallback_type, reason = FallbackType.SEMANTIC_UNAVAILABLE, FallbackReason.BUDGET_EXCEEDED
    pipeline = state.pipeline.model_copy(update={
        "failure_stage": stage, "budget_exceeded": isinstance(exc, BudgetExceededError)})
    step = NextStep(node=Node.FALLBACK.value, fallback_type=fallback_type, reason=reason)
    return state.model_copy(update={"pipeline": pipeline, "next": step})


def _document(run_id: str, raw_output: str | None) -> dict[str, Any]:
    parsed = parse_executor_output(raw_output or "")
    if parsed.document is None:
        raise StaleStateError(f"run {run_id} has no parsed executor output")
    return parsed.document


def _dump(state: RuntimeState) -> dict[str, Any]:
    return state.model_dump(mode="json")


def _find(invocations: Sequence[ToolInvocation], tool_call_id: str) -> ToolInvocation | None:
    return next((i for i in invocations if i.tool_call_id == tool_call_id), None)


def _requested_call(state: RuntimeState, tool_call_id: str) -> ToolCallRequest | None:
    turns = state.transcript.turns if state.transcript else []
    return next((c for t in turns for c in t.tool_calls if c.tool_call_id == tool_call_id), None)


def _next_for(route: Route, *, node: str | None = None) -> NextStep:
    if route.node is Node.FALLBACK:
        return NextStep(node=Node.FALLBACK.value, fallback_type=route.fallback_type,
                        reason=route.reason)
    return NextStep(node=node or route.node.value)


# -- node bodies ----------------------------------------------------------------------------


def _plan(rt: Runtime, inp: NodeInput) -> Commit:
    record, state = inp.head, inp.state
    pipeline = state.pipeline
    gap_mode = pipeline.evidence_retry_count > 0
    previous = None
    if state.session_id and not gap_mode:
        prior = rt.store.previous_turn(state.session_id)
        if prior is not None and prior.run_id != record.run_id and prior.final_answer:
            previous = PreviousTurn(run_id=prior.run_id, query=prior.query,
                                    answer_summary=prior.final_answer.answer_summary)
    log = _attempt_log(rt, inp)
    try:
        plan = rt.agents.planner.plan(
            pipeline.query, registry=rt.registry, previous_turn=previous,
            gaps=list(state.retry_gaps) if gap_mode else None, log=log,
        )
    except RunFailure as exc:
        failed = _model_failure(_logged(state, log), exc, stage="plan",
                                reason=FallbackReason.PLANNER_UNAVAILABLE,
                                fallback_type=FallbackType.SEMANTIC_UNAVAILABLE)
        return Commit(failed, [("plan", "failed", {"error": type(exc).__name__})], log.attempts)
    state = _logged(state, log)
    events: list[Event] = [("plan", "completed", {
        "intent": pipeline.intent.value, "steps": [s.tool_name for s in plan.steps],
        "evidence_gap_only": gap_mode, "previous_turn": previous.run_id if previous else None})]
    if pipeline.intent is Intent.KNOWLEDGE_QUERY:
        step = next((s for s in plan.steps if s.tool_name == "search_runbooks"), None)
        lookup = ToolCallRequest(
            tool_call_id=mint_tool_call_id(record.run_id, "lookup"),
            tool_name="search_runbooks",
            arguments=step.arguments if step else {"query": pipeline.query},
        )
        transcript = Transcript(query=pipeline.query, plan=plan,
                                turns=[ExecutorTurn(tool_calls=[lookup])])
        next_step = NextStep(node=KNOWLEDGE_NODE, tool_call_ids=[lookup.tool_call_id])
        new = state.model_copy(update={"plan": plan, "transcript": transcript, "next": next_step})
        pending = ToolInvocation(tool_call_id=lookup.tool_call_id, tool_name=lookup.tool_name,
                                 arguments=lookup.arguments, status=LifecycleStatus.PROJECTING)
        return Commit(new, events, log.attempts, invocations=[pending], turn=1)
    transcript = Transcript(query=pipeline.query, plan=plan, previous_turn=previous,
                            gaps=list(state.retry_gaps) if gap_mode else [])
    next_step = NextStep(node=Node.EXECUTE.value)
    new = state.model_copy(update={"plan": plan, "transcript": transcript, "next": next_step})
    return Commit(new, events, log.attempts)


def _execute(rt: Runtime, inp: NodeInput) -> Commit:
    state = inp.state
    assert state.transcript is not None
    invocations = inp.invocations
    transcript = _with_results(state.transcript, invocations)
    log = _attempt_log(rt, inp)
    try:
        step = rt.agents.executor.step(transcript, registry=rt.registry, log=log)
    except RunFailure as exc:
        failed = _model_failure(_logged(state, log), exc, stage="execute",
                                reason=FallbackReason.EXECUTOR_UNAVAILABLE,
                                fallback_type=FallbackType.EVIDENCE_VALIDATION_FAILED)
        return Commit(failed, [("execute", "failed", {"error": type(exc).__name__})],
                      log.attempts)
    state = _logged(state, log)
    used = {i.tool_call_id for i in invocations}
    fresh = [c for c in step.tool_calls if c.tool_call_id not in used]
    max_turns = rt.settings.executor_max_turns
    if step.final_output is None and fresh and len(transcript.turns) < max_turns:
        stored = inp.state.transcript
        assert stored is not None
        turns = [*stored.turns, ExecutorTurn(tool_calls=fresh,
                                             assistant_content=step.assistant_content)]
        ids = [c.tool_call_id for c in fresh]
        new = state.model_copy(update={
            "transcript": stored.model_copy(update={"turns": turns}),
            "next": NextStep(node=Node.EXECUTE.value, tool_call_ids=ids)})
        pending = [ToolInvocation(tool_call_id=c.tool_call_id, tool_name=c.tool_name,
                                  arguments=c.arguments, status=LifecycleStatus.PROJECTING)
                   for c in fresh]
        return Commit(new, [("execute", "tool_calls", {
            "turn": len(turns), "tools": [c.tool_name for c in fresh]})], log.attempts,
            invocations=pending, turn=len(turns))
    raw = step.final_output or ""
    events: list[Event] = []
    raw, repaired = _structural_repair(rt, transcript, raw, log=log, events=events)
    state = _logged(state, log)
    pipeline, _ = nodes.parse_node(state.pipeline, raw)
    pipeline = pipeline.model_copy(update={"structural_repair": repaired})
    route = routing.after_execute(pipeline.executor_status, repaired=repaired)
    new = state.model_copy(update={"pipeline": pipeline, "next": _next_for(route)})
    events.append(("execute", "completed", {
        "executor_status": pipeline.executor_status.value,
        "parse_failure": pipeline.parse_failure, "turns": len(transcript.turns)}))
    return Commit(new, events, log.attempts, executor_output_raw=raw)


def _structural_repair(
    rt: Runtime, transcript: Transcript, raw: str, *, log: AttemptLog, events: list[Event]
) -> tuple[str, bool]:
    """The single no-tool structural repair: an output that fails initial validation goes back
    to the Executor once, with what was wrong. Returns the output to keep and whether a repair
    was asked for; a repair that fails to come back keeps the original output."""
    problems = nodes.structural_problems(raw)
    repair = getattr(rt.agents.executor, "repair", None)
    if not problems or repair is None:
        return raw, False
    try:
        repaired: str | None = repair(transcript, raw, problems, log=log)
    except RunFailure as exc:
        events.append(("execute", "structural_repair", {
            "problems": len(problems), "error": type(exc).__name__}))
        return raw, True
    if repaired is None:
        return raw, False
    left = nodes.structural_problems(repaired)
    events.append(("execute", "structural_repair", {
        "problems": len(problems), "problems_left": len(left)}))
    return repaired, True


def _with_results(transcript: Transcript, invocations: Sequence[ToolInvocation]) -> Transcript:
    by_id = {i.tool_call_id: i for i in invocations}
    turns = [
        turn.model_copy(update={"results": [by_id[c.tool_call_id] for c in turn.tool_calls
                                            if c.tool_call_id in by_id]})
        for turn in transcript.turns
    ]
    return transcript.model_copy(update={"turns": turns})


def _gatekeep(rt: Runtime, inp: NodeInput) -> Commit:
    record, state = inp.head, inp.state
    invocations = inp.invocations
    document = _document(record.run_id, inp.raw_output)
    pipeline = nodes.gatekeep_node(state.pipeline, document, invocations)
    assert pipeline.gatekeeper is not None
    result = pipeline.gatekeeper.result
    route = routing.after_gatekeep(
        result.severity,
        repair_failed=pipeline.structural_repair and RuleId.SCHEMA in result.failed_rules)
    new = state.model_copy(update={"pipeline": pipeline, "next": _next_for(route)})
    return Commit(new, [("gatekeep", "completed", {
        "severity": result.severity.value, "failed_rules": [r.value for r in result.failed_rules],
        "bindings": len(result.checked_bindings)})])


def _verify(rt: Runtime, inp: NodeInput) -> Commit:
    record = inp.head
    log = _attempt_log(rt, inp)
    pipeline = nodes.verify_node(inp.state.pipeline, verifier=rt.agents.verifier, log=log)
    state = _logged(inp.state, log)
    gatekeeper = pipeline.gatekeeper
    assert gatekeeper is not None and pipeline.verdict_ceiling is not None
    gaps = routing.valid_critical_gaps(
        pipeline.evidence_gaps,
        verified_claim_ids={c.claim_id for c in gatekeeper.verified_output.claims},
        known_tools=rt.registry.names(),
    )
    route = routing.after_verify(
        verifier_status=pipeline.verifier_status, verdict=pipeline.effective_verdict,
        ceiling=pipeline.verdict_ceiling, valid_gaps=gaps,
        evidence_retry_count=pipeline.evidence_retry_count,
    )
    events: list[Event] = [("verify", "completed", {
        "verifier_status": pipeline.verifier_status.value,
        "effective_verdict": pipeline.effective_verdict.value
        if pipeline.effective_verdict else None,
        "cycle": pipeline.evidence_retry_count, "route": route.node.value})]
    if pipeline.budget_exceeded:
        route = Route(Node.FALLBACK, FallbackType.SEMANTIC_UNAVAILABLE,
                      FallbackReason.BUDGET_EXCEEDED)
    if route.node is Node.PLAN:
        return _evidence_retry(state, pipeline, gaps, events=events, attempts=log.attempts)
    if pipeline.effective_verdict is not None:
        pipeline = nodes.prepare_composition(pipeline, _document(record.run_id, inp.raw_output))
    new = state.model_copy(update={"pipeline": pipeline, "next": _next_for(route)})
    return Commit(new, events, log.attempts)


def _evidence_retry(
    state: RuntimeState,
    pipeline: PipelineState,
    gaps: list[EvidenceGap],
    *,
    events: list[Event],
    attempts: list[LlmAttempt],
) -> Commit:
    """Start the one EVIDENCE_GAP_ONLY cycle: a fresh pipeline that knows the gaps."""
    count = pipeline.evidence_retry_count + 1
    fresh = PipelineState(
        query=pipeline.query, intent=pipeline.intent, evidence_retry_count=count,
        retry_context=RetryContext(evidence_retry_count=count,
                                   previous_gaps=[g.description for g in gaps]),
    )
    new = state.model_copy(update={
        "pipeline": fresh, "plan": None, "transcript": None, "retry_gaps": gaps,
        "attempt_counters": {}, "next": NextStep(node=Node.PLAN.value)})
    events.append(("verify", "evidence_retry", {"gaps": len(gaps), "cycle": count}))
    return Commit(new, events, attempts, evidence_retry_count=count)


def _compose(rt: Runtime, inp: NodeInput) -> Commit:
    log = _attempt_log(rt, inp)
    pipeline = nodes.compose_node(inp.state.pipeline, composer=rt.agents.composer, log=log)
    state = _logged(inp.state, log)
    route = routing.after_compose(pipeline.composer_status)
    if pipeline.budget_exceeded:
        route = Route(Node.FALLBACK, FallbackType.SEMANTIC_UNAVAILABLE,
                      FallbackReason.BUDGET_EXCEEDED)
    new = state.model_copy(update={"pipeline": pipeline, "next": _next_for(route)})
    return Commit(new, [("compose", "completed", {
        "composer_status": pipeline.composer_status.value})], log.attempts)


def _fallback(rt: Runtime, inp: NodeInput) -> Commit:
    state = inp.state
    assert state.next is not None
    route = Route(Node.FALLBACK, state.next.fallback_type, state.next.reason)
    pipeline = nodes.fallback_node(state.pipeline, route)
    new = state.model_copy(update={"pipeline": pipeline,
                                   "next": NextStep(node=Node.FINALIZE.value)})
    return Commit(new, [("fallback", "completed", {
        "fallback_type": route.fallback_type.value if route.fallback_type else None,
        "reason": route.reason.value if route.reason else None})])


def _knowledge(rt: Runtime, inp: NodeInput) -> Commit:
    state = inp.state
    assert state.transcript is not None
    lookup_id = state.transcript.turns[0].tool_calls[0].tool_call_id
    lookup = _find(inp.invocations, lookup_id)
    pipeline = state.pipeline.model_copy(update={"executor_status": StageStatus.OK})
    answer: KnowledgeAnswer | None = None
    errors = ["the lookup call did not complete"]
    log = _attempt_log(rt, inp)
    if lookup is not None and lookup.status is LifecycleStatus.READY:
        try:
            answer = rt.agents.knowledge.answer(pipeline.query, lookup, log=log)
        except RunFailure as exc:
            failed = _model_failure(_logged(state, log), exc, stage=KNOWLEDGE_NODE,
                                    reason=FallbackReason.KNOWLEDGE_REFERENCE_INVALID,
                                    fallback_type=FallbackType.EVIDENCE_VALIDATION_FAILED)
            return Commit(failed, [(KNOWLEDGE_NODE, "failed", {"error": type(exc).__name__})],
                          log.attempts)
        errors = rt.agents.validate_knowledge(answer, lookup)
    state = _logged(state, log)
    if errors or answer is None:
        route = Route(Node.FALLBACK, FallbackType.EVIDENCE_VALIDATION_FAILED,
                      FallbackReason.KNOWLEDGE_REFERENCE_INVALID)
        pipeline = pipeline.model_copy(update={"failure_stage": KNOWLEDGE_NODE})
    else:
        route = Route(Node.FINALIZE)
        pipeline = pipeline.model_copy(update={
            "composer_status": StageStatus.OK, "composer_output": _knowledge_output(answer)})
    new = state.model_copy(update={"pipeline": pipeline, "knowledge": answer,
                                   "knowledge_errors": errors, "next": _next_for(route)})
    return Commit(new, [(KNOWLEDGE_NODE, "completed", {"errors": errors})], log.attempts)


def _knowledge_output(answer: KnowledgeAnswer) -> ComposerOutput:
    lines = [f"- {item.text} [{', '.join(item.document_ids)}]" for item in answer.items]
    return ComposerOutput(
        answer_summary=answer.items[0].text,
        recommended_actions=[],
        user_facing_answer="From the runbooks:\n" + "\n".join(lines),
    )


_BODIES: dict[str, Body] = {
    Node.PLAN.value: _plan,
    Node.EXECUTE.value: _execute,
    Node.GATEKEEP.value: _gatekeep,
    Node.VERIFY.value: _verify,
    Node.COMPOSE.value: _compose,
    Node.FALLBACK.value: _fallback,
    KNOWLEDGE_NODE: _knowledge,
}
NODE_NAMES = (*_BODIES, Node.FINALIZE.value)
