"""Task events as a worker publishes them: every task's four events, in a few batches."""

from __future__ import annotations

import base64
import collections
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from pipeline.store import RunStore
from tasks.events import EVENT_FLUSH_S
from tests.integration.conftest import TENANT, Workers, produce, wait_for
from tests.integration.test_worker_runs import CHECKOUT, QUESTION

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


class _Publishes:
    """Every message published on the broker database's event exchange, as it arrives."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        db = url.rsplit("/", 1)[1]
        self.pubsub = self.client.pubsub()
        self.pubsub.psubscribe(f"/{db}.celeryev/*")
        self.messages: list[tuple[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self.pubsub.get_message(timeout=0.1)
            if message and message["type"] == "pmessage":
                envelope = json.loads(message["data"])
                body = json.loads(base64.b64decode(envelope["body"]))
                self.messages.append((message["channel"].decode(), body))

    def events(self) -> list[dict[str, Any]]:
        return [e for _, body in self.messages
                for e in (body if isinstance(body, list) else [body])]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.pubsub.close()
        self.client.close()


@pytest.fixture
def publishes(runtime_env: dict[str, str]) -> Iterator[_Publishes]:
    listener = _Publishes(runtime_env["VERITY_BROKER_URL"])
    yield listener
    listener.close()


def test_a_run_s_task_events_arrive_complete_and_batched(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore, publishes: _Publishes
) -> None:
    workers.start()
    run_id = produce(runtime_env, f"print(client.submit({QUESTION!r}, data_source={CHECKOUT!r}))")
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=60,
             what="the run")
    mine = lambda: [e for e in publishes.events()  # noqa: E731
                    if e.get("type", "").startswith("task-")
                    and str(e.get("uuid", "")).startswith(run_id)]
    # the worker publishes what it buffered within a fraction of a second
    wait_for(lambda: sum(e["type"] == "task-succeeded" for e in mine())
             == len({e["uuid"] for e in mine()}), timeout=5, what="every task to succeed")
    by_task: dict[str, set[str]] = collections.defaultdict(set)
    for event in mine():
        by_task[event["uuid"]].add(event["type"])
    tools = [uuid for uuid in by_task if "-tool-" in uuid]
    assert len(tools) == len(run_store.list_invocations(run_id)) > 0
    four = {"task-sent", "task-received", "task-started", "task-succeeded"}
    assert all(types == four for types in by_task.values()), by_task
    # task-sent events of the tasks the worker dispatched travel in its batches; only the
    # producer's submit publishes one on its own
    channels = collections.Counter(channel.rsplit("/", 1)[1] for channel, _ in publishes.messages)
    assert channels["task.sent"] == 1, channels
    # at most one timed flush per EVENT_FLUSH_S, plus one per full buffer (Celery's default
    # published about every second event: 35 batches for this run's 84 events)
    events = mine()
    span = max(e["timestamp"] for e in events) - min(e["timestamp"] for e in events)
    batches = sum(1 for _, body in publishes.messages if isinstance(body, list))
    assert batches <= span / EVENT_FLUSH_S + len(events) / 24 + 2, (batches, len(events), span)
