"""Verity's own Prometheus metrics: every definition, and the page `/metrics` serves.

Every process that runs Verity code (the API, each worker, the reconciler) counts in these
metrics. With `PROMETHEUS_MULTIPROC_DIR` set in the environment of every process before it
starts (prometheus_client reads it at import), each process writes its samples to files in that
directory and `exposition()` in any one of them collects them all: the API's `/metrics` then
shows the whole machine. The directory must be emptied before the processes start (a stale
file of a dead process would count again). Without it, `exposition()` is this process's own
registry, and a worker serves its own with `verity worker --metrics-port N`.

Tenant ids are not labels: a label's values are bounded and visible to whoever scrapes. The
`tenant` label of the run counters is empty unless `VERITY_METRICS_TENANTS` lists the tenants
to show by id (an opt-in); every other tenant counts as `other`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from functools import cache

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "exposition", "queue_depth_collector", "tenant_label"]

_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_NODE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                 60.0, 120.0)

RUNS_SUBMITTED = Counter(
    "verity_runs_submitted", "Runs accepted, by routed intent.", ["intent", "tenant"])
RUNS_ENDED = Counter(
    "verity_runs_ended", "Runs that reached a terminal status, by status and effective verdict "
    "(empty when none).", ["status", "verdict", "intent", "tenant"])
RUN_DURATION = Histogram(
    "verity_run_duration_seconds", "Submit to terminal status, by status.", ["status"],
    buckets=_DURATION_BUCKETS)
NODE_DURATION = Histogram(
    "verity_node_duration_seconds", "One node message, by node and outcome (committed, stale, "
    "leased, cancelled, terminal, failed).", ["node", "outcome"], buckets=_NODE_BUCKETS)
MODEL_CALLS = Counter(
    "verity_model_calls", "Model attempts by role, model and outcome (ok, unavailable, "
    "invalid_output, guard_rejected, rejected, cancelled, error).", ["role", "model", "outcome"])
MODEL_TOKENS = Counter(
    "verity_model_tokens", "Model tokens by role, model and kind (input, output, cache_read, "
    "cache_write).", ["role", "model", "kind"])
MODEL_COST = Counter(
    "verity_model_cost_usd", "Model cost in US dollars by role and model.", ["role", "model"])
MODEL_RETRIES = Counter(
    "verity_model_retries", "Model calls sent again, by role and reason (technical: the "
    "answer did not parse; transient: the provider was unavailable).", ["role", "reason"])
FALLBACKS = Counter(
    "verity_fallbacks", "Runs released as a safe fallback, by fallback type.", ["type"])
RECONCILER_ACTIONS = Counter(
    "verity_reconciler_actions", "What the reconciler did: resent, failed_deadline, "
    "cancelled, invalid, resend_errors.", ["action"])
LEASE_REFUSALS = Counter(
    "verity_lease_refusals", "Node messages refused because another live copy holds the "
    "node's lease, by node.", ["node"])
DELIVERIES = Counter(
    "verity_notification_deliveries", "Notification deliveries by outcome.", ["outcome"])
WEBHOOK_ALERTS = Counter(
    "verity_webhook_alerts", "Alerts received on the alert webhook, by outcome (received, "
    "deduplicated, skipped).", ["outcome"])


@cache
def _shown_tenants() -> frozenset[str]:
    raw = os.environ.get("VERITY_METRICS_TENANTS", "")
    return frozenset(t.strip() for t in raw.split(",") if t.strip())


def tenant_label(tenant_id: str) -> str:
    """The `tenant` label of a run counter: the id only for tenants `VERITY_METRICS_TENANTS`
    lists, `other` for the rest, empty when it lists none (the default)."""
    shown = _shown_tenants()
    if not shown:
        return ""
    return tenant_id if tenant_id in shown else "other"


class _Forward(Collector):
    """Another registry's metrics, collected into a fresh one."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        return self._source.collect()


class _Gauges(Collector):
    """Gauges read at scrape time."""

    def __init__(self, name: str, doc: str, label: str,
                 read: Callable[[], dict[str, float]]) -> None:
        self._name, self._doc, self._label, self._read = name, doc, label, read

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self._name, self._doc, labels=[self._label])
        for value, amount in self._read().items():
            family.add_metric([value], amount)
        yield family


def queue_depth_collector(read: Callable[[], dict[str, float]]) -> Collector:
    """`verity_queue_depth{queue}`: messages waiting per queue, as `read()` counts them when
    scraped."""
    return _Gauges("verity_queue_depth", "Messages waiting in each broker queue.", "queue", read)


def _registry(extra: Iterable[Collector] = ()) -> CollectorRegistry:
    """Every process's samples (multiprocess mode) or this process's, plus `extra`."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Forward(REGISTRY))
    for collector in extra:
        registry.register(collector)
    return registry


def exposition(extra: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The text page and its content type (see `_registry`)."""
    return generate_latest(_registry(extra)), CONTENT_TYPE_LATEST


def serve(port: int, *, addr: str = "0.0.0.0") -> None:
    """Serve the page on `port` from a daemon thread (`verity worker --metrics-port`)."""
    start_http_server(port, addr=addr, registry=_registry())
