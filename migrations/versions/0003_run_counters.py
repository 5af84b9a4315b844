"""Per-run counters for event and invocation sequence numbers.

Allocating a seq becomes one `UPDATE ... RETURNING` on the run row (which also serializes
concurrent writers of the run) instead of a lock, a MAX() and an insert.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"


def upgrade() -> None:
    """Add the counters and set them from the rows already there."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.add_column(sa.Column("event_seq", sa.Integer(), nullable=False,
                                   server_default=sa.text("0")))
        batch.add_column(sa.Column("invocation_seq", sa.Integer(), nullable=False,
                                   server_default=sa.text("0")))
    op.execute(
        "UPDATE diagnosis_run SET "
        "event_seq = COALESCE((SELECT MAX(seq) FROM run_event "
        "WHERE run_event.run_id = diagnosis_run.run_id), 0), "
        "invocation_seq = COALESCE((SELECT MAX(seq) FROM tool_invocation "
        "WHERE tool_invocation.run_id = diagnosis_run.run_id), 0)"
    )


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.drop_column("invocation_seq")
        batch.drop_column("event_seq")
