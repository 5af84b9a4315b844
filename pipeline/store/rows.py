"""Operations on rows inside one transaction (a session or a connection, no commit) that both
backends share: run rows, seq allocation, event, tool-call and attempt inserts, the release."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import CursorResult, Result, Select, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from models.bundle import RunResult
from models.common import Intent, RunStatus
from models.delivery import DeliveryStatus, NewDelivery
from models.invocation import LifecycleStatus, ToolInvocation
from models.run import LlmAttempt, RunEvent
from models.tables import (
    DeliveryRow,
    DiagnosisRunRow,
    LlmAttemptRow,
    RunEventRow,
    ToolInvocationRow,
)
from pipeline.errors import (
    DuplicateToolCallError,
    RunNotFoundError,
    StaleStateError,
    StoreError,
)
from pipeline.ids import check_tenant_id
from pipeline.store import convert, statements
from pipeline.store.engine import NO_SYNC, RUN_ID_MAX, TERMINAL

_Select = TypeVar("_Select", bound=Select[Any])


def utc_now() -> datetime:
    """The store's clock: every timestamp it writes is this, aware, in UTC."""
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime:
    """A given time in UTC (None: now); StoreError for a naive one."""
    if value is None:
        return utc_now()
    if value.tzinfo is None:
        raise StoreError("naive datetime: the store takes timezone-aware values only")
    return value.astimezone(UTC)


def rowcount(result: Result[Any]) -> int:
    """Rows an executed update or delete changed."""
    return cast(CursorResult[Any], result).rowcount


def check_same_run(run_id: str, expected: str) -> None:
    """StoreError unless a record given for run `expected` is of that run."""
    if run_id != expected:
        raise StoreError(f"record of run {run_id} given for run {expected}")


def run_row(
    *,
    run_id: str,
    tenant_id: str,
    query: str,
    intent: Intent,
    status: RunStatus,
    session_id: str | None,
    source: str,
    source_run_id: str | None,
    executor_output_raw: str | None,
    deadline_s: float | None = None,
    trace_id: str | None = None,
) -> DiagnosisRunRow:
    """A new run row at version 0; StoreError for a bad run id or deadline, InputError for a
    bad tenant id."""
    if not 0 < len(run_id) <= RUN_ID_MAX:
        raise StoreError(f"run id must be 1 to {RUN_ID_MAX} characters: {run_id!r}")
    if deadline_s is not None and not deadline_s > 0:
        raise StoreError(f"a run deadline must be positive: {deadline_s!r}")
    now = utc_now()
    return DiagnosisRunRow(
        run_id=run_id,
        tenant_id=check_tenant_id(tenant_id),
        session_id=session_id,
        query=query,
        intent=Intent(intent).value,
        status=RunStatus(status).value,
        version=0,
        source=source,
        source_run_id=source_run_id,
        cancel_requested=False,
        evidence_retry_count=0,
        executor_output_raw=executor_output_raw,
        created_at=now,
        updated_at=now,
        deadline_at=now + timedelta(seconds=deadline_s) if deadline_s is not None else None,
        reconcile_count=0,
        trace_id=trace_id,
    )


def add_run(session: Session, row: DiagnosisRunRow) -> None:
    """Insert a run row; StoreError if its id is taken."""
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise StoreError(f"run {row.run_id} already exists") from exc


def load_run(session: Session, run_id: str, *, tenant_id: str | None = None,
              lock: bool = False) -> DiagnosisRunRow:
    """The run row; RunNotFoundError if there is none, or (given `tenant_id`) it is another
    tenant's: the same error, so an id of another tenant's run tells nothing."""
    stmt = _owned(select(DiagnosisRunRow).where(DiagnosisRunRow.run_id == run_id), tenant_id)
    if lock:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).one_or_none()
    if row is None:
        raise RunNotFoundError(run_id)
    return row


def require_run(session: Session, run_id: str, *, tenant_id: str | None = None,
                 lock: bool = False) -> None:
    """RunNotFoundError unless the run exists (and, given `tenant_id`, is the tenant's)."""
    stmt = _owned(select(DiagnosisRunRow.run_id).where(DiagnosisRunRow.run_id == run_id),
                  tenant_id)
    if lock:
        stmt = stmt.with_for_update()
    if session.scalar(stmt) is None:
        raise RunNotFoundError(run_id)


def _owned(stmt: _Select, tenant_id: str | None) -> _Select:
    """`stmt` limited to the tenant's runs; None (worker-internal reads by run id) leaves it."""
    return stmt if tenant_id is None else stmt.where(DiagnosisRunRow.tenant_id == tenant_id)


def advance_values(
    node: str | None, status: RunStatus | None, evidence_retry_count: int | None
) -> dict[str, Any]:
    """The columns an `advance` sets (None leaves a field unchanged)."""
    now = utc_now()
    values: dict[str, Any] = {"updated_at": now}
    if node is not None:
        values["node"] = node
    if status is not None:
        values["status"] = status.value
        if status.terminal:
            values["finished_at"] = now
    if evidence_retry_count is not None:
        values["evidence_retry_count"] = evidence_retry_count
    return values


def finalize_run(
    session: Session, run_id: str, result: RunResult, *, expected_version: int | None,
    deliveries: Sequence[NewDelivery] = (),
) -> bool:
    """Release the outcome with a finalize/completed event and its notification deliveries;
    False if the run is terminal or a cancel was requested (then it ends CANCELLED, nothing
    enqueued). StaleStateError at another version."""
    check_same_run(result.run_id, run_id)
    now = utc_now()
    table = DiagnosisRunRow
    stmt = (
        update(table)
        .where(table.run_id == run_id, table.status.not_in(TERMINAL),
               table.cancel_requested.is_(False))
        .values(
            status=RunStatus(result.status).value, node="finalize",
            verdict=result.verdict.value if result.verdict else None,
            fallback_type=result.fallback_type.value if result.fallback_type else None,
            final_answer=result.final_answer.model_dump(mode="json"),
            self_evaluation=result.self_evaluation.model_dump(mode="json"),
            version=table.version + 1, updated_at=now, finished_at=now,
            event_seq=table.event_seq + 1,
        )
        .returning(table.event_seq, table.tenant_id)
    )
    if expected_version is not None:
        stmt = stmt.where(table.version == expected_version)
    released = session.execute(stmt, execution_options=NO_SYNC).one_or_none()
    if released is not None:
        payload = {"status": result.status, "verdict": result.verdict,
                   "fallback_type": result.fallback_type}
        write_events(session, run_id, [("finalize", "completed", payload)],
                     last_seq=released[0])
        enqueue_deliveries(session, run_id=run_id, tenant_id=released[1],
                           deliveries=deliveries, now=now)
        return True
    row = load_run(session, run_id, lock=True)
    if RunStatus(row.status).terminal:
        return False
    if expected_version is not None and row.version != expected_version:
        raise StaleStateError(f"run {run_id} is at version {row.version}, not {expected_version}")
    # cancel requested: nothing is released after a cancel
    row.status = RunStatus.CANCELLED.value
    row.version += 1
    row.updated_at = row.finished_at = now
    session.flush()
    insert_event(session, run_id, node="finalize", kind="cancelled",
                  payload={"reason": "cancel requested before release"})
    return False


def enqueue_deliveries(session: Session, *, run_id: str, tenant_id: str,
                       deliveries: Sequence[NewDelivery], now: datetime) -> None:
    """Add PENDING delivery rows, due now, in the caller's transaction (the run's end)."""
    for new in deliveries:
        session.add(DeliveryRow(
            delivery_id=new.delivery_id, run_id=run_id, tenant_id=tenant_id, kind=new.kind,
            target=dict(new.target), status=DeliveryStatus.PENDING.value, attempts=0,
            max_attempts=new.max_attempts, next_attempt_at=now, created_at=now,
            updated_at=now))


def _allocate(session: Session, run_id: str, *, events: int = 0, invocations: int = 0
              ) -> tuple[int, int]:
    """Reserve seqs on the run row (which serializes the run's writers); the last ones."""
    table = DiagnosisRunRow
    stmt = (
        update(table)
        .where(table.run_id == run_id)
        .values(event_seq=table.event_seq + events,
                invocation_seq=table.invocation_seq + invocations)
        .returning(table.event_seq, table.invocation_seq)
    )
    row = session.execute(stmt, execution_options=NO_SYNC).one_or_none()
    if row is None:
        raise RunNotFoundError(run_id)
    return int(row[0]), int(row[1])


def write_invocations(
    session: Session | Connection,
    run_id: str,
    invocations: Sequence[ToolInvocation],
    *,
    turn: int,
    last_seq: int,
) -> None:
    """Insert tool calls numbered up to `last_seq`; DuplicateToolCallError for a taken id."""
    now = utc_now()
    first = last_seq - len(invocations) + 1
    rows = [
        {
            "run_id": run_id, "tool_call_id": inv.tool_call_id, "tool_name": inv.tool_name,
            "arguments": inv.arguments, "status": inv.status.value,
            "evidence_status": inv.evidence_status.value if inv.evidence_status else None,
            "projection": convert.dump_projection(inv.projection), "error": inv.error, "turn": turn,
            "seq": first + i, "created_at": now,
            "finished_at": None if inv.status is LifecycleStatus.PROJECTING else now,
        }
        for i, inv in enumerate(invocations)
    ]
    if not rows:
        return
    try:
        session.execute(insert(ToolInvocationRow), rows)
    except IntegrityError as exc:
        taken = _taken_ids(session, run_id, [i.tool_call_id for i in invocations])
        raise DuplicateToolCallError(run_id, duplicate_id(invocations, taken)) from exc


def _taken_ids(session: Session | Connection, run_id: str, ids: list[str]) -> str:
    """Which of `ids` the run already has (SQLite names no key in its error)."""
    try:
        rows = session.execute(select(ToolInvocationRow.tool_call_id).where(
            ToolInvocationRow.run_id == run_id, ToolInvocationRow.tool_call_id.in_(ids)))
        return " ".join(str(row[0]) for row in rows)
    except SQLAlchemyError:  # the transaction is gone: the message names all of them
        return ""


def duplicate_id(invocations: Sequence[ToolInvocation], detail: str = "") -> str:
    """The tool_call_id a refused insert repeated: one given twice, else the last of them that
    `detail` (the stored ids, or the database's message) names, else all of them."""
    ids = [i.tool_call_id for i in invocations]
    twice = next((i for n, i in enumerate(ids) if i in ids[:n]), None)
    if twice is not None:
        return twice
    # rows go in in order until one is refused: the last id found stored is the refused one
    named = [i for i in ids if i in detail.split()]
    return named[-1] if named else ", ".join(ids)


def insert_event(
    session: Session, run_id: str, *, node: str, kind: str, payload: dict[str, Any]
) -> RunEvent:
    """Append one event, its seq allocated on the run row."""
    last, _ = _allocate(session, run_id, events=1)
    return write_events(session, run_id, [(node, kind, payload)], last_seq=last)[0]


def write_events(
    session: Session | Connection,
    run_id: str,
    events: Sequence[tuple[str, str, dict[str, Any]]],
    *,
    last_seq: int,
) -> list[RunEvent]:
    """Insert events numbered up to `last_seq` (already reserved on the run row)."""
    now = utc_now()
    first = last_seq - len(events) + 1
    rows = [
        {"run_id": run_id, "seq": first + i, "node": node, "kind": kind,
         "payload": convert.jsonable(payload), "created_at": now}
        for i, (node, kind, payload) in enumerate(events)
    ]
    if rows:
        session.execute(insert(RunEventRow), rows)
    return [RunEvent.model_validate(row) for row in rows]


def duplicate_attempt(attempts: Sequence[LlmAttempt]) -> str:
    """The message for a refused attempt insert."""
    if not attempts:
        return "duplicate model attempt"
    first = attempts[0]
    return (f"duplicate model attempt in run {first.run_id}: role {first.role}, "
            f"cycle {first.cycle}, attempt {first.attempt_number}")


def read_invocations(session: Session, run_id: str) -> list[ToolInvocation]:
    """The run's tool calls in insertion order (ORM)."""
    stmt = (
        select(ToolInvocationRow)
        .where(ToolInvocationRow.run_id == run_id)
        .order_by(ToolInvocationRow.seq, ToolInvocationRow.id)
    )
    return [convert.invocation(row) for row in session.scalars(stmt)]


def write_attempts(session: Session | Connection, attempts: Sequence[LlmAttempt]) -> None:
    """Insert model attempts; StoreError for a taken (run, role, cycle, attempt)."""
    if not attempts:
        return
    rows = [{**a.model_dump(exclude={"created_at"}), "created_at": as_utc(a.created_at)}
            for a in attempts]
    try:
        session.execute(insert(LlmAttemptRow), rows)
    except IntegrityError as exc:
        raise StoreError(duplicate_attempt(attempts)) from exc


def invocation_rows(connection: Connection, run_id: str) -> list[ToolInvocation]:
    """The run's tool calls in insertion order (Core)."""
    rows = connection.execute(statements.SELECT_INVOCATIONS, {"p_run_id": run_id})
    return [convert.invocation(row) for row in rows]
