"""The SQLite store: the ORM path, and the runtime's per-task statements as SQLAlchemy Core
(`statements`) in `BEGIN IMMEDIATE` write transactions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, select

from models.invocation import ToolInvocation
from models.run import LlmAttempt, RunHead
from models.tables import DiagnosisRunRow
from pipeline.errors import RunNotFoundError, StaleStateError
from pipeline.store import convert, rows, statements
from pipeline.store.alerts import SqliteAlerts
from pipeline.store.engine import Database
from pipeline.store.leases import CoreLeaseSql, Leases
from pipeline.store.protocol import Capability
from pipeline.store.sql import SqlStore
from pipeline.store.sweep import DEFAULT_RUN_DEADLINE_S
from pipeline.store.tokens import Tokens


class SqliteStore(SqlStore):
    """A run store on SQLite (the embedded default): one writer at a time, serialized by the
    database's write lock."""

    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, engine: Engine, *,
                 run_deadline_s: float = DEFAULT_RUN_DEADLINE_S) -> None:
        """Wrap a SQLite engine whose schema is already at head; prefer `open_store`."""
        db = Database(engine)
        super().__init__(db, leases=Leases(CoreLeaseSql(db)), tokens=Tokens(db),
                         alerts=SqliteAlerts(db),
                         run_deadline_s=run_deadline_s)

    def _insert_run(self, row: DiagnosisRunRow, *, state: dict[str, Any] | None,
                    data_source: str | None,
                    events: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        row.data_source = data_source
        row.state = state
        row.event_seq = len(events)
        with self._db.write() as session:
            rows.add_run(session, row)
            rows.write_events(session, row.run_id, events, last_seq=len(events))

    def get_node_input(
        self, run_id: str, *, with_executor_output: bool = False, with_invocations: bool = False
    ) -> tuple[RunHead, dict[str, Any] | None, str | None, list[ToolInvocation]]:
        stmt = (statements.SELECT_HEAD_WITH_OUTPUT if with_executor_output
                else statements.SELECT_HEAD)
        with self._db.connect_read() as connection:
            row = connection.execute(stmt, {"p_run_id": run_id}).one_or_none()
            if row is None:
                raise RunNotFoundError(run_id)
            invocations = (rows.invocation_rows(connection, run_id) if with_invocations
                           else [])
        head = convert.head(run_id, row.status, row.version, row.node, row.cancel_requested,
                            row.data_source, row.session_id, row.tenant_id)
        raw = row.executor_output_raw if with_executor_output else None
        return head, row.state, raw, invocations

    def _commit(self, params: dict[str, Any], *,
                events: Sequence[tuple[str, str, dict[str, Any]]],
                attempts: Sequence[LlmAttempt], invocations: Sequence[ToolInvocation],
                turn: int) -> None:
        run_id, table = params["p_run_id"], DiagnosisRunRow
        with self._db.connect_write() as connection:
            seqs = connection.execute(statements.COMMIT_NODE, params).one_or_none()
            if seqs is None:
                found = connection.execute(
                    select(table.version, table.status).where(table.run_id == run_id)
                ).one_or_none()
                if found is None:
                    raise RunNotFoundError(run_id)
                raise StaleStateError(
                    f"run {run_id} is at version {found.version} ({found.status}), "
                    f"not {params['p_version']}"
                )
            rows.write_events(connection, run_id, events, last_seq=int(seqs[0]))
            rows.write_invocations(connection, run_id, invocations, turn=turn,
                                   last_seq=int(seqs[1]))
            rows.write_attempts(connection, attempts)

    def get_tool_call(
        self, run_id: str, tool_call_id: str
    ) -> tuple[RunHead, ToolInvocation] | None:
        params = {"p_run_id": run_id, "p_call_id": tool_call_id}
        with self._db.connect_read() as connection:
            row = connection.execute(statements.SELECT_TOOL_CALL, params).one_or_none()
        if row is None:
            return None
        head = convert.head(run_id, row.run_status, row.version, row.node,
                            row.cancel_requested, row.data_source, row.session_id,
                            row.tenant_id)
        return head, convert.invocation(row)

    def _complete(self, params: dict[str, Any], *, unless_cancelled: bool) -> bool:
        stmt = (statements.COMPLETE_LIVE_INVOCATION if unless_cancelled
                else statements.COMPLETE_INVOCATION)
        with self._db.connect_write() as connection:
            return bool(connection.execute(stmt, params).rowcount == 1)
