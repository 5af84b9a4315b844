"""Durable runs: a deadline per run, a node lease, a reconcile counter, and the index the
reconciler's sweep reads (non-terminal runs by last progress).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"


def upgrade() -> None:
    """Add the columns and the (status, updated_at) index."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.add_column(sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("lease_owner", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True),
                                   nullable=True))
        batch.add_column(sa.Column("reconcile_count", sa.Integer(), nullable=False,
                                   server_default=sa.text("0")))
    op.create_index(op.f("ix_diagnosis_run_status_updated_at"), "diagnosis_run",
                    ["status", "updated_at"], unique=False)


def downgrade() -> None:
    """Drop them."""
    op.drop_index(op.f("ix_diagnosis_run_status_updated_at"), table_name="diagnosis_run")
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.drop_column("reconcile_count")
        batch.drop_column("lease_expires_at")
        batch.drop_column("lease_owner")
        batch.drop_column("deadline_at")
