"""The delivery task: one attempt of one notification delivery, then the next one scheduled
with a countdown when the receiver asked to wait. All logic is `pipeline/notify/sender.py`'s;
the claim in the store makes a redelivered or duplicated message post nothing twice, and the
reconciler re-drives a delivery whose message was lost or whose worker died mid-POST.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC, datetime
from typing import Any

from celery import Task
from models.delivery import Delivery, DeliveryStatus
from pipeline.notify import deliver

from tasks.app import PUBLISH_ERRORS, app, broker_unavailable
from tasks.nodes import DELIVER_TASK, StoreRetryingTask
from tasks.services import get_runtime

logger = logging.getLogger(__name__)

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"
"""Who claims a delivery: this process."""


def send_delivery(delivery_id: str, *, countdown: float = 0.0) -> None:
    """Publish one attempt of the delivery (after `countdown` seconds); BrokerUnavailableError
    if the broker cannot be reached (the reconciler sends it later)."""
    try:
        deliver_notification.apply_async((delivery_id,), countdown=max(0.0, countdown))
    except PUBLISH_ERRORS as exc:
        raise broker_unavailable(exc) from exc


@app.task(name=DELIVER_TASK, bind=True, ignore_result=True, base=StoreRetryingTask)
def deliver_notification(self: Task, delivery_id: str) -> dict[str, Any]:
    """Make one attempt of the delivery if it is due and free; schedule the next if it is to
    be tried again."""
    runtime = get_runtime()
    settings = runtime.settings
    delivery = deliver(runtime.store, delivery_id, owner=WORKER_ID,
                       lease_s=settings.notify_lease_s,
                       public_url=settings.public_url)
    if delivery is None:  # not due, final, or another worker's now: nothing to schedule
        return {"delivery_id": delivery_id, "attempted": False}
    _schedule_next(delivery)
    return {"delivery_id": delivery_id, "status": delivery.status.value,
            "attempts": delivery.attempts}


def _schedule_next(delivery: Delivery) -> None:
    if delivery.status is not DeliveryStatus.PENDING or delivery.next_attempt_at is None:
        return
    wait = (delivery.next_attempt_at - datetime.now(UTC)).total_seconds()
    try:
        send_delivery(delivery.delivery_id, countdown=wait)
    except Exception:  # the reconciler finds it due and sends it
        logger.warning("delivery %s: next attempt not scheduled", delivery.delivery_id,
                       exc_info=True)
