"""Runtime state: diagnosis_run.state (JSON) and diagnosis_run.data_source."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"


def upgrade() -> None:
    """Add the two columns."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.add_column(sa.Column("state", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("data_source", sa.String(length=1024), nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.drop_column("data_source")
        batch.drop_column("state")
