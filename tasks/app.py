"""The Celery application; its settings come from `celeryconfig`."""

from __future__ import annotations

from celery import Celery
from celery.app.amqp import AMQP
from celery.events.dispatcher import EventDispatcher
from kombu.utils.objects import cached_property

from tasks import transport
from tasks.events import SentEventDispatcher

transport.install()


class _AMQP(AMQP):  # type: ignore[misc]
    @cached_property
    def _event_dispatcher(self) -> EventDispatcher:
        # as Celery's: publish() is called with the sender's producer, so it stays disabled
        return SentEventDispatcher(app=self.app, enabled=False)


app = Celery("verity", include=["tasks.nodes"], amqp=_AMQP)
app.config_from_object("celeryconfig")
