"""LeaseKeepers of two processes (two owners) on one real store, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

from models.common import Intent, RunStatus
from pipeline.run.lease import LOST, LeaseKeeper
from pipeline.store import RunStore

TENANT = "team-a"
"""The owner of this module's runs."""


def _run(store: RunStore) -> str:
    return store.create_run(tenant_id=TENANT, query="q", intent=Intent.DIAGNOSIS,
                            state={"next": {"node": "plan"}})


def test_keepers__two_processes_racing_for_a_node_one_runs_it(store: RunStore) -> None:
    run_id = _run(store)
    first, second = (LeaseKeeper(store, ttl_s=5.0, renew_s=0.1) for _ in range(2))
    barrier = threading.Barrier(2)
    inside = threading.Event()
    acquired: list[bool] = []

    def copy(keeper: LeaseKeeper) -> None:
        barrier.wait()
        with keeper.hold(run_id, 0) as held:
            acquired.append(held.acquired)
            if held.acquired:
                inside.set()
                time.sleep(0.3)
            else:
                assert inside.wait(5) and held.outcome.state == "leased"

    threads = [threading.Thread(target=copy, args=(k,)) for k in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(acquired) == [False, True]
    with second.hold(run_id, 0) as again:  # given back on exit: free for the next copy
        assert again.acquired
    for keeper in (first, second):
        keeper.close()


def test_keeper__a_takeover_by_another_process_sets_the_token(store: RunStore) -> None:
    run_id = _run(store)
    slow = LeaseKeeper(store, ttl_s=0.4, renew_s=0.2)
    with slow.hold(run_id, 0) as held:
        slow.close()  # this process stalls: no renewals, the lease expires
        time.sleep(0.5)
        other = LeaseKeeper(store, ttl_s=5.0, renew_s=0.1)
        with other.hold(run_id, 0) as taken:
            assert taken.acquired
            assert slow.renew() == {run_id}  # its next renewal finds the lease gone
            assert held.token.cancelled and held.token.reason == LOST
        other.close()


def test_keeper__a_commit_ends_the_lease_and_the_next_node_takes_it(store: RunStore) -> None:
    run_id = _run(store)
    keeper = LeaseKeeper(store, ttl_s=5.0, renew_s=0.1)
    with keeper.hold(run_id, 0) as held:
        version = store.commit_node(run_id, expected_version=0, node="plan",
                                    state={"next": {"node": "execute"}},
                                    status=RunStatus.RUNNING)
        held.mark_cleared()
        time.sleep(0.3)  # no renewal of a cleared lease: the token is not set by it
        assert not held.token.cancelled
    other = LeaseKeeper(store, ttl_s=5.0, renew_s=0.1)
    with other.hold(run_id, version) as following:
        assert following.acquired
    for k in (keeper, other):
        k.close()
