"""Initial schema: diagnosis_run, tool_invocation, run_event, llm_attempt.

Hand-written to match models/tables.py exactly (tests/store/test_migrations.py checks it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None


def _json() -> sa.JSON:
    # Plain `json` on PostgreSQL, not `jsonb`: documents keep their key order.
    return sa.JSON()


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def _run_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["run_id"],
        ["diagnosis_run.run_id"],
        name=op.f(f"fk_{table}_run_id_diagnosis_run"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    """Create the four tables."""
    _create_diagnosis_run()
    _create_tool_invocation()
    _create_run_event()
    _create_llm_attempt()


def _create_diagnosis_run() -> None:
    op.create_table(
        "diagnosis_run",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=True),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("intent", sa.String(32), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("node", sa.String(64), nullable=True),
        sa.Column("version", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("fallback_type", sa.String(64), nullable=True),
        sa.Column("final_answer", _json(), nullable=True),
        sa.Column("self_evaluation", _json(), nullable=True),
        sa.Column("source", sa.String(16), server_default="run", nullable=False),
        sa.Column("source_run_id", sa.String(64), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column(
            "evidence_retry_count", sa.Integer(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("executor_output_raw", sa.Text(), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.Column("finished_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_diagnosis_run")),
    )
    op.create_index(
        op.f("ix_diagnosis_run_session_id"), "diagnosis_run", ["session_id"], unique=False
    )
    op.create_index(
        op.f("ix_diagnosis_run_created_at"), "diagnosis_run", ["created_at"], unique=False
    )


def _create_tool_invocation() -> None:
    op.create_table(
        "tool_invocation",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("tool_call_id", sa.String(128), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("arguments", _json(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("evidence_status", sa.String(32), nullable=True),
        sa.Column("projection", _json(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("turn", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("finished_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_invocation")),
        _run_fk("tool_invocation"),
        sa.UniqueConstraint(
            "run_id", "tool_call_id", name=op.f("uq_tool_invocation_run_id_tool_call_id")
        ),
    )
    op.create_index(op.f("ix_tool_invocation_run_id"), "tool_invocation", ["run_id"], unique=False)


def _create_run_event() -> None:
    op.create_table(
        "run_event",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("payload", _json(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_event")),
        _run_fk("run_event"),
        sa.UniqueConstraint("run_id", "seq", name=op.f("uq_run_event_run_id_seq")),
    )


def _create_llm_attempt() -> None:
    op.create_table(
        "llm_attempt",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("cycle", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        sa.Column("prompt_name", sa.String(128), nullable=False),
        sa.Column("prompt_version", sa.String(64), nullable=False),
        sa.Column("input_sha256", sa.String(64), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(64), nullable=False),
        sa.Column("error_type", sa.String(128), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_attempt")),
        _run_fk("llm_attempt"),
        sa.UniqueConstraint(
            "run_id",
            "role",
            "cycle",
            "attempt_number",
            name=op.f("uq_llm_attempt_run_id_role_cycle_attempt_number"),
        ),
    )


def downgrade() -> None:
    """Drop the four tables, children first."""
    op.drop_table("llm_attempt")
    op.drop_table("run_event")
    op.drop_index(op.f("ix_tool_invocation_run_id"), table_name="tool_invocation")
    op.drop_table("tool_invocation")
    op.drop_index(op.f("ix_diagnosis_run_created_at"), table_name="diagnosis_run")
    op.drop_index(op.f("ix_diagnosis_run_session_id"), table_name="diagnosis_run")
    op.drop_table("diagnosis_run")
