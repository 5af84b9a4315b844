"""Batch re-verification in the store: selection by keyset pages, batches, items, and their
idempotent results (`Batches`, a part of a store, the same on both backends).

Items are written once: a result lands only on an item still PENDING (`UPDATE ... WHERE status =
'PENDING'`), and the batch's counters move by the rows that did, in the same transaction. A
chunk re-sent after a worker died, or a `--resume`, finds the judged items taken and writes
nothing for them; the last chunk to land ends the batch by the counters (COMPLETED, or
COMPLETED_WITH_ERRORS when an item could not be judged). A stored run is only ever read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Text, and_, case, cast, delete, insert, or_, select, update
from sqlalchemy.orm import Session, defer

from models.batch import (
    BatchRecord,
    BatchStatus,
    ItemRecord,
    ItemResult,
    ItemStatus,
    Selection,
)
from models.bundle import RunBundle
from models.common import Intent
from models.run import LlmAttempt, RunRecord
from models.tables import (
    DiagnosisRunRow,
    LlmAttemptRow,
    ReverifyBatchRow,
    ReverifyItemRow,
    ToolInvocationRow,
)
from pipeline.errors import BatchNotFoundError
from pipeline.store import convert
from pipeline.store.engine import TERMINAL, Database
from pipeline.store.rows import as_utc, rowcount, utc_now

PAGE = 500
"""Rows per keyset page: selection never holds more than this many runs at once."""
_LIVE_BATCH = [BatchStatus.PENDING.value, BatchStatus.RUNNING.value]


class Batches:
    """Selection, batches and items."""

    def __init__(self, db: Database) -> None:
        """`db`: the store's database."""
        self._db = db

    # -- selection ------------------------------------------------------------------------

    def iter_runs(
        self, *, tenant_id: str, selection: Selection, terminal_only: bool = False,
        page: int = PAGE, after: tuple[datetime, str] | None = None, summary: bool = False,
    ) -> Iterator[RunRecord]:
        needs_audit = bool(selection.prompt_versions or selection.models)
        with_evaluation = needs_audit or not summary
        left = selection.limit
        cursor = after
        while left is None or left > 0:
            stmt = _selected(tenant_id, selection, terminal_only=terminal_only,
                             evaluation=with_evaluation, answer=not summary).limit(page)
            if cursor is not None:
                stmt = stmt.where(or_(
                    DiagnosisRunRow.created_at < cursor[0],
                    and_(DiagnosisRunRow.created_at == cursor[0],
                         DiagnosisRunRow.run_id < cursor[1])))
            with self._db.read() as session:
                rows = list(session.scalars(stmt))
                records = [convert.record(row, with_answer=not summary,
                                   with_evaluation=with_evaluation) for row in rows]
            for record in records:
                if selection.matches(record):
                    yield record
                    if left is not None:
                        left -= 1
                        if left == 0:
                            return
            if len(rows) < page:
                return
            cursor = (rows[-1].created_at, rows[-1].run_id)

    # -- batches ----------------------------------------------------------------------------

    def create_batch(
        self, *, batch_id: str, tenant_id: str, selection: Selection, provider: str,
        message_batches: bool, chunk_size: int,
    ) -> BatchRecord:
        now = utc_now()
        with self._db.write() as session:
            session.add(ReverifyBatchRow(
                batch_id=batch_id, tenant_id=tenant_id, status=BatchStatus.PENDING.value,
                provider=provider, message_batches=message_batches,
                selection=selection.model_dump(mode="json"), chunk_size=chunk_size,
                total=0, done=0, failed=0, created_at=now, updated_at=now))
            session.flush()
            seq = 0
            rows: list[dict[str, Any]] = []
            for record in self.iter_runs(tenant_id=tenant_id, selection=selection,
                                         terminal_only=True, summary=True):
                rows.append({"batch_id": batch_id, "seq": seq, "run_id": record.run_id,
                             "status": ItemStatus.PENDING.value})
                seq += 1
                if len(rows) == PAGE:
                    session.execute(insert(ReverifyItemRow), rows)
                    rows = []
            if rows:
                session.execute(insert(ReverifyItemRow), rows)
            session.execute(update(ReverifyBatchRow)
                            .where(ReverifyBatchRow.batch_id == batch_id).values(total=seq))
        return self.get_batch(batch_id)

    def get_batch(self, batch_id: str, *, tenant_id: str | None = None) -> BatchRecord:
        stmt = select(ReverifyBatchRow).where(ReverifyBatchRow.batch_id == batch_id)
        if tenant_id is not None:
            stmt = stmt.where(ReverifyBatchRow.tenant_id == tenant_id)
        with self._db.read() as session:
            row = session.scalars(stmt).one_or_none()
            if row is None:
                raise BatchNotFoundError(batch_id)
            return convert.batch(row)


    def start_batch(self, batch_id: str) -> bool:
        now = utc_now()
        stmt = (update(ReverifyBatchRow)
                .where(ReverifyBatchRow.batch_id == batch_id,
                       ReverifyBatchRow.status == BatchStatus.PENDING.value)
                .values(status=BatchStatus.RUNNING.value, started_at=now, updated_at=now))
        with self._db.write() as session:
            started = rowcount(session.execute(stmt)) == 1
            _finish_if_done(session, batch_id)  # an empty batch ends at once
            return started

    def cancel_batch(self, batch_id: str, *, tenant_id: str) -> bool:
        self.get_batch(batch_id, tenant_id=tenant_id)
        now = utc_now()
        stmt = (update(ReverifyBatchRow)
                .where(ReverifyBatchRow.batch_id == batch_id,
                       ReverifyBatchRow.status.in_(_LIVE_BATCH))
                .values(status=BatchStatus.CANCELLED.value, cancel_requested=True,
                        finished_at=now, updated_at=now))
        with self._db.write() as session:
            return rowcount(session.execute(stmt)) == 1

    def reopen_batch(self, batch_id: str, *, tenant_id: str) -> BatchRecord:
        batch = self.get_batch(batch_id, tenant_id=tenant_id)
        if batch.pending == 0:
            return batch
        now = utc_now()
        with self._db.write() as session:
            session.execute(update(ReverifyBatchRow)
                            .where(ReverifyBatchRow.batch_id == batch_id)
                            .values(status=BatchStatus.RUNNING.value, cancel_requested=False,
                                    finished_at=None, updated_at=now))
        return self.get_batch(batch_id)

    def stalled_batches(self, *, older_than_s: float, now: datetime | None = None
                        ) -> list[BatchRecord]:
        cutoff = (now or utc_now()) - timedelta(seconds=older_than_s)
        stmt = select(ReverifyBatchRow).where(
            ReverifyBatchRow.status == BatchStatus.RUNNING.value,
            ReverifyBatchRow.updated_at < cutoff,
            ReverifyBatchRow.done + ReverifyBatchRow.failed < ReverifyBatchRow.total)
        with self._db.read() as session:
            return [convert.batch(row) for row in session.scalars(stmt)]

    def claim_stalled_batch(self, batch_id: str, *, updated_at: datetime) -> bool:
        stmt = (update(ReverifyBatchRow)
                .where(ReverifyBatchRow.batch_id == batch_id,
                       ReverifyBatchRow.status == BatchStatus.RUNNING.value,
                       ReverifyBatchRow.updated_at == as_utc(updated_at))
                .values(updated_at=utc_now(), resend_count=ReverifyBatchRow.resend_count + 1))
        with self._db.write() as session:
            return rowcount(session.execute(stmt)) == 1

    def delete_batch(self, batch_id: str) -> None:
        with self._db.write() as session:
            session.execute(delete(ReverifyBatchRow).where(ReverifyBatchRow.batch_id == batch_id))

    # -- items ------------------------------------------------------------------------------

    def pending_items(self, batch_id: str, *, start: int, end: int) -> list[tuple[int, str]]:
        stmt = (select(ReverifyItemRow.seq, ReverifyItemRow.run_id)
                .where(ReverifyItemRow.batch_id == batch_id,
                       ReverifyItemRow.seq >= start, ReverifyItemRow.seq < end,
                       ReverifyItemRow.status == ItemStatus.PENDING.value)
                .order_by(ReverifyItemRow.seq))
        with self._db.read() as session:
            return [(seq, run_id) for seq, run_id in session.execute(stmt)]

    def pending_ranges(self, batch_id: str) -> list[tuple[int, int]]:
        batch = self.get_batch(batch_id)
        size = batch.chunk_size
        stmt = (select((ReverifyItemRow.seq // size).label("chunk")).distinct()
                .where(ReverifyItemRow.batch_id == batch_id,
                       ReverifyItemRow.status == ItemStatus.PENDING.value))
        with self._db.read() as session:
            chunks = sorted({int(c) for (c,) in session.execute(stmt)})
        return [(c * size, min((c + 1) * size, batch.total)) for c in chunks]

    def load_for_judging(
        self, run_ids: Sequence[str], *, tenant_id: str
    ) -> dict[str, tuple[RunRecord, RunBundle] | str]:
        out: dict[str, tuple[RunRecord, RunBundle] | str] = {}
        if not run_ids:
            return out
        with self._db.read() as session:
            runs = {row.run_id: row for row in session.execute(
                select(*_JUDGED_RUN_COLUMNS,
                       cast(DiagnosisRunRow.self_evaluation, Text).label("evaluation_json"),
                       DiagnosisRunRow.state["pipeline"]["retry_context"].label("retry"))
                .where(DiagnosisRunRow.run_id.in_(run_ids),
                       DiagnosisRunRow.tenant_id == tenant_id))}
            invocations: dict[str, list[Any]] = {run_id: [] for run_id in runs}
            for call in session.execute(
                    select(*_JUDGED_CALL_COLUMNS,
                           cast(ToolInvocationRow.projection, Text).label("projection_json"))
                    .where(ToolInvocationRow.run_id.in_(list(runs)))
                    .order_by(ToolInvocationRow.run_id, ToolInvocationRow.seq,
                              ToolInvocationRow.id)):
                invocations[call.run_id].append(call)
        for run_id in run_ids:
            run = runs.get(run_id)
            out[run_id] = ("the run is no longer stored" if run is None
                           else convert.judgeable(run, invocations[run_id]))
        return out

    def record_items(
        self, batch_id: str, results: Sequence[ItemResult], attempts: Sequence[LlmAttempt]
    ) -> int:
        now = utc_now()
        landed: set[str] = set()
        done = failed = 0
        with self._db.write() as session:
            # The items still PENDING, locked until commit (SQLite's writer lock does the
            # same); one UPDATE statement sent for all of them (psycopg pipelines executemany).
            pending = set(session.scalars(
                select(ReverifyItemRow.seq)
                .where(ReverifyItemRow.batch_id == batch_id,
                       ReverifyItemRow.seq.in_([r.seq for r in results]),
                       ReverifyItemRow.status == ItemStatus.PENDING.value)
                .with_for_update()))
            fresh = [r for r in results if r.seq in pending]
            if fresh:
                session.execute(update(ReverifyItemRow), [
                    {"batch_id": batch_id, "seq": r.seq, **_item_values(r), "finished_at": now}
                    for r in fresh])
            for result in fresh:
                landed.add(result.run_id)
                if result.status is ItemStatus.DONE:
                    done += 1
                else:
                    failed += 1
            rows = [{**a.model_dump(exclude={"created_at"}), "batch_id": batch_id,
                     "created_at": as_utc(a.created_at)}
                    for a in attempts if a.run_id in landed]
            if rows:
                session.execute(insert(LlmAttemptRow), rows)
            if done or failed:
                session.execute(update(ReverifyBatchRow)
                                .where(ReverifyBatchRow.batch_id == batch_id)
                                .values(done=ReverifyBatchRow.done + done,
                                        failed=ReverifyBatchRow.failed + failed,
                                        updated_at=now))
                _finish_if_done(session, batch_id)
        return done + failed

    def iter_items(self, batch_id: str, *, tenant_id: str, page: int = PAGE
                   ) -> Iterator[ItemRecord]:
        self.get_batch(batch_id, tenant_id=tenant_id)
        after = -1
        while True:
            stmt = (select(ReverifyItemRow)
                    .where(ReverifyItemRow.batch_id == batch_id, ReverifyItemRow.seq > after)
                    .order_by(ReverifyItemRow.seq).limit(page))
            with self._db.read() as session:
                items = [convert.item(row) for row in session.scalars(stmt)]
            yield from items
            if len(items) < page:
                return
            after = items[-1].seq


# -- helpers ----------------------------------------------------------------------------------

def _selected(tenant_id: str, selection: Selection, *, terminal_only: bool, evaluation: bool,
              answer: bool) -> Any:
    """The selection's query; the columns a record does not need are never read (`raiseload`:
    touching one is an error, not one more query per row)."""
    stmt = select(DiagnosisRunRow).where(DiagnosisRunRow.tenant_id == tenant_id)
    deferred = [DiagnosisRunRow.executor_output_raw, DiagnosisRunRow.state]
    if not evaluation:
        deferred.append(DiagnosisRunRow.self_evaluation)
    if not answer:
        deferred.append(DiagnosisRunRow.final_answer)
    stmt = stmt.options(*(defer(column, raiseload=True) for column in deferred))
    if selection.since is not None:
        stmt = stmt.where(DiagnosisRunRow.created_at >= as_utc(selection.since))
    if selection.until is not None:
        stmt = stmt.where(DiagnosisRunRow.created_at < as_utc(selection.until))
    if selection.session_id is not None:
        stmt = stmt.where(DiagnosisRunRow.session_id == selection.session_id)
    if selection.statuses:
        stmt = stmt.where(DiagnosisRunRow.status.in_([s.value for s in selection.statuses]))
    elif terminal_only:
        stmt = stmt.where(DiagnosisRunRow.status.in_(TERMINAL))
    if terminal_only:  # what a batch re-judges: diagnoses (a knowledge answer has no claims)
        stmt = stmt.where(DiagnosisRunRow.intent == Intent.DIAGNOSIS.value)
    if selection.verdicts:
        named = [v for v in selection.verdicts if v != "null"]
        conditions = [DiagnosisRunRow.verdict.in_(named)] if named else []
        if "null" in selection.verdicts:
            conditions.append(DiagnosisRunRow.verdict.is_(None))
        stmt = stmt.where(or_(*conditions))
    return stmt.order_by(DiagnosisRunRow.created_at.desc(), DiagnosisRunRow.run_id.desc())


_JUDGED_RUN_COLUMNS = [
    c for c in DiagnosisRunRow.__table__.columns
    if c.name not in ("state", "final_answer", "self_evaluation")]
_JUDGED_CALL_COLUMNS = [
    ToolInvocationRow.__table__.c[name] for name in (
        "run_id", "tool_call_id", "tool_name", "arguments", "status", "evidence_status",
        "error")]


def _finish_if_done(session: Session, batch_id: str) -> None:
    done = ReverifyBatchRow.done + ReverifyBatchRow.failed >= ReverifyBatchRow.total
    session.execute(
        update(ReverifyBatchRow)
        .where(ReverifyBatchRow.batch_id == batch_id,
               ReverifyBatchRow.status == BatchStatus.RUNNING.value, done)
        .values(status=case((ReverifyBatchRow.failed > 0,
                             BatchStatus.COMPLETED_WITH_ERRORS.value),
                            else_=BatchStatus.COMPLETED.value),
                finished_at=utc_now()))


def _item_values(result: ItemResult) -> dict[str, Any]:
    return {
        "status": result.status.value, "old_status": result.old_status,
        "old_verdict": result.old_verdict, "old_fallback_type": result.old_fallback_type,
        "new_status": result.new_status, "new_verdict": result.new_verdict,
        "new_fallback_type": result.new_fallback_type,
        "detail": result.detail.model_dump(mode="json") if result.detail else None,
        "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
        "cost_usd": result.cost_usd, "error": result.error,
    }


