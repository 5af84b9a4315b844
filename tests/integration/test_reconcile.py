"""The reconciler on real `verity worker --beat` processes over real Redis and PostgreSQL: a run
whose messages are lost (a submit that never reached the broker, a Redis that lost its queues)
still finishes, once; a run past its deadline ends FAILED."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import redis

from models.common import RunStatus
from pipeline.scenarios import default_scenarios_dir
from pipeline.store import RunStore
from tests.integration.conftest import (
    ROOT,
    TENANT,
    Workers,
    assert_exactly_once,
    produce,
    wait_for,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

CHECKOUT = str(default_scenarios_dir() / "checkout-pool-exhaustion")
QUESTION = "Why is checkout-service returning 500s?"
FAST_SWEEPS = {"VERITY_RECONCILE_INTERVAL_S": "1", "VERITY_RECONCILE_STALE_S": "3"}


def _start_beat_worker(workers: Workers, *, faults: str = "") -> subprocess.Popen[bytes]:
    """`verity worker --beat` with sweeps every second, stopped with the test's workers."""
    log = workers.log_dir / f"worker-{len(workers.processes)}.log"
    env = {**workers.env, **FAST_SWEEPS, "VERITY_FAULTS": faults}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", "--beat", "--concurrency", "4",
             "--loglevel", "INFO"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    workers.processes.append(process)
    deadline = time.monotonic() + 30
    while b"ready." not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"worker did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    return process


def _reconcile_events(store: RunStore, run_id: str) -> list[tuple[str, dict[str, object]]]:
    return [(e.kind, e.payload) for e in store.events_since(run_id, tenant_id=TENANT)
            if e.node == "reconcile"]


def test_a_submit_that_never_reached_the_broker_is_resent_and_succeeds(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    # the producer API's own store creates the run, and nothing is published
    run_id = produce(runtime_env, (
        f"print(client.runtime.submit({QUESTION!r}, source={CHECKOUT!r}, "
        "tenant_id=client.tenant))"))
    assert run_store.get_run(run_id, tenant_id=TENANT).status is RunStatus.PENDING
    _start_beat_worker(workers)
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=60,
             what="the reconciler to send the run")
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.SUCCESS, run_store.events_since(run_id, tenant_id=TENANT)
    assert record.reconcile_count == 1
    assert _reconcile_events(run_store, run_id) == [
        ("resent", {"node": "plan", "version": 0, "tool_call_ids": []})]
    assert_exactly_once(run_store, run_id)
    log = (workers.log_dir / "worker-0.log").read_text()
    assert "verity.reconcile.sweep" in log


def test_a_redis_that_lost_its_queues_loses_no_run(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore, redis_db_url: str
) -> None:
    """A worker dies in the middle of the Verifier and the broker loses every message (a
    Redis restart without persistence): no redelivery can come; the reconciler re-sends."""
    first = workers.start(faults="delay:verify=3")
    run_id = produce(runtime_env, f"print(client.submit({QUESTION!r}, data_source={CHECKOUT!r}))")
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).node == "gatekeep", timeout=60,
             what="the Verifier to start")
    time.sleep(0.5)
    workers.kill(first)
    client = redis.Redis.from_url(redis_db_url)
    client.flushdb()  # the unacked verify message is gone with everything else
    client.close()
    assert run_store.get_run(run_id, tenant_id=TENANT).status is RunStatus.RUNNING
    _start_beat_worker(workers)
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=90,
             what="the reconciler to finish the run")
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.SUCCESS, run_store.events_since(run_id, tenant_id=TENANT)
    resent = [payload for kind, payload in _reconcile_events(run_store, run_id)
              if kind == "resent"]
    assert resent and resent[0]["node"] == "verify"
    assert_exactly_once(run_store, run_id)


def test_a_run_past_its_deadline_ends_failed(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    _start_beat_worker(workers, faults="delay:verify=8")
    run_id = produce(runtime_env, (
        f"print(client.submit({QUESTION!r}, data_source={CHECKOUT!r}, deadline_s=3))"))
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=30,
             what="the deadline to end the run")
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.FAILED
    assert record.final_answer is None and record.finished_at is not None
    assert _reconcile_events(run_store, run_id) == [
        ("failed", {"reason": "RUN_DEADLINE_EXCEEDED", "error": "run deadline of 3 s exceeded"})]
    ended = run_store.events_since(run_id, tenant_id=TENANT)[-1].seq
    time.sleep(7)  # the Verifier's late commit arrives now and must change nothing
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.FAILED and record.final_answer is None
    assert run_store.events_since(run_id, ended, tenant_id=TENANT) == []


def test_verity_reconcile_once_resends_over_the_broker(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    """The standalone service: one in-process sweep that publishes to the workers."""
    run_id = produce(runtime_env, (
        f"print(client.runtime.submit({QUESTION!r}, source={CHECKOUT!r}, "
        "tenant_id=client.tenant))"))
    workers.start()  # no beat: only `verity reconcile` can send this run
    time.sleep(1.5)
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "reconcile", "--once"], cwd=ROOT,
        env={**runtime_env, "VERITY_RECONCILE_STALE_S": "1"}, capture_output=True, text=True,
        timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resent"] == 1
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=60,
             what="the re-sent run to finish")
    assert run_store.get_run(run_id, tenant_id=TENANT).status is RunStatus.SUCCESS
    assert_exactly_once(run_store, run_id)


def test_an_outage_past_the_retry_budget_is_finished_by_the_reconciler(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    """verify meets a database that is down for 9 s, against a retry budget of 3 s: the task
    gives up (and says so), and once the database is back the reconciler re-sends the step."""
    workers.env = {**runtime_env, "VERITY_STORE_RETRY_BUDGET_S": "3",
                   "VERITY_RUNTIME_FACTORY": "tests.integration.outage_runtime:build",
                   "VERITY_TEST_OUTAGE_S": "9"}
    _start_beat_worker(workers)
    run_id = produce(runtime_env, f"print(client.submit({QUESTION!r}, data_source={CHECKOUT!r}))")
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=60,
             what="the run to finish after the outage")
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.SUCCESS, run_store.events_since(run_id, tenant_id=TENANT)
    resent = [p for kind, p in _reconcile_events(run_store, run_id) if kind == "resent"]
    assert resent and {p["node"] for p in resent} == {"verify"}
    log = (workers.log_dir / "worker-0.log").read_text()
    assert "giving up, the reconciler will finish the run" in log
    assert "verity.node.verify[" in log and "retry: Retry in" in log
    assert_exactly_once(run_store, run_id)
