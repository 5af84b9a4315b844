"""What the run tells the outside about itself: the one observer the pipeline calls.

The runtime, the attempt wrapper, the reconciler and (in other packages) the alert webhook and
the notifier call these plain functions; they count in Prometheus metrics
(`pipeline.telemetry.metrics`, every definition) and, when tracing is on, write OpenTelemetry
spans (`pipeline.telemetry.tracing`). Nothing else in Verity imports prometheus_client or
opentelemetry. Telemetry never fails a run: what it cannot record, it drops.

    run_submitted / run_ended     verity_runs_submitted_total, verity_runs_ended_total,
                                  verity_run_duration_seconds, verity_fallbacks_total; the
                                  run's root span
    node(...)                     verity_node_duration_seconds; the node's span
    model_call / model_retry      verity_model_calls_total, _tokens_total, _cost_usd_total,
                                  _retries_total; a GenAI `chat` span
    tool_call(...)                an `execute_tool` span with gen_ai.tool.call.id
    reconciled / lease_refused    verity_reconciler_actions_total, verity_lease_refusals_total
    delivery / alert_received     verity_notification_deliveries_total, verity_webhook_alerts_total
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from models.run import LlmAttempt
from models.state import RunTelemetry
from pipeline.telemetry import metrics, tracing

__all__ = [
    "NodeWatch", "alert_received", "delivery", "lease_refused", "model_call", "model_retry",
    "new_run_telemetry", "node", "reconciled", "run_ended", "run_submitted", "tool_call",
    "trace_id",
]

_LOG = logging.getLogger(__name__)

DELIVERY_OUTCOMES = frozenset({"delivered", "failed", "retried", "skipped"})
"""What a notification delivery may end as (`delivery`)."""
ALERT_OUTCOMES = frozenset({"received", "deduplicated", "skipped"})
"""What an alert posted to the webhook may become (`alert_received`)."""


def new_run_telemetry() -> RunTelemetry:
    """What a new run carries: when it was submitted (its duration is timed from it)."""
    return RunTelemetry(submitted_at=time.time())


def trace_id(run_id: str) -> str | None:
    """The run's trace id (32 hex) when tracing is on in this process and the sampler keeps
    the run, else None."""
    ids = tracing.traced(run_id)
    return ids[0] if ids else None


def run_submitted(*, intent: str, tenant_id: str) -> None:
    """A run was accepted."""
    metrics.RUNS_SUBMITTED.labels(intent, metrics.tenant_label(tenant_id)).inc()


def run_ended(
    *, status: str, verdict: str | None, intent: str | None, tenant_id: str | None,
    fallback_type: str | None = None, telemetry: RunTelemetry | None = None,
    run_id: str = "",
) -> None:
    """A run reached `status` (terminal): counted, timed from submit and, with tracing on,
    its root span written."""
    tenant = metrics.tenant_label(tenant_id) if tenant_id else ""
    metrics.RUNS_ENDED.labels(status, verdict or "", intent or "", tenant).inc()
    if fallback_type:
        metrics.FALLBACKS.labels(fallback_type).inc()
    if telemetry is None:
        return
    now = time.time()
    metrics.RUN_DURATION.labels(status).observe(max(0.0, now - telemetry.submitted_at))
    ids = tracing.traced(run_id)
    if ids is None:
        return
    attributes = {"verity.run.id": run_id, "verity.run.status": status,
                  "verity.run.verdict": verdict or "", "verity.run.intent": intent or ""}
    if fallback_type:
        attributes["verity.run.fallback_type"] = fallback_type
    _safely(tracing.end_run_span, ids, start_ns=int(telemetry.submitted_at * 1e9),
            end_ns=int(now * 1e9), attributes=attributes)


@dataclass
class NodeWatch:
    """One node message being run; the runtime sets `outcome` before it ends."""

    outcome: str = "error"
    """A `NodeOutcome.kind`; `error` when the node raised (the task retries it)."""


@contextmanager
def node(run_id: str, name: str, *, started: float | None = None) -> Iterator[NodeWatch]:
    """Time one node message (from `started`, perf_counter seconds, else now) and, with
    tracing on, make its span the current one: model calls inside are its children."""
    watch = NodeWatch()
    start = time.perf_counter() if started is None else started
    ids = tracing.traced(run_id)
    try:
        if ids is None:
            yield watch
        else:
            with tracing.span(f"verity.node {name}", ids, {
                    "verity.run.id": run_id, "verity.node": name}) as attributes:
                yield watch
                attributes["verity.node.outcome"] = watch.outcome
    finally:
        metrics.NODE_DURATION.labels(name, watch.outcome).observe(time.perf_counter() - start)


@contextmanager
def tool_call(run_id: str, *, tool_name: str, tool_call_id: str) -> Iterator[None]:
    """With tracing on, the tool call's `execute_tool` span (GenAI conventions)."""
    ids = tracing.traced(run_id)
    if ids is None:
        yield
        return
    with tracing.span(f"execute_tool {tool_name}", ids, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": tool_call_id, "gen_ai.tool.type": "function",
            "verity.run.id": run_id}):
        yield


def model_call(attempt: LlmAttempt, *, provider: str, started_ns: int) -> None:
    """One model attempt ended: counted by outcome, its tokens and cost added and, with
    tracing on, a GenAI `chat` span under the current node's span (else the run's root)."""
    role, model = attempt.role, attempt.model
    metrics.MODEL_CALLS.labels(role, model, attempt.outcome).inc()
    for kind, amount in (("input", attempt.input_tokens), ("output", attempt.output_tokens),
                         ("cache_read", attempt.cache_read_tokens),
                         ("cache_write", attempt.cache_write_tokens)):
        if amount:
            metrics.MODEL_TOKENS.labels(role, model, kind).inc(amount)
    if attempt.cost_usd:
        metrics.MODEL_COST.labels(role, model).inc(attempt.cost_usd)
    ids = tracing.traced(attempt.run_id)
    if ids is not None:
        _safely(_model_span, attempt, ids, provider=provider, started_ns=started_ns)


def _model_span(attempt: LlmAttempt, ids: tuple[str, str], *, provider: str,
                started_ns: int) -> None:
    attributes: dict[str, object] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
        "gen_ai.request.model": attempt.model, "gen_ai.agent.name": attempt.role,
        "gen_ai.usage.input_tokens": attempt.input_tokens,
        "gen_ai.usage.output_tokens": attempt.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": attempt.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": attempt.cache_write_tokens,
        "verity.run.id": attempt.run_id, "verity.model.attempt": attempt.attempt_number,
        "verity.model.outcome": attempt.outcome, "verity.model.cost_usd": attempt.cost_usd,
        "verity.prompt.name": attempt.prompt_name,
        "verity.prompt.version": attempt.prompt_version,
    }
    if attempt.error_type:
        attributes["error.type"] = attempt.error_type
    end_ns = started_ns + int(attempt.latency_ms * 1e6)
    tracing.timed_span(f"chat {attempt.model}", ids, start_ns=started_ns, end_ns=end_ns,
                       attributes=attributes, error=attempt.error_type)


def model_retry(role: str, reason: str) -> None:
    """A model call is sent again (`technical` or `transient`)."""
    metrics.MODEL_RETRIES.labels(role, reason).inc()


_ENDED_BY_RECONCILER = {"failed_deadline": "FAILED", "invalid": "FAILED",
                        "cancelled": "CANCELLED"}
"""The reconciler's actions that end a run, and the status they end it with."""


def reconciled(actions: Mapping[str, int]) -> None:
    """One reconciler sweep's actions, by name (`SweepReport.as_dict()`); the runs it ended
    count as ended (no verdict, intent or tenant: the sweep does not read them)."""
    for action, count in actions.items():
        if not count:
            continue
        metrics.RECONCILER_ACTIONS.labels(action).inc(count)
        status = _ENDED_BY_RECONCILER.get(action)
        if status is not None:
            metrics.RUNS_ENDED.labels(status, "", "", "").inc(count)


def lease_refused(node_name: str) -> None:
    """A node message found another live copy holding the node's lease."""
    metrics.LEASE_REFUSALS.labels(node_name).inc()


def delivery(outcome: str) -> None:
    """A notification delivery ended as `outcome` (one of `DELIVERY_OUTCOMES`); ValueError
    for another (a typo must not make a new series)."""
    if outcome not in DELIVERY_OUTCOMES:
        raise ValueError(f"unknown delivery outcome: {outcome!r}")
    metrics.DELIVERIES.labels(outcome).inc()


def alert_received(outcome: str) -> None:
    """An alert posted to the webhook was `received` (a run started), `deduplicated` or
    `skipped`; ValueError for another outcome."""
    if outcome not in ALERT_OUTCOMES:
        raise ValueError(f"unknown alert outcome: {outcome!r}")
    metrics.WEBHOOK_ALERTS.labels(outcome).inc()


def _safely(write: object, *args: object, **kwargs: object) -> None:
    try:
        write(*args, **kwargs)  # type: ignore[operator]
    except Exception:  # a span that cannot be written must not touch the run
        _LOG.warning("telemetry: span not written", exc_info=True)
