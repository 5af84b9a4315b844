"""The Celery application; its settings come from `celeryconfig`."""

from __future__ import annotations

from celery import Celery
from celery.app.amqp import AMQP
from celery.events.dispatcher import EventDispatcher
from kombu.exceptions import OperationalError as KombuOperationalError
from kombu.utils.objects import cached_property
from pipeline.errors import BrokerUnavailableError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tasks import transport
from tasks.events import SentEventDispatcher

transport.install()


class _AMQP(AMQP):
    @cached_property
    def _event_dispatcher(self) -> EventDispatcher:
        # as Celery's: publish() is called with the sender's producer, so it stays disabled
        return SentEventDispatcher(app=self.app, enabled=False)


app = Celery("verity", include=["tasks.nodes", "tasks.reconcile", "tasks.batch", "tasks.notify"],
             amqp=_AMQP)
app.config_from_object("celeryconfig")

PUBLISH_ERRORS: tuple[type[BaseException], ...] = (
    KombuOperationalError, RedisConnectionError, RedisTimeoutError, OSError)
"""What a publish raises when the broker (or the chord's result backend) cannot be reached:
kombu's wrapper once its bounded retries are spent, redis-py's own errors from the result
backend, a refused socket."""


def broker_unavailable(exc: BaseException) -> BrokerUnavailableError:
    """A publish error as the one-line Verity error."""
    lines = str(exc).strip().splitlines()
    return BrokerUnavailableError(
        f"broker unavailable: {lines[0] if lines else type(exc).__name__}")


def ping_broker(*, timeout_s: float = 2.0) -> None:
    """Connect to the broker once; BrokerUnavailableError (one line) if it cannot be reached."""
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=timeout_s)
    except PUBLISH_ERRORS as exc:
        raise broker_unavailable(exc) from exc
