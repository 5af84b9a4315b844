"""Node leases and the attempt journal: conformance on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import pytest

from models.common import Intent, RunStatus
from models.run import LlmAttempt
from pipeline.errors import RunNotFoundError
from pipeline.store import ABANDONED, IN_FLIGHT, RunStore

TENANT = "team-a"
"""The owner of this module's runs."""

T = TypeVar("T")
A, B = "host-a:1:aaaa", "host-b:2:bbbb"
ATTEMPT = {"prompt_name": "verifier", "prompt_version": "v3", "input_sha256": "ab" * 32,
           "model": "claude-opus-5-5"}


def _run(store: RunStore) -> str:
    return store.create_run(tenant_id=TENANT, query="why is checkout-service returning 500s?",
                            intent=Intent.DIAGNOSIS, state={"next": {"node": "plan"}})


def _commit(store: RunStore, run_id: str, version: int) -> int:
    return store.commit_node(run_id, expected_version=version, node="plan",
                             state={"next": {"node": "execute"}}, status=RunStatus.RUNNING)


def _race(*calls: Callable[[], T]) -> list[T]:
    """Run the calls at once, released together by a barrier."""
    barrier = threading.Barrier(len(calls))

    def released(call: Callable[[], T]) -> T:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(released, calls))


# -- leases ---------------------------------------------------------------------------------


def test_lease__acquired_at_the_version_then_refused_to_another_owner(store: RunStore) -> None:
    run_id = _run(store)
    mine = store.acquire_lease(run_id, version=0, owner=A, ttl_s=30)
    theirs = store.acquire_lease(run_id, version=0, owner=B, ttl_s=30)
    assert mine.acquired and mine.state == "acquired" and mine.owner == A
    assert mine.expires_at is not None and mine.expires_at > datetime.now(UTC)
    assert not theirs.acquired and theirs.state == "leased"
    assert (theirs.owner, theirs.version) == (A, 0)
    assert store.acquire_lease(run_id, version=0, owner=A, ttl_s=30).acquired  # already ours


@pytest.mark.parametrize("case", ["stale_version", "cancel_requested", "terminal"])
def test_lease__refused_with_the_reason(store: RunStore, case: str) -> None:
    run_id = _run(store)
    version, expected = 0, "ended"
    if case == "stale_version":
        version, expected = 1, "stale"
    elif case == "cancel_requested":
        store.request_cancel(run_id, tenant_id=TENANT)
    else:
        store.cancel_run(run_id)
        version = store.get_run(run_id, tenant_id=TENANT).version
    outcome = store.acquire_lease(run_id, version=version, owner=A, ttl_s=30)
    assert (outcome.acquired, outcome.state) == (False, expected)


def test_lease__missing_run_is_run_not_found(store: RunStore) -> None:
    with pytest.raises(RunNotFoundError):
        store.acquire_lease("no-such-run", version=0, owner=A, ttl_s=30)


def test_lease__an_expired_lease_is_taken_over(store: RunStore) -> None:
    run_id = _run(store)
    assert store.acquire_lease(run_id, version=0, owner=A, ttl_s=0.05).acquired
    time.sleep(0.1)
    taken = store.acquire_lease(run_id, version=0, owner=B, ttl_s=30)
    assert taken.acquired and taken.owner == B
    assert store.renew_leases(A, [run_id], ttl_s=30) == {run_id}  # A has lost it


def test_lease__two_owners_racing_for_one_lease_one_wins(store: RunStore) -> None:
    for _ in range(10):
        run_id = _run(store)
        outcomes = _race(*(partial(store.acquire_lease, run_id, version=0, owner=owner,
                                   ttl_s=30) for owner in (A, B)))
        winners = [o.owner for o in outcomes if o.acquired]
        losers = [o for o in outcomes if not o.acquired]
        assert len(winners) == 1 and len(losers) == 1
        assert losers[0].state == "leased" and losers[0].owner == winners[0]


def test_renew__one_call_extends_ours_and_names_the_lost(store: RunStore) -> None:
    ours, cancelled, theirs, ended = (_run(store) for _ in range(4))
    for run_id in (ours, cancelled, ended):
        assert store.acquire_lease(run_id, version=0, owner=A, ttl_s=0.3).acquired
    assert store.acquire_lease(theirs, version=0, owner=B, ttl_s=30).acquired
    store.request_cancel(cancelled, tenant_id=TENANT)
    store.cancel_run(ended)
    lost = store.renew_leases(A, [ours, cancelled, theirs, ended], ttl_s=30)
    assert lost == {cancelled, theirs, ended}
    time.sleep(0.4)  # past the first TTL: the renewal kept it
    assert store.acquire_lease(ours, version=0, owner=B, ttl_s=30).state == "leased"
    assert store.renew_leases(A, [], ttl_s=30) == set()


def test_release__frees_the_lease_only_for_its_owner(store: RunStore) -> None:
    run_id = _run(store)
    assert store.acquire_lease(run_id, version=0, owner=A, ttl_s=30).acquired
    assert store.release_lease(run_id, B) is False
    assert store.release_lease(run_id, A) is True
    assert store.release_lease(run_id, A) is False
    assert store.acquire_lease(run_id, version=0, owner=B, ttl_s=30).acquired


def test_commit_node__clears_the_lease(store: RunStore) -> None:
    run_id = _run(store)
    assert store.acquire_lease(run_id, version=0, owner=A, ttl_s=30).acquired
    version = _commit(store, run_id, 0)
    assert store.renew_leases(A, [run_id], ttl_s=30) == {run_id}
    assert store.release_lease(run_id, A) is False
    assert store.acquire_lease(run_id, version=version, owner=B, ttl_s=30).acquired
    assert store.acquire_lease(run_id, version=0, owner=A, ttl_s=30).state == "stale"


# -- the attempt journal --------------------------------------------------------------------


def _begin(store: RunStore, run_id: str, role: str = "verifier", cycle: int = 0) -> int:
    return store.begin_attempt(run_id, role=role, cycle=cycle, **ATTEMPT)


def _by_number(store: RunStore, run_id: str) -> dict[tuple[str, int, int], LlmAttempt]:
    return {(a.role, a.cycle, a.attempt_number): a for a in store.list_attempts(run_id)}


def test_journal__numbers_count_per_role_and_cycle(store: RunStore) -> None:
    run_id = _run(store)
    numbers = [_begin(store, run_id), _begin(store, run_id), _begin(store, run_id, "composer"),
               _begin(store, run_id, cycle=1), _begin(store, run_id)]
    assert numbers == [1, 2, 1, 1, 3]
    row = _by_number(store, run_id)[("verifier", 0, 1)]
    assert row.outcome == IN_FLIGHT and row.model == "claude-opus-5-5"
    assert (row.input_tokens, row.output_tokens, row.cost_usd, row.latency_ms) == (0, 0, 0, 0)
    assert row.created_at is not None and row.created_at.tzinfo is not None


def test_journal__end_completes_the_row_once(store: RunStore) -> None:
    run_id = _run(store)
    number = _begin(store, run_id)
    usage: dict[str, Any] = {"input_tokens": 1000, "output_tokens": 200,
                             "cache_read_tokens": 3000, "cache_write_tokens": 500}
    assert store.end_attempt(run_id, "verifier", 0, number, outcome="ok", latency_ms=812.5,
                             cost_usd=0.0123, **usage)
    assert not store.end_attempt(run_id, "verifier", 0, number, outcome="error")
    row = _by_number(store, run_id)[("verifier", 0, number)]
    assert (row.outcome, row.latency_ms, row.cost_usd, row.error_type) == ("ok", 812.5,
                                                                          0.0123, None)
    assert (row.input_tokens, row.output_tokens, row.cache_read_tokens,
            row.cache_write_tokens) == (1000, 200, 3000, 500)


def test_journal__abandon_marks_only_in_flight_rows_and_a_late_end_still_lands(
    store: RunStore,
) -> None:
    run_id = _run(store)
    first, second, done = _begin(store, run_id), _begin(store, run_id), _begin(store, run_id)
    store.end_attempt(run_id, "verifier", 0, done, outcome="ok")
    assert store.abandon_in_flight(run_id) == 2
    assert store.abandon_in_flight(run_id) == 0
    rows = _by_number(store, run_id)
    assert [rows[("verifier", 0, n)].outcome for n in (first, second, done)] == [
        ABANDONED, ABANDONED, "ok"]
    assert store.end_attempt(run_id, "verifier", 0, first, outcome="cancelled",
                             error_type="RunCancelledError")
    assert _by_number(store, run_id)[("verifier", 0, first)].outcome == "cancelled"


def test_journal__missing_run_is_run_not_found(store: RunStore) -> None:
    with pytest.raises(RunNotFoundError):
        _begin(store, "no-such-run")


def test_journal__concurrent_copies_never_share_a_number(store: RunStore) -> None:
    run_id = _run(store)
    copies, each = 6, 5
    numbers = _race(*(lambda: [_begin(store, run_id) for _ in range(each)]
                      for _ in range(copies)))
    flat = sorted(n for batch in numbers for n in batch)
    assert flat == list(range(1, copies * each + 1))
    assert all(batch == sorted(batch) for batch in numbers)




def test_journal__a_completed_row_is_dated_when_it_ended(store: RunStore) -> None:
    run_id = _run(store)
    number = _begin(store, run_id)
    began = _by_number(store, run_id)[("verifier", 0, number)].created_at
    time.sleep(0.05)
    store.end_attempt(run_id, "verifier", 0, number, outcome="ok", latency_ms=50.0)
    ended = _by_number(store, run_id)[("verifier", 0, number)].created_at
    assert began is not None and ended is not None
    assert (ended - began).total_seconds() >= 0.05
