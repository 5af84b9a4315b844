"""Notification deliveries in the store, on SQLite and PostgreSQL: enqueued only by the
transaction that releases a run, claimed once, ended under the claim, re-driven when lost."""

from __future__ import annotations

from datetime import timedelta

from models.common import Intent
from models.delivery import DeliveryStatus, NewDelivery
from pipeline.errors import RunNotFoundError
from pipeline.run.reconciler import SweepReport, redrive_deliveries
from pipeline.store import RunStore
from pipeline.store.rows import utc_now
from tests.store.samples import QUERY, make_result

A, B = "team-a", "team-b"


def _new(delivery_id: str = "d" * 32, *, max_attempts: int = 3) -> NewDelivery:
    return NewDelivery(delivery_id=delivery_id, kind="webhook",
                       target={"type": "webhook", "url": "http://127.0.0.1:1/hook"},
                       max_attempts=max_attempts)


def _finished(store: RunStore, *deliveries: NewDelivery, tenant: str = A) -> str:
    run_id = store.create_run(tenant_id=tenant, query=QUERY, intent=Intent.DIAGNOSIS)
    assert store.finalize(run_id, make_result(run_id), deliveries=deliveries) is True
    return run_id


def test_deliveries_are_enqueued_with_the_release_and_scoped_to_the_tenant(
        store: RunStore) -> None:
    run_id = _finished(store, _new("a" * 32), _new("b" * 32))
    found = store.list_deliveries(run_id, tenant_id=A)
    assert [(d.delivery_id, d.status, d.attempts, d.tenant_id) for d in found] == [
        ("a" * 32, DeliveryStatus.PENDING, 0, A), ("b" * 32, DeliveryStatus.PENDING, 0, A)]
    assert found[0].target == {"type": "webhook", "url": "http://127.0.0.1:1/hook"}
    try:
        store.list_deliveries(run_id, tenant_id=B)
    except RunNotFoundError:
        pass
    else:
        raise AssertionError("another tenant read the run's deliveries")


def test_a_redelivered_finalize_enqueues_nothing_more(store: RunStore) -> None:
    run_id = _finished(store, _new())
    assert store.finalize(run_id, make_result(run_id), deliveries=[_new("e" * 32)]) is False
    assert [d.delivery_id for d in store.list_deliveries(run_id, tenant_id=A)] == ["d" * 32]


def test_a_cancelled_run_enqueues_nothing(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=A, query=QUERY, intent=Intent.DIAGNOSIS)
    store.request_cancel(run_id, tenant_id=A)
    assert store.finalize(run_id, make_result(run_id), deliveries=[_new()]) is False
    assert store.list_deliveries(run_id, tenant_id=A) == []


def test_one_claim_at_a_time_then_delivered(store: RunStore) -> None:
    _finished(store, _new())
    claimed = store.claim_delivery("d" * 32, owner="w1", lease_s=30)
    assert claimed is not None and claimed[1] == 1
    assert claimed[0].status is DeliveryStatus.SENDING
    assert store.claim_delivery("d" * 32, owner="w2", lease_s=30) is None  # live claim
    assert store.end_delivery_attempt("d" * 32, 1, owner="w2", outcome="delivered") is None
    done = store.end_delivery_attempt("d" * 32, 1, owner="w1", outcome="delivered",
                                      status_code=200)
    assert done is not None and done.status is DeliveryStatus.DELIVERED
    assert [(a.number, a.outcome, a.status_code) for a in done.history] == [(1, "delivered", 200)]
    assert store.claim_delivery("d" * 32, owner="w1", lease_s=30) is None  # final


def test_a_retry_waits_until_its_time_and_the_budget_ends_failed(store: RunStore) -> None:
    _finished(store, _new(max_attempts=2))
    now = utc_now()
    assert store.claim_delivery("d" * 32, owner="w", lease_s=30, now=now) is not None
    later = now + timedelta(seconds=5)
    moved = store.end_delivery_attempt("d" * 32, 1, owner="w", outcome="retry", status_code=429,
                                       error="HTTP 429", retry_at=later, now=now)
    assert moved is not None and moved.status is DeliveryStatus.PENDING
    assert moved.history[0].retry_after_s == 5.0
    assert store.claim_delivery("d" * 32, owner="w", lease_s=30, now=now) is None  # not due
    claimed = store.claim_delivery("d" * 32, owner="w", lease_s=30, now=later)
    assert claimed is not None and claimed[1] == 2
    failed = store.end_delivery_attempt("d" * 32, 2, owner="w", outcome="failed",
                                        status_code=500, error="HTTP 500", now=later)
    assert failed is not None and failed.status is DeliveryStatus.FAILED
    assert failed.last_error == "HTTP 500"
    assert [a.outcome for a in failed.history] == ["retry", "failed"]


def test_an_expired_claim_is_taken_over_and_its_attempt_abandoned(store: RunStore) -> None:
    _finished(store, _new())
    now = utc_now()
    assert store.claim_delivery("d" * 32, owner="dead", lease_s=5, now=now) is not None
    assert store.due_deliveries(older_than_s=0, limit=10, now=now) == []
    after = now + timedelta(seconds=6)
    assert store.due_deliveries(older_than_s=0, limit=10, now=after) == ["d" * 32]
    taken = store.claim_delivery("d" * 32, owner="alive", lease_s=5, now=after)
    assert taken is not None and taken[1] == 2
    assert [a.outcome for a in taken[0].history] == ["abandoned", "in_flight"]
    # the dead worker's late write changes nothing
    assert store.end_delivery_attempt("d" * 32, 1, owner="dead", outcome="delivered") is None


def test_a_claim_lost_on_the_last_attempt_ends_failed(store: RunStore) -> None:
    _finished(store, _new(max_attempts=1))
    now = utc_now()
    assert store.claim_delivery("d" * 32, owner="dead", lease_s=1, now=now) is not None
    assert store.claim_delivery("d" * 32, owner="w", lease_s=1,
                                now=now + timedelta(seconds=2)) is None
    found = store.get_delivery("d" * 32)
    assert found is not None and found.status is DeliveryStatus.FAILED
    assert [a.outcome for a in found.history] == ["abandoned"]


def test_due_deliveries_finds_pending_ones_whose_message_was_lost(store: RunStore) -> None:
    _finished(store, _new())
    now = utc_now()
    assert store.due_deliveries(older_than_s=60, limit=10, now=now) == []
    assert store.due_deliveries(older_than_s=60, limit=10,
                                now=now + timedelta(seconds=61)) == ["d" * 32]


def test_the_reconciler_resends_lost_and_abandoned_deliveries_only(store: RunStore) -> None:
    _finished(store, _new("a" * 32), _new("b" * 32), _new("c" * 32))
    now = utc_now()
    assert store.claim_delivery("b" * 32, owner="dead", lease_s=1, now=now) is not None
    assert store.claim_delivery("c" * 32, owner="alive", lease_s=600, now=now) is not None
    sent: list[str] = []
    report = SweepReport()
    redrive_deliveries(store, send=sent.append, stale_after_s=5, limit=10, report=report,
                       now=now + timedelta(seconds=6))
    assert sorted(sent) == ["a" * 32, "b" * 32]  # lost message, expired claim; not the live one
    assert report.deliveries_resent == 2
