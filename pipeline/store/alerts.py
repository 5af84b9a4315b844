"""Alert groups in the store: the record that makes one firing group start one run.

A part of a store (`SqliteAlerts`, `PgAlerts`). `claim_alert_group` decides in one write
transaction, and its decision is an insert-or-nothing on the unique (tenant_id, dedupe_key):

- no record of the group, or one past its window, resolved, or skipped: the insert (or the
  conditional update of the stale record) wins and says `started`, or `skipped` when the
  tenant's groups started in the last hour already reach its cap;
- otherwise nothing is written but the record's duplicate count: `deduplicated`.

Two servers claiming one group at once cannot both win: the loser's insert meets the unique
constraint and becomes the conditional update, which a fresh record refuses. The hourly cap is
counted under a per-tenant lock (PostgreSQL: a transaction advisory lock; SQLite: its one
writer), so concurrent groups cannot overshoot it either.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any
from uuid import uuid4

from sqlalchemy import delete, func, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from models.alert import AlertGroup, AlertOutcome, RunAlert
from models.tables import AlertGroupRow, DiagnosisRunRow
from pipeline.ids import check_tenant_id
from pipeline.store.engine import Database
from pipeline.store.rows import rowcount, utc_now

HOUR = timedelta(hours=1)
_KEPT = (AlertOutcome.STARTED.value, AlertOutcome.SKIPPED.value)


def group_sha256(group_key: str) -> str:
    """The indexed form of a groupKey (which may be long)."""
    return hashlib.sha256(group_key.encode("utf-8")).hexdigest()


def _record(row: Any) -> AlertGroup:
    return AlertGroup(receipt_id=row.receipt_id, tenant_id=row.tenant_id,
                      group_key=row.group_key, alertname=row.alertname,
                      outcome=AlertOutcome(row.outcome), run_id=row.run_id,
                      fired_at=row.fired_at, duplicates=row.duplicates,
                      resolved_at=row.resolved_at)


class Alerts:
    """Alert group records, read and written through the ORM; a backend supplies its
    upsert and its tenant lock."""

    def __init__(self, db: Database) -> None:
        """`db`: the store's database."""
        self._db = db

    def _insert(self) -> Any:
        """The dialect's INSERT of alert_group (with ON CONFLICT)."""
        raise NotImplementedError

    def _lock_tenant(self, session: Session, tenant_id: str) -> None:
        """Hold the tenant's claims until the transaction ends."""

    def claim_alert_group(
        self, *, tenant_id: str, dedupe_key: str, group_key: str, alertname: str,
        window_s: float, max_per_hour: int, now: datetime | None = None,
    ) -> tuple[AlertOutcome, AlertGroup]:
        moment = now or utc_now()
        values = {"receipt_id": uuid4().hex, "tenant_id": check_tenant_id(tenant_id),
                  "dedupe_key": dedupe_key, "group_key": group_key,
                  "group_sha256": group_sha256(group_key), "alertname": alertname[:64],
                  "run_id": None, "fired_at": moment, "duplicates": 0, "resolved_at": None}
        table = AlertGroupRow.__table__
        with self._db.write() as session:
            self._lock_tenant(session, tenant_id)
            started = session.scalar(select(func.count()).select_from(AlertGroupRow).where(
                AlertGroupRow.tenant_id == tenant_id,
                AlertGroupRow.outcome == AlertOutcome.STARTED.value,
                AlertGroupRow.fired_at > moment - HOUR)) or 0
            outcome = AlertOutcome.STARTED if started < max_per_hour else AlertOutcome.SKIPPED
            insert = self._insert().values(**values, outcome=outcome.value)
            stale = or_(table.c.fired_at <= moment - timedelta(seconds=window_s),
                        table.c.resolved_at.is_not(None),
                        table.c.outcome == AlertOutcome.SKIPPED.value)
            fresh = {name: insert.excluded[name] for name in (
                "receipt_id", "group_key", "group_sha256", "alertname", "outcome", "run_id",
                "fired_at", "duplicates", "resolved_at")}
            claim = insert.on_conflict_do_update(
                index_elements=["tenant_id", "dedupe_key"], set_=fresh, where=stale,
            ).returning(*table.c)
            won = session.execute(claim).one_or_none()
            if won is not None:
                return outcome, _record(won)
            bump = (update(AlertGroupRow)
                    .where(AlertGroupRow.tenant_id == tenant_id,
                           AlertGroupRow.dedupe_key == dedupe_key)
                    .values(duplicates=AlertGroupRow.duplicates + 1)
                    .returning(*table.c))
            kept = session.execute(bump).one()
            return AlertOutcome.DEDUPLICATED, _record(kept)

    def attach_alert_run(self, receipt_id: str, *, run_id: str, alert: RunAlert) -> None:
        with self._db.write() as session:
            resolved_at = session.execute(
                update(AlertGroupRow).where(AlertGroupRow.receipt_id == receipt_id)
                .values(run_id=run_id).returning(AlertGroupRow.resolved_at)).scalar()
            if resolved_at is not None:  # resolved while its run was being created
                alert = alert.model_copy(update={"resolved_at": resolved_at})
            session.execute(update(DiagnosisRunRow)
                            .where(DiagnosisRunRow.run_id == run_id)
                            .values(alert_json=alert.model_dump(mode="json")))

    def release_alert_group(self, receipt_id: str) -> bool:
        stmt = delete(AlertGroupRow).where(AlertGroupRow.receipt_id == receipt_id,
                                           AlertGroupRow.run_id.is_(None))
        with self._db.write() as session:
            return rowcount(session.execute(stmt)) == 1

    def resolve_alert_group(self, *, tenant_id: str, group_key: str,
                            now: datetime | None = None) -> AlertGroup | None:
        moment = now or utc_now()
        latest = (select(AlertGroupRow)
                  .where(AlertGroupRow.tenant_id == tenant_id,
                         AlertGroupRow.group_sha256 == group_sha256(group_key),
                         AlertGroupRow.group_key == group_key,
                         AlertGroupRow.outcome.in_(_KEPT))
                  .order_by(AlertGroupRow.fired_at.desc()).limit(1))
        with self._db.write() as session:
            row = session.scalars(latest).one_or_none()
            if row is None:
                return None
            if row.resolved_at is None:
                row.resolved_at = moment
                if row.run_id is not None:
                    self._resolve_run(session, row.run_id, moment)
            session.flush()
            return _record(row)

    def _resolve_run(self, session: Session, run_id: str, moment: datetime) -> None:
        run = session.get(DiagnosisRunRow, run_id)
        if run is not None and run.alert_json is not None:
            run.alert_json = {**run.alert_json, "resolved_at": moment.isoformat()}

    def list_alert_groups(self, *, tenant_id: str, limit: int = 50) -> list[AlertGroup]:
        stmt = (select(AlertGroupRow).where(AlertGroupRow.tenant_id == tenant_id)
                .order_by(AlertGroupRow.fired_at.desc(), AlertGroupRow.receipt_id)
                .limit(limit))
        with self._db.read() as session:
            return [_record(row) for row in session.scalars(stmt)]


class SqliteAlerts(Alerts):
    """Alert groups on SQLite: its write transaction (BEGIN IMMEDIATE) is the tenant lock."""

    def _insert(self) -> Any:
        return sqlite.insert(AlertGroupRow)


class PgAlerts(Alerts):
    """Alert groups on PostgreSQL: the cap is counted under a transaction advisory lock of
    the tenant."""

    def _insert(self) -> Any:
        return postgresql.insert(AlertGroupRow)

    def _lock_tenant(self, session: Session, tenant_id: str) -> None:
        session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                        {"key": f"verity:alerts:{tenant_id}"})


__all__ = ["Alerts", "PgAlerts", "SqliteAlerts"]
