"""Notification deliveries in the store: enqueued with the run's end
(`rows.enqueue_deliveries`, inside the finalize transaction), claimed before each POST, ended
after it, listed for `verity show`, the API and the page, and found again by the reconciler
when due or abandoned.

A claim is one conditional UPDATE: a PENDING delivery that is due, or a SENDING one whose claim
expired (its worker died), becomes SENDING under the claimer with its attempt count bumped, and
an `in_flight` attempt row is written in the same transaction (an expired claim's in-flight row
becomes `abandoned`). Of several workers claiming one delivery exactly one gets it; a POST is
only ever sent under a claim, so two live workers never post one delivery at the same time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from models.delivery import Delivery, DeliveryAttempt, DeliveryStatus
from models.tables import DeliveryAttemptRow, DeliveryRow
from pipeline.store.engine import Database
from pipeline.store.rows import require_run, rowcount, utc_now

EndOutcome = Literal["delivered", "retry", "failed"]
"""How an attempt ended: accepted, to be tried again at `retry_at`, or final failure."""

IN_FLIGHT = "in_flight"
ABANDONED = "abandoned"
LOST = "claim expired while posting (worker lost); the receiver may have it"


class Deliveries:
    """Deliveries and their attempts, read and written through SQLAlchemy Core/ORM."""

    def __init__(self, db: Database) -> None:
        """`db`: the store's database."""
        self._db = db

    def claim_delivery(self, delivery_id: str, *, owner: str, lease_s: float,
                       now: datetime | None = None) -> tuple[Delivery, int] | None:
        """Take the delivery for one attempt; the delivery and the attempt's number, or None
        if it is not due, final, or claimed by a live worker."""
        moment = now or utc_now()
        table = DeliveryRow
        expired = and_(table.status == DeliveryStatus.SENDING.value,
                       table.lease_expires_at < moment)
        due = and_(table.status == DeliveryStatus.PENDING.value,
                   table.next_attempt_at <= moment)
        with self._db.write() as session:
            # a lost claim on the last attempt spends the budget: FAILED, not posted again
            spent = session.execute(
                update(table)
                .where(table.delivery_id == delivery_id, expired,
                       table.attempts >= table.max_attempts)
                .values(status=DeliveryStatus.FAILED.value, last_error=LOST, lease_owner=None,
                        lease_expires_at=None, updated_at=moment))
            number = session.execute(
                update(table)
                .where(table.delivery_id == delivery_id, or_(due, expired))
                .values(status=DeliveryStatus.SENDING.value, attempts=table.attempts + 1,
                        lease_owner=owner, lease_expires_at=moment + timedelta(seconds=lease_s),
                        updated_at=moment)
                .returning(table.attempts)).scalar_one_or_none()
            if number is None:
                if rowcount(spent):
                    self._abandon(session, delivery_id, moment)
                return None
            self._abandon(session, delivery_id, moment)
            session.add(DeliveryAttemptRow(delivery_id=delivery_id, number=number,
                                           outcome=IN_FLIGHT, started_at=moment))
            session.flush()
            return self._load(session, delivery_id), number

    def end_delivery_attempt(
        self, delivery_id: str, number: int, *, owner: str, outcome: EndOutcome,
        status_code: int | None = None, error: str | None = None,
        retry_at: datetime | None = None, now: datetime | None = None,
    ) -> Delivery | None:
        """Record how claimed attempt `number` ended and move the delivery on: DELIVERED,
        PENDING again until `retry_at`, or FAILED. None, and nothing written, if the claim is
        no longer `owner`'s (it expired and another worker took it over)."""
        moment = now or utc_now()
        table = DeliveryRow
        values: dict[str, object] = {"lease_owner": None, "lease_expires_at": None,
                                     "updated_at": moment, "last_error": error}
        if outcome == "delivered":
            values.update(status=DeliveryStatus.DELIVERED.value, delivered_at=moment,
                          next_attempt_at=None)
        elif outcome == "retry" and retry_at is not None:
            values.update(status=DeliveryStatus.PENDING.value, next_attempt_at=retry_at)
        else:
            values.update(status=DeliveryStatus.FAILED.value, next_attempt_at=None)
        retry_after = (retry_at - moment).total_seconds() if retry_at is not None else None
        with self._db.write() as session:
            moved = session.execute(
                update(table)
                .where(table.delivery_id == delivery_id, table.attempts == number,
                       table.status == DeliveryStatus.SENDING.value, table.lease_owner == owner)
                .values(**values))
            if rowcount(moved) != 1:
                return None
            attempt = DeliveryAttemptRow
            session.execute(
                update(attempt)
                .where(attempt.delivery_id == delivery_id, attempt.number == number)
                .values(outcome=outcome if values["status"] != "FAILED" else "failed",
                        status_code=status_code, error=error,
                        retry_after_s=max(0.0, retry_after) if retry_after is not None else None,
                        finished_at=moment))
            return self._load(session, delivery_id)

    def list_deliveries(self, run_id: str, *, tenant_id: str) -> list[Delivery]:
        """The tenant's run's deliveries, oldest first, each with its attempts;
        RunNotFoundError if the tenant has no such run."""
        with self._db.read() as session:
            require_run(session, run_id, tenant_id=tenant_id)
            ids = session.scalars(
                select(DeliveryRow.delivery_id).where(DeliveryRow.run_id == run_id)
                .order_by(DeliveryRow.created_at, DeliveryRow.delivery_id)).all()
            return [self._load(session, delivery_id) for delivery_id in ids]

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        """One delivery with its attempts, or None."""
        with self._db.read() as session:
            if session.get(DeliveryRow, delivery_id) is None:
                return None
            return self._load(session, delivery_id)

    def due_deliveries(self, *, older_than_s: float, limit: int,
                       now: datetime | None = None) -> list[str]:
        """Ids of deliveries the reconciler should re-drive: PENDING and due for more than
        `older_than_s` seconds (its message was lost), or SENDING with an expired claim."""
        moment = now or utc_now()
        table = DeliveryRow
        stmt = (
            select(table.delivery_id)
            .where(or_(
                and_(table.status == DeliveryStatus.PENDING.value,
                     table.next_attempt_at <= moment - timedelta(seconds=older_than_s)),
                and_(table.status == DeliveryStatus.SENDING.value,
                     table.lease_expires_at < moment)))
            .order_by(table.next_attempt_at)
            .limit(limit)
        )
        with self._db.read() as session:
            return list(session.scalars(stmt))

    @staticmethod
    def _abandon(session: Session, delivery_id: str, moment: datetime) -> None:
        """Mark attempts left in flight by a lost claim `abandoned` (before a new one)."""
        attempt = DeliveryAttemptRow
        session.execute(
            update(attempt)
            .where(attempt.delivery_id == delivery_id, attempt.outcome == IN_FLIGHT)
            .values(outcome=ABANDONED, error=LOST, finished_at=moment))

    @staticmethod
    def _load(session: Session, delivery_id: str) -> Delivery:
        row = session.get(DeliveryRow, delivery_id, populate_existing=True)
        assert row is not None
        history = session.scalars(
            select(DeliveryAttemptRow).where(DeliveryAttemptRow.delivery_id == delivery_id)
            .order_by(DeliveryAttemptRow.number)).all()
        return Delivery(
            delivery_id=row.delivery_id, run_id=row.run_id, tenant_id=row.tenant_id,
            kind=row.kind, target=row.target, status=DeliveryStatus(row.status),
            attempts=row.attempts, max_attempts=row.max_attempts,
            next_attempt_at=row.next_attempt_at, last_error=row.last_error,
            created_at=row.created_at, updated_at=row.updated_at, delivered_at=row.delivered_at,
            history=[DeliveryAttempt(
                number=a.number, outcome=a.outcome, status_code=a.status_code, error=a.error,
                retry_after_s=a.retry_after_s, started_at=a.started_at,
                finished_at=a.finished_at) for a in history])
