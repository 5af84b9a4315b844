"""The run store: every read and write of run state, behind one class.

The only module of `pipeline/` that imports sqlalchemy. ORM rows never leave it: methods take
and return the contracts of `models/` (RunRecord, ToolInvocation, RunEvent, LlmAttempt ...).

How it stays correct under at-least-once delivery and concurrent workers:
- run state moves by conditional updates (`WHERE version = ?`, `WHERE status = 'PROJECTING'`,
  not terminal), so a redelivered task or a lost race changes nothing and says so;
- per-run sequence numbers (event seq, invocation order) are allocated while holding the run
  row: `SELECT ... FOR UPDATE` on PostgreSQL, a write transaction (`BEGIN IMMEDIATE`) on SQLite;
- `open()` migrates to head inside one transaction, under an advisory lock on PostgreSQL.

Every run has an owner (`tenant_id`). The reads and the cancel a producer makes (`get_run`,
`get_state`, `events_since`, `list_runs`, `to_bundle`, `request_cancel`, `previous_turn`) take
the tenant and filter on it in SQL; another tenant's run id is refused exactly like an unknown
one (RunNotFoundError). The workers' paths (node input, commits, tool calls, leases, the
reconciler) go by run id alone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any
from uuid import uuid4

from sqlalchemy import Engine, and_, insert, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer, sessionmaker

from models.bundle import RunBundle, RunResult
from models.common import Intent, RunStatus
from models.invocation import EvidenceStatus, LifecycleStatus, Projection, ToolInvocation
from models.run import LlmAttempt, RunEvent, RunHead, RunRecord, StalledRun
from models.state import NextStep
from models.tables import DiagnosisRunRow, LlmAttemptRow, RunEventRow, ToolInvocationRow
from models.verifier import RetryContext
from pipeline.errors import RunNotFoundError, StaleStateError, StoreError
from pipeline.store import _hot, _pg, _sweep
from pipeline.store._batch import BatchStore
from pipeline.store._engine import (
    _NO_SYNC,
    _TERMINAL,
    _WRITE,
    autocommit_engine,
    make_engine,
    upgrade_schema,
)
from pipeline.store._lease import LeaseStore
from pipeline.store._ops import (
    _add_run,
    _advance_values,
    _as_utc,
    _attempt,
    _available,
    _check_same_run,
    _dump_projection,
    _duplicate_attempt,
    _event,
    _finalize,
    _insert_attempt,
    _insert_event,
    _insert_invocation,
    _invocation,
    _invocation_of,
    _invocations,
    _load_run,
    _now,
    _record,
    _require_run,
    _rowcount,
    _run_row,
    _write_events,
    _write_invocations,
)
from pipeline.store._sweep import DEFAULT_RUN_DEADLINE_S
from pipeline.store._tokens import TokenStore


class RunStore(LeaseStore, BatchStore, TokenStore):
    """Runs, tool invocations, events and model attempts in a relational database; node
    leases and the attempt journal come from `LeaseStore`, API tokens from `TokenStore`."""

    def __init__(self, engine: Engine, *, run_deadline_s: float = DEFAULT_RUN_DEADLINE_S
                 ) -> None:
        """Wrap an engine whose schema is already at head; prefer `RunStore.open`.

        `run_deadline_s`: the deadline of a run created without one of its own.
        """
        self._engine = engine
        self.run_deadline_s = run_deadline_s
        self._pg = engine.dialect.name == "postgresql"
        # Reads, and on PostgreSQL the one-statement hot writes, run in autocommit: one round
        # trip per statement, no BEGIN/COMMIT around it. PostgreSQL gets a pool of its own
        # that stays in autocommit (no isolation switch on every checkout).
        self._fast = autocommit_engine(engine)
        self._hot = _pg.HotPath(self._fast) if self._pg else None
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(self._fast, expire_on_commit=False)

    @classmethod
    def open(cls, url: str, *, run_deadline_s: float = DEFAULT_RUN_DEADLINE_S) -> RunStore:
        """Connect to `url` and migrate the schema to head; a database that cannot be
        reached is StoreUnavailableError."""
        engine = make_engine(url)
        try:
            with _available():
                upgrade_schema(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, run_deadline_s=run_deadline_s)

    def close(self) -> None:
        """Close every pooled connection."""
        self._fast.dispose()
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

    def _hot_path(self) -> _pg.HotPath:
        assert self._hot is not None, "PostgreSQL only"
        return self._hot

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with _available(), self._sessions.begin() as session:
            session.connection(execution_options=_WRITE)
            yield session

    @contextmanager
    def _connect_write(self) -> Iterator[Connection]:
        """A Core connection in a write transaction: the hot path skips the ORM session."""
        with _available(), self._engine.connect() as connection:
            connection = connection.execution_options(**_WRITE)
            with connection.begin():
                yield connection

    @contextmanager
    def _connect_read(self) -> Iterator[Connection]:
        """A Core connection in autocommit: reads, and PostgreSQL's one-statement writes."""
        with _available(), self._fast.connect() as connection:
            yield connection

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with _available(), self._read_sessions() as session:
            yield session

    # -- runs ---------------------------------------------------------------------------

    def create_run(
        self,
        *,
        tenant_id: str,
        query: str,
        intent: Intent,
        session_id: str | None = None,
        run_id: str | None = None,
        origin: str = "run",
        origin_run_id: str | None = None,
        executor_output_raw: str | None = None,
        status: RunStatus = RunStatus.PENDING,
        data_source: str | None = None,
        state: dict[str, Any] | None = None,
        events: Sequence[tuple[str, str, dict[str, Any]]] = (),
        deadline_s: float | None = None,
    ) -> str:
        """Insert a run of `tenant_id` at version 0 and return its id (a uuid4 hex when none
        is given); InputError for a tenant id `check_tenant_id` refuses.

        The run must end within `deadline_s` seconds (default: the store's `run_deadline_s`),
        else the reconciler ends it FAILED.
        """
        row = _run_row(
            run_id=run_id or uuid4().hex,
            tenant_id=tenant_id,
            query=query,
            intent=intent,
            status=status,
            session_id=session_id,
            source=origin,
            source_run_id=origin_run_id,
            executor_output_raw=executor_output_raw,
            deadline_s=self.run_deadline_s if deadline_s is None else deadline_s,
        )
        if self._pg:
            params = {
                "p_run_id": row.run_id, "p_tenant_id": row.tenant_id,
                "p_session_id": session_id, "p_query": query,
                "p_intent": row.intent, "p_status": row.status, "p_source": origin,
                "p_source_run_id": origin_run_id, "p_output": executor_output_raw,
                "p_state": _pg.dumps(state) if state is not None else None,
                "p_data_source": data_source, "p_events": len(events),
                "p_event_rows": _pg.event_rows(events), "p_now": row.created_at,
                "p_deadline": row.deadline_at,
            }
            self._hot_path().write(_pg.CREATE_RUN, params, row.run_id)
            return row.run_id
        row.data_source = data_source
        row.state = state
        row.event_seq = len(events)
        with self._write() as session:
            _add_run(session, row)
            _write_events(session, row.run_id, events, last_seq=len(events))
        return row.run_id

    def get_state(self, run_id: str, *, tenant_id: str
                  ) -> tuple[RunRecord, dict[str, Any] | None]:
        """The tenant's run and its runtime state document, read together; RunNotFoundError
        if the tenant has no such run."""
        with self._read() as session:
            row = _load_run(session, run_id, tenant_id=tenant_id)
            return _record(row), row.state

    def get_head(
        self, run_id: str, *, with_executor_output: bool = False
    ) -> tuple[RunHead, dict[str, Any] | None, str | None]:
        """What a node needs on every task, in one read: the head, the state and, if asked,
        the raw Executor output."""
        head, state, output, _ = self.get_node_input(
            run_id, with_executor_output=with_executor_output
        )
        return head, state, output

    def get_node_input(
        self, run_id: str, *, with_executor_output: bool = False, with_invocations: bool = False
    ) -> tuple[RunHead, dict[str, Any] | None, str | None, list[ToolInvocation]]:
        """The head, the state, the raw Executor output and the invocations a node asks for,
        read together."""
        if self._hot is not None:
            found = self._hot.fetch_one(_pg.NODE_INPUT[with_executor_output, with_invocations],
                                        {"p_run_id": run_id})
            if found is None:
                raise RunNotFoundError(run_id)
            head = _head(run_id, *found[1:8])
            calls = [_invocation_of(**item) for item in found[10] or ()]
            return head, found[8], found[9], calls
        stmt = _hot.SELECT_HEAD_WITH_OUTPUT if with_executor_output else _hot.SELECT_HEAD
        with self._connect_read() as connection:
            row = connection.execute(stmt, {"p_run_id": run_id}).one_or_none()
            if row is None:
                raise RunNotFoundError(run_id)
            invocations = _invocation_rows(connection, run_id) if with_invocations else []
        head = _head(run_id, row.status, row.version, row.node, row.cancel_requested,
                     row.data_source, row.session_id, row.tenant_id)
        raw = row.executor_output_raw if with_executor_output else None
        return head, row.state, raw, invocations

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
        invocations: Sequence[ToolInvocation] = (),
        turn: int = 0,
    ) -> int:
        """Persist one node's output, its events, model attempts and requested tool calls
        (PROJECTING rows) in one transaction.

        The run must still be at `expected_version` and not terminal (StaleStateError
        otherwise): a redelivered or duplicate node loses here and changes nothing.
        """
        for attempt in attempts:
            _check_same_run(attempt.run_id, run_id)
        params = {
            "p_run_id": run_id, "p_version": expected_version,
            "p_new_version": expected_version + 1, "p_node": node, "p_state": state,
            "p_status": status.value if status else None, "p_retry": evidence_retry_count,
            "p_output": executor_output_raw, "p_now": _now(),
            "p_terminal": bool(status and status.terminal),
            "p_events": len(events), "p_invocations": len(invocations),
        }
        if self._hot is not None:
            return self._commit_node_pg(params, events=events, attempts=attempts,
                                        invocations=invocations, turn=turn)
        table = DiagnosisRunRow
        with self._connect_write() as connection:
            seqs = connection.execute(_hot.COMMIT_NODE, params).one_or_none()
            if seqs is None:
                found = connection.execute(
                    select(table.version, table.status).where(table.run_id == run_id)
                ).one_or_none()
                if found is None:
                    raise RunNotFoundError(run_id)
                raise StaleStateError(
                    f"run {run_id} is at version {found.version} ({found.status}), "
                    f"not {expected_version}"
                )
            _write_events(connection, run_id, events, last_seq=int(seqs[0]))
            _write_invocations(connection, run_id, invocations, turn=turn,
                               last_seq=int(seqs[1]))
            _write_attempts(connection, attempts)
        return expected_version + 1

    def _commit_node_pg(
        self,
        params: dict[str, Any],
        *,
        events: Sequence[tuple[str, str, dict[str, Any]]],
        attempts: Sequence[LlmAttempt],
        invocations: Sequence[ToolInvocation],
        turn: int,
    ) -> int:
        run_id, expected_version, now = params["p_run_id"], params["p_version"], params["p_now"]
        params = {
            **params, "p_state": _pg.dumps(params["p_state"]), "p_turn": turn,
            "p_event_rows": _pg.event_rows(events),
            "p_call_rows": _pg.call_rows(invocations, now),
            "p_attempt_rows": _pg.attempt_rows(attempts, now),
        }
        hot = self._hot_path()
        statement = _pg.COMMIT_NODE[bool(invocations), bool(attempts)]
        if hot.write(statement, params, run_id, invocations, attempts) is not None:
            return int(expected_version) + 1
        found = hot.fetch_one(_pg.SELECT_VERSION, {"p_run_id": run_id})
        if found is None:
            raise RunNotFoundError(run_id)
        raise StaleStateError(
            f"run {run_id} is at version {found[0]} ({found[1]}), not {expected_version}"
        )

    def get_tool_call(
        self, run_id: str, tool_call_id: str
    ) -> tuple[RunHead, ToolInvocation] | None:
        """A requested tool call with its run's head, in one read; None if not requested."""
        params = {"p_run_id": run_id, "p_call_id": tool_call_id}
        if self._hot is not None:
            found = self._hot.fetch_one(_pg.SELECT_TOOL_CALL, params)
            if found is None:
                return None
            return _head(run_id, *found[:7]), _invocation_of(*found[7:])
        with self._connect_read() as connection:
            row = connection.execute(_hot.SELECT_TOOL_CALL, params).one_or_none()
        if row is None:
            return None
        head = _head(run_id, row.run_status, row.version, row.node, row.cancel_requested,
                     row.data_source, row.session_id, row.tenant_id)
        return head, _invocation(row)

    def cancel_run(self, run_id: str, *, reason: str = "cancel requested",
                   node: str | None = None) -> bool:
        """End a non-terminal run as CANCELLED, with an event (of `node`, else the run's last
        node); False if already terminal."""
        with self._write() as session:
            row = _load_run(session, run_id, lock=True)
            if RunStatus(row.status).terminal:
                return False
            now = _now()
            row.status = RunStatus.CANCELLED.value
            row.cancel_requested = True
            row.version += 1
            row.updated_at = row.finished_at = now
            row.lease_owner = row.lease_expires_at = None
            session.flush()
            _insert_event(session, run_id, node=node or row.node or "submit",
                          kind="cancelled", payload={"reason": reason})
            return True

    # -- the reconciler -----------------------------------------------------------------

    def find_stalled(
        self, *, older_than_s: float, limit: int, now: datetime | None = None
    ) -> list[StalledRun]:
        """PENDING or RUNNING runs whose last change is more than `older_than_s` seconds old
        and whose node lease is absent or expired, oldest first, with their stored next step."""
        now = _as_utc(now)
        stmt = _sweep.select_stalled(before=_sweep.stale_before(now, older_than_s), now=now,
                                     limit=limit)
        with self._connect_read() as connection:
            return [_sweep.stalled_run(row) for row in connection.execute(stmt)]

    def claim_stalled(
        self, run_id: str, *, version: int, updated_at: datetime, step: NextStep | None = None
    ) -> bool:
        """Claim a stalled run for one re-send: touch it (`updated_at`, `reconcile_count`)
        and append a reconcile/resent event, only if it is still at `version` and
        `updated_at` with no live lease. Of several reconcilers claiming one stall, exactly
        one gets True. `step` is the stored next step for the event (read if not given)."""
        with self._connect_write() as connection:
            return _sweep.claim(connection, run_id, version=version,
                                updated_at=_as_utc(updated_at), step=step)

    def fail_overdue(self, *, now: datetime | None = None, limit: int = 100) -> list[str]:
        """End non-terminal runs past their deadline as FAILED (RUN_DEADLINE_EXCEEDED), each
        with a reconcile/failed event; the ids of those this call ended."""
        stmt = _sweep.select_overdue(now=_as_utc(now), limit=limit)
        with self._connect_read() as connection:
            overdue = list(connection.execute(stmt))
        return [row.run_id for row in overdue if self.fail_run(
            row.run_id, version=row.version, reason=_sweep.DEADLINE_EXCEEDED,
            error=_sweep.deadline_message(row.created_at, row.deadline_at))]

    def fail_run(self, run_id: str, *, version: int, reason: str, error: str) -> bool:
        """End a non-terminal run at `version` FAILED with a reconcile/failed event
        ({reason, error}); False, and nothing written, if it moved on or ended."""
        with self._connect_write() as connection:
            return _sweep.fail(connection, run_id, version=version, reason=reason,
                               error=error)

    def delete_run(self, run_id: str) -> bool:
        """Remove a run that never started (PENDING at version 0, e.g. its submit never
        reached the broker), with its events; False if there is none or it has started."""
        with self._connect_write() as connection:
            return bool(connection.execute(_sweep.delete_unstarted(run_id)).rowcount == 1)

    def previous_turn(self, tenant_id: str, session_id: str) -> RunRecord | None:
        """The latest DIAGNOSIS run of the tenant's session that ended SUCCESS, if any: a
        session id is the tenant's own, another tenant's session of that name is another.

        Fallback, failed and cancelled runs are never a previous turn.
        """
        stmt = (
            select(DiagnosisRunRow)
            .options(defer(DiagnosisRunRow.executor_output_raw), defer(DiagnosisRunRow.state))
            .where(DiagnosisRunRow.tenant_id == tenant_id)
            .where(DiagnosisRunRow.session_id == session_id)
            .where(DiagnosisRunRow.intent == Intent.DIAGNOSIS.value)
            .where(DiagnosisRunRow.status == RunStatus.SUCCESS.value)
            .order_by(DiagnosisRunRow.created_at.desc(), DiagnosisRunRow.run_id.desc())
            .limit(1)
        )
        with self._read() as session:
            row = session.scalars(stmt).one_or_none()
            return _record(row) if row is not None else None

    def get_run(self, run_id: str, *, tenant_id: str) -> RunRecord:
        """The tenant's run as a contract; RunNotFoundError if there is none, or it is another
        tenant's (the same error: a run id tells another tenant nothing)."""
        with self._read() as session:
            return _record(_load_run(session, run_id, tenant_id=tenant_id))

    def list_runs(
        self,
        *,
        tenant_id: str,
        limit: int = 20,
        session_id: str | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[RunRecord]:
        """The tenant's runs, newest first, optionally of one session and in some statuses."""
        stmt = (
            select(DiagnosisRunRow)
            .options(defer(DiagnosisRunRow.executor_output_raw), defer(DiagnosisRunRow.state))
            .where(DiagnosisRunRow.tenant_id == tenant_id)
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
        if self._hot is not None and result.run_id == run_id and self._finalize_pg(
                run_id, result, expected_version):
            return True
        with self._write() as session:
            return _finalize(session, run_id, result, expected_version=expected_version)

    def _finalize_pg(self, run_id: str, result: RunResult, expected_version: int | None) -> bool:
        """The usual release in one statement; False sends the caller down the general path
        (terminal, cancelled, stale or missing run), which decides and says why."""
        payload = {"status": result.status, "verdict": result.verdict,
                   "fallback_type": result.fallback_type}
        params = {
            "p_run_id": run_id, "p_version": expected_version,
            "p_status": RunStatus(result.status).value,
            "p_verdict": result.verdict.value if result.verdict else None,
            "p_fallback_type": result.fallback_type.value if result.fallback_type else None,
            "p_final_answer": _pg.dumps(result.final_answer.model_dump(mode="json")),
            "p_self_evaluation": _pg.dumps(result.self_evaluation.model_dump(mode="json")),
            "p_now": _now(), "p_events": 1,
            "p_event_rows": _pg.event_rows([("finalize", "completed", payload)]),
        }
        return self._hot_path().write(_pg.FINALIZE, params, run_id) is not None

    def save_verified_run(
        self,
        *,
        tenant_id: str,
        bundle: RunBundle,
        result: RunResult,
        events: list[tuple[str, str, dict[str, Any]]],
        attempts: list[LlmAttempt],
    ) -> str:
        """Store a `verity verify` outcome as a new finalized run of `tenant_id`; all of it or
        nothing."""
        for attempt in attempts:
            _check_same_run(attempt.run_id, result.run_id)
        row = _run_row(
            run_id=result.run_id,
            tenant_id=tenant_id,
            query=bundle.query,
            intent=bundle.intent,
            status=RunStatus.RUNNING,
            session_id=bundle.session_id,
            source="verify",
            source_run_id=bundle.run_id,
            executor_output_raw=bundle.executor_output_raw,
        )
        row.event_seq, row.invocation_seq = len(events), len(bundle.invocations)
        with self._write() as session:
            _add_run(session, row)
            _write_invocations(session, row.run_id, bundle.invocations, turn=0,
                               last_seq=len(bundle.invocations))
            _write_events(session, row.run_id, events, last_seq=len(events))
            _write_attempts(session, attempts)
            _finalize(session, row.run_id, result, expected_version=None)
        return row.run_id

    def request_cancel(self, run_id: str, *, tenant_id: str) -> bool:
        """Flag the tenant's run for cancellation; False if it is already terminal,
        RunNotFoundError if the tenant has no such run."""
        stmt = (
            update(DiagnosisRunRow)
            .where(DiagnosisRunRow.run_id == run_id, DiagnosisRunRow.tenant_id == tenant_id)
            .where(DiagnosisRunRow.status.not_in(_TERMINAL))
            .values(cancel_requested=True, updated_at=_now())
        )
        with self._write() as session:
            if _rowcount(session.execute(stmt, execution_options=_NO_SYNC)) == 1:
                return True
            _require_run(session, run_id, tenant_id=tenant_id)
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

    def to_bundle(self, run_id: str, *, tenant_id: str) -> RunBundle:
        """The tenant's run as a bundle (`verity export`); StoreError if it has no Executor
        output, RunNotFoundError if the tenant has no such run."""
        with self._read() as session:
            row = _load_run(session, run_id, tenant_id=tenant_id)
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
        unless_cancelled: bool = False,
    ) -> bool:
        """Move a PROJECTING call to READY or ERROR; False if it was already completed (or,
        with `unless_cancelled`, if its run was cancelled: the late result is not kept)."""
        if status is LifecycleStatus.PROJECTING:
            raise StoreError("complete_invocation needs status READY or ERROR")
        params = {
            "p_run_id": run_id, "p_call_id": tool_call_id, "p_status": status.value,
            "p_evidence_status": evidence_status.value if evidence_status else None,
            "p_projection": _dump_projection(projection), "p_error": error, "p_now": _now(),
        }
        if self._completed(params, unless_cancelled=unless_cancelled):
            return True
        with self._read() as session:
            found = session.scalar(select(ToolInvocationRow.id).where(
                ToolInvocationRow.run_id == run_id, ToolInvocationRow.tool_call_id == tool_call_id
            ))
            if found is None:
                _require_run(session, run_id)
                raise StoreError(f"no tool call {tool_call_id!r} in run {run_id}")
        return False

    def _completed(self, params: dict[str, Any], *, unless_cancelled: bool) -> bool:
        """The completing update, in one statement; whether it moved the call."""
        if self._hot is not None:
            sql = _pg.COMPLETE_LIVE_INVOCATION if unless_cancelled else _pg.COMPLETE_INVOCATION
            projection = params["p_projection"]
            dumped = None if projection is None else _pg.dumps(projection)
            return self._hot.rowcount(sql, {**params, "p_projection": dumped}) == 1
        stmt = _hot.COMPLETE_LIVE_INVOCATION if unless_cancelled else _hot.COMPLETE_INVOCATION
        with self._connect_write() as connection:
            return bool(connection.execute(stmt, params).rowcount == 1)

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
        self, run_id: str, seq: int = 0, *, tenant_id: str, limit: int | None = None
    ) -> list[RunEvent]:
        """The tenant's run's events with a seq above `seq`, ascending (at most `limit` of
        them); RunNotFoundError if the tenant has no such run."""
        stmt = (
            select(RunEventRow)
            .join(DiagnosisRunRow, DiagnosisRunRow.run_id == RunEventRow.run_id)
            .where(RunEventRow.run_id == run_id, DiagnosisRunRow.tenant_id == tenant_id,
                   RunEventRow.seq > seq)
            .order_by(RunEventRow.seq)
            .limit(limit)
        )
        with self._read() as session:
            events = [_event(row) for row in session.scalars(stmt)]
            if not events:
                _require_run(session, run_id, tenant_id=tenant_id)
            return events

    def follow(
        self, run_id: str, seq: int = 0, *, tenant_id: str, limit: int = 500
    ) -> tuple[RunStatus, list[RunEvent]]:
        """The tenant's run's status and its events with a seq above `seq` (at most `limit`),
        in one statement: a terminal status read here comes with every event written before
        it. RunNotFoundError if the tenant has no such run."""
        stmt = (
            select(DiagnosisRunRow.status, RunEventRow)
            .outerjoin(RunEventRow, and_(RunEventRow.run_id == DiagnosisRunRow.run_id,
                                         RunEventRow.seq > seq))
            .where(DiagnosisRunRow.run_id == run_id, DiagnosisRunRow.tenant_id == tenant_id)
            .order_by(RunEventRow.seq)
            .limit(limit)
        )
        with self._read() as session:
            rows = session.execute(stmt).all()
        if not rows:
            raise RunNotFoundError(run_id)
        events = [_event(event) for _, event in rows if event is not None]
        return RunStatus(rows[0][0]), events

    def ping(self) -> None:
        """One round trip to the database; StoreUnavailableError if it cannot be reached."""
        with self._connect_read() as connection:
            connection.execute(text("SELECT 1"))

    def record_attempt(self, attempt: LlmAttempt) -> None:
        """Record one model call; StoreError if (run, role, cycle, attempt) is taken."""
        with self._write() as session:
            _insert_attempt(session, attempt)

    def list_attempts(self, run_id: str) -> list[LlmAttempt]:
        """The run's own model attempts in the order they were recorded (a re-verification's
        are its batch's)."""
        stmt = (
            select(LlmAttemptRow)
            .where(LlmAttemptRow.run_id == run_id, LlmAttemptRow.batch_id == "")
            .order_by(LlmAttemptRow.id)
        )
        with self._read() as session:
            attempts = [_attempt(row) for row in session.scalars(stmt)]
            if not attempts:
                _require_run(session, run_id)
            return attempts


# -- helpers: one session, no commit ------------------------------------------------------




def _write_attempts(session: Session | Connection, attempts: Sequence[LlmAttempt]) -> None:
    if not attempts:
        return
    rows = [{**a.model_dump(exclude={"created_at"}), "created_at": _as_utc(a.created_at)}
            for a in attempts]
    try:
        session.execute(insert(LlmAttemptRow), rows)
    except IntegrityError as exc:
        raise StoreError(_duplicate_attempt(attempts)) from exc


def _head(run_id: str, status: str, version: int, node: str | None, cancel_requested: bool,
          data_source: str | None, session_id: str | None, tenant_id: str) -> RunHead:
    return RunHead(run_id=run_id, status=RunStatus(status), version=version, node=node,
                   cancel_requested=cancel_requested, source=data_source,
                   session_id=session_id, tenant_id=tenant_id)


def _invocation_rows(connection: Connection, run_id: str) -> list[ToolInvocation]:
    rows = connection.execute(_hot.SELECT_INVOCATIONS, {"p_run_id": run_id})
    return [_invocation(row) for row in rows]
