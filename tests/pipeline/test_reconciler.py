"""The reconciler's sweep over a real store, on SQLite and PostgreSQL: lost submits and lost
messages are re-sent once, overdue runs fail, flagged runs end cancelled, runs without a next
step fail, and several sweeps at once never act twice."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from models.common import Intent, RunStatus
from models.state import NextStep
from models.tables import DiagnosisRunRow
from pipeline.errors import BrokerUnavailableError
from pipeline.run.reconciler import SweepReport, sweep
from pipeline.store import RunStore, make_engine

TENANT = "team-a"
"""The owner of this module's runs."""

LATER = timedelta(minutes=5)
PLAN = NextStep(node="plan")


class Sent:
    """A `resend` that records what it was asked to send (thread-safe)."""

    def __init__(self, fail_for: set[str] | None = None,
                 error: Exception | None = None) -> None:
        self.calls: list[tuple[str, int, NextStep]] = []
        self.fail_for = fail_for or set()
        self.error = error or RuntimeError("no such node task")
        self._lock = threading.Lock()

    def __call__(self, run_id: str, version: int, step: NextStep) -> None:
        with self._lock:
            if run_id in self.fail_for:
                raise self.error
            self.calls.append((run_id, version, step))


def _run(store: RunStore, step: NextStep | None = PLAN, **kwargs: Any) -> str:
    state = {"pipeline": {"query": "why?"}, "next": step.model_dump(mode="json") if step else None}
    return store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS, state=state,
                            events=[("submit", "accepted", {})], **kwargs)


def _sweep(store: RunStore, resend: Sent, *, now: datetime | None = None) -> SweepReport:
    return sweep(store, resend=resend, stale_after_s=60, limit=50,
                 now=now or datetime.now(UTC) + LATER)


def _reconcile_events(store: RunStore, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.payload) for e in store.events_since(run_id, tenant_id=TENANT)
            if e.node == "reconcile"]


def test_sweep__a_submit_that_never_reached_the_broker_is_sent_again(store: RunStore) -> None:
    run_id = _run(store)
    resend = Sent()
    report = _sweep(store, resend)
    assert report == SweepReport(resent=1)
    assert resend.calls == [(run_id, 0, PLAN)]
    assert _reconcile_events(store, run_id) == [
        ("resent", {"node": "plan", "version": 0, "tool_call_ids": []})]
    assert store.get_run(run_id, tenant_id=TENANT).reconcile_count == 1


def test_sweep__a_lost_tool_chord_is_sent_again_with_its_calls(store: RunStore) -> None:
    run_id = _run(store)
    step = NextStep(node="execute", tool_call_ids=["toolu_a", "toolu_b"])
    store.commit_node(run_id, expected_version=0, node="execute", status=RunStatus.RUNNING,
                      state={"pipeline": {"query": "why?"}, "next": step.model_dump()})
    resend = Sent()
    assert _sweep(store, resend).resent == 1
    assert resend.calls == [(run_id, 1, step)]
    assert _reconcile_events(store, run_id) == [
        ("resent", {"node": "execute", "version": 1, "tool_call_ids": ["toolu_a", "toolu_b"]})]


def test_sweep__a_run_making_progress_or_holding_a_lease_is_left_alone(
    store: RunStore, database_url: str
) -> None:
    fresh = _run(store)
    leased = _run(store)
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(update(DiagnosisRunRow)
                               .where(DiagnosisRunRow.run_id == leased)
                               .values(lease_owner="w1",
                                       lease_expires_at=datetime.now(UTC) + 2 * LATER))
    finally:
        engine.dispose()
    resend = Sent()
    assert _sweep(store, resend, now=datetime.now(UTC)) == SweepReport()  # fresh: not stale
    assert _sweep(store, resend).resent == 1  # stale, but only the unleased one is re-sent
    assert [call[0] for call in resend.calls] == [fresh]
    assert _reconcile_events(store, leased) == []


def test_sweep__a_run_past_its_deadline_ends_failed_and_is_not_resent(store: RunStore) -> None:
    overdue = _run(store, deadline_s=30)
    resend = Sent()
    report = _sweep(store, resend)
    assert report == SweepReport(failed_deadline=1)
    assert resend.calls == []
    record = store.get_run(overdue, tenant_id=TENANT)
    assert record.status is RunStatus.FAILED and record.finished_at is not None
    assert _reconcile_events(store, overdue) == [
        ("failed", {"reason": "RUN_DEADLINE_EXCEEDED", "error": "run deadline of 30 s exceeded"})]


def test_sweep__a_run_flagged_for_cancel_ends_cancelled(store: RunStore) -> None:
    run_id = _run(store)
    store.request_cancel(run_id, tenant_id=TENANT)
    resend = Sent()
    assert _sweep(store, resend) == SweepReport(cancelled=1)
    assert resend.calls == []
    assert store.get_run(run_id, tenant_id=TENANT).status is RunStatus.CANCELLED
    assert _reconcile_events(store, run_id) == [("cancelled", {"reason": "cancel requested"})]


def test_sweep__a_run_without_a_next_step_ends_failed_invalid(store: RunStore) -> None:
    stepless = _run(store, step=None)
    bare = store.create_run(tenant_id=TENANT, query="why?",
                            intent=Intent.DIAGNOSIS)  # no state at all
    resend = Sent()
    assert _sweep(store, resend) == SweepReport(invalid=2)
    for run_id in (stepless, bare):
        assert store.get_run(run_id, tenant_id=TENANT).status is RunStatus.FAILED
        assert _reconcile_events(store, run_id) == [
            ("failed", {"reason": "RUN_STATE_INVALID", "error": "run state has no next step"})]


def test_sweep__a_step_that_cannot_be_sent_does_not_stop_the_others(store: RunStore) -> None:
    bad, good = _run(store), _run(store)
    resend = Sent(fail_for={bad})
    assert _sweep(store, resend) == SweepReport(resent=1, resend_errors=1)
    assert [call[0] for call in resend.calls] == [good]


def test_sweep__a_broker_that_is_down_ends_the_sweep(store: RunStore) -> None:
    first, _second = _run(store), _run(store)
    resend = Sent(fail_for={first}, error=BrokerUnavailableError("broker unavailable"))
    assert _sweep(store, resend) == SweepReport(resend_errors=1)
    assert resend.calls == []


def _age(store: RunStore, database_url: str, run_ids: list[str], by: timedelta) -> None:
    """Move the runs' last progress and deadline `by` into the past, as if time had passed."""
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            for record in (store.get_run(run_id, tenant_id=TENANT) for run_id in run_ids):
                assert record.updated_at is not None and record.deadline_at is not None
                connection.execute(update(DiagnosisRunRow)
                                   .where(DiagnosisRunRow.run_id == record.run_id)
                                   .values(updated_at=record.updated_at - by,
                                           deadline_at=record.deadline_at - by))
    finally:
        engine.dispose()


@pytest.mark.parametrize("sweeps", [4])
def test_sweep__concurrent_sweeps_act_once_per_run(
    store: RunStore, database_url: str, sweeps: int
) -> None:
    stalled = [_run(store) for _ in range(5)]
    overdue = [_run(store, deadline_s=60) for _ in range(3)]
    _age(store, database_url, stalled + overdue, LATER)
    resend = Sent()
    barrier = threading.Barrier(sweeps)
    reports: list[SweepReport] = []
    errors: list[BaseException] = []

    def one() -> None:
        barrier.wait()
        try:
            reports.append(sweep(store, resend=resend, stale_after_s=60, limit=50))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(sweeps)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(call[0] for call in resend.calls) == sorted(stalled)
    assert sum(r.resent for r in reports) == 5 and sum(r.failed_deadline for r in reports) == 3
    for run_id in stalled:
        assert [kind for kind, _ in _reconcile_events(store, run_id)] == ["resent"]
    for run_id in overdue:
        assert [kind for kind, _ in _reconcile_events(store, run_id)] == ["failed"]
