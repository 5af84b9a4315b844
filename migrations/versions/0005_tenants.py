"""Tenants: every run has an owner, and sessions are per owner.

Runs stored before this revision belong to tenant `default`. The session index becomes a
(tenant_id, session_id) index: the previous-turn lookup and a tenant's listing read it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"


def upgrade() -> None:
    """Add tenant_id (existing rows: `default`, then no server default) and swap the index."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.add_column(sa.Column("tenant_id", sa.String(length=128), nullable=False,
                                   server_default="default"))
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.alter_column("tenant_id", server_default=None)
    op.drop_index(op.f("ix_diagnosis_run_session_id"), table_name="diagnosis_run")
    op.create_index(op.f("ix_diagnosis_run_tenant_id_session_id"), "diagnosis_run",
                    ["tenant_id", "session_id"], unique=False)


def downgrade() -> None:
    """Drop tenant_id and restore the session index."""
    op.drop_index(op.f("ix_diagnosis_run_tenant_id_session_id"), table_name="diagnosis_run")
    op.create_index(op.f("ix_diagnosis_run_session_id"), "diagnosis_run", ["session_id"],
                    unique=False)
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.drop_column("tenant_id")
