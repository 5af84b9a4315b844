"""The worker's task-event batching (tasks/events.py), without a broker: its scheduling and
where `task-sent` events go. `tests/integration/test_task_events.py` watches a real worker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tasks import events
from tasks.app import app


@dataclass
class _Hub:
    soon: list[Callable[[], None]] = field(default_factory=list)
    later: list[tuple[float, Callable[[], None]]] = field(default_factory=list)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.soon.append(callback)

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.later.append((delay, callback))


@dataclass
class _Dispatcher:
    enabled: bool = True
    buffer_group: frozenset[str] = frozenset({"task"})
    groups: set[str] | None = None
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    flushes: int = 0

    def send(self, type: str, blind: bool = False, **fields: Any) -> None:  # noqa: A002
        self.sent.append((type, {"blind": blind, **fields}))

    def flush(self) -> None:
        self.flushes += 1


def _consumer(dispatcher: _Dispatcher | None = None) -> events.Consumer:
    consumer = events.Consumer.__new__(events.Consumer)  # the worker's, without a worker
    consumer.hub = _Hub()
    consumer.event_dispatcher = dispatcher or _Dispatcher()
    consumer._events_flush_due = False
    return consumer


def test_buffered_events_are_published_once_per_interval() -> None:
    consumer = _consumer()
    hub, dispatcher = consumer.hub, consumer.event_dispatcher
    for _ in range(5):  # five threads buffer an event each
        consumer.on_send_event_buffered()
    assert len(hub.soon) == 1 and not hub.later
    hub.soon.pop()()  # on the worker's loop: a timer, not a flush
    (delay, flush), = hub.later
    assert delay == events.EVENT_FLUSH_S and dispatcher.flushes == 0
    consumer.on_send_event_buffered()
    assert not hub.soon  # still due: the timer will publish this one too
    flush()
    assert dispatcher.flushes == 1
    consumer.on_send_event_buffered()  # after the flush, the next event schedules again
    assert len(hub.soon) == 1


def test_stopping_the_consumer_publishes_what_is_buffered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = _consumer()
    for method in ("stop", "shutdown"):
        monkeypatch.setattr(events.CeleryConsumer, method, lambda self: None)
        getattr(consumer, method)()
    assert consumer.event_dispatcher.flushes == 2


@pytest.mark.parametrize(("dispatcher", "buffered"), [
    (_Dispatcher(), True),
    (_Dispatcher(groups={"task", "worker"}), True),
    (_Dispatcher(enabled=False), False),  # events disabled (by Flower or remote control)
    (_Dispatcher(groups={"worker"}), False),  # a worker started without task events
    (_Dispatcher(buffer_group=frozenset()), False),  # a pool without the event loop
], ids=["enabled", "task-group", "disabled", "worker-events-only", "unbuffered"])
def test_task_sent_joins_the_worker_batch_only_where_task_events_are_buffered(
    dispatcher: _Dispatcher, buffered: bool,
) -> None:
    consumer = _consumer(dispatcher)
    fields = {"uuid": "t-1", "name": "verity.node.plan", "retries": 0}
    assert consumer.buffer_task_sent(fields, blind=False) is buffered
    assert dispatcher.sent == ([("task-sent", {"blind": False, **fields})] if buffered else [])


def test_the_sent_dispatcher_hands_task_sent_to_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dispatcher = app.amqp._event_dispatcher
    consumer = _consumer()
    monkeypatch.setattr(events, "_consumer", consumer)
    published: list[Any] = []

    class Producer:
        def publish(self, body: Any, **kwargs: Any) -> None:
            published.append(body)

    dispatcher.publish("task-sent", {"uuid": "t-2", "name": "verity.node.tool"}, Producer())
    assert not published
    assert consumer.event_dispatcher.sent == [
        ("task-sent", {"blind": False, "uuid": "t-2", "name": "verity.node.tool"})]
    consumer.event_dispatcher.enabled = False
    dispatcher.publish("task-sent", {"uuid": "t-3", "name": "verity.node.tool"}, Producer())
    assert [body["uuid"] for body in published] == ["t-3"]
