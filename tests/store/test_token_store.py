"""API tokens, `follow` and keyset starts in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from models.batch import Selection
from models.common import Intent, RunStatus
from pipeline.errors import InputError, RunNotFoundError
from pipeline.store import RunStore
from pipeline.tokens import SECRET_PREFIX, hash_secret, new_secret
from tests.store_rows import append_event

A, B = "team-a", "team-b"


def _token(store: RunStore, token_id: str = "t1", tenant: str = A) -> str:
    secret = new_secret()
    store.create_token(token_id=token_id, tenant_id=tenant, name="web",
                       secret_sha256=hash_secret(secret))
    return secret


def test_a_token_is_found_by_its_secrets_hash_only(store: RunStore) -> None:
    secret = _token(store)
    found = store.token_by_secret_hash(hash_secret(secret))
    assert found is not None and (found.token_id, found.tenant_id) == ("t1", A)
    assert secret.startswith(SECRET_PREFIX)
    assert store.token_by_secret_hash(secret) is None  # the secret itself is not a key
    assert store.token_by_secret_hash(hash_secret(secret + "x")) is None


def test_a_revoked_token_is_not_found(store: RunStore) -> None:
    secret = _token(store)
    assert store.revoke_token("t1") is True
    assert store.revoke_token("t1") is False
    assert store.revoke_token("nope") is False
    assert store.token_by_secret_hash(hash_secret(secret)) is None
    (listed,) = store.list_tokens()
    assert listed.revoked_at is not None and not listed.active


def test_tokens_are_listed_per_tenant(store: RunStore) -> None:
    _token(store, "t1", A)
    _token(store, "t2", B)
    assert [t.token_id for t in store.list_tokens(tenant_id=B)] == ["t2"]
    assert [t.token_id for t in store.list_tokens()] == ["t1", "t2"]


def test_last_used_is_written_at_most_once_a_minute(store: RunStore) -> None:
    secret = _token(store)
    now = datetime.now(UTC)
    first = store.token_by_secret_hash(hash_secret(secret), now=now)
    assert first is not None and first.last_used_at == now
    store.token_by_secret_hash(hash_secret(secret), now=now + timedelta(seconds=30))
    (stored,) = store.list_tokens()
    assert stored.last_used_at == now
    store.token_by_secret_hash(hash_secret(secret), now=now + timedelta(minutes=2))
    (stored,) = store.list_tokens()
    assert stored.last_used_at == now + timedelta(minutes=2)


@pytest.mark.parametrize("name", ["", " ", "x" * 129], ids=["empty", "blank", "too-long"])
def test_a_token_needs_a_name(store: RunStore, name: str) -> None:
    with pytest.raises(InputError):
        store.create_token(token_id="t1", tenant_id=A, name=name, secret_sha256="0" * 64)


def test_follow_reads_status_and_new_events_of_the_tenants_run(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=A, query="q", intent=Intent.DIAGNOSIS)
    assert store.follow(run_id, 0, tenant_id=A) == (RunStatus.PENDING, [])
    for kind in ("started", "completed", "routed"):
        append_event(store, run_id, node="plan", kind=kind)
    status, events = store.follow(run_id, 1, tenant_id=A)
    assert status is RunStatus.PENDING and [e.seq for e in events] == [2, 3]
    assert [e.seq for e in store.follow(run_id, 0, tenant_id=A, limit=2)[1]] == [1, 2]
    with pytest.raises(RunNotFoundError):
        store.follow(run_id, 0, tenant_id=B)
    store.cancel_run(run_id)
    status, events = store.follow(run_id, 3, tenant_id=A)
    assert status is RunStatus.CANCELLED


def test_iter_runs_starts_past_a_keyset_cursor(store: RunStore) -> None:
    ids = [store.create_run(tenant_id=A, query=f"q{i}", intent=Intent.DIAGNOSIS)
           for i in range(5)]
    newest_first = [r for r in store.iter_runs(tenant_id=A, selection=Selection())]
    assert [r.run_id for r in newest_first] == list(reversed(ids))
    third = newest_first[2]
    assert third.created_at is not None
    rest = store.iter_runs(tenant_id=A, selection=Selection(limit=10),
                           after=(third.created_at, third.run_id))
    assert [r.run_id for r in rest] == [r.run_id for r in newest_first[3:]]


def test_ping(store: RunStore) -> None:
    store.ping()
