"""Session-level operations of the run store and the conversion of rows to contracts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, TypeVar, cast

from sqlalchemy import CursorResult, Result, Select, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from models.bundle import FinalAnswer, RunResult
from models.common import FallbackType, Intent, RunStatus, Verdict
from models.evaluation import SelfEvaluation
from models.invocation import EvidenceStatus, LifecycleStatus, Projection, ToolInvocation
from models.run import LlmAttempt, RunEvent, RunRecord
from models.tables import DiagnosisRunRow, LlmAttemptRow, RunEventRow, ToolInvocationRow
from pipeline.errors import (
    DuplicateToolCallError,
    RunNotFoundError,
    StaleStateError,
    StoreError,
    StoreUnavailableError,
)
from pipeline.ids import check_tenant_id
from pipeline.store._engine import _NO_SYNC, _RUN_ID_MAX, _TERMINAL

TERMINAL = _TERMINAL
_Select = TypeVar("_Select", bound=Select[Any])


def _now() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime | None) -> datetime:
    if value is None:
        return _now()
    if value.tzinfo is None:
        raise StoreError("naive datetime: the store takes timezone-aware values only")
    return value.astimezone(UTC)


def _rowcount(result: Result[Any]) -> int:
    return cast(CursorResult[Any], result).rowcount


@contextmanager
def _available() -> Iterator[None]:
    """A lost or refused database connection becomes StoreUnavailableError (retryable); the
    pool has already dropped the broken connection."""
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        raise _unavailable(exc.orig or exc) from exc


def _unavailable(exc: BaseException) -> StoreUnavailableError:
    lines = str(exc).strip().splitlines()
    return StoreUnavailableError(
        f"database unavailable: {lines[0] if lines else type(exc).__name__}")


def _check_same_run(run_id: str, expected: str) -> None:
    if run_id != expected:
        raise StoreError(f"record of run {run_id} given for run {expected}")


def _run_row(
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
) -> DiagnosisRunRow:
    if not 0 < len(run_id) <= _RUN_ID_MAX:
        raise StoreError(f"run id must be 1 to {_RUN_ID_MAX} characters: {run_id!r}")
    if deadline_s is not None and not deadline_s > 0:
        raise StoreError(f"a run deadline must be positive: {deadline_s!r}")
    now = _now()
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
    )


def _add_run(session: Session, row: DiagnosisRunRow) -> None:
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise StoreError(f"run {row.run_id} already exists") from exc


def _load_run(session: Session, run_id: str, *, tenant_id: str | None = None,
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


def _require_run(session: Session, run_id: str, *, tenant_id: str | None = None,
                 lock: bool = False) -> None:
    stmt = _owned(select(DiagnosisRunRow.run_id).where(DiagnosisRunRow.run_id == run_id),
                  tenant_id)
    if lock:
        stmt = stmt.with_for_update()
    if session.scalar(stmt) is None:
        raise RunNotFoundError(run_id)


def _owned(stmt: _Select, tenant_id: str | None) -> _Select:
    """`stmt` limited to the tenant's runs; None (worker-internal reads by run id) leaves it."""
    return stmt if tenant_id is None else stmt.where(DiagnosisRunRow.tenant_id == tenant_id)


def _require_invocation(session: Session, run_id: str, tool_call_id: str) -> None:
    stmt = select(ToolInvocationRow.id).where(
        ToolInvocationRow.run_id == run_id, ToolInvocationRow.tool_call_id == tool_call_id
    )
    if session.scalar(stmt) is None:
        _require_run(session, run_id)
        raise StoreError(f"no tool call {tool_call_id!r} in run {run_id}")


def _advance_values(
    node: str | None, status: RunStatus | None, evidence_retry_count: int | None
) -> dict[str, Any]:
    now = _now()
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


def _finalize(
    session: Session, run_id: str, result: RunResult, *, expected_version: int | None
) -> bool:
    _check_same_run(result.run_id, run_id)
    now = _now()
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
        .returning(table.event_seq)
    )
    if expected_version is not None:
        stmt = stmt.where(table.version == expected_version)
    seq = session.execute(stmt, execution_options=_NO_SYNC).scalar_one_or_none()
    if seq is not None:
        payload = {"status": result.status, "verdict": result.verdict,
                   "fallback_type": result.fallback_type}
        _write_events(session, run_id, [("finalize", "completed", payload)], last_seq=seq)
        return True
    row = _load_run(session, run_id, lock=True)
    if RunStatus(row.status).terminal:
        return False
    if expected_version is not None and row.version != expected_version:
        raise StaleStateError(f"run {run_id} is at version {row.version}, not {expected_version}")
    # cancel requested: nothing is released after a cancel
    row.status = RunStatus.CANCELLED.value
    row.version += 1
    row.updated_at = row.finished_at = now
    session.flush()
    _insert_event(session, run_id, node="finalize", kind="cancelled",
                  payload={"reason": "cancel requested before release"})
    return False


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
    row = session.execute(stmt, execution_options=_NO_SYNC).one_or_none()
    if row is None:
        raise RunNotFoundError(run_id)
    return int(row[0]), int(row[1])


def _insert_invocation(
    session: Session, run_id: str, invocation: ToolInvocation, *, turn: int
) -> None:
    _, last = _allocate(session, run_id, invocations=1)
    _write_invocations(session, run_id, [invocation], turn=turn, last_seq=last)


def _write_invocations(
    session: Session | Connection,
    run_id: str,
    invocations: Sequence[ToolInvocation],
    *,
    turn: int,
    last_seq: int,
) -> None:
    now = _now()
    first = last_seq - len(invocations) + 1
    rows = [
        {
            "run_id": run_id, "tool_call_id": inv.tool_call_id, "tool_name": inv.tool_name,
            "arguments": inv.arguments, "status": inv.status.value,
            "evidence_status": inv.evidence_status.value if inv.evidence_status else None,
            "projection": _dump_projection(inv.projection), "error": inv.error, "turn": turn,
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
        raise DuplicateToolCallError(run_id, _duplicate_id(invocations, taken)) from exc


def _taken_ids(session: Session | Connection, run_id: str, ids: list[str]) -> str:
    """Which of `ids` the run already has (SQLite names no key in its error)."""
    try:
        rows = session.execute(select(ToolInvocationRow.tool_call_id).where(
            ToolInvocationRow.run_id == run_id, ToolInvocationRow.tool_call_id.in_(ids)))
        return " ".join(str(row[0]) for row in rows)
    except SQLAlchemyError:  # the transaction is gone: the message names all of them
        return ""


def _duplicate_id(invocations: Sequence[ToolInvocation], detail: str = "") -> str:
    """The tool_call_id a refused insert repeated: one given twice, else the last of them that
    `detail` (the stored ids, or the database's message) names, else all of them."""
    ids = [i.tool_call_id for i in invocations]
    twice = next((i for n, i in enumerate(ids) if i in ids[:n]), None)
    if twice is not None:
        return twice
    # rows go in in order until one is refused: the last id found stored is the refused one
    named = [i for i in ids if i in detail.split()]
    return named[-1] if named else ", ".join(ids)


def _insert_event(
    session: Session, run_id: str, *, node: str, kind: str, payload: dict[str, Any]
) -> RunEvent:
    last, _ = _allocate(session, run_id, events=1)
    return _write_events(session, run_id, [(node, kind, payload)], last_seq=last)[0]


def _write_events(
    session: Session | Connection,
    run_id: str,
    events: Sequence[tuple[str, str, dict[str, Any]]],
    *,
    last_seq: int,
) -> list[RunEvent]:
    now = _now()
    first = last_seq - len(events) + 1
    rows = [
        {"run_id": run_id, "seq": first + i, "node": node, "kind": kind,
         "payload": _jsonable(payload), "created_at": now}
        for i, (node, kind, payload) in enumerate(events)
    ]
    if rows:
        session.execute(insert(RunEventRow), rows)
    return [RunEvent.model_validate(row) for row in rows]


def _jsonable(payload: dict[str, Any]) -> dict[str, Any]:
    """Enum members and other JSON-able values as plain JSON types."""
    return {k: v.value if isinstance(v, Enum) else v for k, v in payload.items()}


def _insert_attempt(session: Session, attempt: LlmAttempt) -> None:
    _require_run(session, attempt.run_id)
    fields = attempt.model_dump(exclude={"created_at"})
    session.add(LlmAttemptRow(**fields, created_at=_as_utc(attempt.created_at)))
    try:
        session.flush()
    except IntegrityError as exc:
        raise StoreError(_duplicate_attempt([attempt])) from exc


def _duplicate_attempt(attempts: Sequence[LlmAttempt]) -> str:
    if not attempts:
        return "duplicate model attempt"
    first = attempts[0]
    return (f"duplicate model attempt in run {first.run_id}: role {first.role}, "
            f"cycle {first.cycle}, attempt {first.attempt_number}")


def _invocations(session: Session, run_id: str) -> list[ToolInvocation]:
    stmt = (
        select(ToolInvocationRow)
        .where(ToolInvocationRow.run_id == run_id)
        .order_by(ToolInvocationRow.seq, ToolInvocationRow.id)
    )
    return [_invocation(row) for row in session.scalars(stmt)]


# -- rows to contracts --------------------------------------------------------------------


def _dump_projection(projection: Projection | None) -> dict[str, Any] | None:
    return projection.model_dump(mode="json") if projection is not None else None


def _record(row: Any, *, with_answer: bool = True, with_evaluation: bool = True,
            evaluation: SelfEvaluation | None = None) -> RunRecord:
    """The row (an ORM row, or a Core row with the same column names) as a record;
    `with_answer=False` / `with_evaluation=False` leave `final_answer` / `self_evaluation`
    out (None) for a reader that did not read that column and does not need it (a
    re-judgement, a list of runs). `evaluation`: the self-evaluation already parsed by the
    caller (its column then unread)."""
    return RunRecord(
        run_id=row.run_id,
        tenant_id=row.tenant_id,
        session_id=row.session_id,
        query=row.query,
        intent=Intent(row.intent),
        status=RunStatus(row.status),
        node=row.node,
        version=row.version,
        verdict=Verdict(row.verdict) if row.verdict else None,
        fallback_type=FallbackType(row.fallback_type) if row.fallback_type else None,
        final_answer=(
            FinalAnswer.model_validate(row.final_answer)
            if with_answer and row.final_answer is not None else None
        ),
        self_evaluation=(
            evaluation if evaluation is not None or not with_evaluation
            else SelfEvaluation.model_validate(row.self_evaluation)
            if row.self_evaluation is not None
            else None
        ),
        origin=row.source,
        origin_run_id=row.source_run_id,
        cancel_requested=row.cancel_requested,
        evidence_retry_count=row.evidence_retry_count,
        source=row.data_source,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
        deadline_at=row.deadline_at,
        reconcile_count=row.reconcile_count,
    )


def _invocation(row: Any) -> ToolInvocation:
    """A tool call from an ORM row or a Core row with the same column names."""
    return _invocation_of(row.tool_call_id, row.tool_name, row.arguments, row.status,
                          row.evidence_status, row.projection, row.error)


def _invocation_of(
    tool_call_id: str, tool_name: str, arguments: dict[str, Any], status: str,
    evidence_status: str | None, projection: dict[str, Any] | str | None, error: str | None,
) -> ToolInvocation:
    """A tool call from its columns; `projection` is the stored document, or its JSON text
    (parsed and validated in one pass)."""
    return ToolInvocation(
        tool_call_id=tool_call_id, tool_name=tool_name, arguments=arguments,
        status=LifecycleStatus(status),
        evidence_status=EvidenceStatus(evidence_status) if evidence_status else None,
        projection=(None if not projection
                    else Projection.model_validate_json(projection)
                    if isinstance(projection, str) else Projection.model_validate(projection)),
        error=error,
    )


def _event(row: RunEventRow) -> RunEvent:
    return RunEvent(
        run_id=row.run_id,
        seq=row.seq,
        node=row.node,
        kind=row.kind,
        payload=row.payload,
        created_at=row.created_at,
    )


def _attempt(row: LlmAttemptRow) -> LlmAttempt:
    fields = {name: getattr(row, name) for name in LlmAttempt.model_fields}
    return LlmAttempt.model_validate(fields)

