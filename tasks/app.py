"""The Celery application; its settings come from `celeryconfig`."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.app.amqp import AMQP
from celery.events.dispatcher import EventDispatcher
from celery.events.event import Event
from celery.utils.time import utcoffset
from kombu.utils.objects import cached_property

from tasks import transport

transport.install()


class _SentEventDispatcher(EventDispatcher):  # type: ignore[misc]
    """Publishes `task-sent` events with the sender's own producer, without the lock.

    Celery publishes every `task-sent` event through one dispatcher per process whose lock
    is held across the network write, although each caller passes the producer it just
    published the task with (one per thread, from the producer pool). With a hundred threads
    dispatching nodes and tool chords, the lock serialized them (hundreds of milliseconds per
    five-tool chord in `bench/llm_concurrency.py`). Nothing shared is written here but the
    Lamport clock, which has its own lock.
    """

    def publish(self, type: str, fields: dict[str, Any], producer: Any,  # noqa: A002
                blind: bool = False, Event: Any = Event, **kwargs: Any) -> Any:  # noqa: N803
        clock = None if blind else self.clock.forward()
        event = Event(type, hostname=self.hostname, utcoffset=utcoffset(), pid=self.pid,
                      clock=clock, **fields)
        return self._publish(event, producer, routing_key=type.replace("-", "."), **kwargs)


class _AMQP(AMQP):  # type: ignore[misc]
    @cached_property
    def _event_dispatcher(self) -> EventDispatcher:
        # as Celery's: publish() is called with the sender's producer, so it stays disabled
        return _SentEventDispatcher(app=self.app, enabled=False)


app = Celery("verity", include=["tasks.nodes"], amqp=_AMQP)
app.config_from_object("celeryconfig")
