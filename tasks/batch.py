"""Batch re-verification as Celery tasks on the `batch` queue: a flat canvas, no chord.

    verity.batch.start(batch_id)               RUNNING, then one chunk message per range of
                                               items still PENDING (a group, sent once)
    verity.batch.chunk(batch_id, start, end)   re-judge the range's PENDING items

A chunk writes each item once (the store's conditional update), moves the batch's counters
and, when they reach the total, ends the batch: completion is a database counter, never a
chord, and no task waits on another. Sending `start` again (resume, or the reconciler after a
worker died or Redis lost the messages) re-sends only the ranges with items left; a re-sent
chunk whose items landed writes nothing. Chunks show their progress as task meta (PROGRESS:
batch id, range, done) in Flower.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import Task, group
from models.batch import BatchRecord
from pipeline.factory import batch_judges
from pipeline.reverify import Judges, judge_chunk

from tasks.app import PUBLISH_ERRORS, app
from tasks.nodes import StoreRetryingTask
from tasks.services import get_runtime

logger = logging.getLogger(__name__)

_judges: dict[tuple[str, bool, int], Judges] = {}
_judges_lock = threading.Lock()


def chunk_task_id(batch_id: str, start: int) -> str:
    """The id of the message that judges the range starting at `start`."""
    return f"{batch_id}-chunk-{start}"


def judges_for(batch: BatchRecord) -> Judges:
    """The Verifier and Composer the batch asked for: the runtime's own agents when its
    provider is the runtime's and no Message Batches are asked for (a runtime factory's test
    double included), else built for the batch once per process."""
    runtime = get_runtime()
    own = runtime.settings.resolved_provider()
    if batch.provider == own and not batch.message_batches:
        return runtime.agents.verifier, runtime.agents.composer
    key = (batch.provider, batch.message_batches, batch.chunk_size)
    with _judges_lock:
        judges = _judges.get(key)
        if judges is None:
            judges = _judges[key] = batch_judges(
                runtime.settings, batch.provider, message_batches=batch.message_batches,
                max_batch=batch.chunk_size)
        return judges


@app.task(name="verity.batch.start", bind=True, ignore_result=True, base=StoreRetryingTask)
def start(self: Task, batch_id: str) -> dict[str, Any]:
    """Mark the batch RUNNING and send one chunk message per range with items left."""
    store = get_runtime().store
    store.start_batch(batch_id)
    ranges = store.pending_ranges(batch_id)
    if ranges:
        group(chunk.si(batch_id, first, last).set(task_id=chunk_task_id(batch_id, first))
              for first, last in ranges).apply_async()
    return {"batch_id": batch_id, "chunks": len(ranges)}


@app.task(name="verity.batch.chunk", bind=True, ignore_result=True, base=StoreRetryingTask)
def chunk(self: Task, batch_id: str, first: int, last: int) -> dict[str, Any]:
    """Re-judge items [first, last) of the batch that are still PENDING."""
    runtime = get_runtime()

    def progress(done: int, of: int) -> None:
        request = self.request
        if request.id and not request.called_directly:
            try:
                self.update_state(state="PROGRESS", meta={
                    "batch_id": batch_id, "range": [first, last], "done": done, "of": of})
            except Exception:  # telemetry: a failed write must not touch the batch
                logger.warning("progress of %s not recorded", request.id, exc_info=True)

    outcome = judge_chunk(runtime.store, batch_id, start=first, end=last, judges=judges_for,
                          settings=runtime.settings, progress=progress,
                          concurrent=_concurrent(runtime.store, batch_id))
    return {"batch_id": batch_id, "range": [first, last], "judged": outcome.judged,
            "stopped": outcome.stopped}


def _concurrent(store: Any, batch_id: str) -> bool:
    """Judge a chunk's items at once when their requests go through Message Batches (they are
    gathered into one batch per role), one by one otherwise."""
    return bool(store.get_batch(batch_id).message_batches)


def resend_stalled_batches(store: Any, *, stale_after_s: float) -> list[str]:
    """Send `start` again for each RUNNING batch with items left and no progress for
    `stale_after_s` (taken once among several sweepers): its lost chunks are re-sent."""
    sent = []
    for batch in store.stalled_batches(older_than_s=stale_after_s):
        if batch.updated_at is None or not store.claim_stalled_batch(
                batch.batch_id, updated_at=batch.updated_at):
            continue
        try:
            start.apply_async((batch.batch_id,))
        except PUBLISH_ERRORS as exc:
            logger.warning("batch %s not re-sent: %s", batch.batch_id, exc)
            continue
        logger.info("batch %s stalled with %d items left: chunks re-sent", batch.batch_id,
                    batch.pending)
        sent.append(batch.batch_id)
    return sent
