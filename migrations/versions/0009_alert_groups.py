"""Alerts start runs: `alert_group` keeps each firing alert group of a tenant with the run it
started (or `skipped`, over the hourly cap); its unique (tenant_id, dedupe_key) makes
concurrent notifications of one group start one run. `diagnosis_run.alert_json` is the alert a
run was started for and when it resolved (NULL for every other run).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create alert_group; add diagnosis_run.alert_json."""
    op.create_table(
        "alert_group",
        sa.Column("receipt_id", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("dedupe_key", sa.String(length=64), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("group_sha256", sa.String(length=64), nullable=False),
        sa.Column("alertname", sa.String(length=64), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("fired_at", _utc(), nullable=False),
        sa.Column("duplicates", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("resolved_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("receipt_id", name=op.f("pk_alert_group")),
        sa.UniqueConstraint("tenant_id", "dedupe_key",
                            name=op.f("uq_alert_group_tenant_id_dedupe_key")),
    )
    op.create_index("ix_alert_group_tenant_id_fired_at", "alert_group",
                    ["tenant_id", "fired_at"])
    op.create_index("ix_alert_group_tenant_id_group_sha256", "alert_group",
                    ["tenant_id", "group_sha256"])
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.add_column(sa.Column("alert_json", sa.JSON(), nullable=True))


def downgrade() -> None:
    """Drop alert_group and diagnosis_run.alert_json (the alert records with them)."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.drop_column("alert_json")
    op.drop_index("ix_alert_group_tenant_id_group_sha256", table_name="alert_group")
    op.drop_index("ix_alert_group_tenant_id_fired_at", table_name="alert_group")
    op.drop_table("alert_group")
