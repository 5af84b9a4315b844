"""Notification deliveries: `delivery` (one per finished run and matching target, written in the
transaction that ends the run) and `delivery_attempt` (one per POST, in_flight before it is
sent). Self-contained: it only adds tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create delivery and delivery_attempt."""
    op.create_table(
        "delivery",
        sa.Column("delivery_id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("target", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", _utc(), nullable=True),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_expires_at", _utc(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.Column("delivered_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["diagnosis_run.run_id"],
                                name=op.f("fk_delivery_run_id_diagnosis_run"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("delivery_id", name=op.f("pk_delivery")),
    )
    op.create_index(op.f("ix_delivery_run_id"), "delivery", ["run_id"])
    op.create_index("ix_delivery_status_next_attempt_at", "delivery",
                    ["status", "next_attempt_at"])
    op.create_table(
        "delivery_attempt",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.String(length=32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("retry_after_s", sa.Float(), nullable=True),
        sa.Column("started_at", _utc(), nullable=False),
        sa.Column("finished_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(["delivery_id"], ["delivery.delivery_id"],
                                name=op.f("fk_delivery_attempt_delivery_id_delivery"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_delivery_attempt")),
        sa.UniqueConstraint("delivery_id", "number",
                            name=op.f("uq_delivery_attempt_delivery_id_number")),
    )


def downgrade() -> None:
    """Drop delivery_attempt and delivery (every delivery record with them)."""
    op.drop_table("delivery_attempt")
    op.drop_index("ix_delivery_status_next_attempt_at", table_name="delivery")
    op.drop_index(op.f("ix_delivery_run_id"), table_name="delivery")
    op.drop_table("delivery")
