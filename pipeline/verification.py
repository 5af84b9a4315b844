"""`verity verify`: parse → gatekeep → verify → compose (or the fallback) on a run bundle."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from models.bundle import RunBundle, RunResult
from models.run import LlmAttempt
from models.state import PipelineState
from pipeline import nodes, routing
from pipeline.agents.base import SingleTurnModel
from pipeline.attempts import AttemptLog
from pipeline.errors import BundleError
from pipeline.evaluation import run_result
from pipeline.routing import Node, Route

Event = tuple[str, str, dict[str, Any]]


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
) -> VerifiedRun:
    """Run the deterministic pipeline and the two agents over a bundle; never raises on content."""
    run_id = run_id or uuid.uuid4().hex
    log = AttemptLog(run_id)
    run = VerifiedRun(result=None)  # type: ignore[arg-type]
    state = PipelineState(
        query=bundle.query, intent=bundle.intent, retry_context=bundle.retry_context,
        evidence_retry_count=bundle.retry_context.evidence_retry_count if bundle.retry_context
        else 0,
    )
    state, route = _run_nodes(state, bundle, verifier=verifier, composer=composer, log=log,
                              events=run.events)
    if route.node is Node.FALLBACK:
        state = nodes.fallback_node(state, route)
        run.events.append(("fallback", "completed", {
            "fallback_type": route.fallback_type, "reason": route.reason}))
    run.result = run_result(run_id, state, bundle.invocations)
    run.attempts = log.attempts
    return run


def _run_nodes(
    state: PipelineState,
    bundle: RunBundle,
    *,
    verifier: SingleTurnModel,
    composer: SingleTurnModel,
    log: AttemptLog,
    events: list[Event],
) -> tuple[PipelineState, Route]:
    state, document = nodes.parse_node(state, bundle.executor_output_raw)
    events.append(("execute", "parsed", {"executor_status": state.executor_status,
                                         "parse_failure": state.parse_failure}))
    route = routing.after_execute(state.executor_status)
    if document is None or route.node is not Node.GATEKEEP:
        return state, route
    state = nodes.gatekeep_node(state, document, bundle.invocations)
    assert state.gatekeeper is not None
    events.append(("gatekeep", "completed", {
        "severity": state.gatekeeper.result.severity,
        "failed_rules": state.gatekeeper.result.failed_rules}))
    route = routing.after_gatekeep(state.gatekeeper.result.severity)
    if route.node is not Node.VERIFY:
        return state, route
    state = nodes.verify_node(state, verifier=verifier, log=log)
    events.append(("verify", "completed", {
        "verifier_status": state.verifier_status, "effective_verdict": state.effective_verdict}))
    route, retry_eligible = _after_verify(state)
    if retry_eligible:
        events.append(("verify", "evidence_retry_unavailable",
                       {"reason": "a bundle has no tools to call; composing instead"}))
    if state.effective_verdict is None:
        return state, route
    state = nodes.prepare_composition(state, document)
    if route.node is not Node.COMPOSE:
        return state, route
    state = nodes.compose_node(state, composer=composer, log=log)
    events.append(("compose", "completed", {"composer_status": state.composer_status}))
    return state, routing.after_compose(state.composer_status)


def _after_verify(state: PipelineState) -> tuple[Route, bool]:
    """The route after the Verifier, and whether an evidence retry would have been due.

    A bundle has no tools to call: an eligible evidence retry is recorded, then composed.
    """
    assert state.verdict_ceiling is not None and state.gatekeeper is not None
    gaps = routing.valid_critical_gaps(
        state.evidence_gaps,
        verified_claim_ids={c.claim_id for c in state.gatekeeper.verified_output.claims},
    )
    route = routing.after_verify(
        verifier_status=state.verifier_status,
        verdict=state.effective_verdict,
        ceiling=state.verdict_ceiling,
        valid_gaps=gaps,
        evidence_retry_count=state.evidence_retry_count,
        retry_supported=False,
    )
    eligible = state.effective_verdict is not None and routing.evidence_retry_eligible(
        verdict=state.effective_verdict, ceiling=state.verdict_ceiling, valid_gaps=gaps,
        evidence_retry_count=state.evidence_retry_count,
    )
    return route, eligible
