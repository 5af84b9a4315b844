"""Batch re-verification: batches, their items, and model attempts tied to a batch; and the
journal keeps an accepted answer (`llm_attempt.reply`) so a redelivered node reuses it.

`llm_attempt.batch_id` is the empty string for a live run's attempts (every existing row), a
batch id for a re-verification's; the attempt key gains it, so re-judging a run never collides
with the run's own attempts.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"


def _json() -> sa.JSON:
    # Plain `json` on PostgreSQL, not `jsonb`: documents keep their key order.
    return sa.JSON()


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create reverify_batch and reverify_item; key llm_attempt by batch too."""
    with op.batch_alter_table("llm_attempt") as batch:
        batch.add_column(sa.Column("batch_id", sa.String(length=64), nullable=False,
                                   server_default=sa.text("''")))
        batch.add_column(sa.Column("reply", sa.Text(), nullable=True))
        batch.drop_constraint(op.f("uq_llm_attempt_run_id_role_cycle_attempt_number"),
                              type_="unique")
        batch.create_unique_constraint(
            op.f("uq_llm_attempt_run_id_batch_id_role_cycle_attempt_number"),
            ["run_id", "batch_id", "role", "cycle", "attempt_number"])
    op.create_table(
        "reverify_batch",
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("message_batches", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("selection", _json(), nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("done", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("failed", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.Column("started_at", _utc(), nullable=True),
        sa.Column("finished_at", _utc(), nullable=True),
        sa.Column("resend_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("batch_id", name=op.f("pk_reverify_batch")),
    )
    op.create_index(op.f("ix_reverify_batch_tenant_id"), "reverify_batch", ["tenant_id"])
    op.create_index("ix_reverify_batch_status_updated_at", "reverify_batch",
                    ["status", "updated_at"])
    op.create_table(
        "reverify_item",
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("old_status", sa.String(length=32), nullable=True),
        sa.Column("old_verdict", sa.String(length=16), nullable=True),
        sa.Column("old_fallback_type", sa.String(length=64), nullable=True),
        sa.Column("new_status", sa.String(length=32), nullable=True),
        sa.Column("new_verdict", sa.String(length=16), nullable=True),
        sa.Column("new_fallback_type", sa.String(length=64), nullable=True),
        sa.Column("detail", _json(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("output_tokens", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("cost_usd", sa.Float(), server_default=sa.text("0"), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("finished_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["reverify_batch.batch_id"],
                                name=op.f("fk_reverify_item_batch_id_reverify_batch"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("batch_id", "seq", name=op.f("pk_reverify_item")),
        sa.UniqueConstraint("batch_id", "run_id", name=op.f("uq_reverify_item_batch_id_run_id")),
    )
    op.create_index("ix_reverify_item_batch_id_status", "reverify_item", ["batch_id", "status"])


def downgrade() -> None:
    """Drop the batch tables; llm_attempt loses batch_id (batch attempts with it)."""
    op.drop_index("ix_reverify_item_batch_id_status", table_name="reverify_item")
    op.drop_table("reverify_item")
    op.drop_index("ix_reverify_batch_status_updated_at", table_name="reverify_batch")
    op.drop_index(op.f("ix_reverify_batch_tenant_id"), table_name="reverify_batch")
    op.drop_table("reverify_batch")
    op.execute("DELETE FROM llm_attempt WHERE batch_id <> ''")
    with op.batch_alter_table("llm_attempt") as batch:
        batch.drop_constraint(
            op.f("uq_llm_attempt_run_id_batch_id_role_cycle_attempt_number"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_llm_attempt_run_id_role_cycle_attempt_number"),
            ["run_id", "role", "cycle", "attempt_number"])
        batch.drop_column("batch_id")
        batch.drop_column("reply")
