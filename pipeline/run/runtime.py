"""The run over the store: load a node's input, check its version, commit its step, cancel.

What runs and what follows is `pipeline/run/graph.py`'s; this module only persists it. `tasks/`
turns each `NodeOutcome.next` into Celery messages. A node runs only when the run is at the
version its message carries and commits under that version, so a duplicate or redelivered
message changes nothing. A message lost before or after its node committed (a Redis restart, a
worker killed between commit and dispatch) is found by the reconciler
(`pipeline/run/reconciler.py`), which re-sends the stored next step through this same path.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from models.agent import PreviousTurn, ToolCallRequest
from models.bundle import RunResult
from models.common import Intent, RunStatus
from models.delivery import NewDelivery
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from models.run import RunHead
from models.state import NextStep, PipelineState, RuntimeState
from pipeline import telemetry
from pipeline.agents.protocols import Agents
from pipeline.config import VeritySettings
from pipeline.errors import (
    RunCancelledError,
    StaleStateError,
    StoreError,
    StoreUnavailableError,
)
from pipeline.notify.plan import plan_deliveries
from pipeline.rules.notify import ALERT_ORIGIN
from pipeline.run.attempts import RetryPolicy
from pipeline.run.cancellation import CancelToken
from pipeline.run.evaluation import run_result
from pipeline.run.graph import GRAPH, Graph
from pipeline.run.lease import LeaseKeeper
from pipeline.run.nodes.common import NodeContext, NodeInput, Step
from pipeline.sources.config import NotifyTarget
from pipeline.store import RunStore
from pipeline.tools.registry import ToolRegistry, clean_error, run_tool

__all__ = ["Agents", "NodeInput", "NodeOutcome", "Runtime", "Step"]

MODEL_QUEUE = "llm"
"""Nodes on this queue call models: one copy at a time runs each, under the run's lease."""
_KEEPER_LOCK = threading.Lock()

OutcomeKind = Literal[
    "committed", "stale", "leased", "cancelled", "terminal", "failed", "redispatch"]
"""`leased`: another live copy runs the node; `redispatch`: what the reconciler sends, the
stored next step again."""

_LOG = logging.getLogger(__name__)
"""A node that fails its run logs its traceback here (the run keeps a one-line error)."""


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """What happened to one node message, and what to dispatch next (if anything)."""

    kind: OutcomeKind
    version: int
    next: NextStep | None = None
    deliveries: tuple[str, ...] = ()
    """Notification deliveries the run's release enqueued: to send now (the reconciler
    re-drives any whose message is lost)."""


@dataclass
class Runtime:
    """The graph's nodes over one store, tool registry and agent set."""

    store: RunStore
    registry: ToolRegistry
    agents: Agents
    settings: VeritySettings
    source_loader: Callable[[str | None], Any]
    graph: Graph = GRAPH
    """The graph to drive; benchmarks drive one with instant bodies."""
    leases: LeaseKeeper | None = None
    """Node leases for the nodes that call models; built on first use from the settings."""
    notify_targets: Callable[[str], Sequence[NotifyTarget]] = lambda _tenant: ()
    """A tenant's notification targets (the sources file's); none by default."""

    # -- entry points ---------------------------------------------------------------------

    def submit(
        self,
        query: str,
        *,
        tenant_id: str,
        session_id: str | None = None,
        source: str | None = None,
        run_id: str | None = None,
        deadline_s: float | None = None,
        origin: str = "run",
    ) -> str:
        """Create the run of `tenant_id` with its intent routed; the caller dispatches
        `coordinate(run, 0)`. `session_id` names one of the tenant's sessions. It must end
        within `deadline_s` seconds (default `VERITY_RUN_DEADLINE_S`), or the reconciler ends
        it FAILED. `origin`: what started it (`run`, or `alert` for a firing alert group)."""
        intent = self.agents.classify_intent(query)
        state = RuntimeState(
            pipeline=PipelineState(query=query, intent=intent),
            session_id=session_id,
            next=NextStep(node=self.graph.entry),
            telemetry=telemetry.new_run_telemetry(),
        )
        run_id = run_id or uuid.uuid4().hex
        created = self.store.create_run(
            tenant_id=tenant_id, query=query, intent=intent, session_id=session_id, run_id=run_id,
            source=source, state=_dump(state), trace_id=telemetry.trace_id(run_id), origin=origin,
            deadline_s=self.settings.run_deadline_s if deadline_s is None else deadline_s,
            events=[("submit", "accepted", {"intent": intent.value})],
        )
        telemetry.run_submitted(intent=intent.value, tenant_id=tenant_id)
        return created

    def coordinate(self, run_id: str, version: int, node: str | None = None) -> NodeOutcome:
        """Entry and chord body: dispatch `node` (or the stored next step, tool calls and all)
        at `version`.

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
        return NodeOutcome("committed", version, NextStep.model_validate(step))

    def run_node(self, run_id: str, node: str, version: int) -> NodeOutcome:
        """Run `node` if the run is at `version`; commit its step under that version. Timed
        and traced as one node message (`pipeline.telemetry.node`)."""
        with telemetry.node(run_id, node) as watch:
            outcome = self._run_node(run_id, node, version)
            watch.outcome = outcome.kind
        return outcome

    def _run_node(self, run_id: str, node: str, version: int) -> NodeOutcome:
        spec = self.graph.spec(node)
        inp = self._load(run_id, spec.reads_output, spec.reads_invocations)
        record, state = inp.head, inp.state
        stop = self._stopped(record, state)
        if stop is not None:
            return stop
        if record.version != version or state.next is None or state.next.node != node:
            return NodeOutcome("stale", record.version)
        if node == self.graph.terminal:
            return self._finalize(inp)
        if spec.queue != MODEL_QUEUE:
            return self._advance(inp, node)
        with self._keeper().hold(run_id, version) as held:
            if not held.acquired:  # another live copy runs it, or the run moved on
                if held.outcome.state == "leased":
                    telemetry.lease_refused(node)
                return self._refused(run_id, held.outcome.state, held.outcome.version)
            if self._remote:
                self.store.abandon_in_flight(run_id)  # rows of a copy that died mid-call
            outcome = self._advance(inp, node, token=held.token)
            if outcome.kind in ("committed", "failed"):
                held.mark_cleared()  # the commit cleared the lease with the version bump
            return outcome

    def _advance(self, inp: NodeInput, node: str, *, token: CancelToken | None = None
                 ) -> NodeOutcome:
        try:
            step = self.graph.advance(self.context(), node, inp)
        except StoreUnavailableError:
            raise  # the task waits the database out and runs the node again
        except RunCancelledError:
            return self._interrupted(inp.head, NodeOutcome("cancelled", inp.head.version))
        except Exception as exc:  # a node that cannot go on fails the run, visibly
            # INFO: a worker's log shows it; a CLI without logging set up prints nothing
            _LOG.info("run %s: node %s failed", inp.head.run_id, node, exc_info=True)
            return self._fail(inp.head, inp.state, node=node, error=exc)
        if token is not None and token.cancelled:
            # the run was cancelled or ended, or this copy lost its lease, while its model
            # answered: its step (a fallback for the interrupted call) is not the run's. Every
            # request a remote model sent is already a row (journaled as it went out); offline
            # agents send none, and their attempts go with the step they belong to.
            return self._interrupted(inp.head, NodeOutcome("leased", inp.head.version))
        return self._commit(inp.head, node, step)

    def _interrupted(self, head: RunHead, otherwise: NodeOutcome) -> NodeOutcome:
        """Why an interrupted copy stops: the run's end, or (its lease gone) another copy."""
        current = self.store.get_head(head.run_id)[0]
        stop = self._stopped(current)
        return stop if stop is not None else otherwise

    def _refused(self, run_id: str, state: str, version: int) -> NodeOutcome:
        if state == "leased":
            return NodeOutcome("leased", version)
        if state == "ended":
            stop = self._stopped(self.store.get_head(run_id)[0])
            if stop is not None:
                return stop
        return NodeOutcome("stale", version)

    def run_tool_call(self, run_id: str, tool_call_id: str) -> ToolInvocation | None:
        """Run one requested tool call at most once to completion; never raises on the call's
        own failure (an ERROR invocation, the run goes on).

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
        with telemetry.tool_call(run_id, tool_name=pending.tool_name,
                                 tool_call_id=tool_call_id):
            result = self._call_tool(head, pending)
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

    def cancel(self, run_id: str, *, tenant_id: str) -> bool:
        """Flag the tenant's run and end it CANCELLED now: no node commits or releases after
        this. RunNotFoundError if the tenant has no such run."""
        self.store.request_cancel(run_id, tenant_id=tenant_id)
        ended = self.store.cancel_run(run_id, reason="cancel requested")
        if ended:
            telemetry.run_ended(status=RunStatus.CANCELLED.value, verdict=None, intent=None,
                                tenant_id=tenant_id, run_id=run_id)
        return ended

    def context(self, *, evidence_retry: bool = True) -> NodeContext:
        """What the node bodies may use: this runtime's agents, tools, settings and store."""
        return NodeContext(agents=self.agents, registry=self.registry, settings=self.settings,
                           previous_turn=self._previous_turn, evidence_retry=evidence_retry,
                           retry_policy=RetryPolicy.from_settings(self.settings),
                           journal=self.store)

    def close(self) -> None:
        """Stop the lease keeper and close the store."""
        if self.leases is not None:
            self.leases.close()
        self.store.close()

    # -- helpers -------------------------------------------------------------------------

    def _keeper(self) -> LeaseKeeper:
        with _KEEPER_LOCK:
            if self.leases is None:
                self.leases = LeaseKeeper(self.store, ttl_s=self.settings.lease_ttl_s,
                                          renew_s=self.settings.lease_renew_s)
            return self.leases

    @property
    def _remote(self) -> bool:
        """Whether any agent sends network requests (its attempts are journaled)."""
        return self.agents.remote

    def _call_tool(self, head: RunHead, pending: ToolInvocation) -> ToolInvocation:
        request = ToolCallRequest(tool_call_id=pending.tool_call_id,
                                  tool_name=pending.tool_name, arguments=pending.arguments)
        try:
            source = self.source_loader(head.source)
        except StoreUnavailableError:
            raise
        except Exception as exc:  # a source that cannot be loaded fails the call, not the run
            return pending.model_copy(update={
                "status": LifecycleStatus.ERROR, "evidence_status": EvidenceStatus.ERROR,
                "projection": None, "error": f"data source unavailable: {clean_error(exc)}"})
        return run_tool(self.registry, request, source=source,
                        max_items=self.settings.projection_max_items,
                        max_bytes=self.settings.projection_max_bytes)

    def _previous_turn(self, tenant_id: str, session_id: str, run_id: str
                       ) -> PreviousTurn | None:
        prior = self.store.previous_turn(tenant_id, session_id)
        if prior is None or prior.run_id == run_id or prior.final_answer is None \
                or prior.intent is not Intent.DIAGNOSIS:
            return None
        return PreviousTurn(run_id=prior.run_id, query=prior.query,
                            answer_summary=prior.final_answer.answer_summary)

    def _load(self, run_id: str, output: bool, invocations: bool) -> NodeInput:
        head, raw, raw_output, calls = self.store.get_node_input(
            run_id, with_executor_output=output, with_invocations=invocations)
        if raw is None:
            raise StaleStateError(f"run {run_id} has no runtime state")
        return NodeInput(head, RuntimeState.model_validate(raw), raw_output, calls)

    def _commit(self, record: RunHead, node: str, step: Step) -> NodeOutcome:
        try:
            new_version = self.store.commit_node(
                record.run_id, expected_version=record.version, node=node,
                state=_dump(step.state), status=RunStatus.RUNNING, events=step.events,
                attempts=step.attempts, executor_output_raw=step.executor_output_raw,
                evidence_retry_count=step.evidence_retry_count,
                invocations=step.invocations, turn=step.turn,
            )
        except StaleStateError:
            return NodeOutcome("stale", record.version)
        except StoreUnavailableError:
            raise
        except StoreError as exc:  # a write the store refuses (a duplicate id ...) ends the run
            return self._fail(record, step.state, node=node, error=exc)
        return NodeOutcome("committed", new_version, step.state.next)

    def _stopped(self, record: RunHead, state: RuntimeState | None = None
                 ) -> NodeOutcome | None:
        if record.status.terminal:
            return NodeOutcome("terminal", record.version)
        if record.cancel_requested:
            if self.store.cancel_run(record.run_id, reason="cancel requested"):
                _ended(record, state, status=RunStatus.CANCELLED)
            return NodeOutcome("cancelled", record.version)
        return None

    def _fail(
        self, record: RunHead, state: RuntimeState, *, node: str, error: Exception
    ) -> NodeOutcome:
        message = clean_error(error)
        try:
            version = self.store.commit_node(
                record.run_id, expected_version=record.version, node=node,
                state=_dump(state.model_copy(update={"next": None})), status=RunStatus.FAILED,
                events=[(node, "failed", {"error": message})],
            )
        except StaleStateError:
            return NodeOutcome("stale", record.version)
        _ended(record, state, status=RunStatus.FAILED)
        return NodeOutcome("failed", version)

    def _finalize(self, inp: NodeInput) -> NodeOutcome:
        record = inp.head
        result = run_result(record.run_id, inp.state.pipeline, inp.invocations,
                            prompts_used=inp.state.prompts_used)
        deliveries = self._plan_deliveries(record, result)
        try:
            released = self.store.finalize(record.run_id, result, expected_version=record.version,
                                           deliveries=deliveries)
        except StaleStateError:
            return NodeOutcome("stale", record.version)
        if not released:
            return NodeOutcome("cancelled", record.version + 1)
        _ended(record, inp.state, status=RunStatus(result.status),
               verdict=result.verdict.value if result.verdict else None,
               fallback_type=result.fallback_type.value if result.fallback_type else None)
        return NodeOutcome("committed", record.version + 1,
                           deliveries=tuple(d.delivery_id for d in deliveries))

    def _plan_deliveries(self, record: RunHead, result: RunResult) -> list[NewDelivery]:
        """The deliveries the release enqueues; the run's origin is read only when a rule
        asks for it ("alert")."""
        targets = self.notify_targets(record.tenant_id)
        if not targets:
            return []
        origin = "run"
        if any(target.when == ALERT_ORIGIN for target in targets):
            origin = self.store.get_run(record.run_id, tenant_id=record.tenant_id).origin
        return plan_deliveries(
            record.run_id, targets, status=result.status,
            verdict=result.verdict.value if result.verdict else None, origin=origin)


def _ended(record: RunHead, state: RuntimeState | None, *, status: RunStatus,
           verdict: str | None = None, fallback_type: str | None = None) -> None:
    """Tell telemetry the run ended (once: after the write that ended it)."""
    telemetry.run_ended(
        status=status.value, verdict=verdict, fallback_type=fallback_type,
        intent=state.pipeline.intent.value if state else None, tenant_id=record.tenant_id,
        telemetry=state.telemetry if state else None, run_id=record.run_id)


def _dump(state: RuntimeState) -> dict[str, Any]:
    return state.model_dump(mode="json")


NODE_NAMES = tuple(GRAPH.nodes)
"""Every node of the run's graph: one Celery task each (`verity.node.<name>`)."""
