"""The reconciler's store operations, on SQLite and PostgreSQL: deadlines, stalled runs,
claims that exactly one of several reconcilers wins, deadline and invalid-state failures,
removing a run that never started, and a refused database connection."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, update

from models.common import Intent, RunStatus
from models.state import NextStep
from models.tables import DiagnosisRunRow
from pipeline.errors import StoreUnavailableError
from pipeline.store import RunStore, make_engine, open_store, store_for
from pipeline.store import pg as pg_module
from pipeline.store.engine import autocommit_engine

TENANT = "team-a"
"""The owner of this module's runs."""

LATER = timedelta(minutes=5)
PLAN = NextStep(node="plan")


@pytest.fixture
def engine(database_url: str, store: RunStore) -> Iterator[Engine]:
    """A second engine on the store's database, to set what other components own (leases)."""
    created = make_engine(database_url)
    yield created
    created.dispose()


def _state(step: NextStep | None) -> dict[str, Any]:
    return {"pipeline": {"query": "why?"}, "next": step.model_dump(mode="json") if step else None}


def _run(store: RunStore, step: NextStep | None = PLAN, **kwargs: Any) -> str:
    return store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS,
                            state=_state(step),
                            events=[("submit", "accepted", {})], **kwargs)


def _lease(engine: Engine, run_id: str, expires_at: datetime | None) -> None:
    with engine.begin() as connection:
        connection.execute(update(DiagnosisRunRow).where(DiagnosisRunRow.run_id == run_id)
                           .values(lease_owner="worker-1", lease_expires_at=expires_at))


def _concurrently(count: int, action: Callable[[], Any]) -> list[Any]:
    """`action` in `count` threads released together; their results (or errors)."""
    barrier = threading.Barrier(count)
    results: list[Any] = []

    def call() -> None:
        barrier.wait()
        try:
            results.append(action())
        except BaseException as exc:  # reported by the test's assertions
            results.append(exc)

    threads = [threading.Thread(target=call) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


# -- deadlines ------------------------------------------------------------------------------


def test_create_run__the_deadline_is_the_store_default_or_the_runs_own(store: RunStore) -> None:
    default = store.get_run(_run(store), tenant_id=TENANT)
    own = store.get_run(_run(store, deadline_s=90), tenant_id=TENANT)
    assert default.created_at is not None and default.deadline_at is not None
    assert default.deadline_at - default.created_at == timedelta(seconds=store.run_deadline_s)
    assert own.created_at is not None and own.deadline_at is not None
    assert own.deadline_at - own.created_at == timedelta(seconds=90)
    assert (default.reconcile_count, own.reconcile_count) == (0, 0)


def test_create_run__a_store_opened_with_a_deadline_gives_it_to_every_run(
    database_url: str,
) -> None:
    with open_store(database_url, run_deadline_s=30) as opened:
        record = opened.get_run(_run(opened), tenant_id=TENANT)
    assert record.deadline_at is not None and record.created_at is not None
    assert record.deadline_at - record.created_at == timedelta(seconds=30)


# -- find_stalled ---------------------------------------------------------------------------


def test_find_stalled__old_active_runs_without_a_live_lease_oldest_first(
    store: RunStore, engine: Engine
) -> None:
    pending = _run(store)
    running = _run(store)
    store.commit_node(running, expected_version=0, node="plan", status=RunStatus.RUNNING,
                      state=_state(NextStep(node="execute", tool_call_ids=["toolu_1"])))
    ended = _run(store)
    store.cancel_run(ended)
    leased, expired = _run(store), _run(store)
    now = datetime.now(UTC) + LATER
    _lease(engine, leased, now + timedelta(seconds=30))
    _lease(engine, expired, now - timedelta(seconds=1))

    found = store.find_stalled(older_than_s=60, limit=10, now=now)
    assert [r.run_id for r in found] == [pending, running, expired]  # by last progress
    by_id = {r.run_id: r for r in found}
    assert (by_id[pending].status, by_id[pending].version) == (RunStatus.PENDING, 0)
    assert by_id[pending].next == NextStep(node="plan")
    assert (by_id[running].status, by_id[running].version) == (RunStatus.RUNNING, 1)
    assert by_id[running].next == NextStep(node="execute", tool_call_ids=["toolu_1"])
    assert store.find_stalled(older_than_s=60, limit=2, now=now)[-1].run_id == running
    assert store.find_stalled(older_than_s=60, limit=10) == []  # nothing is a minute old yet


def test_find_stalled__a_run_without_state_or_next_step_has_none(store: RunStore) -> None:
    bare = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS)
    stepless = _run(store, step=None)
    found = store.find_stalled(older_than_s=1, limit=10, now=datetime.now(UTC) + LATER)
    assert {(r.run_id, r.next) for r in found} == {(bare, None), (stepless, None)}


# -- claim_stalled --------------------------------------------------------------------------


def test_claim_stalled__touches_the_run_and_records_the_resend(store: RunStore) -> None:
    run_id = _run(store)
    store.commit_node(run_id, expected_version=0, node="plan", status=RunStatus.RUNNING,
                      state=_state(NextStep(node="execute", tool_call_ids=["toolu_1", "t2"])))
    (stalled,) = store.find_stalled(older_than_s=60, limit=10, now=datetime.now(UTC) + LATER)
    assert store.claim_stalled(run_id, version=stalled.version, updated_at=stalled.updated_at)
    record = store.get_run(run_id, tenant_id=TENANT)
    assert record.reconcile_count == 1 and record.version == 1
    assert record.updated_at is not None and record.updated_at > stalled.updated_at
    event = store.events_since(run_id, tenant_id=TENANT)[-1]
    assert (event.node, event.kind) == ("reconcile", "resent")
    assert event.payload == {"node": "execute", "version": 1, "tool_call_ids": ["toolu_1", "t2"]}
    # the same stall, claimed again, is not claimed twice
    assert not store.claim_stalled(run_id, version=stalled.version,
                                   updated_at=stalled.updated_at)
    assert store.get_run(run_id, tenant_id=TENANT).reconcile_count == 1


def test_claim_stalled__of_concurrent_claims_exactly_one_wins(store: RunStore) -> None:
    run_id = _run(store)
    (stalled,) = store.find_stalled(older_than_s=60, limit=10, now=datetime.now(UTC) + LATER)
    results = _concurrently(6, lambda: store.claim_stalled(
        run_id, version=stalled.version, updated_at=stalled.updated_at, step=stalled.next))
    assert sorted(results, key=str) == [False] * 5 + [True]
    resent = [e for e in store.events_since(run_id, tenant_id=TENANT) if e.kind == "resent"]
    assert len(resent) == 1 and resent[0].payload["node"] == "plan"
    assert store.get_run(run_id, tenant_id=TENANT).reconcile_count == 1


def test_claim_stalled__refused_once_the_run_moved_on_or_is_leased(
    store: RunStore, engine: Engine
) -> None:
    moved, leased, ended = _run(store), _run(store), _run(store)
    now = datetime.now(UTC) + LATER
    found = {r.run_id: r for r in store.find_stalled(older_than_s=60, limit=10, now=now)}
    store.commit_node(moved, expected_version=0, node="plan", state=_state(None))
    _lease(engine, leased, datetime.now(UTC) + timedelta(minutes=1))
    store.cancel_run(ended)
    for run_id in (moved, leased, ended):
        stalled = found[run_id]
        assert not store.claim_stalled(run_id, version=stalled.version,
                                       updated_at=stalled.updated_at)
        assert store.get_run(run_id, tenant_id=TENANT).reconcile_count == 0
        assert not [e for e in store.events_since(run_id,
                                                  tenant_id=TENANT) if e.node == "reconcile"]


# -- fail_overdue and fail_run --------------------------------------------------------------


def test_fail_overdue__ends_runs_past_their_deadline_failed_once(
    store: RunStore, engine: Engine
) -> None:
    overdue = _run(store, deadline_s=2)
    running = _run(store, deadline_s=1.5)
    store.commit_node(running, expected_version=0, node="plan", status=RunStatus.RUNNING,
                      state=_state(NextStep(node="execute")))
    _lease(engine, running, datetime.now(UTC) + LATER)  # a lease does not save it
    in_time = _run(store, deadline_s=3600)
    ended = _run(store, deadline_s=1)
    store.cancel_run(ended)
    now = datetime.now(UTC) + timedelta(seconds=10)

    assert store.fail_overdue(now=now, limit=10) == [running, overdue]  # most overdue first
    for run_id, seconds, version in ((overdue, "2", 1), (running, "1.5", 2)):
        record = store.get_run(run_id, tenant_id=TENANT)
        assert (record.status, record.version) == (RunStatus.FAILED, version)
        assert record.finished_at is not None
        event = store.events_since(run_id, tenant_id=TENANT)[-1]
        assert (event.node, event.kind) == ("reconcile", "failed")
        assert event.payload == {"reason": "RUN_DEADLINE_EXCEEDED",
                                 "error": f"run deadline of {seconds} s exceeded"}
    head = store.get_state(running, tenant_id=TENANT)[0]
    assert head.status is RunStatus.FAILED
    assert store.get_run(in_time, tenant_id=TENANT).status is RunStatus.PENDING
    assert store.get_run(ended, tenant_id=TENANT).status is RunStatus.CANCELLED
    assert store.fail_overdue(now=now, limit=10) == []


def test_fail_overdue__clears_the_lease(store: RunStore, engine: Engine) -> None:
    run_id = _run(store, deadline_s=1)
    _lease(engine, run_id, datetime.now(UTC) + LATER)
    assert store.fail_overdue(now=datetime.now(UTC) + LATER, limit=10) == [run_id]
    with engine.connect() as connection:
        row = connection.execute(
            DiagnosisRunRow.__table__.select().where(DiagnosisRunRow.run_id == run_id)).one()
    assert (row.lease_owner, row.lease_expires_at) == (None, None)


def test_fail_overdue__concurrent_sweeps_fail_each_run_once(store: RunStore) -> None:
    run_ids = [_run(store, deadline_s=1) for _ in range(3)]
    now = datetime.now(UTC) + LATER
    results = _concurrently(4, lambda: store.fail_overdue(now=now, limit=10))
    assert sorted(run_id for ended in results for run_id in ended) == sorted(run_ids)
    for run_id in run_ids:
        assert [e.kind for e in store.events_since(run_id, tenant_id=TENANT)].count("failed") == 1


def test_fail_run__conditional_on_the_version(store: RunStore) -> None:
    run_id = _run(store, step=None)
    assert not store.fail_run(run_id, version=3, reason="RUN_STATE_INVALID", error="x")
    assert store.fail_run(run_id, version=0, reason="RUN_STATE_INVALID",
                          error="run state has no next step")
    assert not store.fail_run(run_id, version=1, reason="RUN_STATE_INVALID", error="again")
    record = store.get_run(run_id, tenant_id=TENANT)
    assert (record.status, record.version) == (RunStatus.FAILED, 1)
    event = store.events_since(run_id, tenant_id=TENANT)[-1]
    assert (event.node, event.kind, event.payload["reason"]) == (
        "reconcile", "failed", "RUN_STATE_INVALID")


def test_cancel_run__names_the_node_that_cancelled(store: RunStore) -> None:
    run_id = _run(store)
    assert store.cancel_run(run_id, reason="cancel requested", node="reconcile")
    event = store.events_since(run_id, tenant_id=TENANT)[-1]
    assert (event.node, event.kind) == ("reconcile", "cancelled")


# -- delete_run -----------------------------------------------------------------------------


def test_delete_run__removes_a_run_that_never_started_with_its_events(store: RunStore) -> None:
    run_id = _run(store)
    keep = _run(store)
    assert store.delete_run(run_id) is True
    assert [r.run_id for r in store.list_runs(tenant_id=TENANT)] == [keep]
    assert store.delete_run(run_id) is False
    assert store.delete_run("no-such-run") is False
    assert len(store.events_since(keep, tenant_id=TENANT)) == 1


def test_delete_run__keeps_a_run_that_started(store: RunStore) -> None:
    started = _run(store)
    store.commit_node(started, expected_version=0, node="plan", state=_state(None))
    running = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS,
                               status=RunStatus.RUNNING)
    assert store.delete_run(started) is False and store.delete_run(running) is False
    assert {r.run_id for r in store.list_runs(tenant_id=TENANT)} == {started, running}


# -- a database that refuses connections ----------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the probe is


@pytest.mark.postgres
def test_a_refused_connection_at_checkout_is_store_unavailable(postgres_server_url: str) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(postgres_server_url).set(port=_closed_port()).render_as_string(
        hide_password=False)
    engine = autocommit_engine(make_engine(url))
    try:
        with pytest.raises(StoreUnavailableError, match="^database unavailable: .*refused"):
            pg_module.HotPath(engine).fetch_one("SELECT 1", {})
    finally:
        engine.dispose()
    with pytest.raises(StoreUnavailableError, match="^database unavailable: .*refused"):
        open_store(url)


@pytest.mark.requires("server")
def test_a_refused_connection_on_every_store_entry_point(store: RunStore,
                                                          database_url: str) -> None:
    """A store whose database went away: each entry point is StoreUnavailableError."""
    from sqlalchemy.engine import make_url

    run_id = _run(store)
    url = make_url(database_url).set(port=_closed_port()).render_as_string(hide_password=False)
    gone = store_for(make_engine(url))
    try:
        calls: list[Callable[[], Any]] = [
            lambda: _run(gone), lambda: gone.get_node_input(run_id),
            lambda: gone.get_run(run_id, tenant_id=TENANT),
            lambda: gone.commit_node(run_id, expected_version=0, node="plan", state={}),
            lambda: gone.find_stalled(older_than_s=1, limit=1),
            lambda: gone.claim_stalled(run_id, version=0, updated_at=datetime.now(UTC)),
            lambda: gone.fail_overdue(limit=1), lambda: gone.delete_run(run_id),
            lambda: gone.cancel_run(run_id),
        ]
        for call in calls:
            with pytest.raises(StoreUnavailableError, match="^database unavailable: "):
                call()
    finally:
        gone.close()

