"""The run store's tables, SQLAlchemy 2 declarative (typed `Mapped[]`).

Data only: `pipeline/store/` is the one package that reads and writes these rows, and it
converts them to the pydantic contracts before they leave it. `migrations/` mirrors this file
exactly; the naming convention keeps constraint names stable across backends and migrations.
Enumerated values are stored as plain strings (validated by the contracts), so adding a value
never needs a migration.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (  # noqa: TID251 - models/ holds the tables
    JSON,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column  # noqa: TID251
from sqlalchemy.types import TypeDecorator, TypeEngine  # noqa: TID251

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names Alembic can rely on."""


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    SQLite keeps no offset: values are written as UTC and UTC is re-attached when read.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Store as UTC; a naive value is taken to be UTC already."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _json() -> TypeEngine[Any]:
    """Generic JSON (`json`, not `jsonb`, on PostgreSQL); Python None is SQL NULL.

    `jsonb` reorders object keys; `json` keeps documents as written, so a projection or an
    audit record reads back in the order it was stored and re-serializes to the same bytes.
    """
    return JSON(none_as_null=True)


class Base(DeclarativeBase):
    """Declarative base of every Verity table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class DiagnosisRunRow(Base):
    """`diagnosis_run`: one run, its state and its released outcome."""

    __tablename__ = "diagnosis_run"
    __table_args__ = (
        # The reconciler's sweep: non-terminal runs, oldest progress first.
        Index("ix_diagnosis_run_status_updated_at", "status", "updated_at"),
        # A session's previous turn, and a tenant's runs: sessions are per tenant.
        Index("ix_diagnosis_run_tenant_id_session_id", "tenant_id", "session_id"),
    )

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # The owner (the producer's credentials): every read and cancel is scoped to it.
    tenant_id: Mapped[str] = mapped_column(String(128))
    session_id: Mapped[str | None] = mapped_column(String(128))
    query: Mapped[str] = mapped_column(Text)
    intent: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32))
    node: Mapped[str | None] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    verdict: Mapped[str | None] = mapped_column(String(16))
    fallback_type: Mapped[str | None] = mapped_column(String(64))
    final_answer: Mapped[dict[str, Any] | None] = mapped_column(_json())
    self_evaluation: Mapped[dict[str, Any] | None] = mapped_column(_json())
    # run, verify or import: RunRecord.origin. Attributes keep their columns' names (the store
    # reads Core rows of these columns by name); the run's data source is `data_source` below.
    source: Mapped[str] = mapped_column(String(16), default="run", server_default="run")
    source_run_id: Mapped[str | None] = mapped_column(String(64))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    evidence_retry_count: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # Kept only for `verity export`; never copied into self_evaluation.
    executor_output_raw: Mapped[str | None] = mapped_column(Text)
    # An imported run's answer as written, with its claims' spans (RunBundle.imported).
    imported_json: Mapped[dict[str, Any] | None] = mapped_column(_json())
    # The alert a run was started for, and when it resolved (RunRecord.alert).
    alert_json: Mapped[dict[str, Any] | None] = mapped_column(_json())
    # The runtime's working state between nodes (plan, transcript, pipeline outputs).
    state: Mapped[dict[str, Any] | None] = mapped_column(_json())
    # Where the run's tools read incident data (a scenario folder here).
    data_source: Mapped[str | None] = mapped_column(String(1024))
    # Last seq handed out to the run's events and tool invocations.
    event_seq: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    invocation_seq: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # Past it the reconciler ends the run FAILED (RUN_DEADLINE_EXCEEDED); None: no deadline.
    deadline_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # Who runs a node of the run now, and until when (a node lease); none between nodes.
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # How often the reconciler re-sent a stalled step of the run.
    reconcile_count: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # The run's trace in Verity's own tracing (32 hex), when tracing was on at submit.
    trace_id: Mapped[str | None] = mapped_column(String(32))


class ToolInvocationRow(Base):
    """`tool_invocation`: one tool call, unique per (run_id, tool_call_id)."""

    __tablename__ = "tool_invocation"
    __table_args__ = (UniqueConstraint("run_id", "tool_call_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("diagnosis_run.run_id", ondelete="CASCADE"), index=True
    )
    tool_call_id: Mapped[str] = mapped_column(String(128))
    tool_name: Mapped[str] = mapped_column(String(128))
    arguments: Mapped[dict[str, Any]] = mapped_column(_json())
    status: Mapped[str] = mapped_column(String(32))
    evidence_status: Mapped[str | None] = mapped_column(String(32))
    projection: Mapped[dict[str, Any] | None] = mapped_column(_json())
    error: Mapped[str | None] = mapped_column(Text)
    turn: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # Insertion order within the run: list_invocations sorts on it.
    seq: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class RunEventRow(Base):
    """`run_event`: the orchestration trace, seq 1, 2, 3 ... per run."""

    __tablename__ = "run_event"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("diagnosis_run.run_id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(Integer)
    node: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(_json())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())


class LlmAttemptRow(Base):
    """`llm_attempt`: one model call attempt, retries included; a re-verification's attempts
    carry its batch id (a live run's, the empty string)."""

    __tablename__ = "llm_attempt"
    __table_args__ = (
        UniqueConstraint("run_id", "batch_id", "role", "cycle", "attempt_number"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("diagnosis_run.run_id", ondelete="CASCADE")
    )
    batch_id: Mapped[str] = mapped_column(String(64), default="", server_default=text("''"))
    role: Mapped[str] = mapped_column(String(32))
    cycle: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    attempt_number: Mapped[int] = mapped_column(Integer)
    prompt_name: Mapped[str] = mapped_column(String(128))
    prompt_version: Mapped[str] = mapped_column(String(64))
    input_sha256: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(128))
    latency_ms: Mapped[float] = mapped_column(Float)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cache_read_tokens: Mapped[int] = mapped_column(Integer)
    cache_write_tokens: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(64))
    error_type: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    # A journaled attempt's accepted answer: a copy of the node redelivered after its worker
    # died between the answer and the commit reuses it instead of calling the model again.
    reply: Mapped[str | None] = mapped_column(Text)


class ReverifyBatchRow(Base):
    """`reverify_batch`: one re-verification job over a tenant's selected runs."""

    __tablename__ = "reverify_batch"
    __table_args__ = (Index("ix_reverify_batch_status_updated_at", "status", "updated_at"),)

    batch_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(128), index=True)
    status: Mapped[str] = mapped_column(String(32))
    provider: Mapped[str] = mapped_column(String(32))
    message_batches: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The selection's filters, as given (keys of models.batch.Selection).
    selection: Mapped[dict[str, Any]] = mapped_column(_json())
    chunk_size: Mapped[int] = mapped_column(Integer)
    total: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    done: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    failed: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # How often the reconciler re-sent the chunks of a stalled batch.
    resend_count: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))


class ReverifyItemRow(Base):
    """`reverify_item`: one stored run of a batch and, once judged, its new outcome. The run
    itself is never written: old values are copied here when the item is judged."""

    __tablename__ = "reverify_item"
    __table_args__ = (
        UniqueConstraint("batch_id", "run_id"),
        Index("ix_reverify_item_batch_id_status", "batch_id", "status"),
    )

    batch_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("reverify_batch.batch_id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    old_status: Mapped[str | None] = mapped_column(String(32))
    old_verdict: Mapped[str | None] = mapped_column(String(16))
    old_fallback_type: Mapped[str | None] = mapped_column(String(64))
    new_status: Mapped[str | None] = mapped_column(String(32))
    new_verdict: Mapped[str | None] = mapped_column(String(16))
    new_fallback_type: Mapped[str | None] = mapped_column(String(64))
    # Gatekeeper severity and failed rules, claim checks (claim_id, old, new), downgrades,
    # the new rationale, the prompts and models used: models.batch.ItemResult's fields.
    detail: Mapped[dict[str, Any] | None] = mapped_column(_json())
    input_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    output_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0, server_default=text("0"))
    error: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class ApiTokenRow(Base):
    """`api_token`: one HTTP API token of a tenant. Only the sha256 of its secret is kept; the
    secret itself is shown once, when the token is created."""

    __tablename__ = "api_token"

    token_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(128), index=True)
    name: Mapped[str] = mapped_column(String(128))
    secret_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class AlertGroupRow(Base):
    """`alert_group`: one firing alert group of a tenant (`POST /hooks/alertmanager`) and the
    run it started, or `skipped` when over the tenant's hourly cap. The unique (tenant,
    dedupe key) is what makes concurrent notifications of one group start one run."""

    __tablename__ = "alert_group"
    __table_args__ = (
        UniqueConstraint("tenant_id", "dedupe_key"),
        # The hourly cap and the receipts list: a tenant's groups by time.
        Index("ix_alert_group_tenant_id_fired_at", "tenant_id", "fired_at"),
        # A resolved notification finds its group.
        Index("ix_alert_group_tenant_id_group_sha256", "tenant_id", "group_sha256"),
    )

    receipt_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(128))
    # sha256 of the groupKey and the firing alerts' fingerprints (pipeline.alerting).
    dedupe_key: Mapped[str] = mapped_column(String(64))
    group_key: Mapped[str] = mapped_column(Text)
    group_sha256: Mapped[str] = mapped_column(String(64))
    alertname: Mapped[str] = mapped_column(String(64))
    # started or skipped (AlertOutcome); the run is set once it is created.
    outcome: Mapped[str] = mapped_column(String(16))
    run_id: Mapped[str | None] = mapped_column(String(64))
    fired_at: Mapped[datetime] = mapped_column(UtcDateTime())
    duplicates: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    resolved_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class DeliveryRow(Base):
    """`delivery`: one notification of a finished run to one configured target, written in
    the transaction that ends the run; its id is the Idempotency-Key every attempt sends."""

    __tablename__ = "delivery"
    __table_args__ = (
        # The reconciler's sweep: deliveries not final, by when they are due.
        Index("ix_delivery_status_next_attempt_at", "status", "next_attempt_at"),
    )

    delivery_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("diagnosis_run.run_id", ondelete="CASCADE"), index=True
    )
    tenant_id: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    # The target's settings from the sources file: URLs and the names of secret variables.
    target: Mapped[dict[str, Any]] = mapped_column(_json())
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    max_attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    # Who posts it now and until when (SENDING); an expired claim is taken over.
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class DeliveryAttemptRow(Base):
    """`delivery_attempt`: one POST of a delivery, written `in_flight` before it is sent."""

    __tablename__ = "delivery_attempt"
    __table_args__ = (UniqueConstraint("delivery_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("delivery.delivery_id", ondelete="CASCADE")
    )
    number: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    retry_after_s: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
