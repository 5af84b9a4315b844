"""The run store: every read and write of run state, behind one class.

The only module of `pipeline/` that imports sqlalchemy. ORM rows never leave it: methods take
and return the contracts of `models/` (RunRecord, ToolInvocation, RunEvent, LlmAttempt ...).

How it stays correct under at-least-once delivery and concurrent workers:
- run state moves by conditional updates (`WHERE version = ?`, `WHERE status = 'PROJECTING'`,
  not terminal), so a redelivered task or a lost race changes nothing and says so;
- per-run sequence numbers (event seq, invocation order) are allocated while holding the run
  row: `SELECT ... FOR UPDATE` on PostgreSQL, a write transaction (`BEGIN IMMEDIATE`) on SQLite;
- `open()` migrates to head inside one transaction, under an advisory lock on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, cast
from uuid import uuid4

from alembic import command
from alembic.config import Config
from sqlalchemy import CursorResult, Engine, Result, create_engine, event, func, select, update
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer, sessionmaker
from sqlalchemy.pool import StaticPool

from models.bundle import FinalAnswer, RunBundle, RunResult
from models.common import FallbackType, Intent, RunStatus, Verdict
from models.evaluation import SelfEvaluation
from models.invocation import EvidenceStatus, LifecycleStatus, Projection, ToolInvocation
from models.run import LlmAttempt, RunEvent, RunRecord
from models.tables import DiagnosisRunRow, LlmAttemptRow, RunEventRow, ToolInvocationRow
from models.verifier import RetryContext
from pipeline.errors import DuplicateToolCallError, RunNotFoundError, StaleStateError, StoreError

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"
"""The Alembic script location."""

_MIGRATION_LOCK_KEY = 0x7665726974790001  # pg_advisory_xact_lock key: b"verity" + 1
_TERMINAL = [status.value for status in RunStatus if status.terminal]
_WRITE = {"verity_write": True}  # read by the SQLite "begin" hook: BEGIN IMMEDIATE
_NO_SYNC = {"synchronize_session": False}
_RUN_ID_MAX = 64
_BUSY_TIMEOUT_S = 5.0


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys, a busy timeout and write locks."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    return create_engine(parsed, pool_pre_ping=True)


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ":memory:"
    in_memory = database == ":memory:" or "mode=memory" in database
    if not in_memory and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": _BUSY_TIMEOUT_S},
        poolclass=StaticPool if in_memory else None,
    )
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # SQLAlchemy, not pysqlite, emits BEGIN (see _on_sqlite_begin): savepoints and DDL work.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        _enable_wal(cursor)
    finally:
        cursor.close()


def _enable_wal(cursor: sqlite3.Cursor) -> None:
    # Switching a fresh file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at
    # once (no busy handler) while another connection writes: retry within the busy timeout.
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] in ("wal", "memory"):
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _on_sqlite_begin(connection: Connection) -> None:
    # A writer takes the write lock up front: a deferred transaction that reads, then writes,
    # fails at once with SQLITE_BUSY in WAL mode instead of waiting for busy_timeout.
    immediate = connection.get_execution_options().get("verity_write", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def upgrade_schema(engine: Engine) -> None:
    """Run `alembic upgrade head` on `engine`: idempotent, safe from concurrent processes."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect() as connection:
        connection.execution_options(**_WRITE)
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK_KEY)))
            config.attributes["connection"] = connection
            command.upgrade(config, "head")


class RunStore:
    """Runs, tool invocations, events and model attempts in a relational database."""

    def __init__(self, engine: Engine) -> None:
        """Wrap an engine whose schema is already at head; prefer `RunStore.open`."""
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def open(cls, url: str) -> RunStore:
        """Connect to `url` and migrate the schema to head."""
        engine = make_engine(url)
        try:
            upgrade_schema(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with self._sessions.begin() as session:
            session.connection(execution_options=_WRITE)
            yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._sessions.begin() as session:
            yield session

    # -- runs ---------------------------------------------------------------------------

    def create_run(
        self,
        *,
        query: str,
        intent: Intent,
        session_id: str | None = None,
        run_id: str | None = None,
        source: str = "run",
        source_run_id: str | None = None,
        executor_output_raw: str | None = None,
        status: RunStatus = RunStatus.PENDING,
        data_source: str | None = None,
        state: dict[str, Any] | None = None,
        events: Sequence[tuple[str, str, dict[str, Any]]] = (),
    ) -> str:
        """Insert a run at version 0 and return its id (a uuid4 hex when none is given)."""
        row = _run_row(
            run_id=run_id or uuid4().hex,
            query=query,
            intent=intent,
            status=status,
            session_id=session_id,
            source=source,
            source_run_id=source_run_id,
            executor_output_raw=executor_output_raw,
        )
        row.data_source = data_source
        row.state = state
        with self._write() as session:
            _add_run(session, row)
            for node, kind, payload in events:
                _insert_event(session, row.run_id, node=node, kind=kind, payload=payload)
        return row.run_id

    def get_state(self, run_id: str) -> tuple[RunRecord, dict[str, Any] | None]:
        """The run and its runtime state document, read together."""
        with self._read() as session:
            row = _load_run(session, run_id)
            return _record(row), row.state

    def commit_node(
        self,
        run_id: str,
        *,
        expected_version: int,
        node: str,
        state: dict[str, Any],
        status: RunStatus | None = None,
        evidence_retry_count: int | None = None,
        executor_output_raw: str | None = None,
        events: Sequence[tuple[str, str, dict[str, Any]]] = (),
        attempts: Sequence[LlmAttempt] = (),
    ) -> int:
        """Persist one node's output, its events and attempts in one transaction.

        The run must still be at `expected_version` and not terminal (StaleStateError
        otherwise): a redelivered or duplicate node loses here and changes nothing.
        """
        for attempt in attempts:
            _check_same_run(attempt.run_id, run_id)
        with self._write() as session:
            row = _load_run(session, run_id, lock=True)
            if row.version != expected_version or RunStatus(row.status).terminal:
                raise StaleStateError(
                    f"run {run_id} is at version {row.version} ({row.status}), "
                    f"not {expected_version}"
                )
            for name, value in _advance_values(node, status, evidence_retry_count).items():
                setattr(row, name, value)
            row.state = state
            row.version = expected_version + 1
            if executor_output_raw is not None:
                row.executor_output_raw = executor_output_raw
            session.flush()
            for event_node, kind, payload in events:
                _insert_event(session, run_id, node=event_node, kind=kind, payload=payload)
            for attempt in attempts:
                _insert_attempt(session, attempt)
            return row.version

    def cancel_run(self, run_id: str, *, reason: str = "cancel requested") -> bool:
        """End a non-terminal run as CANCELLED, with an event; False if already terminal."""
        with self._write() as session:
            row = _load_run(session, run_id, lock=True)
            if RunStatus(row.status).terminal:
                return False
            now = _now()
            row.status = RunStatus.CANCELLED.value
            row.cancel_requested = True
            row.version += 1
            row.updated_at = row.finished_at = now
            session.flush()
            _insert_event(session, run_id, node=row.node or "submit", kind="cancelled",
                          payload={"reason": reason})
            return True

    def previous_turn(self, session_id: str) -> RunRecord | None:
        """The latest DIAGNOSIS run of the session that ended SUCCESS, if any.

        Fallback, failed and cancelled runs are never a previous turn.
        """
        stmt = (
            select(DiagnosisRunRow)
            .options(defer(DiagnosisRunRow.executor_output_raw), defer(DiagnosisRunRow.state))
            .where(DiagnosisRunRow.session_id == session_id)
            .where(DiagnosisRunRow.intent == Intent.DIAGNOSIS.value)
            .where(DiagnosisRunRow.status == RunStatus.SUCCESS.value)
            .order_by(DiagnosisRunRow.created_at.desc(), DiagnosisRunRow.run_id.desc())
            .limit(1)
        )
        with self._read() as session:
            row = session.scalars(stmt).one_or_none()
            return _record(row) if row is not None else None

    def get_run(self, run_id: str) -> RunRecord:
        """The run as a contract; RunNotFoundError if there is none."""
        with self._read() as session:
            return _record(_load_run(session, run_id))

    def list_runs(
        self,
        *,
        limit: int = 20,
        session_id: str | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first, optionally of one session and in some statuses."""
        stmt = (
            select(DiagnosisRunRow)
            .options(defer(DiagnosisRunRow.executor_output_raw), defer(DiagnosisRunRow.state))
            .order_by(DiagnosisRunRow.created_at.desc(), DiagnosisRunRow.run_id.desc())
            .limit(limit)
        )
        if session_id is not None:
            stmt = stmt.where(DiagnosisRunRow.session_id == session_id)
        if statuses is not None:
            stmt = stmt.where(DiagnosisRunRow.status.in_([s.value for s in statuses]))
        with self._read() as session:
            return [_record(row) for row in session.scalars(stmt)]

    def advance(
        self,
        run_id: str,
        *,
        expected_version: int,
        node: str | None = None,
        status: RunStatus | None = None,
        evidence_retry_count: int | None = None,
    ) -> int:
        """Move a non-terminal run at `expected_version` on; return its new version.

        None leaves a field unchanged. StaleStateError if the run is at another version or
        already terminal; RunNotFoundError if it does not exist.
        """
        values = _advance_values(node, status, evidence_retry_count)
        values["version"] = expected_version + 1
        stmt = (
            update(DiagnosisRunRow)
            .where(DiagnosisRunRow.run_id == run_id)
            .where(DiagnosisRunRow.version == expected_version)
            .where(DiagnosisRunRow.status.not_in(_TERMINAL))
            .values(**values)
        )
        with self._write() as session:
            if _rowcount(session.execute(stmt, execution_options=_NO_SYNC)) == 1:
                return expected_version + 1
            _require_run(session, run_id)
        raise StaleStateError(f"run {run_id} is not at version {expected_version} or is terminal")

    def finalize(
        self, run_id: str, result: RunResult, *, expected_version: int | None = None
    ) -> bool:
        """Release the outcome and append a finalize/completed event, in one transaction.

        False, and nothing written, if the run is already terminal (a redelivery).
        """
        with self._write() as session:
            return _finalize(session, run_id, result, expected_version=expected_version)

    def save_verified_run(
        self,
        *,
        bundle: RunBundle,
        result: RunResult,
        events: list[tuple[str, str, dict[str, Any]]],
        attempts: list[LlmAttempt],
    ) -> str:
        """Store a `verity verify` outcome as a new finalized run; all of it or nothing."""
        for attempt in attempts:
            _check_same_run(attempt.run_id, result.run_id)
        row = _run_row(
            run_id=result.run_id,
            query=bundle.query,
            intent=bundle.intent,
            status=RunStatus.RUNNING,
            session_id=bundle.session_id,
            source="verify",
            source_run_id=bundle.run_id,
            executor_output_raw=bundle.executor_output_raw,
        )
        with self._write() as session:
            _add_run(session, row)
            for invocation in bundle.invocations:
                _insert_invocation(session, row.run_id, invocation, turn=0)
            for node, kind, payload in events:
                _insert_event(session, row.run_id, node=node, kind=kind, payload=payload)
            for attempt in attempts:
                _insert_attempt(session, attempt)
            _finalize(session, row.run_id, result, expected_version=None)
        return row.run_id

    def request_cancel(self, run_id: str) -> bool:
        """Flag the run for cancellation; False if it is already terminal."""
        stmt = (
            update(DiagnosisRunRow)
            .where(DiagnosisRunRow.run_id == run_id)
            .where(DiagnosisRunRow.status.not_in(_TERMINAL))
            .values(cancel_requested=True, updated_at=_now())
        )
        with self._write() as session:
            if _rowcount(session.execute(stmt, execution_options=_NO_SYNC)) == 1:
                return True
            _require_run(session, run_id)
            return False

    def is_cancel_requested(self, run_id: str) -> bool:
        """Whether cancellation was requested for the run."""
        stmt = select(DiagnosisRunRow.cancel_requested).where(DiagnosisRunRow.run_id == run_id)
        with self._read() as session:
            flag = session.scalar(stmt)
        if flag is None:
            raise RunNotFoundError(run_id)
        return flag

    def set_executor_output(self, run_id: str, raw: str) -> None:
        """Keep exactly what the Executor returned (for export; never in self_evaluation)."""
        stmt = (
            update(DiagnosisRunRow)
            .where(DiagnosisRunRow.run_id == run_id)
            .values(executor_output_raw=raw, updated_at=_now())
        )
        with self._write() as session:
            if _rowcount(session.execute(stmt, execution_options=_NO_SYNC)) == 0:
                raise RunNotFoundError(run_id)

    def get_executor_output(self, run_id: str) -> str | None:
        """The raw Executor output, or None if none was stored."""
        with self._read() as session:
            return _load_run(session, run_id).executor_output_raw

    def to_bundle(self, run_id: str) -> RunBundle:
        """The run as a bundle (`verity export`); StoreError if it has no Executor output."""
        with self._read() as session:
            row = _load_run(session, run_id)
            invocations = _invocations(session, run_id)
        if row.executor_output_raw is None:
            raise StoreError(f"run {run_id} has no executor output to export")
        pipeline_state = (row.state or {}).get("pipeline") or {}
        retry_context = pipeline_state.get("retry_context")
        return RunBundle(
            run_id=row.run_id,
            session_id=row.session_id,
            query=row.query,
            intent=Intent(row.intent),
            invocations=invocations,
            executor_output_raw=row.executor_output_raw,
            retry_context=RetryContext.model_validate(retry_context) if retry_context else None,
        )

    # -- tool invocations ---------------------------------------------------------------

    def add_invocation(self, run_id: str, invocation: ToolInvocation, *, turn: int = 0) -> None:
        """Record a tool call; DuplicateToolCallError (first row kept) if its id is taken."""
        with self._write() as session:
            _insert_invocation(session, run_id, invocation, turn=turn)

    def complete_invocation(
        self,
        run_id: str,
        tool_call_id: str,
        *,
        status: LifecycleStatus,
        evidence_status: EvidenceStatus | None,
        projection: Projection | None,
        error: str | None = None,
    ) -> bool:
        """Move a PROJECTING call to READY or ERROR; False if it was already completed."""
        if status is LifecycleStatus.PROJECTING:
            raise StoreError("complete_invocation needs status READY or ERROR")
        stmt = (
            update(ToolInvocationRow)
            .where(ToolInvocationRow.run_id == run_id)
            .where(ToolInvocationRow.tool_call_id == tool_call_id)
            .where(ToolInvocationRow.status == LifecycleStatus.PROJECTING.value)
            .values(
                status=status.value,
                evidence_status=evidence_status.value if evidence_status else None,
                projection=_dump_projection(projection),
                error=error,
                finished_at=_now(),
            )
        )
        with self._write() as session:
            if _rowcount(session.execute(stmt, execution_options=_NO_SYNC)) == 1:
                return True
            _require_invocation(session, run_id, tool_call_id)
            return False

    def list_invocations(self, run_id: str) -> list[ToolInvocation]:
        """The run's tool calls in insertion order."""
        with self._read() as session:
            invocations = _invocations(session, run_id)
            if not invocations:
                _require_run(session, run_id)
            return invocations

    # -- events and attempts ------------------------------------------------------------

    def append_event(
        self, run_id: str, *, node: str, kind: str, payload: dict[str, Any] | None = None
    ) -> RunEvent:
        """Append to the run's trace; seq is the next of 1, 2, 3 ... for this run."""
        with self._write() as session:
            return _insert_event(session, run_id, node=node, kind=kind, payload=payload or {})

    def events_since(
        self, run_id: str, seq: int = 0, *, limit: int | None = None
    ) -> list[RunEvent]:
        """Events with a seq above `seq`, ascending (at most `limit` of them)."""
        stmt = (
            select(RunEventRow)
            .where(RunEventRow.run_id == run_id, RunEventRow.seq > seq)
            .order_by(RunEventRow.seq)
            .limit(limit)
        )
        with self._read() as session:
            events = [_event(row) for row in session.scalars(stmt)]
            if not events:
                _require_run(session, run_id)
            return events

    def record_attempt(self, attempt: LlmAttempt) -> None:
        """Record one model call; StoreError if (run, role, cycle, attempt) is taken."""
        with self._write() as session:
            _insert_attempt(session, attempt)

    def list_attempts(self, run_id: str) -> list[LlmAttempt]:
        """The run's model attempts in the order they were recorded."""
        stmt = (
            select(LlmAttemptRow).where(LlmAttemptRow.run_id == run_id).order_by(LlmAttemptRow.id)
        )
        with self._read() as session:
            attempts = [_attempt(row) for row in session.scalars(stmt)]
            if not attempts:
                _require_run(session, run_id)
            return attempts


# -- helpers: one session, no commit ------------------------------------------------------


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


def _check_same_run(run_id: str, expected: str) -> None:
    if run_id != expected:
        raise StoreError(f"record of run {run_id} given for run {expected}")


def _run_row(
    *,
    run_id: str,
    query: str,
    intent: Intent,
    status: RunStatus,
    session_id: str | None,
    source: str,
    source_run_id: str | None,
    executor_output_raw: str | None,
) -> DiagnosisRunRow:
    if not 0 < len(run_id) <= _RUN_ID_MAX:
        raise StoreError(f"run id must be 1 to {_RUN_ID_MAX} characters: {run_id!r}")
    now = _now()
    return DiagnosisRunRow(
        run_id=run_id,
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
    )


def _add_run(session: Session, row: DiagnosisRunRow) -> None:
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise StoreError(f"run {row.run_id} already exists") from exc


def _load_run(session: Session, run_id: str, *, lock: bool = False) -> DiagnosisRunRow:
    stmt = select(DiagnosisRunRow).where(DiagnosisRunRow.run_id == run_id)
    if lock:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).one_or_none()
    if row is None:
        raise RunNotFoundError(run_id)
    return row


def _require_run(session: Session, run_id: str, *, lock: bool = False) -> None:
    stmt = select(DiagnosisRunRow.run_id).where(DiagnosisRunRow.run_id == run_id)
    if lock:
        stmt = stmt.with_for_update()
    if session.scalar(stmt) is None:
        raise RunNotFoundError(run_id)


def _require_invocation(session: Session, run_id: str, tool_call_id: str) -> None:
    stmt = select(ToolInvocationRow.id).where(
        ToolInvocationRow.run_id == run_id, ToolInvocationRow.tool_call_id == tool_call_id
    )
    if session.scalar(stmt) is None:
        _require_run(session, run_id)
        raise StoreError(f"no tool call {tool_call_id!r} in run {run_id}")


def _next_seq(session: Session, table: type[RunEventRow | ToolInvocationRow], run_id: str) -> int:
    # Callers hold the run row (_require_run(lock=True)), so max + 1 cannot race.
    current = session.scalar(select(func.max(table.seq)).where(table.run_id == run_id))
    return (current or 0) + 1


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
    row = _load_run(session, run_id, lock=True)
    if RunStatus(row.status).terminal:
        return False
    if expected_version is not None and row.version != expected_version:
        raise StaleStateError(f"run {run_id} is at version {row.version}, not {expected_version}")
    now = _now()
    if row.cancel_requested:  # nothing is released after a cancel
        row.status = RunStatus.CANCELLED.value
        row.version += 1
        row.updated_at = row.finished_at = now
        session.flush()
        _insert_event(session, run_id, node="finalize", kind="cancelled",
                      payload={"reason": "cancel requested before release"})
        return False
    row.status = RunStatus(result.status).value
    row.node = "finalize"
    row.verdict = result.verdict.value if result.verdict else None
    row.fallback_type = result.fallback_type.value if result.fallback_type else None
    row.final_answer = result.final_answer.model_dump(mode="json")
    row.self_evaluation = result.self_evaluation.model_dump(mode="json")
    row.version += 1
    row.updated_at = now
    row.finished_at = now
    session.flush()
    payload = {"status": row.status, "verdict": row.verdict, "fallback_type": row.fallback_type}
    _insert_event(session, run_id, node="finalize", kind="completed", payload=payload)
    return True


def _insert_invocation(
    session: Session, run_id: str, invocation: ToolInvocation, *, turn: int
) -> None:
    _require_run(session, run_id, lock=True)
    now = _now()
    pending = invocation.status is LifecycleStatus.PROJECTING
    session.add(
        ToolInvocationRow(
            run_id=run_id,
            tool_call_id=invocation.tool_call_id,
            tool_name=invocation.tool_name,
            arguments=invocation.arguments,
            status=invocation.status.value,
            evidence_status=invocation.evidence_status.value
            if invocation.evidence_status
            else None,
            projection=_dump_projection(invocation.projection),
            error=invocation.error,
            turn=turn,
            seq=_next_seq(session, ToolInvocationRow, run_id),
            created_at=now,
            finished_at=None if pending else now,
        )
    )
    try:
        session.flush()
    except IntegrityError as exc:
        raise DuplicateToolCallError(run_id, invocation.tool_call_id) from exc


def _insert_event(
    session: Session, run_id: str, *, node: str, kind: str, payload: dict[str, Any]
) -> RunEvent:
    _require_run(session, run_id, lock=True)
    row = RunEventRow(
        run_id=run_id,
        seq=_next_seq(session, RunEventRow, run_id),
        node=node,
        kind=kind,
        payload=payload,
        created_at=_now(),
    )
    session.add(row)
    session.flush()
    return _event(row)


def _insert_attempt(session: Session, attempt: LlmAttempt) -> None:
    _require_run(session, attempt.run_id)
    fields = attempt.model_dump(exclude={"created_at"})
    session.add(LlmAttemptRow(**fields, created_at=_as_utc(attempt.created_at)))
    try:
        session.flush()
    except IntegrityError as exc:
        raise StoreError(
            f"duplicate model attempt in run {attempt.run_id}: role {attempt.role}, "
            f"cycle {attempt.cycle}, attempt {attempt.attempt_number}"
        ) from exc


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


def _record(row: DiagnosisRunRow) -> RunRecord:
    return RunRecord(
        run_id=row.run_id,
        session_id=row.session_id,
        query=row.query,
        intent=Intent(row.intent),
        status=RunStatus(row.status),
        node=row.node,
        version=row.version,
        verdict=Verdict(row.verdict) if row.verdict else None,
        fallback_type=FallbackType(row.fallback_type) if row.fallback_type else None,
        final_answer=(
            FinalAnswer.model_validate(row.final_answer) if row.final_answer is not None else None
        ),
        self_evaluation=(
            SelfEvaluation.model_validate(row.self_evaluation)
            if row.self_evaluation is not None
            else None
        ),
        source=row.source,
        source_run_id=row.source_run_id,
        cancel_requested=row.cancel_requested,
        evidence_retry_count=row.evidence_retry_count,
        data_source=row.data_source,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )


def _invocation(row: ToolInvocationRow) -> ToolInvocation:
    return ToolInvocation(
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        arguments=row.arguments,
        status=LifecycleStatus(row.status),
        evidence_status=EvidenceStatus(row.evidence_status) if row.evidence_status else None,
        projection=Projection.model_validate(row.projection) if row.projection else None,
        error=row.error,
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
