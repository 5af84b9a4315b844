"""The PostgreSQL store: the ORM path, and the runtime's per-task reads and writes as one
prepared statement each on the hot path (`pg.HotPath`, autocommit, no SQLAlchemy execution
layer): a node's input is one round trip, its commit another."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine

from models.bundle import RunResult
from models.common import RunStatus
from models.delivery import NewDelivery
from models.invocation import ToolInvocation
from models.run import LlmAttempt, RunHead
from models.tables import DiagnosisRunRow
from pipeline.errors import RunNotFoundError, StaleStateError
from pipeline.store import convert, pg, rows
from pipeline.store.alerts import PgAlerts
from pipeline.store.engine import Database
from pipeline.store.leases import Leases, PgLeaseSql
from pipeline.store.protocol import Capability
from pipeline.store.sql import SqlStore
from pipeline.store.sweep import DEFAULT_RUN_DEADLINE_S
from pipeline.store.tokens import PgTokens


class PostgresStore(SqlStore):
    """A run store on PostgreSQL (production): many workers, row locks, the hot path."""

    capabilities: frozenset[Capability] = frozenset({"server"})

    def __init__(self, engine: Engine, *,
                 run_deadline_s: float = DEFAULT_RUN_DEADLINE_S) -> None:
        """Wrap a PostgreSQL engine whose schema is already at head; prefer `open_store`."""
        db = Database(engine)
        self._hot = pg.HotPath(db.fast)
        super().__init__(db, leases=Leases(PgLeaseSql(self._hot)),
                         tokens=PgTokens(db, self._hot), alerts=PgAlerts(db),
                         run_deadline_s=run_deadline_s)

    def _insert_run(self, row: DiagnosisRunRow, *, state: dict[str, Any] | None,
                    data_source: str | None,
                    events: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        params = {
            "p_run_id": row.run_id, "p_tenant_id": row.tenant_id,
            "p_session_id": row.session_id, "p_query": row.query,
            "p_intent": row.intent, "p_status": row.status, "p_source": row.source,
            "p_source_run_id": row.source_run_id, "p_output": row.executor_output_raw,
            "p_state": pg.dumps(state) if state is not None else None,
            "p_data_source": data_source, "p_events": len(events),
            "p_event_rows": pg.event_rows(events), "p_now": row.created_at,
            "p_deadline": row.deadline_at, "p_trace_id": row.trace_id,
        }
        self._hot.write(pg.CREATE_RUN, params, row.run_id)

    def get_node_input(
        self, run_id: str, *, with_executor_output: bool = False, with_invocations: bool = False
    ) -> tuple[RunHead, dict[str, Any] | None, str | None, list[ToolInvocation]]:
        """The head, the state, the raw Executor output and the invocations a node asks for,
        read together in one round trip."""
        found = self._hot.fetch_one(pg.NODE_INPUT[with_executor_output, with_invocations],
                                    {"p_run_id": run_id})
        if found is None:
            raise RunNotFoundError(run_id)
        head = convert.head(run_id, *found[1:8])
        calls = [convert.invocation_of(**item) for item in found[10] or ()]
        return head, found[8], found[9], calls

    def _commit(self, params: dict[str, Any], *,
                events: Sequence[tuple[str, str, dict[str, Any]]],
                attempts: Sequence[LlmAttempt], invocations: Sequence[ToolInvocation],
                turn: int) -> None:
        run_id, expected_version, now = params["p_run_id"], params["p_version"], params["p_now"]
        params = {
            **params, "p_state": pg.dumps(params["p_state"]), "p_turn": turn,
            "p_event_rows": pg.event_rows(events),
            "p_call_rows": pg.call_rows(invocations, now),
            "p_attempt_rows": pg.attempt_rows(attempts, now),
        }
        statement = pg.COMMIT_NODE[bool(invocations), bool(attempts)]
        if self._hot.write(statement, params, run_id, invocations, attempts) is not None:
            return
        found = self._hot.fetch_one(pg.SELECT_VERSION, {"p_run_id": run_id})
        if found is None:
            raise RunNotFoundError(run_id)
        raise StaleStateError(
            f"run {run_id} is at version {found[0]} ({found[1]}), not {expected_version}"
        )

    def get_tool_call(
        self, run_id: str, tool_call_id: str
    ) -> tuple[RunHead, ToolInvocation] | None:
        found = self._hot.fetch_one(pg.SELECT_TOOL_CALL,
                                    {"p_run_id": run_id, "p_call_id": tool_call_id})
        if found is None:
            return None
        return convert.head(run_id, *found[:7]), convert.invocation_of(*found[7:])

    def _complete(self, params: dict[str, Any], *, unless_cancelled: bool) -> bool:
        sql = pg.COMPLETE_LIVE_INVOCATION if unless_cancelled else pg.COMPLETE_INVOCATION
        projection = params["p_projection"]
        dumped = None if projection is None else pg.dumps(projection)
        return self._hot.rowcount(sql, {**params, "p_projection": dumped}) == 1

    def finalize(
        self, run_id: str, result: RunResult, *, expected_version: int | None = None,
        deliveries: Sequence[NewDelivery] = (),
    ) -> bool:
        """Release the outcome and append a finalize/completed event, in one statement when
        the run is live and has nothing to notify (the usual case); otherwise the ORM path
        decides (and writes the deliveries in its transaction) and says why.

        False, and nothing written, if the run is already terminal (a redelivery).
        """
        if not deliveries and result.run_id == run_id \
                and self._finalize_live(run_id, result, expected_version):
            return True
        return super().finalize(run_id, result, expected_version=expected_version,
                                deliveries=deliveries)

    def _finalize_live(self, run_id: str, result: RunResult, expected_version: int | None
                       ) -> bool:
        payload = {"status": result.status, "verdict": result.verdict,
                   "fallback_type": result.fallback_type}
        params = {
            "p_run_id": run_id, "p_version": expected_version,
            "p_status": RunStatus(result.status).value,
            "p_verdict": result.verdict.value if result.verdict else None,
            "p_fallback_type": result.fallback_type.value if result.fallback_type else None,
            "p_final_answer": pg.dumps(result.final_answer.model_dump(mode="json")),
            "p_self_evaluation": pg.dumps(result.self_evaluation.model_dump(mode="json")),
            "p_now": rows.utc_now(), "p_events": 1,
            "p_event_rows": pg.event_rows([("finalize", "completed", payload)]),
        }
        return self._hot.write(pg.FINALIZE, params, run_id) is not None
