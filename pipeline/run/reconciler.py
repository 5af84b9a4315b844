"""The reconciler: messages are hints, the database is the truth.

One sweep over the store ends every run past its deadline as FAILED, then looks at the runs
that made no progress for `stale_after_s` and hold no live node lease:

- a run flagged for cancellation ends CANCELLED (its cancel did not complete);
- a run whose state has no next step cannot go on: it ends FAILED, `RUN_STATE_INVALID`;
- any other run is claimed (a conditional touch, so of several reconcilers exactly one wins)
  and its stored next step is handed to `resend`, which sends it again through the path a
  redelivered message takes (nodes are idempotent: a step that did run changes nothing).

Every action is a `run_event` of node `reconcile`, written by the store. Nothing here knows
about a broker: `tasks/reconcile.py` passes a `resend` that publishes with Celery.

Notification deliveries are re-driven the same way (`redrive_deliveries`): a PENDING delivery
due for `stale_after_s` (its message was lost) or a SENDING one whose claim expired (its worker
died mid-POST) is sent again; the claim in the store decides who posts, so a delivery re-sent
twice is still posted once at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Protocol

from models.run import StalledRun
from models.state import NextStep
from pipeline import telemetry
from pipeline.errors import BrokerUnavailableError

logger = logging.getLogger(__name__)

RUN_STATE_INVALID = "RUN_STATE_INVALID"
"""The failure reason of a run that cannot go on: its state has no next step."""

Resend = Callable[[str, int, NextStep], None]
"""Send `(run_id, version, step)` again; raises if it could not be sent."""
SendDelivery = Callable[[str], None]
"""Send one attempt of a delivery by id; raises if it could not be sent."""


class SweepStore(Protocol):
    """What a sweep needs of the run store (`pipeline.store.RunStore`)."""

    def fail_overdue(self, *, now: datetime | None = None, limit: int = 100) -> list[str]:
        """End runs past their deadline FAILED; their ids."""
        ...

    def find_stalled(
        self, *, older_than_s: float, limit: int, now: datetime | None = None
    ) -> list[StalledRun]:
        """Active runs without progress or a live lease, oldest first."""
        ...

    def claim_stalled(self, run_id: str, *, version: int, updated_at: datetime,
                      step: NextStep | None = None) -> bool:
        """Claim one stall for a re-send; True for exactly one claimer."""
        ...

    def cancel_run(self, run_id: str, *, reason: str = ..., node: str | None = None) -> bool:
        """End a run CANCELLED; False if it had ended."""
        ...

    def fail_run(self, run_id: str, *, version: int, reason: str, error: str) -> bool:
        """End a run at `version` FAILED; False if it moved on."""
        ...


@dataclass
class SweepReport:
    """What one sweep did."""

    resent: int = 0
    """Stalled runs whose next step was sent again."""
    failed_deadline: int = 0
    """Runs ended FAILED past their deadline."""
    cancelled: int = 0
    """Runs flagged for cancellation, ended CANCELLED."""
    invalid: int = 0
    """Runs without a next step, ended FAILED (RUN_STATE_INVALID)."""
    resend_errors: int = 0
    """Claimed runs whose re-send raised; they are claimed again once stale."""
    deliveries_resent: int = 0
    """Notification deliveries due or abandoned whose attempt was sent again."""

    def as_dict(self) -> dict[str, int]:
        """The counts by name (a task result, a log line)."""
        return asdict(self)


def sweep(
    store: SweepStore,
    *,
    resend: Resend,
    stale_after_s: float,
    limit: int,
    now: datetime | None = None,
) -> SweepReport:
    """One pass of the reconciler over `store` (see the module docstring); safe to run in
    several processes at once."""
    now = now or datetime.now(UTC)
    report = SweepReport(failed_deadline=len(store.fail_overdue(now=now, limit=limit)))
    for run in store.find_stalled(older_than_s=stale_after_s, limit=limit, now=now):
        try:
            _reconcile(store, run, resend=resend, report=report)
        except BrokerUnavailableError as exc:  # the rest would fail alike: next sweep
            logger.warning("reconciler: broker unavailable, sweep stopped: %s", exc)
            report.resend_errors += 1
            break
    telemetry.reconciled(report.as_dict())
    return report


def _reconcile(store: SweepStore, run: StalledRun, *, resend: Resend,
               report: SweepReport) -> None:
    if run.cancel_requested:
        if store.cancel_run(run.run_id, reason="cancel requested", node="reconcile"):
            report.cancelled += 1
        return
    if run.next is None:
        if store.fail_run(run.run_id, version=run.version, reason=RUN_STATE_INVALID,
                          error="run state has no next step"):
            report.invalid += 1
        return
    if not store.claim_stalled(run.run_id, version=run.version, updated_at=run.updated_at,
                               step=run.next):
        return  # another reconciler has it, or the run moved on
    try:
        resend(run.run_id, run.version, run.next)
    except BrokerUnavailableError:
        raise
    except Exception:  # one bad step must not stop the sweep; the deadline still holds
        logger.exception("reconciler: re-sending run %s at version %s failed",
                         run.run_id, run.version)
        report.resend_errors += 1
        return
    report.resent += 1


class DeliveryStore(Protocol):
    """What re-driving deliveries needs of the run store."""

    def due_deliveries(self, *, older_than_s: float, limit: int,
                       now: datetime | None = None) -> list[str]:
        """Deliveries whose message was lost or whose claim expired."""
        ...


def redrive_deliveries(store: DeliveryStore, *, send: SendDelivery, stale_after_s: float,
                       limit: int, report: SweepReport, now: datetime | None = None) -> None:
    """Send again each delivery due for `stale_after_s` seconds or abandoned mid-POST."""
    for delivery_id in store.due_deliveries(older_than_s=stale_after_s, limit=limit, now=now):
        try:
            send(delivery_id)
        except BrokerUnavailableError as exc:
            logger.warning("reconciler: broker unavailable, deliveries left: %s", exc)
            report.resend_errors += 1
            return
        report.deliveries_resent += 1
