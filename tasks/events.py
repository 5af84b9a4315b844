"""Task events for Flower at a few publishes per second instead of one per event.

A worker of a hundred threads runs hundreds of tasks a second, each with four events (sent,
received, started, succeeded). Celery buffers the worker's own task events but wakes the
worker's loop to publish them on every one, so most batches hold one event, and it publishes
every `task-sent` event on its own. Here the worker publishes what its threads buffered at most
every `EVENT_FLUSH_S`, `task-sent` events included; Flower sees them a fraction of a second later
(its own view refreshes every few seconds). Outside a worker nothing changes.
"""

from __future__ import annotations

from typing import Any

from celery.events.dispatcher import EventDispatcher
from celery.events.event import Event
from celery.utils.time import utcoffset
from celery.worker.consumer import Consumer as CeleryConsumer

EVENT_FLUSH_S = 0.1
"""How long a buffered task event may wait before the worker publishes its batch."""

_consumer: Consumer | None = None
"""This process's worker consumer, once a worker has started in it."""


class Consumer(CeleryConsumer):
    """The worker's consumer: publishes buffered task events on a timer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        global _consumer
        super().__init__(*args, **kwargs)
        self._events_flush_due = False
        _consumer = self

    def on_send_event_buffered(self) -> None:
        """Called by any thread that buffered an event: one flush per interval, not per event.

        The check and set of the flag are not atomic: two threads may both schedule a flush,
        and the second then publishes whatever arrived since (or nothing). An event is never
        left behind, since the flag is cleared before the flush that publishes it.
        """
        if self.hub is not None and not self._events_flush_due:
            self._events_flush_due = True
            self.hub.call_soon(self._schedule_events_flush)

    def buffer_task_sent(self, fields: dict[str, Any], *, blind: bool) -> bool:
        """Buffer a `task-sent` event with the worker's task events; False when this worker
        sends no task events (the caller then publishes it itself)."""
        dispatcher = self.event_dispatcher
        if (dispatcher is None or not dispatcher.enabled
                or "task" not in (dispatcher.buffer_group or ())
                or (dispatcher.groups and "task" not in dispatcher.groups)):
            return False
        dispatcher.send("task-sent", blind=blind, **fields)
        return True

    def stop(self) -> None:
        self._flush_events()
        super().stop()

    def shutdown(self) -> None:
        self._flush_events()
        super().shutdown()

    def _schedule_events_flush(self) -> None:
        self.hub.call_later(EVENT_FLUSH_S, self._flush_due_events)

    def _flush_due_events(self) -> None:
        self._events_flush_due = False
        self._flush_events()


class SentEventDispatcher(EventDispatcher):
    """Publishes `task-sent` events with the sender's own producer, without the lock; in a
    worker, buffers them with the worker's task events instead.

    Celery publishes every `task-sent` event through one dispatcher per process whose lock
    is held across the network write, although each caller passes the producer it just
    published the task with (one per thread, from the producer pool). With a hundred threads
    dispatching nodes and tool chords, the lock serialized them (hundreds of milliseconds per
    five-tool chord in `bench/llm_concurrency.py`). Nothing shared is written here but the
    Lamport clock, which has its own lock.
    """

    def publish(self, type: str, fields: dict[str, Any], producer: Any,  # noqa: A002
                blind: bool = False, Event: Any = Event, **kwargs: Any) -> Any:  # noqa: N803
        consumer = _consumer
        if type == "task-sent" and consumer is not None and consumer.buffer_task_sent(
                fields, blind=blind):
            return None
        clock = None if blind else self.clock.forward()
        event = Event(type, hostname=self.hostname, utcoffset=utcoffset(), pid=self.pid,
                      clock=clock, **fields)
        return self._publish(event, producer, routing_key=type.replace("-", "."), **kwargs)
