"""What the node bodies share: the step they return, their inputs, and attempt bookkeeping."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from models.agent import PreviousTurn
from models.common import FallbackType
from models.fallback import FallbackReason
from models.gatekeeper import GatekeeperOutcome
from models.invocation import ToolInvocation
from models.run import LlmAttempt, RunHead
from models.state import NodeFailure, PipelineState, RuntimeState
from pipeline.agents.protocols import Agents
from pipeline.config import VeritySettings
from pipeline.errors import BudgetExceededError, RunFailure, StaleStateError
from pipeline.prompts import merge_prompt_uses, prompts_used
from pipeline.rules.executor_output import parse_executor_output
from pipeline.run.attempts import AttemptJournal, AttemptLog, RetryPolicy
from pipeline.tools.registry import ToolRegistry

Event = tuple[str, str, dict[str, Any]]
"""(node, kind, payload): one entry of a run's orchestration trace."""


@dataclass(frozen=True, slots=True)
class NodeInput:
    """What one node reads, in one round trip."""

    head: RunHead
    state: RuntimeState
    raw_output: str | None
    invocations: list[ToolInvocation]


@dataclass
class Step:
    """What a node body hands back: its state, trace, model attempts and requested tool calls,
    to be committed under the run's version (the graph sets `state.next`)."""

    state: RuntimeState
    events: list[Event] = field(default_factory=list)
    attempts: list[LlmAttempt] = field(default_factory=list)
    executor_output_raw: str | None = None
    evidence_retry_count: int | None = None
    invocations: list[ToolInvocation] = field(default_factory=list)
    """New PROJECTING tool calls: they fan out as one chord before the next node."""
    turn: int = 0


def _no_previous_turn(_tenant_id: str, _session_id: str, _run_id: str) -> PreviousTurn | None:
    return None


@dataclass(frozen=True)
class NodeContext:
    """What a body may use besides its input: agents, tools, settings, and the session's
    previous turn (the one read a body makes beyond its input)."""

    agents: Agents
    registry: ToolRegistry
    settings: VeritySettings
    previous_turn: Callable[[str, str, str], PreviousTurn | None] = _no_previous_turn
    """(the run's tenant, session_id, this run's id) -> the latest successful diagnosis of that
    tenant's session (sessions are per tenant)."""
    evidence_retry: bool = True
    """Whether this driver can run the EVIDENCE_GAP_ONLY cycle (a bundle has no tools)."""
    retry_policy: RetryPolicy | None = None
    """The model calls' retries; None leaves them to the model's `Retrying` wrapper (else
    `IMMEDIATE`)."""
    journal: AttemptJournal | None = None
    """Where remote models' attempts are written as they happen (the run store)."""


def attempt_log(ctx: NodeContext, inp: NodeInput) -> AttemptLog:
    """The node's attempt log, continuing the run's attempt numbers and token count."""
    return AttemptLog(
        inp.head.run_id, start=inp.state.attempt_counters,
        token_budget=ctx.settings.token_budget, tokens_used=inp.state.tokens_used,
        cycle=inp.state.pipeline.evidence_retry_count,
        policy=ctx.retry_policy, journal=ctx.journal,
    )


def logged(state: RuntimeState, log: AttemptLog) -> RuntimeState:
    """`state` with the log's attempt numbers, token count and the prompts its attempts used."""
    used = merge_prompt_uses(state.prompts_used, prompts_used([*log.attempts, *log.journaled]))
    return state.model_copy(update={"attempt_counters": log.counters(),
                                    "tokens_used": log.tokens_used, "prompts_used": used})


def model_failure(
    state: RuntimeState, exc: RunFailure, *, stage: str, reason: FallbackReason,
    fallback_type: FallbackType,
) -> RuntimeState:
    """A failed planner, executor or knowledge call: the state routes to its fallback."""
    if isinstance(exc, BudgetExceededError):
        fallback_type, reason = FallbackType.SEMANTIC_UNAVAILABLE, FallbackReason.BUDGET_EXCEEDED
    pipeline = state.pipeline.model_copy(update={
        "failure_stage": stage, "budget_exceeded": isinstance(exc, BudgetExceededError)})
    return state.model_copy(update={
        "pipeline": pipeline, "failure": NodeFailure(fallback_type=fallback_type, reason=reason)})


def document(run_id: str, raw_output: str | None) -> dict[str, Any]:
    """The parsed Executor document a node after execute reads."""
    parsed = parse_executor_output(raw_output or "")
    if parsed.document is None:
        raise StaleStateError(f"run {run_id} has no parsed executor output")
    return parsed.document


def find(invocations: Sequence[ToolInvocation], tool_call_id: str) -> ToolInvocation | None:
    """The invocation with this id, if any."""
    return next((i for i in invocations if i.tool_call_id == tool_call_id), None)


def gatekeeper_of(state: PipelineState) -> GatekeeperOutcome:
    """The Gatekeeper's outcome; ValueError before it ran."""
    if state.gatekeeper is None:
        raise ValueError("the Gatekeeper has not run")
    return state.gatekeeper
