"""Verity's own metrics, in this process's registry: a whole offline run counts as submitted,
ended by status and verdict, timed per node, its model calls by role; the small API other
packages call (deliveries, webhook alerts) refuses unknown outcomes; tenant ids are labels only
for the tenants an operator opts in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from models.common import RunStatus
from pipeline import telemetry
from pipeline.config import VeritySettings
from pipeline.errors import ProviderOutputInvalidError, ProviderUnavailableError
from pipeline.factory import build_runtime
from pipeline.model import ModelReply
from pipeline.prompts import load_prompt
from pipeline.run.attempts import AttemptLog, RetryPolicy, attempt_call
from pipeline.run.reconciler import SweepReport
from pipeline.telemetry import metrics
from tests.providers.test_fake_runs import drive

TENANT = "team-a"


def value(name: str, **labels: str) -> float:
    """A sample's current value (0 when the series does not exist yet)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def shown_tenants(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    metrics._shown_tenants.cache_clear()
    yield
    monkeypatch.delenv("VERITY_METRICS_TENANTS", raising=False)
    metrics._shown_tenants.cache_clear()


def test_an_offline_run__is_counted_submitted_ended_timed_and_its_model_calls(
        tmp_path: Path, shown_tenants: None) -> None:
    runtime = build_runtime(VeritySettings(database_url=f"sqlite:///{tmp_path / 'r.db'}"))
    ended_before = value("verity_runs_ended_total", status="SUCCESS", verdict="PASS",
                         intent="DIAGNOSIS", tenant="")
    submitted_before = value("verity_runs_submitted_total", intent="DIAGNOSIS", tenant="")
    verify_before = value("verity_node_duration_seconds_count", node="verify",
                          outcome="committed")
    calls_before = value("verity_model_calls_total", role="verifier",
                         model="offline-lexical-verifier-1", outcome="ok")
    finished_before = value("verity_run_duration_seconds_count", status="SUCCESS")

    run = runtime.store.get_run(drive(runtime, "checkout-pool-exhaustion"), tenant_id=TENANT)

    assert run.status is RunStatus.SUCCESS and run.verdict is not None
    assert run.verdict.value == "PASS"
    assert value("verity_runs_submitted_total", intent="DIAGNOSIS",
                 tenant="") == submitted_before + 1
    assert value("verity_runs_ended_total", status="SUCCESS", verdict="PASS",
                 intent="DIAGNOSIS", tenant="") == ended_before + 1
    assert value("verity_run_duration_seconds_count", status="SUCCESS") == finished_before + 1
    assert value("verity_node_duration_seconds_count", node="verify",
                 outcome="committed") == verify_before + 1
    assert value("verity_model_calls_total", role="verifier", model="offline-lexical-verifier-1",
                 outcome="ok") == calls_before + 1
    runtime.close()


def test_a_cancelled_run__counts_as_ended_cancelled(tmp_path: Path) -> None:
    runtime = build_runtime(VeritySettings(database_url=f"sqlite:///{tmp_path / 'r.db'}"))
    before = value("verity_runs_ended_total", status="CANCELLED", verdict="", intent="",
                   tenant="")
    run_id = runtime.submit("Why is checkout-service returning 500s?", tenant_id=TENANT)
    assert runtime.cancel(run_id, tenant_id=TENANT)
    assert not runtime.cancel(run_id, tenant_id=TENANT)  # ended once, counted once
    assert value("verity_runs_ended_total", status="CANCELLED", verdict="", intent="",
                 tenant="") == before + 1
    runtime.close()


def test_tenant_ids__are_labels_only_for_the_tenants_opted_in(
        monkeypatch: pytest.MonkeyPatch, shown_tenants: None) -> None:
    assert metrics.tenant_label("team-a") == ""
    monkeypatch.setenv("VERITY_METRICS_TENANTS", "team-a, team-b")
    metrics._shown_tenants.cache_clear()
    assert metrics.tenant_label("team-a") == "team-a"
    assert metrics.tenant_label("team-z") == "other"


@pytest.mark.parametrize(("call", "name", "outcome"), [
    (telemetry.delivery, "verity_notification_deliveries_total", "delivered"),
    (telemetry.delivery, "verity_notification_deliveries_total", "failed"),
    (telemetry.alert_received, "verity_webhook_alerts_total", "received"),
    (telemetry.alert_received, "verity_webhook_alerts_total", "deduplicated"),
    (telemetry.alert_received, "verity_webhook_alerts_total", "skipped"),
])
def test_deliveries_and_webhook_alerts__count_by_outcome(call: object, name: str,
                                                          outcome: str) -> None:
    before = value(name, outcome=outcome)
    call(outcome)  # type: ignore[operator]
    assert value(name, outcome=outcome) == before + 1


@pytest.mark.parametrize("call", [telemetry.delivery, telemetry.alert_received])
def test_an_unknown_outcome__is_refused_and_makes_no_series(call: object) -> None:
    with pytest.raises(ValueError, match="unknown"):
        call("sent")  # type: ignore[operator]
    assert b'outcome="sent"' not in metrics.exposition()[0]


def test_a_sweep__counts_its_actions_and_the_runs_it_ended() -> None:
    failed = value("verity_runs_ended_total", status="FAILED", verdict="", intent="", tenant="")
    resent = value("verity_reconciler_actions_total", action="resent")
    telemetry.reconciled(SweepReport(resent=2, failed_deadline=1, invalid=1).as_dict())
    assert value("verity_reconciler_actions_total", action="resent") == resent + 2
    assert value("verity_runs_ended_total", status="FAILED", verdict="", intent="",
                 tenant="") == failed + 2


def test_the_page__holds_the_samples_and_the_queue_depths() -> None:
    telemetry.lease_refused("verify")
    telemetry.model_retry("verifier", "transient")
    depths = metrics.queue_depth_collector(lambda: {"llm": 3.0})
    page, content_type = metrics.exposition([depths])
    assert content_type.startswith("text/plain")
    text = page.decode()
    assert 'verity_queue_depth{queue="llm"} 3.0' in text
    assert 'verity_lease_refusals_total{node="verify"}' in text
    assert 'verity_model_retries_total{reason="transient",role="verifier"}' in text


def test_model_attempts__count_retries_by_reason_tokens_and_cost() -> None:
    replies: list[ModelReply | Exception] = [
        ProviderUnavailableError("overloaded", retry_after=0.0),
        ModelReply(text="not json", input_tokens=10, output_tokens=2),
        ModelReply(text='{"ok": true}', input_tokens=10, output_tokens=3, cache_read_tokens=7,
                   cost_usd=0.25),
    ]

    def call() -> ModelReply:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def parse(text: str) -> object:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ProviderOutputInvalidError("not JSON") from exc

    labels = {"role": "verifier", "model": "m-test"}  # this test's own series
    transient = value("verity_model_retries_total", role="verifier", reason="transient")
    technical = value("verity_model_retries_total", role="verifier", reason="technical")
    attempt_call(call, role="verifier", prompt=load_prompt("verifier"), digest="d",
                 model="m-test", parse=parse, log=AttemptLog("run-1"),
                 policy=RetryPolicy(sleep=lambda _: None))
    assert value("verity_model_retries_total", role="verifier",
                 reason="transient") == transient + 1
    assert value("verity_model_retries_total", role="verifier",
                 reason="technical") == technical + 1
    assert value("verity_model_calls_total", **labels, outcome="unavailable") == 1
    assert value("verity_model_calls_total", **labels, outcome="invalid_output") == 1
    assert value("verity_model_calls_total", **labels, outcome="ok") == 1
    assert value("verity_model_tokens_total", **labels, kind="input") == 20
    assert value("verity_model_tokens_total", **labels, kind="cache_read") == 7
    assert value("verity_model_cost_usd_total", **labels) == 0.25
