"""Answers reach the team, on real `verity worker` processes over real Redis and PostgreSQL,
posting to local receivers: a receiver that is down, then answers 500, then 429 with
Retry-After, then comes back gets the answer exactly once, every attempt recorded; one that
never comes back leaves the delivery FAILED and visible; a worker SIGKILLed while its POST is
at the receiver leaves a delivery the receiver still counts once (by its Idempotency-Key)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from models.delivery import Delivery, DeliveryStatus
from pipeline.scenarios import default_scenarios_dir
from pipeline.store import RunStore
from tests.conftest import run_verity, start_cli
from tests.integration.conftest import TENANT, Workers, produce, wait_for
from tests.receiver import Receiver, Reply, free_port, serve, signature_ok

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

CHECKOUT = str(default_scenarios_dir() / "checkout-pool-exhaustion")
QUESTION = "Why is checkout-service returning 500s?"
SECRET = "integration-secret"


@pytest.fixture
def receivers() -> Iterator[ExitStack]:
    """Receivers started by the test, stopped after it."""
    with ExitStack() as stack:
        yield stack


def _configure(env: dict[str, str], tmp_path: Path, url: str, **options: object) -> None:
    extra = "".join(f", {key} = {json.dumps(value)}" for key, value in options.items())
    config = tmp_path / "config.toml"
    config.write_text(
        f'[tenants."{TENANT}"]\nnotify = [{{ type = "webhook", url = "{url}", '
        f'secret_env = "HOOK_SECRET", when = "always"{extra} }}]\n')
    env.update({"VERITY_CONFIG": str(config), "HOOK_SECRET": SECRET,
                "VERITY_PUBLIC_URL": "https://verity.example"})


def _submit(env: dict[str, str]) -> str:
    return produce(env, f"print(client.submit({QUESTION!r}, data_source={CHECKOUT!r}))")


def _delivery(store: RunStore, run_id: str) -> Delivery | None:
    found = store.list_deliveries(run_id, tenant_id=TENANT)
    return found[0] if found else None


def _final(store: RunStore, run_id: str, *, timeout: float) -> Delivery:
    def final() -> bool:
        delivery = _delivery(store, run_id)
        return delivery is not None and delivery.status.final

    wait_for(final, timeout=timeout, what="the delivery to end")
    delivery = _delivery(store, run_id)
    assert delivery is not None
    return delivery


def test_down_then_500_then_429_then_back__exactly_one_delivery(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore, tmp_path: Path,
    receivers: ExitStack,
) -> None:
    port = free_port()
    _configure(runtime_env, tmp_path, f"http://127.0.0.1:{port}/hook", backoff_s=0.5,
               max_attempts=10, timeout_s=2)
    workers.start()
    run_id = _submit(runtime_env)

    def refused_once() -> bool:
        delivery = _delivery(run_store, run_id)
        return delivery is not None and delivery.attempts >= 1 \
            and delivery.status is DeliveryStatus.PENDING
    wait_for(refused_once, timeout=90, what="a first attempt on the receiver that is down")
    receiver = Receiver([Reply(500), Reply(429, {"Retry-After": "1"})])
    receivers.enter_context(serve(receiver, port))
    delivery = _final(run_store, run_id, timeout=60)

    assert delivery.status is DeliveryStatus.DELIVERED
    outcomes = [(a.outcome, a.status_code) for a in delivery.history]
    down = len(outcomes) - 3
    assert down >= 1 and outcomes[:down] == [("retry", None)] * down
    assert all((a.error or "").startswith("cannot connect") for a in delivery.history[:down])
    assert outcomes[down:] == [("retry", 500), ("retry", 429), ("delivered", 200)]
    assert delivery.history[down + 1].retry_after_s == pytest.approx(1.0, abs=0.5)
    # the 429's Retry-After was honoured: the next POST came no sooner
    retried, back = delivery.history[down + 1], delivery.history[down + 2]
    assert back.started_at is not None and retried.finished_at is not None
    assert (back.started_at - retried.finished_at).total_seconds() >= 0.9
    # the receiver counts one delivery, every POST signed and carrying the delivery's id
    assert list(receiver.delivered) == [delivery.delivery_id]
    assert len(receiver.requests) == 3
    assert all(signature_ok(SECRET.encode(), r.headers, r.body) for r in receiver.requests)
    body = receiver.delivered[delivery.delivery_id].json()
    assert (body["run_id"], body["url"]) == (run_id, f"https://verity.example/#/runs/{run_id}")


def test_a_receiver_that_never_comes_back_ends_failed_and_visible(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore, tmp_path: Path,
) -> None:
    _configure(runtime_env, tmp_path, f"http://127.0.0.1:{free_port()}/hook", backoff_s=0.2,
               max_attempts=3, timeout_s=1)
    workers.start()
    run_id = _submit(runtime_env)
    delivery = _final(run_store, run_id, timeout=90)
    assert delivery.status is DeliveryStatus.FAILED
    assert [a.outcome for a in delivery.history] == ["retry", "retry", "failed"]
    assert (delivery.last_error or "").startswith("gave up after 3 attempts: cannot connect")

    shown = run_verity("show", run_id, env=runtime_env)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "Notifications" in text and ": FAILED, 3/3 attempts (retry, retry, failed); gave " \
        "up after 3 attempts: cannot connect" in text
    as_json = run_verity("show", run_id, "--json", env=runtime_env)
    assert as_json.returncode == 0, as_json.stderr
    deliveries = json.loads(as_json.stdout)["deliveries"]
    assert [(d["status"], d["attempts"]) for d in deliveries] == [("FAILED", 3)]


def test_a_worker_killed_while_posting__the_receiver_counts_one_delivery(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore, tmp_path: Path,
    receivers: ExitStack,
) -> None:
    receiver = Receiver([Reply(200, pause_s=20)])  # holds the first POST: no answer comes
    base = receivers.enter_context(serve(receiver))
    _configure(runtime_env, tmp_path, f"{base}/hook", timeout_s=10)
    runtime_env.update({"VERITY_NOTIFY_LEASE_S": "2", "VERITY_RECONCILE_INTERVAL_S": "1",
                        "VERITY_RECONCILE_STALE_S": "3"})
    first = workers.start()
    run_id = _submit(runtime_env)
    assert receiver.arrived.wait(90), "no POST reached the receiver"
    workers.kill(first)  # between the POST and the row update
    sending = _delivery(run_store, run_id)
    assert sending is not None and sending.status is DeliveryStatus.SENDING

    log = tmp_path / "worker-beat.log"
    workers.processes.append(start_cli(
        ["worker", "--beat", "--concurrency", "2", "--loglevel", "INFO"], env=runtime_env,
        ready=b"ready.", what="worker", log=log))
    delivery = _final(run_store, run_id, timeout=60)

    assert delivery.status is DeliveryStatus.DELIVERED
    assert [a.outcome for a in delivery.history] == ["abandoned", "delivered"]
    keys = [r.headers["idempotency-key"] for r in receiver.requests]
    assert keys == [delivery.delivery_id, delivery.delivery_id]  # posted twice, one key
    assert list(receiver.delivered) == [delivery.delivery_id]  # counted once
    time.sleep(3)  # more sweeps and redeliveries post nothing more
    assert len(receiver.requests) == 2
