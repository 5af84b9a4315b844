"""Tenants in the store, on SQLite and PostgreSQL: a run is its owner's, and another tenant's
run id is refused exactly like an unknown one (same error, same message)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from models.common import Intent, RunStatus
from pipeline.errors import InputError, RunNotFoundError
from pipeline.store import RunStore
from tests.store.samples import make_bundle, make_invocation, make_result
from tests.store_rows import add_invocation, set_executor_output

A, B = "team-a", "team-b"

READS: dict[str, Callable[[RunStore, str, str], Any]] = {
    "get_run": lambda store, run_id, tenant: store.get_run(run_id, tenant_id=tenant),
    "get_state": lambda store, run_id, tenant: store.get_state(run_id, tenant_id=tenant),
    "events_since": lambda store, run_id, tenant: store.events_since(run_id, tenant_id=tenant),
    "events_since_seq": lambda store, run_id, tenant: store.events_since(
        run_id, 5, tenant_id=tenant),
    "request_cancel": lambda store, run_id, tenant: store.request_cancel(
        run_id, tenant_id=tenant),
    "to_bundle": lambda store, run_id, tenant: store.to_bundle(run_id, tenant_id=tenant),
}
"""Every read or cancel a producer makes by run id."""


def _exported_run(store: RunStore, tenant: str, *, session_id: str = "sre-42") -> str:
    """A finished DIAGNOSIS run of `tenant`, with events, invocations and Executor output."""
    bundle = make_bundle()
    run_id = store.create_run(tenant_id=tenant, query=bundle.query, intent=Intent.DIAGNOSIS,
                              session_id=session_id, state={"next": {"node": "plan"}},
                              events=[("submit", "accepted", {})])
    add_invocation(store, run_id, make_invocation("toolu_01"))
    set_executor_output(store, run_id, bundle.executor_output_raw)
    store.finalize(run_id, make_result(run_id))
    return run_id


def _refusal(call: Callable[[], Any]) -> str:
    with pytest.raises(RunNotFoundError) as caught:
        call()
    assert type(caught.value) is RunNotFoundError
    return str(caught.value)


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
def test_another_tenants_run_is_refused_like_an_unknown_id(store: RunStore, read: str) -> None:
    run_id = _exported_run(store, A)
    other = READS[read]
    unknown = _refusal(lambda: other(store, "no-such-run", B))
    cross = _refusal(lambda: other(store, run_id, B))
    assert cross == unknown.replace("no-such-run", run_id) == f"no run with id {run_id!r}"
    READS[read](store, run_id, A)  # the owner's own read works


def test_a_cross_tenant_cancel_changes_nothing(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=A, query="why?", intent=Intent.DIAGNOSIS)
    _refusal(lambda: store.request_cancel(run_id, tenant_id=B))
    assert store.get_run(run_id, tenant_id=A).cancel_requested is False
    assert store.request_cancel(run_id, tenant_id=A) is True
    assert store.get_run(run_id, tenant_id=A).cancel_requested is True


def test_the_owners_reads_work(store: RunStore) -> None:
    run_id = _exported_run(store, A)
    record = store.get_run(run_id, tenant_id=A)
    assert (record.tenant_id, record.status) == (A, RunStatus.SUCCESS)
    assert [e.kind for e in store.events_since(run_id, tenant_id=A)] == ["accepted", "completed"]
    assert store.to_bundle(run_id, tenant_id=A).query == record.query
    assert store.get_state(run_id, tenant_id=A)[0].tenant_id == A


def test_list_runs__only_the_tenants_own(store: RunStore) -> None:
    mine = [store.create_run(tenant_id=A, query=f"a{i}", intent=Intent.DIAGNOSIS,
                             session_id="sre-42") for i in range(2)]
    theirs = store.create_run(tenant_id=B, query="b", intent=Intent.DIAGNOSIS,
                              session_id="sre-42")
    assert {r.run_id for r in store.list_runs(tenant_id=A)} == set(mine)
    assert {r.run_id for r in store.list_runs(tenant_id=A, session_id="sre-42")} == set(mine)
    assert [r.run_id for r in store.list_runs(tenant_id=B)] == [theirs]
    assert store.list_runs(tenant_id="team-c") == []


def test_previous_turn__a_session_is_per_tenant(store: RunStore) -> None:
    first = _exported_run(store, A)
    assert store.previous_turn(B, "sre-42") is None
    found = store.previous_turn(A, "sre-42")
    assert found is not None and (found.run_id, found.tenant_id) == (first, A)
    second = _exported_run(store, B)
    found = store.previous_turn(B, "sre-42")
    assert found is not None and found.run_id == second
    found = store.previous_turn(A, "sre-42")
    assert found is not None and found.run_id == first


def test_the_workers_reads_carry_the_owner(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=B, query="why?", intent=Intent.DIAGNOSIS,
                              session_id="s", state={"next": {"node": "plan"}})
    add_invocation(store, run_id, make_invocation("toolu_01"))
    head, _, _, _ = store.get_node_input(run_id, with_executor_output=True,
                                         with_invocations=True)
    assert (head.tenant_id, head.session_id) == (B, "s")
    found = store.get_tool_call(run_id, "toolu_01")
    assert found is not None and found[0].tenant_id == B


def test_a_verified_run_is_saved_as_the_tenants(store: RunStore) -> None:
    saved = store.save_verified_run(tenant_id=B, bundle=make_bundle(),
                                    result=make_result("verify-1"), events=[], attempts=[])
    assert store.get_run(saved, tenant_id=B).tenant_id == B
    _refusal(lambda: store.get_run(saved, tenant_id=A))


@pytest.mark.parametrize("tenant", ["", "a b", "x" * 129, "team'a", "t\n1", "é"],
                         ids=["empty", "space", "too-long", "quote", "newline", "non-ascii"])
def test_create_run__refuses_a_bad_tenant_id(store: RunStore, tenant: str) -> None:
    with pytest.raises(InputError) as caught:
        store.create_run(tenant_id=tenant, query="q", intent=Intent.DIAGNOSIS)
    assert "\n" not in str(caught.value)
    assert store.list_runs(tenant_id=tenant) == []
