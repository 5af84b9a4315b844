"""What a producer sends (`client.local.VerityClient`): a new run's first message, a batch's
start, the revocation of a cancelled run's queued messages. A publish that cannot reach the
broker gives up within about a second with BrokerUnavailableError (one line)."""

from __future__ import annotations

from models.state import NextStep
from pipeline.run.graph import GRAPH

from tasks.app import PUBLISH_ERRORS, app, broker_unavailable, ping_broker
from tasks.batch import start as start_batch
from tasks.nodes import coordinate, node_task_id, pending_task_ids

SUBMIT_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2,
                       "interval_max": 0.5}
"""A submit's publish gives up within about a second when the broker is down."""


def send_run(run_id: str) -> None:
    """Send a new run's coordinator, naming the graph's entry node (which spares it a read)."""
    try:
        coordinate.apply_async((run_id, 0, GRAPH.entry),
                               task_id=node_task_id(run_id, "coordinate", 0),
                               retry_policy=SUBMIT_RETRY_POLICY)
    except PUBLISH_ERRORS as exc:
        raise broker_unavailable(exc) from exc


def send_batch(batch_id: str) -> None:
    """Send a batch's start (its items left, chunk by chunk)."""
    try:
        start_batch.apply_async((batch_id,), retry_policy=SUBMIT_RETRY_POLICY)
    except PUBLISH_ERRORS as exc:
        raise broker_unavailable(exc) from exc


def revoke_pending(run_id: str, version: int, step: NextStep | None) -> None:
    """Revoke (never terminate) the messages dispatched for the run's stored next step."""
    ids = pending_task_ids(run_id, version, step)
    if ids:
        app.control.revoke(ids)


__all__ = ["SUBMIT_RETRY_POLICY", "ping_broker", "revoke_pending", "send_batch", "send_run"]
