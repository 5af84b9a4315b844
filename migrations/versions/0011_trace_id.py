"""Verity's own traces: `diagnosis_run.trace_id` is the run's trace (32 hex), so the page can
link it. NULL for every existing row and for runs submitted with tracing off."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"


def upgrade() -> None:
    """Add trace_id."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.add_column(sa.Column("trace_id", sa.String(32), nullable=True))


def downgrade() -> None:
    """Drop trace_id."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.drop_column("trace_id")
