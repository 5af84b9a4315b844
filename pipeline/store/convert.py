"""Rows to contracts: every conversion of a stored row (an ORM row, a Core row with the same
column names, or a row of PostgreSQL's hot path) into the pydantic contract of `models/`.

ORM rows never leave the store; these are the only functions that read their fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from pydantic import ValidationError

from models.alert import RunAlert
from models.batch import BatchRecord, BatchStatus, ItemDetail, ItemRecord, ItemStatus, Selection
from models.bundle import FinalAnswer, ImportedAnswer, RunBundle
from models.common import FallbackType, Intent, RunStatus, Verdict
from models.evaluation import SelfEvaluation
from models.invocation import EvidenceStatus, LifecycleStatus, Projection, ToolInvocation
from models.run import LlmAttempt, RunEvent, RunHead, RunRecord, StalledRun
from models.state import NextStep
from models.tables import ApiTokenRow, LlmAttemptRow, ReverifyBatchRow, ReverifyItemRow, RunEventRow
from models.token import ApiToken
from models.verifier import RetryContext
from pipeline.errors import StoreError


def dump_projection(projection: Projection | None) -> dict[str, Any] | None:
    """A projection as the JSON document stored in its column."""
    return projection.model_dump(mode="json") if projection is not None else None


def jsonable(payload: dict[str, Any]) -> dict[str, Any]:
    """Enum members and other JSON-able values as plain JSON types."""
    return {k: v.value if isinstance(v, Enum) else v for k, v in payload.items()}


def dump_imported(imported: ImportedAnswer | None) -> dict[str, Any] | None:
    """An imported answer as the JSON document stored in `imported_json`."""
    return imported.model_dump(mode="json") if imported is not None else None


def imported_answer(raw: Any) -> ImportedAnswer | None:
    """The stored `imported_json` document as an imported answer; None for none."""
    return ImportedAnswer.model_validate(raw) if raw is not None else None


def run_alert(raw: Any) -> RunAlert | None:
    """The stored `alert_json` document as the run's alert; None for none."""
    return RunAlert.model_validate(raw) if raw is not None else None


def record(row: Any, *, with_answer: bool = True, with_evaluation: bool = True,
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
        imported=imported_answer(row.imported_json),
        alert=run_alert(row.alert_json),
        cancel_requested=row.cancel_requested,
        evidence_retry_count=row.evidence_retry_count,
        source=row.data_source,
        trace_id=getattr(row, "trace_id", None),  # a Core row of a list may not select it
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
        deadline_at=row.deadline_at,
        reconcile_count=row.reconcile_count,
    )


def invocation(row: Any) -> ToolInvocation:
    """A tool call from an ORM row or a Core row with the same column names."""
    return invocation_of(row.tool_call_id, row.tool_name, row.arguments, row.status,
                          row.evidence_status, row.projection, row.error)


def invocation_of(
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


def event(row: RunEventRow) -> RunEvent:
    """A `run_event` row as an event."""
    return RunEvent(
        run_id=row.run_id,
        seq=row.seq,
        node=row.node,
        kind=row.kind,
        payload=row.payload,
        created_at=row.created_at,
    )


def attempt(row: LlmAttemptRow) -> LlmAttempt:
    """An `llm_attempt` row as an attempt."""
    fields = {name: getattr(row, name) for name in LlmAttempt.model_fields}
    return LlmAttempt.model_validate(fields)


def head(run_id: str, status: str, version: int, node: str | None, cancel_requested: bool,
         source: str | None, session_id: str | None, tenant_id: str) -> RunHead:
    """A run's head from its columns (`source`: the `data_source` column)."""
    return RunHead(run_id=run_id, status=RunStatus(status), version=version, node=node,
                   cancel_requested=cancel_requested, source=source,
                   session_id=session_id, tenant_id=tenant_id)


def token(row: ApiTokenRow) -> ApiToken:
    """An `api_token` row as a token (never its secret hash)."""
    return ApiToken(token_id=row.token_id, tenant_id=row.tenant_id, name=row.name,
                    created_at=row.created_at, revoked_at=row.revoked_at,
                    last_used_at=row.last_used_at)


def item(row: ReverifyItemRow) -> ItemRecord:
    """A `reverify_item` row as an item record."""
    return ItemRecord(
        batch_id=row.batch_id, seq=row.seq, run_id=row.run_id, status=ItemStatus(row.status),
        old_status=row.old_status, old_verdict=row.old_verdict,
        old_fallback_type=row.old_fallback_type, new_status=row.new_status,
        new_verdict=row.new_verdict, new_fallback_type=row.new_fallback_type,
        detail=ItemDetail.model_validate(row.detail) if row.detail else None,
        input_tokens=row.input_tokens, output_tokens=row.output_tokens, cost_usd=row.cost_usd,
        error=row.error, finished_at=row.finished_at)


def batch(row: ReverifyBatchRow) -> BatchRecord:
    """A `reverify_batch` row as a batch record; StoreError if its selection is unreadable."""
    try:
        selection = Selection.model_validate(row.selection)
    except ValueError as exc:
        raise StoreError(f"batch {row.batch_id} has an unreadable selection") from exc
    return BatchRecord(
        batch_id=row.batch_id, tenant_id=row.tenant_id, status=BatchStatus(row.status),
        provider=row.provider, message_batches=row.message_batches, selection=selection,
        chunk_size=row.chunk_size, total=row.total, done=row.done, failed=row.failed,
        cancel_requested=row.cancel_requested, created_at=row.created_at,
        updated_at=row.updated_at, started_at=row.started_at, finished_at=row.finished_at,
        resend_count=row.resend_count)


def stalled_run(row: Any) -> StalledRun:
    """A row of `select_stalled` as a contract."""
    return StalledRun(run_id=row.run_id, status=RunStatus(row.status), version=row.version,
                      updated_at=row.updated_at, cancel_requested=row.cancel_requested,
                      reconcile_count=row.reconcile_count, next=next_step(row.next))


def next_step(raw: Any) -> NextStep | None:
    """A stored next step, or None if there is none or it does not parse."""
    try:
        return NextStep.model_validate(raw) if raw else None
    except ValidationError:
        return None


def judgeable(row: Any, invocations: list[Any]) -> tuple[RunRecord, RunBundle] | str:
    """The run and its bundle from the rows a re-judgement reads (`Batches.load_for_judging`),
    or why it cannot be re-judged (one line)."""
    if row.intent != Intent.DIAGNOSIS.value:
        return f"a {row.intent} run has no claims to re-verify"
    if row.executor_output_raw is None:
        return f"the run has no stored Executor output (it ended {row.status} before it)"
    try:
        evaluation = (SelfEvaluation.model_validate_json(row.evaluation_json)
                      if row.evaluation_json is not None else None)
        stored = record(row, with_answer=False, evaluation=evaluation)
        exported = RunBundle(
            run_id=row.run_id, session_id=row.session_id, query=row.query,
            intent=Intent(row.intent),
            invocations=[invocation_of(c.tool_call_id, c.tool_name, c.arguments, c.status,
                                       c.evidence_status, c.projection_json, c.error)
                         for c in invocations],
            executor_output_raw=row.executor_output_raw,
            retry_context=RetryContext.model_validate(row.retry) if row.retry else None,
            imported=stored.imported)
    except (ValueError, TypeError, KeyError) as exc:  # pydantic's ValidationError included
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"the stored run is corrupt: {first}"
    return stored, exported


def bundle(row: Any, invocations: list[ToolInvocation]) -> RunBundle:
    """A run row and its tool calls as a bundle (`verity export`); the row must hold the
    Executor output."""
    assert row.executor_output_raw is not None
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
        imported=imported_answer(row.imported_json),
    )


TOKEN_FIELDS = ("token_id", "tenant_id", "name", "created_at", "revoked_at", "last_used_at")
"""The columns `token_of` reads, in order."""


def token_of(found: Sequence[Any]) -> ApiToken:
    """A token from a plain row of its `TOKEN_FIELDS` (PostgreSQL's hot path), its times
    in UTC."""
    values = dict(zip(TOKEN_FIELDS, found, strict=True))
    return ApiToken(**{k: v.astimezone(UTC) if isinstance(v, datetime) else v
                       for k, v in values.items()})
