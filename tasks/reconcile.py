"""The reconciler's Celery wiring: the periodic sweep task (beat sends it every
VERITY_RECONCILE_INTERVAL_S, see `celeryconfig.beat_schedule`) and the re-send that publishes a
stored next step the way the runtime dispatches it. The sweep itself is
`pipeline/run/reconciler.py`'s; `verity reconcile` runs the same `run_sweep` in a loop of its own.
"""

from __future__ import annotations

import logging
from typing import Any

import celery.beat
from models.state import NextStep
from pipeline.config import VeritySettings
from pipeline.errors import StoreUnavailableError
from pipeline.run.reconciler import SweepReport, redrive_deliveries, sweep
from pipeline.run.runtime import NodeOutcome
from pipeline.store import RunStore

from tasks.app import PUBLISH_ERRORS, app, broker_unavailable
from tasks.nodes import NODE_TASKS, dispatch
from tasks.services import get_runtime

logger = logging.getLogger(__name__)


def resend(run_id: str, version: int, step: NextStep) -> None:
    """Publish `step` of the run at `version` again: the node's task, or the tool chord whose
    body re-enters the coordinator (task ids are deterministic, so a cancel still revokes it).
    A broker that cannot be reached is BrokerUnavailableError."""
    if step.node not in NODE_TASKS:
        raise ValueError(f"run {run_id}: no task for the stored next node {step.node!r}")
    try:
        dispatch(run_id, NodeOutcome("redispatch", version, step))
    except PUBLISH_ERRORS as exc:
        raise broker_unavailable(exc) from exc


def run_sweep(store: RunStore, settings: VeritySettings) -> SweepReport:
    """One sweep over `store` with the settings' threshold and limit: stalled runs, lost or
    abandoned notification deliveries, then stalled re-verification batches (their chunks
    re-sent)."""
    report = sweep(store, resend=resend, stale_after_s=settings.reconcile_stale_s,
                   limit=settings.reconcile_limit)
    from tasks.batch import resend_stalled_batches
    from tasks.notify import send_delivery

    redrive_deliveries(store, send=send_delivery, stale_after_s=settings.reconcile_stale_s,
                       limit=settings.reconcile_limit, report=report)
    resend_stalled_batches(store, stale_after_s=settings.reconcile_stale_s)
    return report


def use_threaded_beat() -> None:
    """Make a worker's embedded beat (`worker -B`) a thread of the worker instead of a forked
    process: a worker that is SIGKILLed takes its beat with it instead of leaving an orphan
    that keeps sending sweeps."""
    embedded = celery.beat.EmbeddedService
    if getattr(embedded, "verity_threaded", False):
        return

    def threaded(app: Any, **kwargs: Any) -> Any:
        kwargs.pop("thread", None)
        return embedded(app, thread=True, **kwargs)

    threaded.verity_threaded = True  # type: ignore[attr-defined]
    celery.beat.EmbeddedService = threaded


@app.task(name="verity.reconcile.sweep", ignore_result=True)
def reconcile_sweep() -> dict[str, Any]:
    """Re-send stalled runs' next steps, end overdue runs FAILED (see pipeline/run/reconciler.py).

    Safe on several workers at once; a database that is down skips this sweep (the next beat
    sends another)."""
    try:
        runtime = get_runtime()
        report = run_sweep(runtime.store, runtime.settings)
    except StoreUnavailableError as exc:
        logger.warning("reconcile sweep skipped: %s", exc)
        return {"skipped": str(exc)}
    counts = report.as_dict()
    if any(counts.values()):
        logger.info("reconcile sweep: %s", counts)
    return counts
