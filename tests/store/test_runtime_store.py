"""Store operations the runtime relies on, on SQLite and PostgreSQL: node commits under an
optimistic lock, cancellation that releases nothing, previous-turn selection."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from models.common import Intent, RunStatus
from models.invocation import LifecycleStatus
from pipeline.errors import (
    DuplicateToolCallError,
    StaleStateError,
    StoreError,
    StoreUnavailableError,
)
from pipeline.store import RunStore, open_store
from tests.store.samples import make_attempt, make_invocation, make_result
from tests.store_rows import executor_output

TENANT = "team-a"
"""The owner of this module's runs."""


def test_commit_node__one_transaction_under_the_version_lock(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS,
                              source="/data/x", state={"a": 1},
                              events=[("submit", "accepted", {"n": 1})])
    record, state = store.get_state(run_id, tenant_id=TENANT)
    assert (record.version, state, record.source) == (0, {"a": 1}, "/data/x")
    version = store.commit_node(
        run_id, expected_version=0, node="verify", state={"a": 2}, status=RunStatus.RUNNING,
        events=[("verify", "completed", {"ok": True})], attempts=[make_attempt(run_id)],
        executor_output_raw='{"claims": []}',
    )
    record, state = store.get_state(run_id, tenant_id=TENANT)
    assert (version, record.version, record.node, state) == (1, 1, "verify", {"a": 2})
    events = store.events_since(run_id, tenant_id=TENANT)
    assert [e.kind for e in events] == ["accepted", "completed"]
    assert len(store.list_attempts(run_id)) == 1
    assert executor_output(store, run_id) == '{"claims": []}'


def test_commit_node__a_stale_copy_changes_nothing(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS,
                              state={"a": 1})
    store.commit_node(run_id, expected_version=0, node="plan", state={"a": 2})
    with pytest.raises(StaleStateError):
        store.commit_node(run_id, expected_version=0, node="plan", state={"a": 3},
                          events=[("plan", "completed", {})], attempts=[make_attempt(run_id)])
    record, state = store.get_state(run_id, tenant_id=TENANT)
    assert (record.version, state) == (1, {"a": 2})
    assert store.events_since(run_id, tenant_id=TENANT) == [] and store.list_attempts(run_id) == []


def test_commit_node__refused_once_the_run_is_terminal(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS)
    assert store.cancel_run(run_id, reason="user asked") is True
    with pytest.raises(StaleStateError):
        store.commit_node(run_id, expected_version=1, node="plan", state={})
    assert store.cancel_run(run_id) is False


def test_finalize__releases_nothing_after_a_cancel_request(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS)
    assert store.request_cancel(run_id, tenant_id=TENANT) is True
    assert store.finalize(run_id, make_result(run_id)) is False
    record = store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.CANCELLED
    assert record.final_answer is None and record.self_evaluation is None
    assert store.events_since(run_id, tenant_id=TENANT)[-1].kind == "cancelled"


def test_previous_turn__only_diagnosis_success_runs_of_the_session(store: RunStore) -> None:
    assert store.previous_turn(TENANT, "s1") is None
    ok = store.create_run(tenant_id=TENANT, query="first", intent=Intent.DIAGNOSIS, session_id="s1")
    store.finalize(ok, make_result(ok))
    fallback = store.create_run(tenant_id=TENANT, query="second", intent=Intent.DIAGNOSIS,
                                session_id="s1")
    store.finalize(fallback, make_result(fallback, fallback=True))
    cancelled = store.create_run(tenant_id=TENANT, query="third", intent=Intent.DIAGNOSIS,
                                 session_id="s1")
    store.cancel_run(cancelled)
    knowledge = store.create_run(tenant_id=TENANT, query="how?", intent=Intent.KNOWLEDGE_QUERY,
                                 session_id="s1")
    store.finalize(knowledge, make_result(knowledge))
    other = store.create_run(tenant_id=TENANT, query="elsewhere", intent=Intent.DIAGNOSIS,
                             session_id="s2")
    store.finalize(other, make_result(other))
    previous = store.previous_turn(TENANT, "s1")
    assert previous is not None and previous.run_id == ok


def test_commit_node__stores_calls_and_attempts_exactly(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS, state={})
    pending = make_invocation("toolu_01", status=LifecycleStatus.PROJECTING)
    attempt = make_attempt(run_id)
    store.commit_node(run_id, expected_version=0, node="execute", state={"n": 1},
                      invocations=[pending, make_invocation("toolu_02")], attempts=[attempt],
                      turn=2)
    assert store.list_invocations(run_id) == [pending, make_invocation("toolu_02")]
    assert store.list_attempts(run_id) == [attempt]
    head, state, _, invocations = store.get_node_input(run_id, with_invocations=True)
    assert (head.version, head.node, state) == (1, "execute", {"n": 1})
    assert invocations == [pending, make_invocation("toolu_02")]


def test_commit_node__a_duplicate_writes_nothing(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS, state={})
    store.commit_node(run_id, expected_version=0, node="execute", state={},
                      invocations=[make_invocation("toolu_01")], attempts=[make_attempt(run_id)])
    with pytest.raises(DuplicateToolCallError):
        store.commit_node(run_id, expected_version=1, node="execute", state={"lost": True},
                          invocations=[make_invocation("toolu_01")],
                          events=[("execute", "tool_calls", {})])
    # in a batch, the message names the id that was taken, not the batch
    with pytest.raises(DuplicateToolCallError, match="duplicate tool_call_id 'toolu_01' in run"):
        store.commit_node(run_id, expected_version=1, node="execute", state={"lost": True},
                          invocations=[make_invocation("toolu_03"), make_invocation("toolu_01")])
    with pytest.raises(DuplicateToolCallError, match="duplicate tool_call_id 'toolu_04' in run"):
        store.commit_node(run_id, expected_version=1, node="execute", state={"lost": True},
                          invocations=[make_invocation("toolu_04"), make_invocation("toolu_04")])
    with pytest.raises(StoreError, match="duplicate model attempt"):
        store.commit_node(run_id, expected_version=1, node="verify", state={"lost": True},
                          attempts=[make_attempt(run_id)], events=[("verify", "completed", {})])
    record, state = store.get_state(run_id, tenant_id=TENANT)
    assert (record.version, state) == (1, {})
    assert store.events_since(run_id, tenant_id=TENANT) == []
    assert len(store.list_invocations(run_id)) == 1 and len(store.list_attempts(run_id)) == 1


def test_a_lost_database_connection_is_store_unavailable_then_recovers(
    postgres_url: str, postgres_server_url: str
) -> None:
    name = f"verity-lost-{uuid.uuid4().hex[:12]}"  # kill this store's connections, no others
    url = make_url(postgres_url).update_query_dict({"application_name": name})
    with open_store(url.render_as_string(hide_password=False)) as store:
        run_id = store.create_run(tenant_id=TENANT, query="why?", intent=Intent.DIAGNOSIS, state={})
        store.get_node_input(run_id)  # a pooled connection now exists
        admin = create_engine(postgres_server_url, poolclass=NullPool)
        with admin.connect() as connection:
            killed = connection.execute(text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = :name"), {"name": name}).scalar_one()
        admin.dispose()
        assert killed >= 1
        with pytest.raises(StoreUnavailableError, match="database unavailable"):
            store.get_node_input(run_id)
        head, _, _, _ = store.get_node_input(run_id)  # the pool reconnects
        assert head.run_id == run_id
