"""SQLite's hot path: the runtime's per-task statements as SQLAlchemy Core, built once.

Every task of a run reads its node input and commits its output; building these statements
per call (coercions, cache keys) cost more than running them. Optional values are bound as
NULL and kept with COALESCE, so one statement serves every node.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String, Text, bindparam, case, func, select, update

from models.invocation import LifecycleStatus
from models.tables import DiagnosisRunRow, ToolInvocationRow
from pipeline.store.engine import TERMINAL

RUN = DiagnosisRunRow
CALL = ToolInvocationRow

_HEAD = (RUN.run_id, RUN.status, RUN.version, RUN.node, RUN.cancel_requested, RUN.data_source,
         RUN.session_id, RUN.tenant_id, RUN.state)
SELECT_HEAD = select(*_HEAD).where(RUN.run_id == bindparam("p_run_id"))
SELECT_HEAD_WITH_OUTPUT = select(*_HEAD, RUN.executor_output_raw).where(
    RUN.run_id == bindparam("p_run_id")
)

INVOCATION_COLUMNS = (CALL.tool_call_id, CALL.tool_name, CALL.arguments, CALL.status,
                      CALL.evidence_status, CALL.projection, CALL.error)
SELECT_INVOCATIONS = (
    select(*INVOCATION_COLUMNS)
    .where(CALL.run_id == bindparam("p_run_id"))
    .order_by(CALL.seq, CALL.id)
)
SELECT_TOOL_CALL = (
    select(RUN.status.label("run_status"), RUN.version, RUN.node, RUN.cancel_requested,
           RUN.data_source, RUN.session_id, RUN.tenant_id, *INVOCATION_COLUMNS)
    .join(CALL, CALL.run_id == RUN.run_id)
    .where(RUN.run_id == bindparam("p_run_id"), CALL.tool_call_id == bindparam("p_call_id"))
)

COMMIT_NODE = (
    update(RUN)
    .where(RUN.run_id == bindparam("p_run_id"), RUN.version == bindparam("p_version"),
           RUN.status.not_in(TERMINAL))
    .values(
        state=bindparam("p_state", type_=JSON(none_as_null=True)),
        version=bindparam("p_new_version", type_=Integer),
        node=bindparam("p_node", type_=String),
        status=func.coalesce(bindparam("p_status", type_=String), RUN.status),
        evidence_retry_count=func.coalesce(bindparam("p_retry", type_=Integer),
                                           RUN.evidence_retry_count),
        executor_output_raw=func.coalesce(bindparam("p_output", type_=Text),
                                          RUN.executor_output_raw),
        updated_at=bindparam("p_now"),
        finished_at=case((bindparam("p_terminal", type_=Boolean), bindparam("p_now")),
                         else_=RUN.finished_at),
        event_seq=RUN.event_seq + bindparam("p_events", type_=Integer),
        invocation_seq=RUN.invocation_seq + bindparam("p_invocations", type_=Integer),
        lease_owner=None,  # the node is over: its lease with it
        lease_expires_at=None,
    )
    .returning(RUN.event_seq, RUN.invocation_seq)
)

_LIVE_RUN = select(RUN.run_id).where(RUN.run_id == bindparam("p_run_id"),
                                     RUN.cancel_requested.is_(False))
_COMPLETE_VALUES: dict[str, Any] = {
    "status": bindparam("p_status", type_=String),
    "evidence_status": bindparam("p_evidence_status", type_=String),
    "projection": bindparam("p_projection", type_=JSON(none_as_null=True)),
    "error": bindparam("p_error", type_=Text),
    "finished_at": bindparam("p_now"),
}
_PENDING = (CALL.run_id == bindparam("p_run_id"), CALL.tool_call_id == bindparam("p_call_id"),
            CALL.status == LifecycleStatus.PROJECTING.value)
COMPLETE_INVOCATION = update(CALL).where(*_PENDING).values(**_COMPLETE_VALUES)
COMPLETE_LIVE_INVOCATION = (
    update(CALL).where(*_PENDING, CALL.run_id.in_(_LIVE_RUN)).values(**_COMPLETE_VALUES)
)
