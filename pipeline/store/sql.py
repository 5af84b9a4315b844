"""The ORM path both backends share: `SqlStore`, the base of `SqliteStore` and `PostgresStore`.

The only modules of `pipeline/` that import sqlalchemy are this package's. ORM rows never leave
it: methods take and return the contracts of `models/` (RunRecord, ToolInvocation, RunEvent,
LlmAttempt ...), converted by `convert`.

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

A backend class adds what differs: the runtime's per-task statements (`create_run`,
`get_node_input`, `commit_node`, `get_tool_call`, completing a tool call) and its parts' SQL.
Leases and the attempt journal (`Leases`), batches (`Batches`), API tokens (`Tokens`) and
alert groups (`Alerts`) are parts a store is made of; its methods of the same names hand
over to them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any
from uuid import uuid4

from sqlalchemy import Engine, and_, select, text, update
from sqlalchemy.orm import defer

from models.alert import AlertGroup, AlertOutcome, RunAlert
from models.batch import BatchRecord, ItemRecord, ItemResult, Selection
from models.bundle import RunBundle, RunResult
from models.common import Intent, RunStatus
from models.delivery import Delivery, NewDelivery
from models.invocation import EvidenceStatus, LifecycleStatus, Projection, ToolInvocation
from models.run import LlmAttempt, RunEvent, RunHead, RunRecord, StalledRun
from models.state import NextStep
from models.tables import DiagnosisRunRow, LlmAttemptRow, RunEventRow, ToolInvocationRow
from models.token import ApiToken
from pipeline.errors import RunNotFoundError, StaleStateError, StoreError
from pipeline.store import convert, rows, sweep
from pipeline.store.alerts import Alerts
from pipeline.store.batches import PAGE, Batches
from pipeline.store.deliveries import Deliveries, EndOutcome
from pipeline.store.engine import NO_SYNC, TERMINAL, Database
from pipeline.store.leases import LeaseOutcome, Leases
from pipeline.store.protocol import Capability, RunStore
from pipeline.store.sweep import DEFAULT_RUN_DEADLINE_S
from pipeline.store.tokens import Tokens


class SqlStore(RunStore):
    """Runs, tool invocations, events and model attempts in a relational database, through
    the ORM; a backend subclass supplies the hot path and the parts' SQL."""

    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, db: Database, *, leases: Leases, tokens: Tokens, alerts: Alerts,
                 run_deadline_s: float = DEFAULT_RUN_DEADLINE_S) -> None:
        """A store on `db` (schema at head) made of its parts; `run_deadline_s`: the deadline
        of a run created without one of its own."""
        self._db = db
        self.run_deadline_s = run_deadline_s
        self.leases = leases
        self.batches = Batches(db)
        self.tokens = tokens
        self.alerts = alerts
        self.deliveries = Deliveries(db)

    @property
    def engine(self) -> Engine:
        """The engine the store writes with (its schema at head)."""
        return self._db.engine

    @property
    def read_engine(self) -> Engine:
        """The autocommit engine reads go through (on SQLite the same pool as `engine`)."""
        return self._db.fast

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- what a backend supplies ---------------------------------------------------------------

    def _insert_run(self, row: DiagnosisRunRow, *, state: dict[str, Any] | None,
                    data_source: str | None,
                    events: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        """Insert a new run row with its first events; StoreError if its id is taken."""
        raise NotImplementedError

    def _commit(self, params: dict[str, Any], *,
                events: Sequence[tuple[str, str, dict[str, Any]]],
                attempts: Sequence[LlmAttempt], invocations: Sequence[ToolInvocation],
                turn: int) -> None:
        """A node's commit (`commit_node`'s parameters); StaleStateError or
        RunNotFoundError when the run is not at the expected version."""
        raise NotImplementedError

    def _complete(self, params: dict[str, Any], *, unless_cancelled: bool) -> bool:
        """The completing update of a tool call, in one statement; whether it moved it."""
        raise NotImplementedError

    # -- runs (the ORM path) ------------------------------------------------------------------

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
        source: str | None = None,
        state: dict[str, Any] | None = None,
        events: Sequence[tuple[str, str, dict[str, Any]]] = (),
        deadline_s: float | None = None,
        trace_id: str | None = None,
    ) -> str:
        row = rows.run_row(
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
            trace_id=trace_id,
        )
        self._insert_run(row, state=state, data_source=source, events=events)
        return row.run_id

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
        for attempt in attempts:
            rows.check_same_run(attempt.run_id, run_id)
        params = {
            "p_run_id": run_id, "p_version": expected_version,
            "p_new_version": expected_version + 1, "p_node": node, "p_state": state,
            "p_status": status.value if status else None, "p_retry": evidence_retry_count,
            "p_output": executor_output_raw, "p_now": rows.utc_now(),
            "p_terminal": bool(status and status.terminal),
            "p_events": len(events), "p_invocations": len(invocations),
        }
        self._commit(params, events=events, attempts=attempts, invocations=invocations, turn=turn)
        return expected_version + 1

    def get_state(self, run_id: str, *, tenant_id: str
                  ) -> tuple[RunRecord, dict[str, Any] | None]:
        with self._db.read() as session:
            row = rows.load_run(session, run_id, tenant_id=tenant_id)
            return convert.record(row), row.state

    def get_head(
        self, run_id: str, *, with_executor_output: bool = False
    ) -> tuple[RunHead, dict[str, Any] | None, str | None]:
        head, state, output, _ = self.get_node_input(
            run_id, with_executor_output=with_executor_output
        )
        return head, state, output

    def cancel_run(self, run_id: str, *, reason: str = "cancel requested",
                   node: str | None = None) -> bool:
        with self._db.write() as session:
            row = rows.load_run(session, run_id, lock=True)
            if RunStatus(row.status).terminal:
                return False
            now = rows.utc_now()
            row.status = RunStatus.CANCELLED.value
            row.cancel_requested = True
            row.version += 1
            row.updated_at = row.finished_at = now
            row.lease_owner = row.lease_expires_at = None
            session.flush()
            rows.insert_event(session, run_id, node=node or row.node or "submit",
                          kind="cancelled", payload={"reason": reason})
            return True

    def find_stalled(
        self, *, older_than_s: float, limit: int, now: datetime | None = None
    ) -> list[StalledRun]:
        now = rows.as_utc(now)
        stmt = sweep.select_stalled(before=sweep.stale_before(now, older_than_s), now=now,
                                     limit=limit)
        with self._db.connect_read() as connection:
            return [convert.stalled_run(row) for row in connection.execute(stmt)]

    def claim_stalled(
        self, run_id: str, *, version: int, updated_at: datetime, step: NextStep | None = None
    ) -> bool:
        with self._db.connect_write() as connection:
            return sweep.claim(connection, run_id, version=version,
                                updated_at=rows.as_utc(updated_at), step=step)

    def fail_overdue(self, *, now: datetime | None = None, limit: int = 100) -> list[str]:
        stmt = sweep.select_overdue(now=rows.as_utc(now), limit=limit)
        with self._db.connect_read() as connection:
            overdue = list(connection.execute(stmt))
        return [row.run_id for row in overdue if self.fail_run(
            row.run_id, version=row.version, reason=sweep.DEADLINE_EXCEEDED,
            error=sweep.deadline_message(row.created_at, row.deadline_at))]

    def fail_run(self, run_id: str, *, version: int, reason: str, error: str) -> bool:
        with self._db.connect_write() as connection:
            return sweep.fail(connection, run_id, version=version, reason=reason,
                               error=error)

    def delete_run(self, run_id: str) -> bool:
        with self._db.connect_write() as connection:
            return bool(connection.execute(sweep.delete_unstarted(run_id)).rowcount == 1)

    def previous_turn(self, tenant_id: str, session_id: str) -> RunRecord | None:
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
        with self._db.read() as session:
            row = session.scalars(stmt).one_or_none()
            return convert.record(row) if row is not None else None

    def get_run(self, run_id: str, *, tenant_id: str) -> RunRecord:
        with self._db.read() as session:
            return convert.record(rows.load_run(session, run_id, tenant_id=tenant_id))

    def list_runs(
        self,
        *,
        tenant_id: str,
        limit: int = 20,
        session_id: str | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[RunRecord]:
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
        with self._db.read() as session:
            return [convert.record(row) for row in session.scalars(stmt)]

    def advance(
        self,
        run_id: str,
        *,
        expected_version: int,
        node: str | None = None,
        status: RunStatus | None = None,
        evidence_retry_count: int | None = None,
    ) -> int:
        values = rows.advance_values(node, status, evidence_retry_count)
        values["version"] = expected_version + 1
        stmt = (
            update(DiagnosisRunRow)
            .where(DiagnosisRunRow.run_id == run_id)
            .where(DiagnosisRunRow.version == expected_version)
            .where(DiagnosisRunRow.status.not_in(TERMINAL))
            .values(**values)
        )
        with self._db.write() as session:
            if rows.rowcount(session.execute(stmt, execution_options=NO_SYNC)) == 1:
                return expected_version + 1
            rows.require_run(session, run_id)
        raise StaleStateError(f"run {run_id} is not at version {expected_version} or is terminal")

    def finalize(
        self, run_id: str, result: RunResult, *, expected_version: int | None = None,
        deliveries: Sequence[NewDelivery] = (),
    ) -> bool:
        with self._db.write() as session:
            return rows.finalize_run(session, run_id, result, expected_version=expected_version,
                                     deliveries=deliveries)

    def save_verified_run(
        self,
        *,
        tenant_id: str,
        bundle: RunBundle,
        result: RunResult,
        events: list[tuple[str, str, dict[str, Any]]],
        attempts: list[LlmAttempt],
    ) -> str:
        for attempt in attempts:
            rows.check_same_run(attempt.run_id, result.run_id)
        row = rows.run_row(
            run_id=result.run_id,
            tenant_id=tenant_id,
            query=bundle.query,
            intent=bundle.intent,
            status=RunStatus.RUNNING,
            session_id=bundle.session_id,
            source="import" if bundle.imported is not None else "verify",
            source_run_id=bundle.run_id,
            executor_output_raw=bundle.executor_output_raw,
        )
        row.imported_json = convert.dump_imported(bundle.imported)
        row.event_seq, row.invocation_seq = len(events), len(bundle.invocations)
        with self._db.write() as session:
            rows.add_run(session, row)
            rows.write_invocations(session, row.run_id, bundle.invocations, turn=0,
                               last_seq=len(bundle.invocations))
            rows.write_events(session, row.run_id, events, last_seq=len(events))
            rows.write_attempts(session, attempts)
            rows.finalize_run(session, row.run_id, result, expected_version=None)
        return row.run_id

    def request_cancel(self, run_id: str, *, tenant_id: str) -> bool:
        stmt = (
            update(DiagnosisRunRow)
            .where(DiagnosisRunRow.run_id == run_id, DiagnosisRunRow.tenant_id == tenant_id)
            .where(DiagnosisRunRow.status.not_in(TERMINAL))
            .values(cancel_requested=True, updated_at=rows.utc_now())
        )
        with self._db.write() as session:
            if rows.rowcount(session.execute(stmt, execution_options=NO_SYNC)) == 1:
                return True
            rows.require_run(session, run_id, tenant_id=tenant_id)
            return False

    def is_cancel_requested(self, run_id: str) -> bool:
        stmt = select(DiagnosisRunRow.cancel_requested).where(DiagnosisRunRow.run_id == run_id)
        with self._db.read() as session:
            flag = session.scalar(stmt)
        if flag is None:
            raise RunNotFoundError(run_id)
        return flag

    def to_bundle(self, run_id: str, *, tenant_id: str) -> RunBundle:
        with self._db.read() as session:
            row = rows.load_run(session, run_id, tenant_id=tenant_id)
            invocations = rows.read_invocations(session, run_id)
        if row.executor_output_raw is None:
            raise StoreError(f"run {run_id} has no executor output to export")
        return convert.bundle(row, invocations)

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
        if status is LifecycleStatus.PROJECTING:
            raise StoreError("complete_invocation needs status READY or ERROR")
        params = {
            "p_run_id": run_id, "p_call_id": tool_call_id, "p_status": status.value,
            "p_evidence_status": evidence_status.value if evidence_status else None,
            "p_projection": convert.dump_projection(projection), "p_error": error,
            "p_now": rows.utc_now(),
        }
        if self._complete(params, unless_cancelled=unless_cancelled):
            return True
        with self._db.read() as session:
            found = session.scalar(select(ToolInvocationRow.id).where(
                ToolInvocationRow.run_id == run_id, ToolInvocationRow.tool_call_id == tool_call_id
            ))
            if found is None:
                rows.require_run(session, run_id)
                raise StoreError(f"no tool call {tool_call_id!r} in run {run_id}")
        return False

    def list_invocations(self, run_id: str) -> list[ToolInvocation]:
        with self._db.read() as session:
            invocations = rows.read_invocations(session, run_id)
            if not invocations:
                rows.require_run(session, run_id)
            return invocations

    def events_since(
        self, run_id: str, seq: int = 0, *, tenant_id: str, limit: int | None = None
    ) -> list[RunEvent]:
        stmt = (
            select(RunEventRow)
            .join(DiagnosisRunRow, DiagnosisRunRow.run_id == RunEventRow.run_id)
            .where(RunEventRow.run_id == run_id, DiagnosisRunRow.tenant_id == tenant_id,
                   RunEventRow.seq > seq)
            .order_by(RunEventRow.seq)
            .limit(limit)
        )
        with self._db.read() as session:
            events = [convert.event(row) for row in session.scalars(stmt)]
            if not events:
                rows.require_run(session, run_id, tenant_id=tenant_id)
            return events

    def follow(
        self, run_id: str, seq: int = 0, *, tenant_id: str, limit: int = 500
    ) -> tuple[RunStatus, list[RunEvent]]:
        stmt = (
            select(DiagnosisRunRow.status, RunEventRow)
            .outerjoin(RunEventRow, and_(RunEventRow.run_id == DiagnosisRunRow.run_id,
                                         RunEventRow.seq > seq))
            .where(DiagnosisRunRow.run_id == run_id, DiagnosisRunRow.tenant_id == tenant_id)
            .order_by(RunEventRow.seq)
            .limit(limit)
        )
        with self._db.read() as session:
            rows = session.execute(stmt).all()
        if not rows:
            raise RunNotFoundError(run_id)
        events = [convert.event(event) for _, event in rows if event is not None]
        return RunStatus(rows[0][0]), events

    def ping(self) -> None:
        with self._db.connect_read() as connection:
            connection.execute(text("SELECT 1"))

    def list_attempts(self, run_id: str) -> list[LlmAttempt]:
        stmt = (
            select(LlmAttemptRow)
            .where(LlmAttemptRow.run_id == run_id, LlmAttemptRow.batch_id == "")
            .order_by(LlmAttemptRow.id)
        )
        with self._db.read() as session:
            attempts = [convert.attempt(row) for row in session.scalars(stmt)]
            if not attempts:
                rows.require_run(session, run_id)
            return attempts

    # -- parts: leases and the attempt journal, batches, API tokens ------------------------------

    def acquire_lease(
        self, run_id: str, *, version: int, owner: str, ttl_s: float
    ) -> LeaseOutcome:
        """See `Leases.acquire_lease`."""
        return self.leases.acquire_lease(run_id, version=version, owner=owner, ttl_s=ttl_s)

    def renew_leases(self, owner: str, run_ids: Collection[str], ttl_s: float) -> set[str]:
        """See `Leases.renew_leases`."""
        return self.leases.renew_leases(owner, run_ids, ttl_s)

    def release_lease(self, run_id: str, owner: str) -> bool:
        """See `Leases.release_lease`."""
        return self.leases.release_lease(run_id, owner)

    def begin_attempt(
        self, run_id: str, *, role: str, cycle: int, prompt_name: str, prompt_version: str,
        input_sha256: str, model: str,
    ) -> int:
        """See `Leases.begin_attempt`."""
        return self.leases.begin_attempt(
            run_id, role=role, cycle=cycle, prompt_name=prompt_name, prompt_version=prompt_version,
            input_sha256=input_sha256, model=model)

    def end_attempt(
        self, run_id: str, role: str, cycle: int, number: int, *, outcome: str,
        input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
        cache_write_tokens: int = 0, latency_ms: float = 0.0, cost_usd: float = 0.0,
        error_type: str | None = None, reply: str | None = None,
    ) -> bool:
        """See `Leases.end_attempt`."""
        return self.leases.end_attempt(
            run_id, role, cycle, number, outcome=outcome, input_tokens=input_tokens,
            output_tokens=output_tokens, cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens, latency_ms=latency_ms, cost_usd=cost_usd,
            error_type=error_type, reply=reply)

    def answered(self, run_id: str, *, role: str, cycle: int, input_sha256: str) -> str | None:
        """See `Leases.answered`."""
        return self.leases.answered(run_id, role=role, cycle=cycle, input_sha256=input_sha256)

    def abandon_in_flight(self, run_id: str) -> int:
        """See `Leases.abandon_in_flight`."""
        return self.leases.abandon_in_flight(run_id)

    def iter_runs(
        self, *, tenant_id: str, selection: Selection, terminal_only: bool = False,
        page: int = PAGE, after: tuple[datetime, str] | None = None, summary: bool = False,
    ) -> Iterator[RunRecord]:
        """See `Batches.iter_runs`."""
        return self.batches.iter_runs(
            tenant_id=tenant_id, selection=selection, terminal_only=terminal_only, page=page,
            after=after, summary=summary)

    def create_batch(
        self, *, batch_id: str, tenant_id: str, selection: Selection, provider: str,
        message_batches: bool, chunk_size: int,
    ) -> BatchRecord:
        """See `Batches.create_batch`."""
        return self.batches.create_batch(
            batch_id=batch_id, tenant_id=tenant_id, selection=selection, provider=provider,
            message_batches=message_batches, chunk_size=chunk_size)

    def get_batch(self, batch_id: str, *, tenant_id: str | None = None) -> BatchRecord:
        """See `Batches.get_batch`."""
        return self.batches.get_batch(batch_id, tenant_id=tenant_id)

    def start_batch(self, batch_id: str) -> bool:
        """See `Batches.start_batch`."""
        return self.batches.start_batch(batch_id)

    def cancel_batch(self, batch_id: str, *, tenant_id: str) -> bool:
        """See `Batches.cancel_batch`."""
        return self.batches.cancel_batch(batch_id, tenant_id=tenant_id)

    def reopen_batch(self, batch_id: str, *, tenant_id: str) -> BatchRecord:
        """See `Batches.reopen_batch`."""
        return self.batches.reopen_batch(batch_id, tenant_id=tenant_id)

    def stalled_batches(self, *, older_than_s: float, now: datetime | None = None
                        ) -> list[BatchRecord]:
        """See `Batches.stalled_batches`."""
        return self.batches.stalled_batches(older_than_s=older_than_s, now=now)

    def claim_stalled_batch(self, batch_id: str, *, updated_at: datetime) -> bool:
        """See `Batches.claim_stalled_batch`."""
        return self.batches.claim_stalled_batch(batch_id, updated_at=updated_at)

    def delete_batch(self, batch_id: str) -> None:
        """See `Batches.delete_batch`."""
        return self.batches.delete_batch(batch_id)

    def pending_items(self, batch_id: str, *, start: int, end: int) -> list[tuple[int, str]]:
        """See `Batches.pending_items`."""
        return self.batches.pending_items(batch_id, start=start, end=end)

    def pending_ranges(self, batch_id: str) -> list[tuple[int, int]]:
        """See `Batches.pending_ranges`."""
        return self.batches.pending_ranges(batch_id)

    def load_for_judging(
        self, run_ids: Sequence[str], *, tenant_id: str
    ) -> dict[str, tuple[RunRecord, RunBundle] | str]:
        """See `Batches.load_for_judging`."""
        return self.batches.load_for_judging(run_ids, tenant_id=tenant_id)

    def record_items(
        self, batch_id: str, results: Sequence[ItemResult], attempts: Sequence[LlmAttempt]
    ) -> int:
        """See `Batches.record_items`."""
        return self.batches.record_items(batch_id, results, attempts)

    def iter_items(self, batch_id: str, *, tenant_id: str, page: int = PAGE
                   ) -> Iterator[ItemRecord]:
        """See `Batches.iter_items`."""
        return self.batches.iter_items(batch_id, tenant_id=tenant_id, page=page)

    def create_token(self, *, token_id: str, tenant_id: str, name: str, secret_sha256: str
                     ) -> ApiToken:
        """See `Tokens.create_token`."""
        return self.tokens.create_token(
            token_id=token_id, tenant_id=tenant_id, name=name, secret_sha256=secret_sha256)

    def token_by_secret_hash(self, secret_sha256: str, *, now: datetime | None = None
                             ) -> ApiToken | None:
        """See `Tokens.token_by_secret_hash`."""
        return self.tokens.token_by_secret_hash(secret_sha256, now=now)

    def list_tokens(self, *, tenant_id: str | None = None) -> list[ApiToken]:
        """See `Tokens.list_tokens`."""
        return self.tokens.list_tokens(tenant_id=tenant_id)

    def revoke_token(self, token_id: str) -> bool:
        """See `Tokens.revoke_token`."""
        return self.tokens.revoke_token(token_id)

    def claim_alert_group(
        self, *, tenant_id: str, dedupe_key: str, group_key: str, alertname: str,
        window_s: float, max_per_hour: int, now: datetime | None = None,
    ) -> tuple[AlertOutcome, AlertGroup]:
        """See `Alerts.claim_alert_group`."""
        return self.alerts.claim_alert_group(
            tenant_id=tenant_id, dedupe_key=dedupe_key, group_key=group_key,
            alertname=alertname, window_s=window_s, max_per_hour=max_per_hour, now=now)

    def attach_alert_run(self, receipt_id: str, *, run_id: str, alert: RunAlert) -> None:
        """See `Alerts.attach_alert_run`."""
        self.alerts.attach_alert_run(receipt_id, run_id=run_id, alert=alert)

    def release_alert_group(self, receipt_id: str) -> bool:
        """See `Alerts.release_alert_group`."""
        return self.alerts.release_alert_group(receipt_id)

    def resolve_alert_group(self, *, tenant_id: str, group_key: str,
                            now: datetime | None = None) -> AlertGroup | None:
        """See `Alerts.resolve_alert_group`."""
        return self.alerts.resolve_alert_group(tenant_id=tenant_id, group_key=group_key,
                                               now=now)

    def list_alert_groups(self, *, tenant_id: str, limit: int = 50) -> list[AlertGroup]:
        """See `Alerts.list_alert_groups`."""
        return self.alerts.list_alert_groups(tenant_id=tenant_id, limit=limit)


    def claim_delivery(self, delivery_id: str, *, owner: str, lease_s: float,
                       now: datetime | None = None) -> tuple[Delivery, int] | None:
        """See `Deliveries.claim_delivery`."""
        return self.deliveries.claim_delivery(delivery_id, owner=owner, lease_s=lease_s, now=now)

    def end_delivery_attempt(
        self, delivery_id: str, number: int, *, owner: str, outcome: EndOutcome,
        status_code: int | None = None, error: str | None = None,
        retry_at: datetime | None = None, now: datetime | None = None,
    ) -> Delivery | None:
        """See `Deliveries.end_delivery_attempt`."""
        return self.deliveries.end_delivery_attempt(
            delivery_id, number, owner=owner, outcome=outcome, status_code=status_code,
            error=error, retry_at=retry_at, now=now)

    def list_deliveries(self, run_id: str, *, tenant_id: str) -> list[Delivery]:
        """See `Deliveries.list_deliveries`."""
        return self.deliveries.list_deliveries(run_id, tenant_id=tenant_id)

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        """See `Deliveries.get_delivery`."""
        return self.deliveries.get_delivery(delivery_id)

    def due_deliveries(self, *, older_than_s: float, limit: int,
                       now: datetime | None = None) -> list[str]:
        """See `Deliveries.due_deliveries`."""
        return self.deliveries.due_deliveries(older_than_s=older_than_s, limit=limit, now=now)
