"""Alert group records in the store, on SQLite and PostgreSQL: one run per firing group,
duplicates counted, the hourly cap recorded as `skipped`, resolved notifications kept on the
record and its run, and concurrent claims of one group starting it once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from models.alert import AlertOutcome, RunAlert
from models.common import Intent
from pipeline.store import RunStore

A, B = "team-a", "team-b"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
WINDOW_S = 4 * 3600


def _claim(store: RunStore, key: str = "k1", *, tenant: str = A, at: datetime = NOW,
           cap: int = 20, group: str = "{}:{alertname=\"HighErrorRate\"}") -> Any:
    return store.claim_alert_group(tenant_id=tenant, dedupe_key=key, group_key=group,
                                   alertname="HighErrorRate", window_s=WINDOW_S,
                                   max_per_hour=cap, now=at)


def test_a_group_starts_once_and_again_only_after_its_window(store: RunStore) -> None:
    outcome, first = _claim(store)
    assert outcome is AlertOutcome.STARTED and first.duplicates == 0
    again, same = _claim(store, at=NOW + timedelta(hours=1))
    assert again is AlertOutcome.DEDUPLICATED
    assert (same.receipt_id, same.duplicates) == (first.receipt_id, 1)
    later, fresh = _claim(store, at=NOW + timedelta(seconds=WINDOW_S))
    assert later is AlertOutcome.STARTED and fresh.receipt_id != first.receipt_id


def test_groups_are_per_tenant(store: RunStore) -> None:
    assert _claim(store, tenant=A)[0] is AlertOutcome.STARTED
    assert _claim(store, tenant=B)[0] is AlertOutcome.STARTED
    assert [g.tenant_id for g in store.list_alert_groups(tenant_id=B)] == [B]


def test_over_the_hourly_cap_a_group_is_recorded_skipped(store: RunStore) -> None:
    for n in range(2):
        assert _claim(store, f"k{n}", cap=2, at=NOW + timedelta(minutes=n))[0] \
            is AlertOutcome.STARTED
    outcome, skipped = _claim(store, "k9", cap=2, at=NOW + timedelta(minutes=5))
    assert outcome is AlertOutcome.SKIPPED and skipped.run_id is None
    listed = store.list_alert_groups(tenant_id=A)
    assert [g.outcome for g in listed] == [AlertOutcome.SKIPPED, AlertOutcome.STARTED,
                                           AlertOutcome.STARTED]
    # the same group once the hour has passed: it starts (a skipped record never dedupes)
    retried, started = _claim(store, "k9", cap=2, at=NOW + timedelta(minutes=61))
    assert retried is AlertOutcome.STARTED and started.receipt_id != skipped.receipt_id


def test_a_resolved_notification_is_kept_on_the_record_and_its_run(store: RunStore) -> None:
    _, group = _claim(store)
    run_id = store.create_run(tenant_id=A, query="why?", intent=Intent.DIAGNOSIS)
    alert = RunAlert(receipt_id=group.receipt_id, group_key=group.group_key,
                     alertname="HighErrorRate", starts_at=NOW - timedelta(minutes=3))
    store.attach_alert_run(group.receipt_id, run_id=run_id, alert=alert)
    assert store.get_run(run_id, tenant_id=A).alert == alert
    assert store.resolve_alert_group(tenant_id=B, group_key=group.group_key) is None
    resolved_at = NOW + timedelta(minutes=30)
    found = store.resolve_alert_group(tenant_id=A, group_key=group.group_key, now=resolved_at)
    assert found is not None and (found.run_id, found.resolved_at) == (run_id, resolved_at)
    record = store.get_run(run_id, tenant_id=A).alert
    assert record is not None and record.resolved_at == resolved_at
    # resolved again: the first time is kept; firing again starts a new run
    store.resolve_alert_group(tenant_id=A, group_key=group.group_key, now=NOW + timedelta(hours=1))
    assert store.list_alert_groups(tenant_id=A)[0].resolved_at == resolved_at
    assert _claim(store, at=NOW + timedelta(hours=1))[0] is AlertOutcome.STARTED


def test_a_claim_whose_run_failed_is_released(store: RunStore) -> None:
    _, group = _claim(store)
    assert store.release_alert_group(group.receipt_id) is True
    assert store.list_alert_groups(tenant_id=A) == []
    assert _claim(store)[0] is AlertOutcome.STARTED


def test_concurrent_claims_start_each_group_once_and_respect_the_cap(store: RunStore) -> None:
    keys = [f"g{n % 10}" for n in range(60)]  # 10 groups, each notified 6 times at once
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda key: _claim(store, key, cap=7)[0], keys))
    assert outcomes.count(AlertOutcome.STARTED) == 7
    assert outcomes.count(AlertOutcome.SKIPPED) >= 3
    groups = store.list_alert_groups(tenant_id=A)
    assert len(groups) == 10
    assert sum(g.outcome is AlertOutcome.STARTED for g in groups) == 7


def test_a_group_resolved_before_its_run_is_attached_keeps_that_on_the_run(
        store: RunStore) -> None:
    _, group = _claim(store)
    resolved_at = NOW + timedelta(minutes=1)
    store.resolve_alert_group(tenant_id=A, group_key=group.group_key, now=resolved_at)
    run_id = store.create_run(tenant_id=A, query="why?", intent=Intent.DIAGNOSIS)
    store.attach_alert_run(group.receipt_id, run_id=run_id, alert=RunAlert(
        receipt_id=group.receipt_id, group_key=group.group_key, alertname="HighErrorRate",
        starts_at=NOW))
    alert = store.get_run(run_id, tenant_id=A).alert
    assert alert is not None and alert.resolved_at == resolved_at
