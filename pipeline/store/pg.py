"""PostgreSQL's hot path: each of a run's per-task reads and writes is one statement.

On PostgreSQL a single statement is atomic on its own, so the hot writes run in autocommit as
one statement each, their inserts chained to the run-row update by data-modifying CTEs: a
node's commit is one round trip instead of BEGIN, UPDATE, INSERT ..., COMMIT. If the update
matches no row (another version, a terminal run) the inserts select from an empty CTE and
write nothing. A node's input, with the run's invocations aggregated by the database, is one
round trip as well.

Rows to insert travel as one JSON array per table and are expanded by
`json_populate_recordset(NULL::table, ...)`, so the columns are matched by name against the
table's own row type. Sequence numbers come from the updated run row, as on SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from models.invocation import LifecycleStatus, ToolInvocation
from models.run import LlmAttempt
from pipeline.errors import DuplicateToolCallError, StoreError
from pipeline.store.convert import jsonable
from pipeline.store.engine import TERMINAL, available, unavailable
from pipeline.store.rows import as_utc, duplicate_attempt, duplicate_id

_NOT_TERMINAL = "status NOT IN ({})".format(", ".join(f"'{s}'" for s in TERMINAL))

_INVOCATIONS_JSON = """(
  SELECT json_agg(json_build_object(
    'tool_call_id', c.tool_call_id, 'tool_name', c.tool_name, 'arguments', c.arguments,
    'status', c.status, 'evidence_status', c.evidence_status, 'projection', c.projection,
    'error', c.error) ORDER BY c.seq, c.id)
  FROM tool_invocation c WHERE c.run_id = r.run_id)"""

_HEAD = "r.run_id, r.status, r.version, r.node, r.cancel_requested, r.data_source, " \
        "r.session_id, r.tenant_id, r.state"


def _node_input(*, output: bool, invocations: bool) -> str:
    columns = [_HEAD, "r.executor_output_raw" if output else "NULL AS executor_output_raw",
               f"{_INVOCATIONS_JSON} AS invocations" if invocations else "NULL AS invocations"]
    return f"SELECT {', '.join(columns)} FROM diagnosis_run r WHERE r.run_id = %(p_run_id)s"


NODE_INPUT = {(o, i): _node_input(output=o, invocations=i)
              for o in (False, True) for i in (False, True)}
"""The node input statement by (with executor output, with invocations)."""

_EVENTS_CTE = """events AS (
  INSERT INTO run_event (run_id, seq, node, kind, payload, created_at)
  SELECT %(p_run_id)s, run.event_seq - %(p_events)s + e.seq, e.node, e.kind, e.payload, %(p_now)s
  FROM run, json_populate_recordset(NULL::run_event, CAST(%(p_event_rows)s AS json)) AS e
)"""

_RUN_UPDATE = f"""run AS (
  UPDATE diagnosis_run SET
    state = CAST(%(p_state)s AS json), version = %(p_version)s + 1, node = %(p_node)s,
    status = COALESCE(%(p_status)s, status),
    evidence_retry_count = COALESCE(%(p_retry)s, evidence_retry_count),
    executor_output_raw = COALESCE(%(p_output)s, executor_output_raw),
    updated_at = %(p_now)s,
    finished_at = CASE WHEN %(p_terminal)s THEN %(p_now)s ELSE finished_at END,
    event_seq = event_seq + %(p_events)s, invocation_seq = invocation_seq + %(p_invocations)s,
    lease_owner = NULL, lease_expires_at = NULL
  WHERE run_id = %(p_run_id)s AND version = %(p_version)s AND {_NOT_TERMINAL}
  RETURNING event_seq, invocation_seq
)"""

_CALLS_CTE = """calls AS (
  INSERT INTO tool_invocation (run_id, tool_call_id, tool_name, arguments, status,
                               evidence_status, projection, error, turn, seq, created_at,
                               finished_at)
  SELECT %(p_run_id)s, c.tool_call_id, c.tool_name, c.arguments, c.status, c.evidence_status,
         c.projection, c.error, %(p_turn)s, run.invocation_seq - %(p_invocations)s + c.seq,
         %(p_now)s, c.finished_at
  FROM run, json_populate_recordset(NULL::tool_invocation, CAST(%(p_call_rows)s AS json)) AS c
)"""

_ATTEMPTS_CTE = """attempts AS (
  INSERT INTO llm_attempt (run_id, role, cycle, attempt_number, prompt_name, prompt_version,
                           input_sha256, model, latency_ms, input_tokens, output_tokens,
                           cache_read_tokens, cache_write_tokens, cost_usd, outcome,
                           error_type, created_at)
  SELECT a.run_id, a.role, a.cycle, a.attempt_number, a.prompt_name, a.prompt_version,
         a.input_sha256, a.model, a.latency_ms, a.input_tokens, a.output_tokens,
         a.cache_read_tokens, a.cache_write_tokens, a.cost_usd, a.outcome, a.error_type,
         a.created_at
  FROM run, json_populate_recordset(NULL::llm_attempt, CAST(%(p_attempt_rows)s AS json)) AS a
)"""


def _commit_node(*, calls: bool, attempts: bool) -> str:
    parts = [_RUN_UPDATE, _EVENTS_CTE]
    parts += [_CALLS_CTE] if calls else []
    parts += [_ATTEMPTS_CTE] if attempts else []
    return f"WITH {', '.join(parts)}\nSELECT event_seq, invocation_seq FROM run"


COMMIT_NODE = {(c, a): _commit_node(calls=c, attempts=a) for c in (False, True)
               for a in (False, True)}
"""A node's commit by (with tool calls, with model attempts): the database does no work for a
part the node has nothing to write into."""

FINALIZE = f"""
WITH run AS (
  UPDATE diagnosis_run SET
    status = %(p_status)s, node = 'finalize', verdict = %(p_verdict)s,
    fallback_type = %(p_fallback_type)s, final_answer = CAST(%(p_final_answer)s AS json),
    self_evaluation = CAST(%(p_self_evaluation)s AS json), version = version + 1,
    updated_at = %(p_now)s, finished_at = %(p_now)s, event_seq = event_seq + %(p_events)s,
    lease_owner = NULL, lease_expires_at = NULL
  WHERE run_id = %(p_run_id)s AND {_NOT_TERMINAL} AND NOT cancel_requested
    AND (CAST(%(p_version)s AS integer) IS NULL OR version = %(p_version)s)
  RETURNING event_seq
), {_EVENTS_CTE}
SELECT event_seq FROM run
"""

CREATE_RUN = f"""
WITH run AS (
  INSERT INTO diagnosis_run (run_id, tenant_id, session_id, query, intent, status, version,
                             source, source_run_id, cancel_requested, evidence_retry_count,
                             executor_output_raw, state, data_source, event_seq,
                             invocation_seq, created_at, updated_at, deadline_at, trace_id)
  VALUES (%(p_run_id)s, %(p_tenant_id)s, %(p_session_id)s, %(p_query)s, %(p_intent)s,
          %(p_status)s, 0, %(p_source)s, %(p_source_run_id)s, false, 0, %(p_output)s,
          CAST(%(p_state)s AS json), %(p_data_source)s, %(p_events)s, 0, %(p_now)s, %(p_now)s,
          %(p_deadline)s, %(p_trace_id)s)
  RETURNING event_seq
), {_EVENTS_CTE}
SELECT event_seq FROM run
"""


def dumps(value: Any) -> str:
    """JSON text for a CAST(... AS json) parameter (datetimes as ISO 8601)."""
    return json.dumps(value, default=_iso, ensure_ascii=False, separators=(",", ":"))


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def event_rows(events: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """The events to insert, numbered 1..n (their seq is offset by the run's counter)."""
    return dumps([{"seq": i, "node": node, "kind": kind, "payload": jsonable(payload)}
                  for i, (node, kind, payload) in enumerate(events, start=1)])


def call_rows(invocations: Sequence[ToolInvocation], now: datetime) -> str:
    """The tool calls to insert, numbered 1..n."""
    return dumps([{
        "seq": i, "tool_call_id": inv.tool_call_id, "tool_name": inv.tool_name,
        "arguments": inv.arguments, "status": inv.status.value,
        "evidence_status": inv.evidence_status.value if inv.evidence_status else None,
        "projection": inv.projection.model_dump(mode="json") if inv.projection else None,
        "error": inv.error,
        "finished_at": None if inv.status is LifecycleStatus.PROJECTING else now,
    } for i, inv in enumerate(invocations, start=1)])


def attempt_rows(attempts: Sequence[LlmAttempt], now: datetime) -> str:
    """The model attempts to insert; a naive created_at is refused (StoreError)."""
    return dumps([{**a.model_dump(mode="json", exclude={"created_at"}),
                   "created_at": as_utc(a.created_at) if a.created_at else now}
                  for a in attempts])


SELECT_VERSION = "SELECT version, status FROM diagnosis_run WHERE run_id = %(p_run_id)s"

SELECT_TOOL_CALL = """
SELECT r.status, r.version, r.node, r.cancel_requested, r.data_source, r.session_id,
       r.tenant_id, c.tool_call_id, c.tool_name, c.arguments, c.status, c.evidence_status,
       c.projection, c.error
FROM diagnosis_run r JOIN tool_invocation c ON c.run_id = r.run_id
WHERE r.run_id = %(p_run_id)s AND c.tool_call_id = %(p_call_id)s
"""

_COMPLETE = """
UPDATE tool_invocation SET status = %(p_status)s, evidence_status = %(p_evidence_status)s,
  projection = CAST(%(p_projection)s AS json), error = %(p_error)s, finished_at = %(p_now)s
WHERE run_id = %(p_run_id)s AND tool_call_id = %(p_call_id)s AND status = 'PROJECTING'
"""
COMPLETE_INVOCATION = _COMPLETE
COMPLETE_LIVE_INVOCATION = _COMPLETE + """  AND run_id IN (
    SELECT run_id FROM diagnosis_run WHERE run_id = %(p_run_id)s AND NOT cancel_requested)
"""


class HotPath:
    """The hot statements, run on the autocommit pool's DBAPI connections (psycopg): no
    SQLAlchemy execution layer between the runtime and its one round trip."""

    def __init__(self, engine: Engine) -> None:
        """`engine`: an autocommit PostgreSQL engine (its pool is borrowed, not owned)."""
        self._engine = engine
        dbapi = engine.dialect.dbapi
        assert dbapi is not None
        self._lost = (dbapi.OperationalError, dbapi.InterfaceError)
        self._integrity = dbapi.IntegrityError

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        """A cursor on a pooled connection; a lost connection drops the pool and becomes
        StoreUnavailableError (the caller's task is retried), and so does a refused one."""
        try:
            with available():
                connection = self._engine.raw_connection()
        except self._lost as exc:  # the pool connects with psycopg's own errors, unwrapped
            raise unavailable(exc) from exc
        cursor = connection.cursor()
        try:
            yield cursor
        except self._lost as exc:
            connection.invalidate(exc)
            self._engine.dispose()  # its siblings are likely dead too: reconnect lazily
            raise unavailable(exc) from exc
        finally:
            cursor.close()
            connection.close()

    def fetch_one(self, sql: str, params: dict[str, Any]) -> Any:
        """One row or None."""
        with self.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    def rowcount(self, sql: str, params: dict[str, Any]) -> int:
        """Rows an update changed."""
        with self.cursor() as cursor:
            cursor.execute(sql, params)
            return int(cursor.rowcount)

    def write(self, sql: str, params: dict[str, Any], run_id: str,
              invocations: Sequence[ToolInvocation] = (),
              attempts: Sequence[LlmAttempt] = ()) -> Any:
        """One hot write returning one row or None; a unique violation becomes the store's
        own error, and nothing of the statement is written."""
        try:
            return self.fetch_one(sql, params)
        except self._integrity as exc:
            constraint = getattr(getattr(exc, "diag", None), "constraint_name", "") or ""
            if "tool_invocation" in constraint:
                # "Key (run_id, tool_call_id)=(<run>, <id>) already exists."
                detail = getattr(getattr(exc, "diag", None), "message_detail", "") or ""
                detail = detail.replace("(", " ").replace(")", " ").replace(",", " ")
                raise DuplicateToolCallError(run_id, duplicate_id(invocations, detail)
                                             ) from exc
            if "llm_attempt" in constraint:
                raise StoreError(duplicate_attempt(attempts)) from exc
            if "diagnosis_run" in constraint:
                raise StoreError(f"run {run_id} already exists") from exc
            raise StoreError(f"write to run {run_id} refused: {constraint or 'integrity'}"
                             ) from exc
